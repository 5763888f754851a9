"""``dfa release``: regenerate the student notebooks that the Colab badges open.

For each lab: render its jupytext source ``source/<lab>/<lab>.py`` into the source notebook ``<lab>.ipynb``
(shared cells included, stable cell ids: ``labsource``), then let nbgrader's ``generate_assignment`` write
``release/<lab>/<lab>.ipynb`` (solutions stubbed, hidden tests and outputs removed, the lab recorded in the
course gradebook). Last, the lab tables between ``<!-- labs:start -->`` and
``<!-- labs:end -->`` in the README files are rewritten; a README without the markers is left alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import nbformat

from common.errors import DFAError
from common.grading import colab, labsource
from common.grading.course import Course, all_courses


@dataclass
class Released:
    course: str
    lab: str
    path: Path
    source_written: bool  # the source notebook was (re)written from the lab's .py


repo_path = labsource.repo_path


def lab_title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("# "):
            return cell.source.lstrip()[2:].splitlines()[0].strip()
    return "(untitled)"


def release_lab(course: Course, lab: str, api=None, *, render: bool = True, force: bool = False) -> Released:
    """Release one lab; ``render=False`` releases the source notebook as it is (what ``dfa check`` needs)."""
    written = labsource.write_source_notebook(course, lab, force=force) if render else False
    result = (api or course.api()).generate_assignment(lab, force=True, create=True)
    if not result["success"]:
        raise DFAError(
            f"nbgrader could not release {course.name}/{lab}: "
            f"{_last_error(result.get('log', '') + result.get('error', ''))}"
        )
    return Released(course.name, lab, course.release_notebook(lab), written)


def _last_error(log: str) -> str:
    lines = [line for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if "[ERROR]" in line or "Error" in line]
    return (errors or lines or ["unknown error"])[-1].strip()


def release(courses: list[Course], *, force: bool = False) -> list[Released]:
    released = []
    for course in courses:
        if not course.labs():
            continue
        with course.lock("dfa release"):  # not while another dfa command writes this course
            api = course.api()
            released.extend([release_lab(course, lab, api, force=force) for lab in course.labs()])
    return released


def readme_rows(courses: list[Course], readme: Path) -> list[tuple[str, str, str, str]]:
    """(course, lab title, link relative to ``readme``, repository path) for every released lab."""
    rows = []
    for course in courses:
        for lab in course.labs():
            path = course.release_notebook(lab)
            if path.is_file():
                title = lab_title(nbformat.read(course.source_notebook(lab), as_version=4))
                link = Path(os.path.relpath(path, readme.parent)).as_posix()
                rows.append((course.name, title, link, repo_path(course.name, lab)))
    return rows


def readme_updates(courses: list[Course], *, write: bool) -> list[Path]:
    """README files whose lab table is (with ``write``) or would be rewritten: the README of the folder that
    holds these courses (listing every course there) and each course's own README."""
    targets = []
    for parent in sorted({c.root.parent for c in courses}):
        targets.append((parent / "README.md", all_courses(parent)))
    targets += [(c.root / "README.md", [c]) for c in courses]
    changed = []
    for readme, scope in targets:
        if colab.update_lab_table(readme, readme_rows(scope, readme), write=write):
            changed.append(readme)
    return changed
