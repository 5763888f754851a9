"""A lab's source is a jupytext percent file, ``courseN_*/source/<lab>/<lab>.py``; this module turns it into the
source notebook ``<lab>.ipynb`` that nbgrader releases, and says when the two are out of step.

The ``.py`` is plain text an author runs cell by cell (Jupyter opens it as a notebook when jupytext is
installed), diffs in git and reviews. Cells are ``# %%`` headers with their metadata as JSON::

    # %% nbgrader={"grade": false, "grade_id": "relu", "locked": false, "schema_version": 3, ...}
    def relu(x):
        ### BEGIN SOLUTION
        ...

Cells that every lab shares are not copied into each file: a cell whose header says ``include="NAME"`` is
replaced on rendering by the cell ``INCLUDES[NAME]`` builds (its body in the ``.py`` is only a placeholder
that lets the author run it). Rendering is deterministic: the same ``.py`` always gives the same bytes, with
cell ids ``cell-000``, ``cell-001``, ... so nbgrader's gradebook and re-matching see stable ids.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import nbformat

from common.errors import DFAError, unknown
from common.grading.authoring import colab
from common.grading.courses import standard

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
# What ipykernel reports as its language_info, but the Python version (each learner's own): JupyterLab writes the
# running kernel's language_info and kernelspec into the notebook when the kernel starts, and marks the notebook
# modified when they differ from the file's. Releasing them as the kernel reports them leaves only `version`.
LANGUAGE_INFO = {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                 "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
                 "pygments_lexer": "ipython3"}
TEXT_FORMAT = "py:percent"
# What the .py's YAML header keeps: the kernel, and no jupytext version (it would churn on every upgrade).
HEADER = {"notebook_metadata_filter": "kernelspec,-jupytext.text_representation.jupytext_version",
          "cell_metadata_filter": "all"}
INCLUDE_KEY = "include"


def repo_path(course_name: str, lab: str) -> str:
    """Where a release notebook lives in the repository (course folders sit at its root): Colab opens this."""
    return f"{course_name}/release/{lab}/{lab}.ipynb"


def _locked(grade_id: str) -> dict:
    """Metadata of a read-only cell the autograder restores if the learner changes it."""
    return {"deletable": False, "editable": False,
            "nbgrader": {"grade": False, "grade_id": grade_id, "locked": True, "schema_version": 3,
                         "solution": False, "task": False}}


def _badge(course: str, lab: str, cells) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(colab.badge_markdown(repo_path(course, lab)))
    cell.metadata["tags"] = [standard.BADGE_TAG]
    return cell


def _setup(course: str, lab: str, cells) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(colab.setup_cell_source().strip("\n"))
    cell.metadata.update(_locked(standard.SETUP_GRADE_ID))
    cell.metadata["tags"] = [standard.SETUP_TAG]
    return cell


def _points(value: float) -> str:
    return f"{value:g} point" + ("" if value == 1 else "s")


def _grading(course: str, lab: str, cells) -> nbformat.NotebookNode:
    """The first screen's 'how this lab is graded', counted from the lab's own nbgrader metadata."""
    auto = [standard.nbgrader_meta(c)["points"] for c in cells if standard.is_autograded_test(c)]
    manual = [standard.nbgrader_meta(c)["points"] for c in cells if standard.is_manual_answer(c)]
    text = (
        f"**How this lab is graded.** {_points(sum(auto) + sum(manual))} in all: {_points(sum(auto))} checked "
        f"automatically by the {len(auto)} locked test cells (visible checks plus hidden tests the autograder "
        f"adds), and {_points(sum(manual))} for the {len(manual)} written answers, which your instructor "
        "grades by hand.\n\n"
        "**Checking your work as you go.** Run the test cell under each function you write: it prints what "
        "your code gave and why it fails, or a ✔. Passing the visible checks is necessary, not sufficient — "
        "the hidden tests try other inputs.\n\n"
        "**Run All stops at the first test cell whose function you have not written yet** (it raises "
        "`NotImplementedError`). Work through the parts in order, or run cells one by one."
    )
    return nbformat.v4.new_markdown_cell(text)


# name -> make(course, lab, the lab's cells after expansion of the others) -> the cell.
INCLUDES = {"badge": _badge, "setup": _setup, "grading": _grading}
_LAST = ("grading",)  # includes that read the rest of the lab are expanded after the others


def text_path(course, lab: str) -> Path:
    return course.source_dir / lab / f"{lab}.py"


def render(text: str, course: str, lab: str) -> nbformat.NotebookNode:
    """The source notebook of a lab whose jupytext text is ``text``."""
    import jupytext

    nb = jupytext.reads(text, fmt=TEXT_FORMAT)
    wanted = [c.metadata.get(INCLUDE_KEY) for c in nb.cells]
    for name in wanted:
        if name is not None and name not in INCLUDES:
            raise unknown(f"include in {course}/{lab}", name, list(INCLUDES))
    cells = list(nb.cells)
    for phase in (lambda n: n not in _LAST, lambda n: n in _LAST):
        for i, name in enumerate(wanted):
            if name is not None and phase(name):
                cells[i] = INCLUDES[name](course, lab, cells)
    for i, cell in enumerate(cells):
        cell.id = f"cell-{i:03d}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    out = nbformat.v4.new_notebook(cells=cells)
    out.metadata = {"dfa": {"course": course, "lab": lab}, "kernelspec": dict(KERNELSPEC),
                    "language_info": copy.deepcopy(LANGUAGE_INFO)}
    nbformat.validate(out)
    return out


def notebook_text(nb) -> str:
    """nbformat's canonical JSON, as it is committed."""
    return nbformat.writes(nb) + "\n"


