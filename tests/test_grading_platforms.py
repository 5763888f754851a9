"""The Coursera and Gradescope graders, run end to end on a folder laid out as each platform lays it out.

Each bridge grades the fixture lab three times, once per submission: honest (full marks), blank (the release
notebook: 0) and hostile (it writes a perfect result where it guesses the platform's files are, and prints a
perfect score: it still gets 0). The exports are checked for what they hold and for refusing a non-empty folder.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from fixtures.grading_support import (
    AUTOGRADED_POINTS,
    FIXTURE_COURSE,
    LAB,
    PART,
    needs_sandbox,
    release_nb,
    right_answers,
    with_code,
)

from common.cli import main
from common.errors import DFAError
from common.grading.courses import regions
from common.grading.courses.course import Course
from common.grading.platforms import coursera, gradescope, shared

# Reference values and names of the fixture's hidden tests and mark scheme: no platform file may show them.
# (A failed judgement's feedback names its check, "hidden test 'relu on mixed signs' failed", never its values.)
HIDDEN_LITERALS = ("[0.0, 0.0, 2.25]", "2_000_000", "on-wafer SRAM", "BEGIN HIDDEN TESTS", "JUDGEMENT", "_ref(")

HOSTILE = """\
import json, pathlib
fake = {fake}
for path in {paths}:
    try:
        pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(path).write_text(json.dumps(fake))
    except OSError as exc:
        print("could not write", path, exc)
print(json.dumps(fake))

def relu(x):
    return x
"""


def submissions(root: Path, platform_root: str, results: list[Path], fake: dict) -> dict:
    """Honest, blank and hostile notebooks; the hostile one writes ``fake`` to ``results`` (the real paths, and
    the same under ``platform_root``, where the platform has them)."""
    course = Course(FIXTURE_COURSE)
    paths = [str(p) for p in results] + [f"{platform_root}/{p.relative_to(root)}" for p in results]
    hostile = HOSTILE.format(fake=fake, paths=paths)
    return {"honest": right_answers(course), "blank": release_nb(course),
            "hostile": with_code(release_nb(course), relu=hostile)}


def put(nb, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{LAB}.ipynb").write_text(nbformat.writes(nb, version=4), encoding="utf-8")


def secrets() -> list[str]:
    nb = nbformat.read(Course(FIXTURE_COURSE).source_notebook(LAB), as_version=4)
    return regions.secret_lines(nb, kinds=("hidden tests", "mark scheme"))


def assert_no_hidden_tests(root: Path) -> None:
    lines = secrets()
    for path in root.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            for literal in HIDDEN_LITERALS:
                assert literal not in text, f"{path} shows {literal!r}"
            assert not regions.find_leaks(regions.html_text(text), lines), path


# ---- Coursera ---
def run_coursera(grader: Path, root: Path, part_id: str = PART) -> tuple[dict, str]:
    """The exported grader.py as Coursera runs it: $partId set, /shared (here: ``root``) holding the submission."""
    env = {**os.environ, "partId": part_id, coursera.ROOT_ENV: str(root)}
    done = subprocess.run([sys.executable, str(grader / "grader.py")], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    feedback = json.loads((root / "feedback.json").read_text(encoding="utf-8"))
    assert json.loads(done.stdout.splitlines()[-1]) == feedback  # `grade local` reads the last line printed
    assert 0.0 <= feedback["fractionalScore"] <= 1.0 and feedback["feedbackType"] == "HTML"
    return feedback, (root / "htmlFeedback.html").read_text(encoding="utf-8")


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("case", ["honest", "blank", "hostile"])
def test_coursera_grader_end_to_end(coursera_grader, tmp_path, case):
    root = tmp_path / "shared"
    fake = {"fractionalScore": 1.0, "feedback": "perfect (fake)", "feedbackType": "HTML"}
    results = [root / "feedback.json", root / "htmlFeedback.html"]
    put(submissions(root, coursera.DEFAULT_ROOT, results, fake)[case], root / "submission")
    feedback, page = run_coursera(coursera_grader, root)
    assert feedback["fractionalScore"] == (1.0 if case == "honest" else 0.0)
    assert "fake" not in feedback["feedback"]  # (the page may show what the learner's own cells printed)
    if case == "honest":
        assert f"{AUTOGRADED_POINTS:g} / {AUTOGRADED_POINTS:g} points" in feedback["feedback"]
        assert "relu_tests" in page and "Written answers (2 points)" in page
    assert_no_hidden_tests(root)
    if os.geteuid() == 0:  # closed to the other user a sandbox without namespaces runs the kernel as
        assert stat.S_IMODE((coursera_grader / "courses").stat().st_mode) == 0o700


def test_coursera_failures_still_give_feedback(coursera_grader, tmp_path):
    root = tmp_path / "shared"
    (root / "submission").mkdir(parents=True)
    feedback, _ = run_coursera(coursera_grader, root)
    assert feedback["fractionalScore"] == 0.0 and "no notebook" in feedback["feedback"]
    put(release_nb(Course(FIXTURE_COURSE)), root / "submission")
    (root / "submission" / "copy.ipynb").write_text("{}", encoding="utf-8")
    assert "2 notebooks" in run_coursera(coursera_grader, root)[0]["feedback"]
    (root / "submission" / "copy.ipynb").unlink()
    feedback, _ = run_coursera(coursera_grader, root, part_id="nope")
    assert feedback["fractionalScore"] == 0.0 and "'nope'" in feedback["feedback"]


@needs_sandbox
def test_coursera_time_limit_still_gives_feedback(coursera_grader, tmp_path, monkeypatch):
    root = tmp_path / "shared"
    put(right_answers(Course(FIXTURE_COURSE)), root / "submission")
    budget = shared.Budget(1200, 4)
    # the deadline comes long before the grading child can have graded anything: it is killed
    monkeypatch.setattr(shared.Budget, "deadline_s", property(lambda self: 2.0))
    feedback = coursera.run(root, coursera_grader, PART, budget)
    assert feedback["fractionalScore"] == 0.0 and "ran out of time" in feedback["feedback"]
    assert json.loads((root / "feedback.json").read_text(encoding="utf-8")) == feedback


# ---- Gradescope ---
def run_gradescope(archive: Path, root: Path) -> dict:
    """Gradescope's layout: the zip in source/, the submission in submission/, an empty results/."""
    with zipfile.ZipFile(archive) as z:
        z.extractall(root / "source")
    (root / "results").mkdir(parents=True, exist_ok=True)
    gradescope.run(root)
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("case", ["honest", "blank", "hostile"])
def test_gradescope_grader_end_to_end(gradescope_zip, tmp_path, case):
    root = tmp_path / "autograder"
    fake = {"score": 1000.0, "output": "perfect (fake)", "tests": []}
    put(submissions(root, gradescope.DEFAULT_ROOT, [root / "results" / "results.json"], fake)[case],
        root / "submission")
    results = run_gradescope(gradescope_zip, root)
    assert results["score"] == (AUTOGRADED_POINTS if case == "honest" else 0.0)
    assert "fake" not in json.dumps(results)
    tests = {t["name"].rsplit(": ", 1)[-1]: t for t in results["tests"]}
    assert set(tests) == {"relu_tests", "intensity_tests", "q_ridge"}  # one test per graded cell
    assert tests["relu_tests"]["visibility"] == "after_published"  # it holds hidden tests
    assert tests["relu_tests"]["max_score"] == 3.0 and tests["q_ridge"]["max_score"] == 0.0
    assert tests["relu_tests"]["status"] == ("passed" if case == "honest" else "failed")
    assert "graded by hand" in tests["q_ridge"]["output"]
    assert_no_hidden_tests(root / "results")
    if os.geteuid() == 0:
        assert stat.S_IMODE((root / "source" / "courses").stat().st_mode) == 0o700


