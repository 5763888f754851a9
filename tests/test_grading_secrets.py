"""No secret inside the sandbox, and a hijacked probe channel gains nothing on any grading path.

* A submission scans everything it can see while it is graded — every readable file (the sandbox's own root,
  its scratch space, the Python installation), every environment variable, and what /proc shows of the
  processes beside it — for the offering's salt, the answer key's text and the judgements' text. It finds none.
* The files a Dask worker receives hold no judgement, answer or salt either.
* A submission that forges its probe's data (``Probe.finish`` replaced, the display channel rewritten) gains
  nothing on the local pool, ``dfa grade-one``, Dask, Coursera and Gradescope.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from fixtures.grading_support import (
    AUTOGRADED_POINTS,
    FAST_LIMITS,
    FIXTURE_COURSE,
    FORGED_PROBE,
    LAB,
    PART,
    all_output_text,
    autograded_nb,
    copy_course,
    needs_bubblewrap,
    needs_sandbox,
    release_nb,
    right_answers,
    submit,
    with_code,
)

from common.cli import main
from common.grading.gradebook.autograde import autograde
from common.grading.platforms import coursera, gradescope
from common.grading.sandbox.limits import GB, Limits
from common.grading.verdicts.judge import parts

pytestmark = [pytest.mark.slow, needs_sandbox]

REPO = Path(__file__).resolve().parents[1]
SALT = "fixture-offering-secret"  # c.Offering.salt of the fixture course
SCAN_LIMITS = Limits(cell_timeout_s=900, notebook_timeout_s=1800, memory_bytes=2 * GB, max_processes=64)


def secret_needles() -> list[str]:
    """The salt, distinctive lines of the answer key, and every judgement line of the fixture lab."""
    source = (FIXTURE_COURSE / "source" / LAB / f"{LAB}.py").read_text(encoding="utf-8")
    answers = (FIXTURE_COURSE / "source" / LAB / "answers.py").read_text(encoding="utf-8")
    judgement_lines = []
    for block in source.split("### BEGIN HIDDEN TESTS")[1:]:
        _, _, judgement = parts("### BEGIN HIDDEN TESTS" + block.split("### END HIDDEN TESTS")[0] +
                                "### END HIDDEN TESTS")  # fmt: skip
        judgement_lines += [ln.strip() for ln in judgement.splitlines() if len(ln.strip()) > 24]
    answer_lines = [ln.strip() for ln in answers.splitlines() if len(ln.strip()) > 24]
    # a line the student package or the release also holds (an import, the probe's documented example) is public
    public = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "common").rglob("*.py"))
    public += (FIXTURE_COURSE / "release" / LAB / f"{LAB}.ipynb").read_text(encoding="utf-8")
    needles = [SALT, *(line for line in [*answer_lines, *judgement_lines] if line not in public)]
    assert len(needles) >= 6, needles
    return needles


# The scanner carries its needles base64-encoded, so its own notebook does not hold them in plain text.
SCANNER = """
import base64, os
NEEDLES = [base64.b64decode(n) for n in {needles!r}]
SKIP = ("/proc", "/sys", "/dev")
hits, files, read_bytes = [], 0, 0
def look(where, data):
    for n in NEEDLES:
        if n in data:
            hits.append(where + " holds " + n[:20].decode(errors="replace"))
for top, dirs, names in os.walk("/", onerror=lambda e: None):
    dirs[:] = [d for d in dirs if os.path.join(top, d) not in SKIP]
    for name in names:
        path = os.path.join(top, name)
        try:
            if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > 8_000_000:
                continue
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        files += 1
        read_bytes += len(data)
        look(path, data)
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for part in ("environ", "cmdline"):
        try:
            with open(f"/proc/{{pid}}/{{part}}", "rb") as f:
                look(f"/proc/{{pid}}/{{part}}", f.read())
        except OSError:
            pass
look("os.environ", "\\n".join(f"{{k}}={{v}}" for k, v in os.environ.items()).encode())
print("SCANNED", files, "files", read_bytes, "bytes")
print("HITS", hits)
def relu(x):
    return x