def normalised(nb) -> nbformat.NotebookNode:
    """``nb`` as Jupyter would save it unedited, so that JupyterLab opens it clean.

    jupyter_server reads and writes notebooks with nbformat (the current minor version, cell ids, keys sorted,
    one-space indent, a final newline: ``notebook_text``); JupyterLab's notebook model then sets the kernelspec
    and language_info of the kernel it starts, and keeps a code cell's ``execution_count`` and ``outputs``.
    Here: nbformat 4.5 with an id on every cell, code cells with no outputs and no count, the kernelspec and
    language_info ipykernel reports (``KERNELSPEC``, ``LANGUAGE_INFO``), Colab's GPU runtime setting
    (``colab.NOTEBOOK_METADATA``: Colab then opens the lab on a GPU), other metadata kept."""
    nb = nbformat.from_dict(copy.deepcopy(dict(nb)))
    nb.nbformat, nb.nbformat_minor = nbformat.v4.nbformat, nbformat.v4.nbformat_minor
    for i, cell in enumerate(nb.cells):
        cell.setdefault("id", f"cell-{i:03d}")
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = copy.deepcopy(LANGUAGE_INFO)
    nb.metadata.update(copy.deepcopy(colab.NOTEBOOK_METADATA))
    nbformat.validate(nb)
    return nb


def normalise_file(path: Path) -> bool:
    """Rewrite the notebook at ``path`` in its ``normalised`` form; returns whether its bytes changed."""
    text = path.read_text(encoding="utf-8")
    new = notebook_text(normalised(nbformat.reads(text, as_version=4)))
    if new == text:
        return False
    path.write_text(new, encoding="utf-8")
    return True


def to_text(nb) -> str:
    """The jupytext text of a notebook (used to turn a notebook written by hand into a lab source)."""
    import jupytext

    nb = nbformat.from_dict(nb)
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "jupytext": dict(HEADER)}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return jupytext.writes(nb, fmt=TEXT_FORMAT)


def _inputs(nb) -> list:
    return [(c.cell_type, c.source, {k: v for k, v in c.metadata.items() if k in ("nbgrader", "tags")})
            for c in nb.cells]


def rendered(course, lab: str) -> str | None:
    """The source notebook's text as ``<lab>.py`` renders it now; None when the lab has no ``.py``."""
    path = text_path(course, lab)
    if not path.is_file():
        return None
    return notebook_text(render(path.read_text(encoding="utf-8"), course.name, lab))


def write_source_notebook(course, lab: str, *, force: bool = False) -> bool:
    """Render ``<lab>.py`` to ``<lab>.ipynb``; returns whether the notebook changed.

    A notebook whose cells were edited after the ``.py`` (e.g. in Jupyter without jupytext) is not
    overwritten unless ``force``: its edits would be lost."""
    text = rendered(course, lab)
    if text is None:
        return False
    target = course.source_notebook(lab)
    if target.is_file():
        current = target.read_text(encoding="utf-8")
        if current == text:
            return False
        edited = _inputs(nbformat.reads(current, as_version=4)) != _inputs(nbformat.reads(text, as_version=4))
        newer = target.stat().st_mtime > text_path(course, lab).stat().st_mtime
        if edited and newer and not force:
            raise DFAError(
                f"{target} has changes that {lab}.py does not (edited after it): put them in {lab}.py, "
                f"which is the source, or run `dfa release --force {course.name}` to discard them")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return True


def source_problems(course, lab: str) -> list[str]:
    """``dfa check``: a lab without a ``.py`` source, or a source notebook that its ``.py`` no longer gives."""
    try:
        text = rendered(course, lab)
    except DFAError as exc:
        return [str(exc)]
    except Exception as exc:  # jupytext or nbformat refusing the text: report it, keep checking other labs
        return [f"source/{lab}/{lab}.py cannot be rendered: {str(exc).splitlines()[0]}"]
    if text is None:
        return [f"source/{lab}/{lab}.py is missing: the lab source is a jupytext file "
                f"(`jupytext --to py:percent source/{lab}/{lab}.ipynb` makes one)"]
    path = course.source_notebook(lab)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        return [f"source/{lab}/{lab}.ipynb is out of date with {lab}.py: run `dfa release {course.name}`"]
    return []


if __name__ == "__main__":  # `%run -m common.grading.authoring.labsource setup`: an author running a .py in Jupyter
    from IPython import get_ipython

    shell = get_ipython()
    if sys.argv[1:] != ["setup"] or shell is None:
        raise SystemExit("usage, in Jupyter: %run -m common.grading.authoring.labsource setup")
    shell.run_cell(colab.setup_cell_source())  # in the notebook's namespace; %pip needs IPython anyway
