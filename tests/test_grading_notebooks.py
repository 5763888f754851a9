"""Every lab in the repository, in CI: the sandboxed autograder gives the **source** notebook every autograded
point, with no error output in any cell (Lab 1's source is graded by the README's instructor block, in
tests/test_documented_commands.py, with the same checks). The autograder runs each notebook top to bottom with
``NBGRADER_EXECUTION`` set, so labs take their FAST setting there. That the blank release earns nothing is
checked, test cell by test cell, in the lazy-notebook run of each lab (tests/test_shortcut_notebooks.py), which
halves the notebooks graded here (CI's 30 minutes); the fixture lab's blank release goes through the sandbox in
tests/test_grading_autograde.py.

papermill (``FAST=True`` injected into the ``parameters`` cell, the route a learner's CI or an instructor's
dry-run takes) runs the fixture lab and the first lab of course 1; the autograder's run covers every lab, and
each papermill run repeats one of them (CI has 30 minutes; the torch matrix runs the same lab on torch 2.11).

The labs are discovered (``course*/source/<lab>/<lab>.ipynb``): with none committed yet these cases are empty,
and the fixture lab keeps the machinery itself under test.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import papermill
import pytest
from fixtures.grading_support import FIXTURE_COURSE, copy_course

from common.grading.authoring.release import release_lab
from common.grading.courses.standard import is_autograded_test
from common.grading.gradebook.autograde import autograde
from common.grading.sandbox.sandbox import Sandbox, SandboxUnavailable

REPO = Path(__file__).resolve().parents[1]
REPO_LABS = sorted(REPO.glob("course*_*/source/*/*.ipynb"))
FIXTURE_LAB = FIXTURE_COURSE / "source" / "lab1" / "lab1.ipynb"

pytestmark = pytest.mark.slow


def _id(path: Path) -> str:
    return f"{path.parents[2].name}/{path.stem}"


def _first_lab_per_course(labs: list[Path]) -> list[Path]:
    seen: dict[str, Path] = {}
    for lab in labs:
        seen.setdefault(lab.parents[2].name, lab)
    return list(seen.values())


def _error_outputs(nb) -> list[str]:
    return [f"{o.get('ename')}: {o.get('evalue')}" for c in nb.cells for o in c.get("outputs", [])
            if o.output_type == "error"]


@pytest.mark.parametrize("notebook", [FIXTURE_LAB, *_first_lab_per_course(REPO_LABS)[:1]], ids=_id)
def test_source_notebook_runs_with_papermill(notebook, tmp_path):
    env_before = dict(os.environ)
    os.environ.setdefault("PYTHONPATH", str(REPO))  # the kernel imports `common` like a learner's would
    try:
        papermill.execute_notebook(
            str(notebook),
            str(tmp_path / notebook.name),
            parameters={"FAST": True},
            cwd=str(notebook.parent),
            kernel_name="python3",
            progress_bar=False,
        )
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    executed = nbformat.read(tmp_path / notebook.name, as_version=4)
    assert _error_outputs(executed) == []


# Lab 1 is graded from its source by the README's instructor block, as written, with the same checks
# (tests/test_documented_commands.py): grading it here again cost CI half a minute.
README_GRADED = REPO / "course1_landscape" / "source" / "lab1_landscape" / "lab1_landscape.ipynb"


@pytest.mark.parametrize("notebook", [lab for lab in REPO_LABS if lab != README_GRADED], ids=_id)
def test_lab_autogrades_source_full(notebook, tmp_path):
    try:
        Sandbox().check_available()
        unsafe = False
    except SandboxUnavailable:
        if os.environ.get("DFA_REQUIRE_SANDBOX"):
            raise
        unsafe = True  # instructor notebooks only: trusted code
    course = copy_course(notebook.parents[2], tmp_path)
    lab = notebook.stem
    release_lab(course, lab)
    folder = course.submitted_dir / "source" / lab
    folder.mkdir(parents=True)
    (folder / f"{lab}.ipynb").write_bytes(course.source_notebook(lab).read_bytes())
    graded = {g.student: g for g in autograde(course, lab, workers=1, unsafe_no_sandbox=unsafe)}
    points = sum(
        c.metadata.nbgrader["points"]
        for c in nbformat.read(notebook, as_version=4).cells
        if is_autograded_test(c)
    )
    assert graded["source"].status == "completed", graded["source"].message
    assert graded["source"].score == points
    executed = nbformat.read(course.autograded_dir / "source" / lab / f"{lab}.ipynb", as_version=4)
    assert _error_outputs(executed) == []
