"""``dfa check``: is every lab gradable, standard, released and leak-free? One line per problem; CI fails.

For each lab: its source notebook is what its jupytext source ``<lab>.py`` renders now, nbgrader metadata
valid (schema 3, unique grade ids, points on graded cells), the lab-standard sections present and in order.
For each release notebook: identical to what ``dfa release`` would write now, no outputs, no solution,
hidden-test or mark-scheme text. Last, the README lab tables are current.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import nbformat

from common.grading.authoring import lab_length, labsource
from common.grading.authoring.release import readme_updates
from common.grading.courses import regions, standard
from common.grading.courses.course import CONFIG_FILE, Course
from common.grading.verdicts import judge


def metadata_problems(nb) -> list[str]:
    from nbgrader.nbgraderformat import (
        MetadataValidator,
        SchemaTooNewError,
        SchemaTooOldError,
        ValidationError,
    )

    problems = []
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        problems.append(f"not a valid notebook: {str(exc).splitlines()[0]}")
    try:
        MetadataValidator().validate_nb(nb)
    except (ValidationError, SchemaTooOldError, SchemaTooNewError) as exc:
        problems.append(f"invalid nbgrader metadata: {str(exc).strip().splitlines()[0]}")
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        meta = standard.nbgrader_meta(cell)
        if not meta:
            continue
        grade_id = meta.get("grade_id")
        if meta.get("schema_version") != 3:
            problems.append(
                f"cell {index} ({grade_id}): nbgrader schema_version is "
                f"{meta.get('schema_version')}, expected 3"
            )
        if grade_id in seen:
            problems.append(f"cell {index}: grade id {grade_id!r} is used more than once")
        seen.add(grade_id)
        if meta.get("grade") and not (isinstance(meta.get("points"), (int, float)) and meta["points"] > 0):
            problems.append(f"cell {index} ({grade_id}): a graded cell needs points > 0")
        if standard.is_autograded_test(cell):  # a source notebook's test cell: graded by its judgement alone
            source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
            _, probe, judgement = judge.parts(source)
            if not probe.strip() or not judgement.strip():
                problems.append(f"cell {index} ({grade_id}): an autograded test cell needs hidden tests with a "
                                f"probe and a judgement, split by a '{judge.JUDGEMENT}' line")  # fmt: skip
            if re.search(r"^\s*(from\s+answers\s+import|import\s+answers\b)", probe, re.M):
                problems.append(f"cell {index} ({grade_id}): its probe imports answers: the answer key belongs "
                                "below the judgement line (the probe runs in the learner's kernel)")  # fmt: skip
    return problems


def _regenerated_releases(course: Course) -> dict[str, dict]:
    """What ``dfa release`` would write for each lab, generated in a throw-away copy of the course."""
    from common.grading.authoring.release import release_lab

    with tempfile.TemporaryDirectory(prefix="dfa-check-") as tmp:
        copy = Path(tmp) / course.name
        copy.mkdir()
        shutil.copy2(course.root / CONFIG_FILE, copy / CONFIG_FILE)
        shutil.copytree(course.source_dir, copy / "source")
        clone = Course(copy)
        api = clone.api()
        out = {}
        for lab in clone.labs():
            released = release_lab(clone, lab, api, render=False)
            out[lab] = json.loads(released.path.read_text(encoding="utf-8"))
        return out


def release_problems(course: Course, lab: str, regenerated: dict | None) -> list[str]:
    path = course.release_notebook(lab)
    if not path.is_file():
        return [f"no release notebook: run `dfa release {course.name}`"]
    committed = json.loads(path.read_text(encoding="utf-8"))
    problems = []
    if regenerated is not None and committed != regenerated:
        problems.append(
            f"release/{lab}/{lab}.ipynb is out of date with its source: run `dfa release {course.name}`"
        )
    for extra in sorted(path.parent.glob("*.py")):  # a lab source next to its release: the answers ship
        problems.append(f"release/{lab}/{extra.name} is in the release folder: it must never be released")
    release_nb = nbformat.read(path, as_version=4)
    if any(cell.get("outputs") for cell in release_nb.cells):
        problems.append(f"release/{lab}/{lab}.ipynb has stored outputs")
    source = nbformat.read(course.source_notebook(lab), as_version=4)
    leaks = regions.find_leaks(regions.notebook_text(release_nb), regions.secret_lines(source))
    for leak in leaks[:5]:
        problems.append(f"release/{lab}/{lab}.ipynb leaks solution or hidden-test text: {leak[:80]!r}")
    return problems


def check_course(course: Course) -> list[str]:
    problems: list[str] = []
    labs = course.labs()
    try:
        regenerated = _regenerated_releases(course) if labs else {}
    except Exception as exc:  # a broken source notebook is reported below, per lab
        problems.append(f"{course.name}: could not regenerate the release tree: {exc}")
        regenerated = {}
    minutes = tuple(course.config.get("Offering", {}).get("core_lab_minutes", lab_length.CORE_RANGE))
    readme_path = course.root / "README.md"
    readme = readme_path.read_text(encoding="utf-8") if readme_path.is_file() else ""
    for lab in labs:
        where = f"{course.name}/{lab}"
        try:
            nb = nbformat.read(course.source_notebook(lab), as_version=4)
        except Exception as exc:
            problems.append(f"{where}: cannot read the source notebook: {exc}")
            continue
        found = labsource.source_problems(course, lab) + metadata_problems(nb) + standard.section_problems(nb)
        found += lab_length.length_problems(nb, core=lab.startswith("lab"), core_range=minutes)
        found += lab_length.readme_problems(readme, lab, lab_length.stated_minutes(nb))
        found += release_problems(course, lab, regenerated.get(lab))
        problems.extend(f"{where}: {p}" for p in found)
    if course.release_dir.is_dir():
        for folder in sorted(p for p in course.release_dir.iterdir() if p.is_dir()):
            if folder.name not in labs:
                problems.append(f"{course.name}: release/{folder.name} has no source notebook")
    return problems


def check(courses: list[Course]) -> list[str]:
    problems = [p for course in courses for p in check_course(course)]
    stale = readme_updates(courses, write=False)
    return problems + [f"{path}: the lab table is out of date: run `dfa release`" for path in stale]
