"""Submissions whose automatic scores in the gradebook do not belong to the notebook now in ``submitted/``.

nbgrader keeps a submission's last scores until a grading run replaces them. When ``dfa collect`` brings a new
notebook, or a regrade fails (nbgrader's error, a full disk, a lost Dask worker, a refused entry), the gradebook
still holds the old notebook's scores while ``timestamp.txt`` is the new one's: exported as they are, they
would be a grade for work the learner no longer submitted. So each of those events marks the submission stale
here, a successful score clears the mark, and ``dfa grades`` warns and exits 1 while any mark remains (its CSV
shows ``stale`` in place of those scores).

The marks live in ``submitted/.dfa-stale.json`` (student data: ``submitted/`` is never committed; nbgrader never
reads dot names), as ``{lab: {student: why}}``, rewritten in one step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

FILE = ".dfa-stale.json"


def _path(course) -> Path:
    return course.submitted_dir / FILE


def read(course) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(_path(course).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(course, data: dict) -> None:
    path = _path(course)
    data = {lab: students for lab, students in data.items() if students}
    if not data:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{FILE}.partial")
    partial.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(partial, path)


def mark(course, lab: str, student: str, why: str) -> None:
    data = read(course)
    data.setdefault(lab, {})[student] = why
    _write(course, data)


def clear(course, lab: str, student: str) -> None:
    data = read(course)
    if data.get(lab, {}).pop(student, None) is not None:
        _write(course, data)


def lines(course) -> list[str]:
    """One warning per stale submission."""
    return [f"stale: {lab}/{student}: {why}; its gradebook scores are an earlier notebook's: grade it again "
            f"(dfa autograde {course.name} {lab} --student {student})"
            for lab, students in sorted(read(course).items()) for student, why in sorted(students.items())]
