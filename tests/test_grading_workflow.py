"""The instructor workflow of docs/instructors.md, through the ``dfa`` CLI: release, collect an LMS zip,
autograde, feedback without hidden tests, grades as CSV and histograms."""

from __future__ import annotations

import csv
import zipfile

import nbformat
import pytest
from fixtures.grading_support import (
    FIXTURE_COURSE,
    LAB,
    RIGHT_RELU,
    colab_stripped,
    copy_course,
    needs_sandbox,
    release_nb,
    source_nb,
    with_code,
)

from common.cli import main
from common.grading.courses.regions import html_text, secret_lines

pytestmark = [
    pytest.mark.slow,
    needs_sandbox,
]

NBGRADER_CSV_COLUMNS = [
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
]


def test_release_collect_autograde_feedback_grades(tmp_path, capsys):
    course = copy_course(FIXTURE_COURSE, tmp_path / "repo")
    root = str(course.root)
    assert main(["release", root]) == 0

    archive = tmp_path / "lms_download.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("alice_101_1_lab1.ipynb", nbformat.writes(source_nb(course)))
        zf.writestr("bob_102_2_lab1.ipynb", nbformat.writes(release_nb(course)))
        zf.writestr(
            "carol_103_3_Copy_of_lab1.ipynb",
            nbformat.writes(colab_stripped(with_code(release_nb(course), relu=RIGHT_RELU))),
        )
    assert main(["collect", root, LAB, str(archive)]) == 0
    assert "collected 3 submission(s) of lab1: alice, bob, carol" in capsys.readouterr().out

    assert main(["autograde", root, LAB, "--workers", "2", "--timeout", "60", "--memory", "2"]) == 0
    out = capsys.readouterr().out
    assert "graded 3 of 3 submission(s)" in out

    assert main(["feedback", root, LAB]) == 0
    assert "wrote 3 feedback page(s)" in capsys.readouterr().out
    # alice submitted the instructor's source: its mark scheme is her own text, its hidden tests are not
    secrets = secret_lines(source_nb(course), kinds=("hidden tests",))
    assert secrets
    for student in ("alice", "bob", "carol"):
        page = html_text((course.feedback_dir / student / LAB / f"{LAB}.html").read_text(encoding="utf-8"))
        assert "relu" in page and "BEGIN HIDDEN TESTS" not in page
        assert not [line for line in secrets if line in page], student
    bob_page = html_text((course.feedback_dir / "bob" / LAB / f"{LAB}.html").read_text(encoding="utf-8"))
    assert "NotImplementedError" in bob_page

    csv_path = tmp_path / "export" / "grades.csv"
    assert main(["grades", root, "--csv", str(csv_path)]) == 0
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [*NBGRADER_CSV_COLUMNS, "seconds_late", "status"]  # nbgrader's, then ours
    assert {r["student_id"]: float(r["score"]) for r in rows} == {"alice": 5.0, "bob": 0.0, "carol": 3.0}
    png = tmp_path / "export" / f"{LAB}_scores.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
