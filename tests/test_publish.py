"""The student edition: ``dfa publish`` writes it, ``dfa check --published`` proves it holds nothing graded.

The fast tests publish the fixture course with a small stand-in package (a ``common`` with one grader-only
reference that no notebook uses, and a ``common/grading`` that must stay behind), check that the clean edition
has no problem, then plant each kind of leak in a copy and check that it is found: a check that did nothing
would pass the first test and fail every other. The slow test runs the published fixture lab in a fresh
virtual environment holding only the edition.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import nbformat
import pytest
from fixtures.grading_support import FIXTURE_COURSE, copy_course

from common.errors import DFAError
from common.grading.courses import regions
from common.grading.courses.course import all_courses, repo_root
from common.grading.editions import grader_only, published_check, published_package
from common.grading.editions.publish import MANIFEST, publish

REPO = "learners-org/student-labs"
NOTEBOOK = "course0_fixture/release/lab1/lab1.ipynb"
SOLUTION_LINE = "return torch.where(x > 0, x, torch.zeros_like(x))"
REAL_REGISTRY = grader_only.GRADER_ONLY
STAND_IN_PACKAGE: list[Path] = []  # set by the edition fixture
HIDDEN_LINE = ('grader.assert_scalar(data["unseen"], _ref(1_000_000 + seed % 1_000_003, 7_000), '
               'name="intensity, unseen input")')


def _package(parent: Path) -> Path:
    """A stand-in for this checkout: pyproject, a tiny ``common`` with a grader-only reference, and grading."""
    (parent / "common" / "grading").mkdir(parents=True)
    shutil.copy2(repo_root() / "pyproject.toml", parent / "pyproject.toml")
    for name in ("LICENSE", "LICENSE-CONTENT", "CITATION.cff"):
        shutil.copy2(repo_root() / name, parent / name)
    (parent / "common" / "__init__.py").write_text('"""stand-in package"""\n')
    (parent / "common" / "checks.py").write_text("def check_tensor(*args, **kwargs):\n    return None\n")
    (parent / "common" / "grading" / "__init__.py").write_text("INSTRUCTOR_ONLY = True\n")
    (parent / "common" / "dataflow.py").write_text(
        "def run_tokens(gm, *args):\n    return None, []\n\n\ndef kept_helper():\n    return 1\n"
    )
    (parent / "common" / "roofline.py").write_text(
        "class Roofline:\n    def ceiling_at(self, i):\n        return i\n\n    def kept(self):\n        return 0\n"
    )
    return parent


# The stand-in package's grader-only references: the real registry empties as references move to the labs'
# answers.py, and these tests are about the machinery, not today's list.
STAND_IN_REGISTRY = (
    ("course2_dataflow/lab2_dataflow", "run_dataflow", "common.dataflow:run_tokens"),
    ("course6_roofline/lab6_roofline", "attainable", "common.roofline:Roofline.ceiling_at"),
)


@pytest.fixture(scope="module", autouse=True)
def stand_in_registry():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grader_only, "GRADER_ONLY", STAND_IN_REGISTRY)
        yield


@pytest.fixture(scope="module")
def edition(tmp_path_factory, stand_in_registry):
    base = tmp_path_factory.mktemp("publish")
    course = copy_course(FIXTURE_COURSE, base / "instructor")
    package = _package(base / "package")
    STAND_IN_PACKAGE[:] = [package]
    out = base / "edition"
    result = publish([course], out, repo=REPO, package_parent=package)
    return course, out, result


def _problems(course, out) -> list[str]:
    """The check, with the stand-in package as the instructor's checkout (its registry and salts)."""
    return published_check.check_published(out, [course], STAND_IN_PACKAGE[0], REPO)


