"""``dfa grades``: nbgrader's CSV export of the gradebook, plus one score histogram per lab.

The CSV has nbgrader's columns (``assignment, duedate, timestamp, student_id, last_name, first_name, email,
raw_score, late_submission_penalty, score, max_score``), written by nbgrader's own ``CsvExportPlugin``.
Both land in ``COURSE/grades/`` by default — student data: that folder must never be committed.
"""

from __future__ import annotations

from pathlib import Path

from common.grading.course import Course


def export_csv(course: Course, path: Path) -> Path:
    from nbgrader.plugins import CsvExportPlugin

    path.parent.mkdir(parents=True, exist_ok=True)
    with course.gradebook() as gb:
        CsvExportPlugin(to=str(path)).export(gb)
    return path


def lab_scores(course: Course) -> dict[str, tuple[list[float], float]]:
    """{lab: (scores of the students who submitted it, its maximum score)} from the gradebook."""
    out = {}
    with course.gradebook() as gb:
        for assignment in gb.assignments:
            scores = [float(max(0.0, s.score - s.late_submission_penalty)) for s in assignment.submissions]
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
        color="#4C72B0",
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
    fig.savefig(path, dpi=100)
    return path


def export(course: Course, csv_path: Path | None = None) -> tuple[Path, list[Path]]:
    """Write the CSV and the histograms; returns their paths."""
    out_dir = csv_path.parent if csv_path else course.root / "grades"
    csv = export_csv(course, csv_path or out_dir / "grades.csv")
    pngs = [
        histogram(lab, scores, max_score, out_dir / f"{lab}_scores.png")
        for lab, (scores, max_score) in sorted(lab_scores(course).items())
    ]
    return csv, pngs
