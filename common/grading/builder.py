"""Write a lab's source notebook from Python, so it is generated reproducibly rather than hand-edited JSON.

A course keeps one small script per lab (``courseN_*/build_<lab>.py`` or similar)::

    lab = LabBuilder("course2_dataflow", "lab1_tiles", "Tiles and sticks")
    lab.header(objectives=["…"], expected_time="90–120 minutes", runtime="Colab CPU or any laptop")
    lab.parameters("FAST = bool(os.environ.get('NBGRADER_EXECUTION'))\\nN = 64 if FAST else 1024")
    lab.part("Tiling a matmul", "Explanation, principle first, vendor second…")
    lab.solution("def tile(x):\\n    ### BEGIN SOLUTION\\n    ...\\n    ### END SOLUTION", grade_id="tile")
    lab.tests("check_tensor('tile', tile(x), ref)\\n### BEGIN HIDDEN TESTS\\n...\\n### END HIDDEN TESTS",
              grade_id="tile_tests", points=2)
    lab.analysis("Predict, then check against the simulator.")
    lab.answer("Which of GPU/TPU/WSE moves fewer bytes here, and why?", grade_id="q1", points=2)
    lab.landscape("Add your rows to the map.", "…code…")
    lab.wrap_up("What to remember…")
    lab.write("course2_dataflow/source/lab1_tiles/lab1_tiles.ipynb")

and ends with ``sys.exit(write_labs(COURSE_DIR, build_core, build_deepdive))``, which writes each lab to
``<course>/source/<lab>/<lab>.ipynb`` and says which ones changed.

The builder adds the Colab badge and the setup cell, numbers the parts, gives every cell a stable id, writes
nbgrader metadata (schema 3) with the right flags, and refuses a notebook that misses a standard section.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from common.errors import DFAError
from common.grading import colab, standard

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
CODE_STUB_NOTE = "### BEGIN SOLUTION"


def _nbgrader(
    grade_id: str, *, grade: bool, solution: bool, locked: bool, points: float | None = None
) -> dict:
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if grade:
        meta["points"] = points
    return meta


class LabBuilder:
    """Collects cells in order; ``notebook()`` checks them against the lab standard and returns it."""

    def __init__(self, course: str, lab: str, title: str):
        self.course, self.lab, self.title = course, lab, title
        self.cells: list = []
        self._parts = 0
        self._grade_ids: set[str] = set()

    # ---- plain cells ---
    def _add(self, cell, tags: list[str] | None = None):
        cell.id = f"cell-{len(self.cells):03d}"
        if tags:
            cell.metadata["tags"] = list(tags)
        self.cells.append(cell)
        return cell

    def _claim(self, grade_id: str) -> str:
        if not grade_id or not grade_id.replace("_", "").replace("-", "").isalnum():
            raise DFAError(f"grade_id {grade_id!r} must be letters, digits, '_' or '-'")
        if grade_id in self._grade_ids:
            raise DFAError(f"grade_id {grade_id!r} is used twice in {self.lab}")
        self._grade_ids.add(grade_id)
        return grade_id

    def markdown(self, text: str, *, tags: list[str] | None = None):
        return self._add(nbformat.v4.new_markdown_cell(text.strip("\n")), tags)

    def code(self, source: str, *, tags: list[str] | None = None, locked_id: str | None = None):
        """A plain code cell; with ``locked_id`` a read-only one that the autograder restores if changed."""
        cell = self._add(nbformat.v4.new_code_cell(source.strip("\n")), tags)
        if locked_id:
            cell.metadata["nbgrader"] = _nbgrader(
                self._claim(locked_id), grade=False, solution=False, locked=True
            )
            cell.metadata["editable"] = False
            cell.metadata["deletable"] = False
        return cell

    # ---- the standard sections, in order ---
    def header(self, *, objectives: list[str], expected_time: str, runtime: str, intro: str = "") -> None:
        path = f"{self.course}/release/{self.lab}/{self.lab}.ipynb"  # course folders sit at the repo root
        self.markdown(colab.badge_markdown(path), tags=[standard.BADGE_TAG])
        bullets = "\n".join(f"- {item}" for item in objectives)
        self.markdown(
            f"# {self.title}\n\n{intro}\n\n**Learning objectives**\n\n{bullets}\n\n"
            f"**Expected time:** {expected_time}  \n**Runtime:** {runtime}"
        )
        self.code(colab.setup_cell_source(), tags=[standard.SETUP_TAG], locked_id=standard.SETUP_GRADE_ID)

    def parameters(self, source: str) -> None:
        """The papermill ``parameters`` cell; it must define ``FAST`` (True under CI and the autograder)."""
        self.code(source, tags=[standard.PARAMETERS_TAG])

    def part(self, title: str, text: str = "") -> None:
        self._parts += 1
        self.markdown(f"## Part {self._parts} — {title}\n\n{text}")

    def solution(self, source: str, *, grade_id: str):
        """The learner's stub: the ``### BEGIN/END SOLUTION`` region becomes ``NotImplementedError``."""
        if CODE_STUB_NOTE not in source:
            raise DFAError(f"solution cell {grade_id!r} has no '{CODE_STUB_NOTE}' region")
        cell = self._add(nbformat.v4.new_code_cell(source.strip("\n")))
        cell.metadata["nbgrader"] = _nbgrader(self._claim(grade_id), grade=False, solution=True, locked=False)
        return cell

    def tests(self, source: str, *, grade_id: str, points: float):
        """An autograded, read-only test cell: visible checks, then ``### BEGIN HIDDEN TESTS`` … if any."""
        if points <= 0:
            raise DFAError(f"test cell {grade_id!r} needs points > 0")
        cell = self._add(nbformat.v4.new_code_cell(source.strip("\n")))
        cell.metadata["nbgrader"] = _nbgrader(
            self._claim(grade_id), grade=True, solution=False, locked=True, points=points
        )
        cell.metadata["editable"] = False
        cell.metadata["deletable"] = False
        return cell

    def analysis(self, text: str = "") -> None:
        self.markdown(f"## Analysis\n\n{text}")

    def answer(self, prompt: str, *, grade_id: str, points: float, model_answer: str = "YOUR ANSWER HERE"):
        """A question and its manually graded markdown answer cell (the model answer stays in the source)."""
        self.markdown(prompt)
        body = (
            f"=== BEGIN MARK SCHEME ===\n{model_answer}\n=== END MARK SCHEME ==="
            if model_answer != "YOUR ANSWER HERE"
            else model_answer
        )
        cell = self._add(nbformat.v4.new_markdown_cell(body))
        cell.metadata["nbgrader"] = _nbgrader(
            self._claim(grade_id), grade=True, solution=True, locked=False, points=points
        )
        return cell

    def landscape(self, text: str, source: str) -> None:
        self.markdown(f"## Landscape map\n\n{text}")
        self.code(source)

    def wrap_up(self, text: str) -> None:
        self.markdown(f"## Wrap-up\n\n{text}")

    # ---- output -------------------------------------------------------------------------------------------
    def notebook(self):
        nb = nbformat.v4.new_notebook(cells=list(self.cells))
        nb.metadata = {
            "kernelspec": dict(KERNELSPEC),
            "language_info": {"name": "python"},
            "dfa": {"course": self.course, "lab": self.lab},
        }
        problems = standard.section_problems(nb)
        if problems:
            raise DFAError(f"{self.lab} does not follow the lab standard: " + "; ".join(problems))
        nbformat.validate(nb)
        return nb

    def write(self, path: str | Path) -> bool:
        """Write the notebook (nbformat's canonical JSON); returns whether the file changed."""
        path = Path(path)
        text = nbformat.writes(self.notebook()) + "\n"
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return True


def write_labs(course_dir: str | Path, *builders) -> int:
    """A build script's ``main``: call each builder (a function returning a ``LabBuilder``), write its notebook
    to ``course_dir/source/<lab>/<lab>.ipynb`` and print whether it changed. Returns 0 (the exit status)."""
    for build in builders:
        lab = build()
        changed = lab.write(Path(course_dir) / "source" / lab.lab / f"{lab.lab}.ipynb")
        print(f"{lab.lab}: {'rewritten' if changed else 'up to date'}")
    return 0
