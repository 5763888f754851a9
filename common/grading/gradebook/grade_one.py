"""``dfa grade-one``: grade one submission, as ``dfa autograde`` grades a batch, and write the result to a folder.

This is the entry a platform's grader calls (a Coursera or Gradescope image runs one submission per container).
It changes nothing in the course folder: the lab is released into a throw-away copy of the course (its own
gradebook), the submission is collected there, and the same prepare → sandboxed execute → score steps of
``autograde`` grade it. ``OUT`` then holds:

- ``result.json``: status, score, maximum, and one entry per graded cell (grade id, kind, score, maximum);
- ``feedback.html``: nbgrader's feedback page without hidden tests (``dfa feedback``'s page).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from common.errors import DFAError
from common.grading.courses.course import CONFIG_FILE, Course, all_courses, quiet_nbgrader
from common.grading.gradebook import inputs

STUDENT = "submission"  # the one student of the throw-away course


def find_lab(lab: str, courses: list[Course] | None = None) -> tuple[Course, str]:
    """The course holding ``lab`` (a lab id, a unique prefix of one, or ``COURSE/LAB``), among ``courses``
    (default: every course). Each course resolves the name itself (``Course.require_lab``)."""
    from common.errors import unknown

    courses = courses if courses is not None else all_courses()
    if "/" in lab:
        name, lab = lab.split("/", 1)
        courses = [c for c in courses if c.name == name]
    found = []
    for course in courses:
        try:
            found.append((course, course.require_lab(lab)))
        except DFAError:
            continue
    if len(found) != 1:
        raise unknown("lab", lab, [f"{c.name}/{n}" for c in courses for n in c.labs()])
    return found[0]


def _cells(course: Course, lab: str) -> list[dict]:
    with course.gradebook() as gb:
        cells = []
        for nb in gb.find_submission(lab, STUDENT).notebooks:
            for grade in nb.grades:
                cells.append({"notebook": nb.name, "grade_id": grade.name, "kind": grade.cell_type,
                              "needs_manual_grade": bool(grade.needs_manual_grade), "score": float(grade.score or 0.0),
                              "max_score": float(grade.max_score)})
    return cells


def grade_one(lab: str, submission: Path, out: Path, *, limits=None, unsafe_no_sandbox: bool = False,
              courses: list[Course] | None = None) -> dict:
    """Grade ``submission`` (a notebook) of ``lab``; write ``out/result.json`` and ``out/feedback.html``."""
    from common.grading.authoring.release import release_lab
    from common.grading.gradebook.autograde import NOT_SCORED, autograde
    from common.grading.gradebook.feedback import generate_feedback

    if not os.path.lexists(submission):
        raise DFAError(f"no submission file {submission}")
    inputs.check_file(submission)  # a link or a hard link would be read with the grader's rights: refused
    course, lab = find_lab(lab, courses)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dfa-grade-one-") as tmp:
        work = Path(tmp) / course.name  # keeps the course name: badges and course ids depend on it
        work.mkdir()
        shutil.copy2(course.root / CONFIG_FILE, work / CONFIG_FILE)
        shutil.copytree(course.source_dir / lab, work / "source" / lab)
        copy = Course(work)
        modes: list[str] = []  # the sandbox's description, reported with the result
        with quiet_nbgrader():
            release_lab(copy, lab, render=False)
            target = copy.submitted_dir / STUDENT / lab / f"{lab}.ipynb"
            target.parent.mkdir(parents=True)
            inputs.copy_regular(submission, target)  # O_NOFOLLOW, checked on the open file: no swap in between
            graded = autograde(copy, lab, limits=limits, unsafe_no_sandbox=unsafe_no_sandbox,
                               students=[STUDENT], report=lambda g: None, announce=modes.append)[0]
            cells = _cells(copy, lab) if graded.status not in NOT_SCORED else []
            pages, _ = generate_feedback(copy, lab) if cells else ([], [])
        if pages:
            shutil.copyfile(pages[0], out / "feedback.html")
    result = {"course": course.name, "lab": lab, "status": graded.status, "score": graded.score,
              "max_score": graded.max_score, "needs_manual_grade": graded.needs_manual_grade,
              "message": graded.message, "review": graded.review,
              "sandbox": modes[0] if modes else "", "seconds": round(graded.seconds, 1),
              "cells": cells}
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result