def test_publish_writes_the_student_edition(edition):
    course, out, result = edition
    assert result.notebooks == [NOTEBOOK]
    nb = nbformat.read(out / NOTEBOOK, as_version=4)
    text = json.dumps(nb)
    assert f"colab.research.google.com/github/{REPO}/blob/main/{NOTEBOOK}" in text
    assert f"git+https://github.com/{REPO}.git@" in text
    assert "raise NotImplementedError" in text and "BEGIN SOLUTION" not in text
    readme = (out / "README.md").read_text()
    assert f"colab.research.google.com/github/{REPO}/blob/main/{NOTEBOOK}" in readme and "pip install" in readme
    project = tomllib.loads((out / "pyproject.toml").read_text())
    assert project["tool"]["dfa"]["published_repo"] == REPO
    extras = project["project"]["optional-dependencies"]
    assert list(extras) == ["lab"] and "jupyterlab>=4" in extras["lab"]  # no instructor, cluster or dev extras
    assert (out / "LICENSE").read_text() == (repo_root() / "LICENSE").read_text()
    assert "Apache License" in (out / "LICENSE").read_text()
    assert "LICENSE" in json.loads((out / MANIFEST).read_text())["files"]
    assert "CC BY 4.0" in (out / "LICENSE-CONTENT").read_text()  # the course text and figures' licence
    assert f"repository-code: \"https://github.com/{REPO}\"" in (out / "CITATION.cff").read_text()
    assert '.[lab]' in readme and "dataflow-labs[lab] @ git+" in readme  # one install that opens the labs
    assert project["project"]["scripts"]["dfa"] == "common.cli:main"
    assert (out / "common" / "checks.py").is_file() and not (out / "common" / "grading").exists()
    assert not list((out / "course0_fixture").rglob("*.py"))  # no lab source, no nbgrader_config.py
    assert not (out / "course0_fixture" / "source").exists()
    dataflow = (out / "common" / "dataflow.py").read_text()
    assert "def run_tokens" not in dataflow and "def kept_helper" in dataflow  # unused reference left out
    assert [s.removed for s in result.strips if s.reference == "common.dataflow:run_tokens"] == [True]
    manifest = json.loads((out / MANIFEST).read_text())
    assert NOTEBOOK in manifest["files"] and manifest["published_repo"] == REPO


def test_a_clean_edition_has_no_problem(edition):
    course, out, _ = edition
    assert _problems(course, out) == []


def _plant_in_notebook(out: Path, line: str) -> None:
    nb = nbformat.read(out / NOTEBOOK, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "def relu" in c.source)
    cell.source += "\n" + line
    nbformat.write(nb, out / NOTEBOOK)


def _plant_file(rel: str, text: str):
    def plant(out: Path, course) -> None:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)

    return plant


def _lab_source(course) -> str:
    return (course.source_dir / "lab1" / "lab1.py").read_text()


def _as_markdown(course) -> str:
    import jupytext

    return jupytext.writes(nbformat.read(course.source_notebook("lab1"), as_version=4), fmt="md")


PLANTS = {
    "solution line": (lambda out, course: _plant_in_notebook(out, SOLUTION_LINE), "solution or hidden-test text"),
    "hidden test line": (lambda out, course: _plant_in_notebook(out, HIDDEN_LINE), "solution or hidden-test text"),
    "lab source .py": (
        lambda out, course: _plant_file("labs/lab1.py", _lab_source(course))(out, course),
        "a notebook in text form",
    ),
    "lab source .py in the course": (
        lambda out, course: _plant_file("course0_fixture/release/lab1/lab1.py", "x = 1\n")(out, course),
        "a build source",
    ),
    "lab source .md": (
        lambda out, course: _plant_file("notes/lab1.md", _as_markdown(course))(out, course),
        "a notebook in text form",
    ),
    "source notebook": (
        lambda out, course: shutil.copy2(course.source_notebook("lab1"), out / "lab1.ipynb"),
        "not a lab's release notebook",
    ),
    "salt": (lambda out, course: _plant_in_notebook(out, "INSTRUCTOR_SALT = 'offering-2027-b'"), "a salt"),
    "known salt value": (
        lambda out, course: _plant_file("NOTES.md", "seeded with fixture-offering-secret\n")(out, course),
        "holds the salt 'fixture-offering-secret'",  # the fixture course's c.Offering.salt
    ),
    "reference function": (
        lambda out, course: _plant_file("common/dataflow.py", "def run_tokens(gm, *a):\n    return gm\n")(out, course),
        "defines run_tokens, the reference of graded stub(s) course2_dataflow/lab2_dataflow",
    ),
    "reference method": (
        lambda out, course: _plant_file(
            "common/roofline.py", "class Roofline:\n    def ceiling_at(self, i):\n        return i\n"
        )(out, course),
        "defines Roofline.ceiling_at",
    ),
    "gradebook": (
        lambda out, course: _plant_file("course0_fixture/gradebook.db", "")(out, course),
        "named like an answer key",
    ),
    "instructor tooling": (
        lambda out, course: _plant_file("common/grading/authoring/release.py", "\n")(out, course),
        "instructor tooling",
    ),
    "no licence": (lambda out, course: (out / "LICENSE").unlink(), "LICENSE: missing"),
    "licence edited": (
        lambda out, course: _plant_file("LICENSE", "All rights reserved.\n")(out, course),
        "LICENSE: differs from the instructor edition's licence",
    ),
    "foreign badge": (
        lambda out, course: _plant_file(
            "README2.md", "(https://colab.research.google.com/github/staff/private-labs/blob/main/x.ipynb)"
        )(out, course),
        "points at staff/private-labs",
    ),
}


