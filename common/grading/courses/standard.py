"""The shape every lab notebook has (the project's LAB_STANDARD), as code ``dfa check`` and the tests share.

A lab is, in order: a Colab badge, a header (title, learning objectives, expected time, runtime), the setup
cell, a ``parameters`` cell that defines ``FAST``, numbered parts (each with a stub and an autograded test
cell), an analysis section with manually graded answers, the landscape map, and a wrap-up. Sections are found
by their markdown headings and by cell tags, whatever wrote the notebook.
"""

from __future__ import annotations

import re

BADGE_TAG = "dfa-badge"
SETUP_TAG = "dfa-setup"
PARAMETERS_TAG = "parameters"  # papermill's tag
SETUP_GRADE_ID = "dfa_setup"

# The header must mention these (case-insensitive).
HEADER_TOPICS = ("learning objectives", "expected time", "runtime")

PART_HEADING = re.compile(r"^##\s+Part\s+(\d+)\b", re.IGNORECASE | re.MULTILINE)
ANALYSIS_HEADING = re.compile(r"^##\s+Analysis\b", re.IGNORECASE | re.MULTILINE)
LANDSCAPE_HEADING = re.compile(r"^##\s+Landscape map\b", re.IGNORECASE | re.MULTILINE)
WRAP_UP_HEADING = re.compile(r"^##\s+Wrap[- ]up\b", re.IGNORECASE | re.MULTILINE)
GOING_FURTHER = re.compile(r"^##\s+Going further\b", re.IGNORECASE | re.MULTILINE)  # optional, ungraded
FAST_ASSIGNMENT = re.compile(r"^FAST\s*=", re.MULTILINE)


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def nbgrader_meta(cell) -> dict:
    return dict(cell.get("metadata", {}).get("nbgrader", {}))


def is_autograded_test(cell) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution") and cell.get("cell_type") == "code"


def is_manual_answer(cell) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and bool(meta.get("solution"))


def is_stub(cell) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta.get("solution")) and not meta.get("grade") and cell.get("cell_type") == "code"


def ungraded_tail(cells, graded_indices=()) -> set[int]:
    """Indices of the code cells after the last ``## Going further`` heading, if nothing after it is graded.

    The grader does not run them: they carry no point. A cell counts as graded if nbgrader marks it a grade
    cell or its index is in ``graded_indices`` (the test cells the grader holds), so a heading a learner adds
    early, above a graded cell, skips nothing."""
    heading = max((i for i, c in enumerate(cells) if _heading(GOING_FURTHER)(c)), default=None)
    if heading is None:
        return set()
    tail = range(heading + 1, len(cells))
    if any(nbgrader_meta(cells[i]).get("grade") or i in graded_indices for i in tail):
        return set()
    return {i for i in tail if cells[i].get("cell_type") == "code"}


def _first(cells, predicate) -> int | None:
    return next((i for i, cell in enumerate(cells) if predicate(cell)), None)


def _heading(pattern):
    return lambda cell: cell.get("cell_type") == "markdown" and bool(pattern.search(cell.get("source", "")))


def section_problems(nb) -> list[str]:
    """What is missing or out of order in ``nb`` with respect to the lab standard; empty when it conforms."""
    cells = nb["cells"]
    problems: list[str] = []
    positions: dict[str, int | None] = {}

    positions["badge"] = _first(cells, lambda c: BADGE_TAG in tags(c))
    header = _first(
        cells, lambda c: c.get("cell_type") == "markdown" and c.get("source", "").lstrip().startswith("# ")
    )
    positions["header"] = header
    if header is not None:
        text = cells[header]["source"].lower()
        missing = [topic for topic in HEADER_TOPICS if topic not in text]
        if missing:
            problems.append(f"the header (cell {header}) does not mention: {', '.join(missing)}")
    positions["setup cell"] = _first(cells, lambda c: SETUP_TAG in tags(c) and c.get("cell_type") == "code")
    params = _first(cells, lambda c: PARAMETERS_TAG in tags(c) and c.get("cell_type") == "code")
    positions["parameters cell"] = params
    if params is not None and not FAST_ASSIGNMENT.search(cells[params]["source"]):
        problems.append("the parameters cell does not define FAST (the fast setting for CI and grading)")

    parts = [
        (i, int(PART_HEADING.search(c["source"]).group(1)))
        for i, c in enumerate(cells)
        if _heading(PART_HEADING)(c)
    ]
    positions["Part 1"] = parts[0][0] if parts else None
    numbers = [n for _, n in parts]
    if parts and numbers != list(range(1, len(parts) + 1)):
        problems.append(f"parts are numbered {numbers}, expected 1..{len(parts)} in order")
    positions["Analysis"] = _first(cells, _heading(ANALYSIS_HEADING))
    positions["Landscape map"] = _first(cells, _heading(LANDSCAPE_HEADING))
    positions["Wrap-up"] = _first(cells, _heading(WRAP_UP_HEADING))

    for name, where in positions.items():
        if where is None:
            problems.append(f"missing section: {name}")
    present = [(name, where) for name, where in positions.items() if where is not None]
    for (name_a, a), (name_b, b) in zip(present, present[1:], strict=False):
        if a > b:
            problems.append(f"section '{name_a}' (cell {a}) should come before '{name_b}' (cell {b})")

    # every part has a stub and an autograded test cell with points, before the next section starts
    ends = [i for i, _ in parts[1:]] + ([positions["Analysis"] or len(cells)] if parts else [])
    for (start, number), end in zip(parts, ends, strict=True):
        body = cells[start:end]
        if not any(is_stub(c) for c in body):
            problems.append(f"Part {number} has no stub (a code cell marked as a solution)")
        if not any(is_autograded_test(c) and nbgrader_meta(c).get("points", 0) > 0 for c in body):
            problems.append(f"Part {number} has no autograded test cell with points")
    if positions["Analysis"] is not None:
        analysis_end = positions["Landscape map"] or len(cells)
        if not any(is_manual_answer(c) for c in cells[positions["Analysis"] : analysis_end]):
            problems.append("the Analysis section has no manually graded answer cell")
    return problems