def test_gradescope_without_a_notebook_still_writes_results(gradescope_zip, tmp_path):
    (tmp_path / "submission").mkdir()
    results = run_gradescope(gradescope_zip, tmp_path)
    assert results["score"] == 0.0 and "no notebook" in results["output"] and results["tests"] == []


# ---- exports and budgets ---
def test_exports_hold_the_grader_and_refuse_a_non_empty_folder(coursera_grader, gradescope_zip, tmp_path, capsys):
    dockerfile = (coursera_grader / "Dockerfile").read_text(encoding="utf-8")
    for needed in ("bubblewrap", "download.pytorch.org/whl/cpu", '-e "/grader/package[instructor]"',
                   "--grader-cpu 1 --grader-memory-limit 4096 --grading-timeout 1200", "ENTRYPOINT"):
        assert needed in dockerfile
    assert json.loads((coursera_grader / "parts.json").read_text()) == {PART: "course0_fixture/lab1"}
    assert (coursera_grader / "courses/course0_fixture/source/lab1/lab1.ipynb").is_file()
    assert (coursera_grader / "package/common/grading/platforms/coursera.py").is_file()

    with zipfile.ZipFile(gradescope_zip) as z:
        names = set(z.namelist())
        setup, run = z.read("setup.sh").decode(), z.read("run_autograder").decode()
        assert z.getinfo("run_autograder").external_attr >> 16 & 0o111
    assert {"setup.sh", "run_autograder", gradescope.CONFIG_FILE} <= names  # at the zip's root
    assert "courses/course0_fixture/source/lab1/lab1.ipynb" in names
    assert not any("__pycache__" in n for n in names)
    assert "bubblewrap" in setup and "pip install --no-cache-dir -e" in setup
    assert "common.grading.platforms.gradescope" in run

    for argv in (["coursera", str(FIXTURE_COURSE), str(coursera_grader)],
                 ["gradescope", str(FIXTURE_COURSE), "lab1", str(gradescope_zip.parent)]):
        assert main(["export", *argv]) == 2
        assert "is not empty" in capsys.readouterr().err
    out = tmp_path / "again"
    out.mkdir()
    (out / "old.txt").write_text("x")
    assert main(["export", "gradescope", str(FIXTURE_COURSE), "lab1", str(out), "--force"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["autograder.zip"]
    assert main(["export", "coursera", str(FIXTURE_COURSE), str(tmp_path / "new"), "--part", "x=lab9"]) == 2
    assert "unknown lab of course0_fixture 'lab9'" in capsys.readouterr().err


def test_budget_fits_the_platform_limits():
    budget = shared.Budget(coursera.DEFAULT_TIMEOUT_S, coursera.DEFAULT_MEMORY_GB)
    limits = budget.limits(cell_timeout_s=120)
    # a run that hits the notebook limit and its retry at doubled limits, both stretched, still end in time
    worst = limits.notebook_timeout_s * budget.runs + shared.OVERHEAD_S + shared.MARGIN_S
    assert worst <= coursera.DEFAULT_TIMEOUT_S and limits.cell_timeout_s == 120
    assert limits.memory_bytes + shared.RESERVE_GB * shared.GB <= coursera.DEFAULT_MEMORY_GB * shared.GB
    with pytest.raises(DFAError, match="too small"):
        shared.Budget(1200, 3)
    with pytest.raises(DFAError, match="too short"):
        shared.Budget(200, 4)