"""


@needs_bubblewrap  # the fallback reads what other users may read (a checkout elsewhere holds the fixture's salt)
def test_nothing_secret_is_visible_inside_the_sandbox(released, tmp_path):
    course = copy_course(released.root, tmp_path)
    needles = [base64.b64encode(n.encode()).decode() for n in secret_needles()]
    submit(course, "scanner", with_code(release_nb(course), relu=SCANNER.format(needles=needles)))
    (graded,) = autograde(course, LAB, limits=SCAN_LIMITS, report=print)
    text = all_output_text(autograded_nb(course, "scanner"))
    assert "SCANNED" in text, text[-2000:]
    scanned = int(text.split("SCANNED ", 1)[1].split()[0])
    assert scanned > 1000, f"the scan saw only {scanned} files: it did not look"
    assert "HITS []" in text, text[text.index("HITS") :][:2000]
    assert graded.score == 0.0


def test_what_a_dask_worker_receives_holds_no_secret(released, tmp_path):
    pytest.importorskip("distributed")
    import cloudpickle

    from common.grading.gradebook.executors import execute_files

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    course = copy_course(released.root, tmp_path / "course")
    submit(course, "alice", right_answers(course))
    seen = tmp_path / "seen"
    seen.mkdir()

    def task(files, notebooks, *args):  # what crossed to the worker, kept for the test to read
        for name, data in files.items():
            (seen / name.replace("/", "_")).write_bytes(data)
        return execute_files(files, notebooks, *args)

    (graded,) = autograde(course, LAB, cluster="local:1", limits=FAST_LIMITS, dask_task=task, report=print)
    assert graded.score == AUTOGRADED_POINTS  # judged on this side, with the answer key only this side has
    sent = b"".join(p.read_bytes() for p in seen.iterdir())
    assert b"probe.send" in sent  # the probes did cross
    for needle in secret_needles():
        assert needle.encode() not in sent, f"a Dask worker received {needle[:40]!r}"


# ---- a forged probe on every path ---
def forged_nb(course):
    return with_code(release_nb(course), relu=FORGED_PROBE)


def write(nb, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nb, version=4), encoding="utf-8")
    return path


@pytest.mark.parametrize("path", ["local", "grade-one", "dask", "coursera", "gradescope"])
def test_a_forged_probe_gains_nothing_on_every_path(released, tmp_path, path, monkeypatch):
    course = copy_course(released.root, tmp_path / "repo")
    nb = forged_nb(course)
    if path in ("local", "dask"):
        if path == "dask":
            pytest.importorskip("distributed")
        submit(course, "mallory", nb)
        kwargs = {"cluster": "local:1"} if path == "dask" else {}
        (graded,) = autograde(course, LAB, limits=FAST_LIMITS, report=print, **kwargs)
        score = graded.score
    elif path == "grade-one":
        monkeypatch.chdir(tmp_path / "repo")
        out = tmp_path / "out"
        assert main(["grade-one", "--lab", LAB, "--submission", str(write(nb, tmp_path / "s.ipynb")),
                     "--out", str(out)]) == 0  # fmt: skip
        score = json.loads((out / "result.json").read_text(encoding="utf-8"))["score"]
    elif path == "coursera":
        grader = tmp_path / "coursera"
        assert main(["export", "coursera", str(FIXTURE_COURSE), str(grader), "--part", f"{PART}=lab1"]) == 0
        root = tmp_path / "shared"
        write(nb, root / "submission" / f"{LAB}.ipynb")
        env = {**os.environ, "partId": PART, coursera.ROOT_ENV: str(root)}
        done = subprocess.run([sys.executable, str(grader / "grader.py")], env=env, capture_output=True, text=True,
                              timeout=900)  # fmt: skip
        assert done.returncode == 0, done.stderr
        score = json.loads((root / "feedback.json").read_text(encoding="utf-8"))["fractionalScore"]
    else:
        out = tmp_path / "export"
        assert main(["export", "gradescope", str(FIXTURE_COURSE), LAB, str(out)]) == 0
        root = tmp_path / "autograder"
        with zipfile.ZipFile(out / "autograder.zip") as z:
            z.extractall(root / "source")
        (root / "results").mkdir(parents=True)
        write(nb, root / "submission" / f"{LAB}.ipynb")
        gradescope.run(root)
        score = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))["score"]
    assert score == 0.0, f"a forged probe earned {score} on {path}"
