"""``dfa grades``: the gradebook as a CSV, plus one score histogram per lab.

The CSV has nbgrader's columns (``assignment, duedate, timestamp, student_id, last_name, first_name, email,
raw_score, late_submission_penalty, score, max_score``, as its ``CsvExportPlugin`` writes them) and two more:
``seconds_late`` (after the lab's due date, ``c.Offering.due``; empty without one) and ``status``:

- ``graded``;
- ``not submitted``: the student never handed the lab in (nbgrader's plugin writes a score of 0 there); the
  score columns read ``not submitted``;
- ``stale: why``: the gradebook's scores belong to an earlier notebook (a re-collect not graded since, or a
  failed regrade: stale.py); the score columns read ``stale``, and ``dfa grades`` exits 1 while any remain.

Both land in ``COURSE/grades/`` by default — student data: that folder must never be committed.
"""

from __future__ import annotations

import csv
from pathlib import Path

from common.grading.courses.course import Course
from common.grading.gradebook import inputs, stale
from common.palette import SEQUENCE

COLUMNS = ("assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email", "raw_score",
           "late_submission_penalty", "score", "max_score", "seconds_late", "status")
NOT_SUBMITTED = "not submitted"


def _text(value) -> str:
    return "" if value is None else str(value)


def export_csv(course: Course, path: Path) -> Path:
    from nbgrader.api import MissingEntry

    marks = stale.read(course)
    path.parent.mkdir(parents=True, exist_ok=True)
    with inputs.writing(path), course.gradebook() as gb, open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, COLUMNS)
        writer.writeheader()
        students = {s.id: s for s in gb.students}
        for assignment in gb.assignments:
            lab_marks = marks.get(assignment.name, {})
            for student_id in sorted(set(students) | set(lab_marks)):
                student = students.get(student_id)
                row = {"assignment": assignment.name, "duedate": _text(assignment.duedate), "student_id": student_id,
                       "last_name": _text(student and student.last_name),
                       "first_name": _text(student and student.first_name),
                       "email": _text(student and student.email), "max_score": _text(assignment.max_score)}
                try:
                    submission = gb.find_submission(assignment.name, student_id)
                except MissingEntry:
                    submission = None
                if student_id in lab_marks:
                    row.update(raw_score="stale", score="stale", status=f"stale: {lab_marks[student_id]}")
                elif submission is None:
                    row.update(raw_score=NOT_SUBMITTED, score=NOT_SUBMITTED, status=NOT_SUBMITTED)
                else:
                    penalty = submission.late_submission_penalty or 0.0
                    row.update(raw_score=_text(submission.score), late_submission_penalty=_text(penalty),
                               score=_text(max(0.0, submission.score - penalty)), status="graded")
                if submission is not None:
                    row["timestamp"] = _text(submission.timestamp)
                    if assignment.duedate is not None and submission.timestamp is not None:
                        row["seconds_late"] = f"{submission.total_seconds_late:g}"
                writer.writerow(row)
    return path


def lab_scores(course: Course) -> dict[str, tuple[list[float], float]]:
    """{lab: (scores of the students who submitted it, its maximum score)} from the gradebook (stale ones left
    out: stale.py)."""
    out, marks = {}, stale.read(course)
    with course.gradebook() as gb:
        for assignment in gb.assignments:
            scores = [float(max(0.0, s.score - (s.late_submission_penalty or 0.0))) for s in assignment.submissions
                      if s.student.id not in marks.get(assignment.name, {})]
            out[assignment.name] = (scores, float(assignment.max_score))
    return out


def histogram(lab: str, scores: list[float], max_score: float, path: Path) -> Path:
    """A PNG of how many students got each score (bins of one point, or 20 bins for large maxima)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    top = max(max_score, max(scores, default=0.0), 1.0)
    bins = int(top) + 1 if top <= 40 else 20
    ax.hist(
        scores,
        bins=bins,
        range=(0, top + (1 if top <= 40 else 0)),
        color=SEQUENCE[0],
        edgecolor="white",
        align="left" if top <= 40 else "mid",
    )
    ax.set_xlim(-0.5, top + 0.5)
    ax.set_xlabel(f"score (points, out of {max_score:g})")
    ax.set_ylabel("students")
    mean = sum(scores) / len(scores) if scores else 0.0
    ax.set_title(f"{lab}: scores of {len(scores)} submissions (mean {mean:.1f} of {max_score:g})")
    ax.yaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with inputs.writing(path):
        fig.savefig(path, dpi=100)
    return path


def export(course: Course, csv_path: Path | None = None) -> tuple[Path, list[Path]]:
    """Write the CSV and the histograms; returns their paths (``stale.lines(course)`` says what is stale)."""
    out_dir = csv_path.parent if csv_path else course.root / "grades"
    csv = export_csv(course, csv_path or out_dir / "grades.csv")
    pngs = [
        histogram(lab, scores, max_score, out_dir / f"{lab}_scores.png")
        for lab, (scores, max_score) in sorted(lab_scores(course).items())
    ]
    return csv, pngs
