"""``dfa release``: regenerate the student notebooks that the Colab badges open.

For each lab: render its jupytext source ``source/<lab>/<lab>.py`` into the source notebook ``<lab>.ipynb``
(shared cells included, stable cell ids: ``labsource``), then let nbgrader's ``generate_assignment`` write
``release/<lab>/<lab>.ipynb`` (solutions stubbed, hidden tests and outputs removed, the lab recorded in the
course gradebook), rewritten in the form Jupyter saves (``labsource.normalised``) so it opens unmodified, with
Colab's GPU runtime setting (``colab.NOTEBOOK_METADATA``) so Colab opens it on a GPU.
Last, the lab tables between ``<!-- labs:start -->`` and ``<!-- labs:end -->`` in the README files are
rewritten; a README without the markers is left alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import nbformat

from common.errors import DFAError
from common.grading.authoring import colab, labsource
from common.grading.courses.course import Course, all_courses


@dataclass
class Released:
    course: str
    lab: str
    path: Path
    source_written: bool  # the source notebook was (re)written from the lab's .py
    backup: Path | None = None  # a hand-edited release notebook replaced with --force was kept here


# What each release notebook was when ``dfa release`` last wrote it ({lab: sha256}), committed with them: a
# release notebook that differs was edited by hand since, and is not overwritten without --force.
RELEASE_RECORD = ".dfa-release.json"
BACKUPS = ".dfa-backups"  # in the course folder: hand-edited release notebooks replaced with --force


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _records(course: Course) -> dict[str, str]:
    try:
        data = json.loads((course.release_dir / RELEASE_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _record(course: Course, digests: dict[str, str]) -> None:
    path = course.release_dir / RELEASE_RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**_records(course), **digests}, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def guard_hand_edits(course: Course, lab: str, force: bool) -> Path | None:
    """Refuse (DFAError) to overwrite ``lab``'s release notebook if it differs from what the last ``dfa release``
    wrote; with ``force``, copy it to ``BACKUPS`` first and return the copy's path. No record: nothing to compare."""
    path, recorded = course.release_notebook(lab), _records(course).get(lab)
    if not path.is_file() or recorded is None or _digest(path) == recorded:
        return None
    backup = course.root / BACKUPS / f"{lab}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.ipynb"
    if not force:
        raise DFAError(f"{path} was edited by hand since the last dfa release (it differs from what that release "
                       f"wrote): move the edits into source/{lab}/{lab}.py, or pass --force to replace it (a copy "
                       f"is kept in {backup.parent})")
    backup.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, backup)
    return backup


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
    labsource.normalise_file(course.release_notebook(lab))  # as Jupyter saves it: JupyterLab opens it clean
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
            backups = {lab: guard_hand_edits(course, lab, force) for lab in course.labs()}  # before any write
            for lab in course.labs():
                item = release_lab(course, lab, api, force=force)
                item.backup = backups[lab]
                released.append(item)
            _record(course, {item.lab: _digest(item.path) for item in released if item.course == course.name})
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