@pytest.mark.parametrize("kind", list(PLANTS))
def test_the_check_finds_each_planted_problem(edition, tmp_path, kind):
    course, clean, _ = edition
    out = tmp_path / "edition"
    shutil.copytree(clean, out)
    plant, expected = PLANTS[kind]
    plant(out, course)
    problems = _problems(course, out)
    assert any(expected in p for p in problems), problems


def test_solution_text_in_a_module_is_found_as_a_block(edition, tmp_path):
    course, clean, _ = edition
    out = tmp_path / "edition"
    shutil.copytree(clean, out)
    source = nbformat.read(course.source_notebook("lab1"), as_version=4)
    body = [line for line in regions.secret_lines(source, ("solution",)) if "bytes_moved" in line]
    (out / "common" / "helpers.py").write_text("def f(flops, bytes_moved):\n    " + "\n    ".join(body) + "\n")
    assert len(body) >= published_check.BLOCK
    assert any("lines of course0_fixture/lab1's solution" in p for p in _problems(course, out))


def test_publish_refuses_a_non_empty_folder_and_force_keeps_what_it_did_not_write(edition, tmp_path):
    course, _, _ = edition
    package = _package(tmp_path / "package")
    out = tmp_path / "out"
    (out / ".git").mkdir(parents=True)  # a fresh clone of the published repository counts as empty
    publish([course], out, repo=REPO, package_parent=package)
    (out / "CONTRIBUTING.md").write_text("the learners' own notes\n")
    (out / MANIFEST).unlink()  # as in a clone whose manifest was not committed: every file is someone else's
    with pytest.raises(DFAError, match="not empty"):
        publish([course], out, repo=REPO, package_parent=package)
    result = publish([course], out, repo=REPO, package_parent=package, force=True)
    assert {"README.md", "LICENSE"} <= set(result.replaced)  # overwritten only with --force
    assert "CONTRIBUTING.md" in result.foreign
    stale = json.loads((out / MANIFEST).read_text())
    stale["files"].append("common/old_module.py")
    (out / MANIFEST).write_text(json.dumps(stale))
    (out / "common" / "old_module.py").write_text("\n")
    result = publish([course], out, repo=REPO, package_parent=package, force=True)
    assert (out / "CONTRIBUTING.md").read_text() == "the learners' own notes\n"
    assert "CONTRIBUTING.md" in result.foreign
    assert not (out / "common" / "old_module.py").exists() and result.removed == ["common/old_module.py"]
    assert (out / ".git").is_dir()


def test_a_reference_a_notebook_uses_is_kept_and_named(tmp_path):
    package = _package(tmp_path)
    out = tmp_path / "out"
    published_package.copy_package(package, out)
    strips = published_package.strip_references(
        out, {"course2_dataflow/release/lab2/lab2.ipynb": "from common.dataflow import run_tokens"}
    )
    kept = next(s for s in strips if s.reference == "common.dataflow:run_tokens")
    assert not kept.removed and kept.users == ["course2_dataflow/release/lab2/lab2.ipynb"]
    assert "def run_tokens" in (out / "common" / "dataflow.py").read_text()


def test_the_grader_only_registry_matches_the_labs(monkeypatch):
    """Every entry names a graded stub of its lab and a function of common; every namesake is accounted for."""
    monkeypatch.setattr(grader_only, "GRADER_ONLY", REAL_REGISTRY)
    assert grader_only.registry_problems(all_courses(repo_root()), repo_root()) == []


def test_publish_needs_a_published_repository(edition, tmp_path):
    course, _, _ = edition
    with pytest.raises(DFAError, match="owner/name"):
        publish([course], tmp_path / "out", repo="not a repo", package_parent=_package(tmp_path / "p"))


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("DFA_PUBLISHED_VENV"), reason="builds a fresh venv with torch (~5 min): "
                    "set DFA_PUBLISHED_VENV=1 (CI's time budget leaves it out, as .ci/run says)")  # fmt: skip
def test_the_published_lab_runs_in_a_fresh_environment(tmp_path):
    """The fixture lab, with the real package, solved, top to bottom in a venv holding only the edition."""
    from common.grading.editions import published_run

    course = copy_course(FIXTURE_COURSE, tmp_path / "instructor")
    out = tmp_path / "edition"
    publish([course], out, repo=REPO)
    broken = nbformat.read(out / NOTEBOOK, as_version=4)  # a notebook needing what the edition lacks must fail
    broken.cells.insert(3, nbformat.v4.new_code_cell("import common.grading.authoring.release"))
    nbformat.write(broken, out / "course0_fixture/release/lab1/broken.ipynb")
    sources = {
        NOTEBOOK: course.source_notebook("lab1"),
        "course0_fixture/release/lab1/broken.ipynb": course.source_notebook("lab1"),
    }
    problems = published_run.execute(out, sources, log=lambda line: None)
    assert len(problems) == 1 and "broken.ipynb" in problems[0] and "common.grading" in problems[0], problems
