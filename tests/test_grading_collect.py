"""``dfa collect`` (collect.py) and the course lock (Course.lock): no student dropped without a message, a
bad entry skipped, entries streamed, a size cap, earlier submissions kept with nbgrader's timestamp, and one
command at a time per course. No kernel, no sandbox: seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tracemalloc
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import nbformat
import pytest
from fixtures.grading_support import FIXTURE_COURSE, LAB, copy_course

from common.cli import main
from common.errors import DFAError
from common.grading.authoring.release import release
from common.grading.courses.course import LOCK_FILE
from common.grading.gradebook.autograde import autograde
from common.grading.gradebook.collect import ARCHIVE, collect, safe_student_id

RELEASE = FIXTURE_COURSE / "release" / LAB / f"{LAB}.ipynb"
WHEN = (2026, 3, 1, 12, 30, 4)  # a zip entry's time (DOS times have 2 s steps)


@pytest.fixture
def course(tmp_path):
    return copy_course(FIXTURE_COURSE, tmp_path)


def _zip(path: Path, members: dict[str, bytes], level: int | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, WHEN), data, zipfile.ZIP_DEFLATED, level)
    return path


def _submitted(course, student: str) -> Path:
    return course.submitted_dir / student / LAB / f"{LAB}.ipynb"


def _notebook(marker: str) -> bytes:
    nb = nbformat.read(RELEASE, as_version=4)
    nb.cells[0].source += f"\n<!-- {marker} -->"
    return nbformat.writes(nb).encode()


# ---- formats and student ids ---
def test_collect_an_lms_zip(course, tmp_path):
    notebook = RELEASE.read_bytes()
    archive = _zip(
        tmp_path / "download.zip",
        {
            "doejane_12345_67890_lab1.ipynb": notebook,  # Canvas
            "Bob Smith/Copy of lab1.ipynb": notebook,  # a folder per student, Colab's file name
            "carol.ipynb": notebook,  # flat
            "../../evil.ipynb": notebook,  # path traversal: only a name, never a path
            "dave_1_2_lab1.ipynb": b"not json",
            "erin/notes.txt": b"ignored",
        },
    )
    report = collect(course, LAB, archive)
    assert sorted(report.students) == ["Bob_Smith", "carol", "doejane"]
    for student in report.students:
        assert _submitted(course, student).read_bytes() == notebook
    assert any(s.startswith("dave_1_2_lab1.ipynb: not a readable notebook") for s in report.skipped)
    assert any(s.startswith("../../evil.ipynb: no student id") for s in report.skipped)
    assert any("erin/notes.txt" in n for n in report.notes)
    assert not (course.root.parent / "evil.ipynb").exists() and not (tmp_path / "evil.ipynb").exists()
    # (and the stale marks of the three: collected, not graded yet)
    assert sorted(p.name for p in course.submitted_dir.iterdir()) == [".dfa-stale.json", "Bob_Smith", "carol",
                                                                      "doejane"]


def test_collect_a_folder_with_a_custom_pattern(course, tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / "lab1-s001.ipynb").write_bytes(RELEASE.read_bytes())
    (folder / "lab1-s002.ipynb").write_bytes(RELEASE.read_bytes())
    report = collect(course, LAB, folder, pattern=r"lab1-(?P<student_id>s\d+)\.ipynb")
    assert report.students == ["s001", "s002"]
    with pytest.raises(DFAError, match="student_id"):
        collect(course, LAB, folder, pattern=r"lab1-(\w+)")
    with pytest.raises(DFAError, match="unknown lab"):
        collect(course, "lab9", folder)


def test_student_ids_are_safe_stable_and_distinct():
    assert safe_student_id("../../etc") == "etc" and safe_student_id("..") == ""
    assert safe_student_id("Jane Doe (2)") == "Jane_Doe_2"
    assert safe_student_id("José") == safe_student_id("Josè") == safe_student_id("Jose\u0301") == "Jose"
    cjk = [safe_student_id(n) for n in ("王伟", "李娜", "王伟")]
    assert cjk[0] == cjk[2] != cjk[1] and all(len(i) == 11 and i.startswith("id-") for i in cjk)
    long = [safe_student_id("a" * 70), safe_student_id("a" * 69 + "b")]
    assert long[0] != long[1] and all(len(i) == 64 for i in long)


def test_no_student_is_dropped_silently(course, tmp_path, capsys):
    notebook = RELEASE.read_bytes()
    archive = _zip(
        tmp_path / "download.zip",
        {
            "José/lab1.ipynb": notebook,
            "Josè/lab1.ipynb": notebook,  # a different name with the same id
            "doejane_101_1_lab1.ipynb": notebook,
            "doejane_202_2_lab1.ipynb": notebook,  # two Canvas students of the same name
            "王伟/lab1.ipynb": notebook,  # a name without an ASCII form
            f"{'x' * 70}/lab1.ipynb": notebook,
            f"{'x' * 69}y/lab1.ipynb": notebook,  # the same first 64 characters
        },
    )
    assert main(["collect", str(course.root), LAB, str(archive)]) == 1
    out = capsys.readouterr().out
    jose, canvas = [line for line in out.splitlines() if "different students with the same id" in line]
    assert "José/lab1.ipynb" in jose and "Josè/lab1.ipynb" in jose and "'Jose'" in jose
    assert "doejane_101_1_lab1.ipynb" in canvas and "doejane_202_2_lab1.ipynb" in canvas
    assert "LMS id 101" in canvas and "LMS id 202" in canvas
    assert "collected 3 submission(s)" in out and "; 2 skipped" in out
    assert not (course.submitted_dir / "Jose").exists() and not (course.submitted_dir / "doejane").exists()
    assert _submitted(course, safe_student_id("王伟")).is_file()
    assert _submitted(course, safe_student_id("x" * 70)).is_file()
    assert _submitted(course, safe_student_id("x" * 69 + "y")).is_file()


# ---- damaged, large and oversize entries ---
def test_a_corrupt_entry_is_skipped_and_the_rest_collected(course, tmp_path, capsys):
    archive = _zip(
        tmp_path / "download.zip", {"alice/lab1.ipynb": _notebook("alice"), "bob/lab1.ipynb": _notebook("bob")}
    )
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("bob/lab1.ipynb")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)  # bob's compressed bytes
    data[start + 20 : start + 60] = bytes(40)
    archive.write_bytes(bytes(data))
    assert main(["collect", str(course.root), LAB, str(archive)]) == 1
    out = capsys.readouterr().out
    assert "skipped: bob/lab1.ipynb: cannot be read" in out and "Traceback" not in out
    assert "collected 1 submission(s) of lab1: alice" in out
    assert not (course.submitted_dir / "bob").exists()


def test_entries_are_streamed_not_held(course, tmp_path):
    import nbgrader.plugins  # noqa: F401  (imported before measuring: its import alone allocates ~40 MB)

    big = nbformat.v4.new_notebook()
    big.cells.append(nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("stream", text="y" * 4 * 2**20)]))
    data = nbformat.writes(big).encode()
    archive = _zip(tmp_path / "download.zip", {f"s{i}/lab1.ipynb": data for i in range(8)}, level=1)
    assert archive.stat().st_size < len(data)  # 32 MB of notebooks in a small zip
    tracemalloc.start()
    try:
        report = collect(course, LAB, archive)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(report.students) == 8 and not report.skipped
    assert peak < 3 * len(data), f"peak {peak / 2**20:.1f} MB for 8 notebooks of {len(data) / 2**20:.1f} MB"


def test_oversize_notebooks_are_skipped(course, tmp_path, capsys):
    folder = tmp_path / "downloads"
    (folder / "alice").mkdir(parents=True)
    (folder / "bob").mkdir()
    (folder / "alice" / "lab1.ipynb").write_bytes(RELEASE.read_bytes())
    with (folder / "bob" / "lab1.ipynb").open("wb") as f:
        f.truncate(21 * 2**20)  # sparse: its size is all that is read
    report = collect(course, LAB, folder)
    assert report.students == ["alice"]
    assert report.skipped == ["bob/lab1.ipynb: 21 MB, over the 20 MB limit (--max-notebook-mb)"]
    assert main(["collect", str(course.root), LAB, str(folder / "alice"), "--max-notebook-mb", "0.001"]) == 1
    assert "over the 0.001 MB limit" in capsys.readouterr().out


# ---- re-collecting ---
def test_recollect_keeps_the_earlier_submission_with_its_timestamp(course, tmp_path, capsys):
    from nbgrader.utils import parse_utc

    first = _zip(tmp_path / "first.zip", {"alice/lab1.ipynb": _notebook("first")})
    assert collect(course, LAB, first).students == ["alice"]
    stamp = (course.submitted_dir / "alice" / LAB / "timestamp.txt").read_text()
    assert parse_utc(stamp.strip()) == datetime(*WHEN)  # nbgrader reads it as the submission time

    (course.root / "grades").mkdir()
    (course.root / "grades" / "grades.csv").write_text("assignment,student_id\n")
    second = tmp_path / "second"
    (second / "alice").mkdir(parents=True)
    (second / "alice" / "lab1.ipynb").write_bytes(_notebook("second"))
    os.utime(second / "alice" / "lab1.ipynb", (1770000000, 1770000000))
    assert main(["collect", str(course.root), LAB, str(second)]) == 0
    out = capsys.readouterr().out
    assert "note: alice: replaced; the earlier submission is kept in submitted/.archive/alice/lab1/" in out
    assert "grades/grades.csv predates this collect" in out
    assert (course.root / "grades" / "grades.csv").is_file()
    (kept,) = (course.submitted_dir / ARCHIVE / "alice" / LAB).iterdir()
    assert b"first" in (kept / f"{LAB}.ipynb").read_bytes() and (kept / "timestamp.txt").read_text() == stamp
    assert b"second" in _submitted(course, "alice").read_bytes()
    timestamp = (course.submitted_dir / "alice" / LAB / "timestamp.txt").read_text().strip()
    assert parse_utc(timestamp) == datetime.fromtimestamp(1770000000, UTC).replace(tzinfo=None)

    assert main(["collect", str(course.root), LAB, str(second)]) == 0  # the same download again
    out = capsys.readouterr().out
    assert "alice: unchanged" in out and "predates" not in out
    assert len(list((course.submitted_dir / ARCHIVE / "alice" / LAB).iterdir())) == 1
    # nbgrader sees one submission, not the archive or a staging folder
    assert course.api().get_submitted_students("*") == {"alice"}


# ---- the course lock ---
HOLD = """
import sys
from pathlib import Path
from common.grading.courses.course import Course
with Course(Path(sys.argv[1])).lock("dfa autograde lab1"):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_one_command_at_a_time_per_course(course, tmp_path, capsys):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(course.root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        busy = rf"{course.name} is busy \(pid {holder.pid}, dfa autograde lab1, since [0-9: -]+ UTC\)"
        started = time.monotonic()
        with pytest.raises(DFAError, match=busy):
            autograde(course, LAB)
        assert time.monotonic() - started < 1.0  # at once, not after a wait
        with pytest.raises(DFAError, match=busy):  # the lock comes first: a bad lab is not even looked at
            autograde(course, "lab9")
        with pytest.raises(DFAError, match=busy):
            collect(course, LAB, tmp_path)
        with pytest.raises(DFAError, match=busy):
            release([course])
        assert main(["autograde", str(course.root), LAB]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("dfa: error: course0_fixture is busy") and "\n" not in err
    finally:
        holder.send_signal(signal.SIGKILL)  # a holder that dies without cleaning up leaves its file behind
        holder.wait()
    assert (course.root / LOCK_FILE).is_file()
    with pytest.raises(DFAError, match="unknown lab"):  # past the lock: the stale file is no bar
        autograde(course, "lab9")
    assert not (course.root / LOCK_FILE).exists()  # removed when released
    with course.lock("dfa test"):  # a locked command may call another in the same process
        assert collect(course, LAB, _zip(tmp_path / "d.zip", {"alice.ipynb": RELEASE.read_bytes()})).students
    assert not (course.root / LOCK_FILE).exists()
    assert not list(course.submitted_dir.rglob(LOCK_FILE)) and not list(course.release_dir.rglob(LOCK_FILE))
