"""What every grading path accepts: regular files only, a Dask scheduler only over TLS, and the
data-safety rules around a grade (stale scores, a full disk, hand-edited releases, due dates, missing labs).

The attacks, each on every path it reaches: a submission that is a symbolic link (or a hard link, or a FIFO)
to the lab's own source notebook, which holds the solutions, hidden tests and mark scheme — graded before this
change as 5 of 5 and, on Coursera, shown back on the feedback page; and a plain ``tcp://`` scheduler on another
machine, where whoever reaches the port runs code as root on the workers. Both must gain nothing.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import stat
import subprocess
import zipfile
from pathlib import Path

import nbformat
import pytest
from fixtures.grading_support import (
    AUTOGRADED_POINTS,
    FAST_LIMITS,
    FIXTURE_COURSE,
    LAB,
    PART,
    copy_course,
    needs_sandbox,
    release_nb,
    right_answers,
    submit,
    with_code,
)

from common.cli import main
from common.errors import DFAError
from common.grading.authoring.release import BACKUPS
from common.grading.courses.course import Course
from common.grading.gradebook import inputs, stale
from common.grading.gradebook.autograde import autograde
from common.grading.gradebook.collect import collect
from common.grading.platforms import coursera, gradescope, shared

SECRET_TEXT = ("BEGIN HIDDEN TESTS", "relu on mixed signs", "BEGIN MARK SCHEME")


def scores(course) -> dict[str, float]:
    with course.gradebook() as gb:
        return {s.student.id: s.score for s in gb.find_assignment(LAB).submissions}


def linked_submission(course, student: str, how: str) -> Path:
    """``submitted/<student>/lab1/lab1.ipynb`` made a symlink, a hard link or a FIFO; the first two lead to the
    lab's source notebook (solutions, hidden tests, mark scheme)."""
    folder = course.submitted_dir / student / LAB
    folder.mkdir(parents=True)
    target, path = course.source_notebook(LAB), folder / f"{LAB}.ipynb"
    if how == "symlink":
        path.symlink_to(os.path.relpath(target, folder))
    elif how == "hardlink":
        os.link(target, path)
    else:
        submit(course, student, release_nb(course))
        os.mkfifo(folder / "data.fifo")
    return path


# ---- the symlink submission, on every path ---
def test_refusal_lines_name_the_entry(tmp_path):
    (tmp_path / "real.ipynb").write_text("{}")
    (tmp_path / "link.ipynb").symlink_to(tmp_path / "real.ipynb")
    os.link(tmp_path / "real.ipynb", tmp_path / "hard.ipynb")
    os.mkfifo(tmp_path / "pipe")
    for name, why in (("link.ipynb", "a symbolic link"), ("hard.ipynb", "a hard link"), ("pipe", "a FIFO")):
        with pytest.raises(inputs.RefusedEntry, match=f"refused .*{name}: {why}"):
            inputs.check_file(tmp_path / name)
    with pytest.raises(inputs.RefusedEntry, match="a symbolic link"):
        inputs.open_regular(tmp_path / "link.ipynb")
    with pytest.raises(inputs.RefusedEntry):
        inputs.check_tree(tmp_path)
    (tmp_path / "hard.ipynb").unlink()
    with inputs.open_regular(tmp_path / "real.ipynb") as f:  # single link again: accepted
        assert f.read() == b"{}"


def test_copies_into_a_sandbox_or_to_a_worker_take_no_links(tmp_path):
    from common.grading.gradebook.executors import folder_files
    from common.grading.sandbox.runner import copy_regular_files

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "lab1.ipynb").write_text("{}")
    (tmp_path / "secret").write_text("solutions")
    os.link(tmp_path / "secret", tmp_path / "src" / "hard")
    (tmp_path / "src" / "soft").symlink_to(tmp_path / "secret")
    assert folder_files(tmp_path / "src") == {"lab1.ipynb": b"{}"}
    copy_regular_files(tmp_path / "src", tmp_path / "copy")
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["lab1.ipynb"]


@pytest.mark.parametrize("how", ["symlink", "hardlink", "fifo"])
@needs_sandbox
def test_local_autograde_refuses_linked_submissions(course, how, capsys):
    path = linked_submission(course, "mallory", how)
    assert main(["autograde", str(course.root), LAB, "--student", "mallory"]) == 1  # refused before any sandbox
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("mallory"))
    assert "refused" in line and " 0.0 " in line and (path.name if how != "fifo" else "data.fifo") in line
    assert "mallory" not in scores(course)  # nothing recorded
    assert not (course.autograded_dir / "mallory").exists()  # nothing copied through the link
    assert "mallory" in stale.read(course)[LAB]


@pytest.mark.slow
def test_dask_path_refuses_the_symlink_before_sending_it(course):
    pytest.importorskip("distributed")
    linked_submission(course, "mallory", "symlink")
    graded = autograde(course, LAB, cluster="local:1", limits=FAST_LIMITS, report=lambda g: None)
    assert [(g.student, g.status, g.score) for g in graded] == [("mallory", "refused", 0.0)]
    assert "a symbolic link" in graded[0].message


def test_grade_one_refuses_a_symlink_submission(tmp_path, capsys):
    link = tmp_path / "lab1.ipynb"
    link.symlink_to(FIXTURE_COURSE / "source" / LAB / f"{LAB}.ipynb")
    assert main(["grade-one", "--lab", f"{FIXTURE_COURSE.name}/{LAB}", "--submission", str(link),
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "refused" in err and "a symbolic link" in err
    assert not (tmp_path / "out" / "result.json").exists()


def test_collect_refuses_links_in_folders_and_zips(course, tmp_path, capsys):
    download = tmp_path / "download"
    (download / "alice").mkdir(parents=True)
    (download / "alice" / f"{LAB}.ipynb").write_text(nbformat.writes(release_nb(course)))
    (download / "mallory").mkdir()
    (download / "mallory" / f"{LAB}.ipynb").symlink_to(course.source_notebook(LAB))
    (download / "eve").mkdir()
    os.link(course.source_notebook(LAB), download / "eve" / f"{LAB}.ipynb")
    report = collect(course, LAB, download)
    assert report.students == ["alice"]
    assert any("mallory/lab1.ipynb: a symbolic link" in s for s in report.skipped)
    assert any("eve/lab1.ipynb: a hard link" in s for s in report.skipped)

    archive = tmp_path / "lms.zip"
    with zipfile.ZipFile(archive, "w") as z:
        info = zipfile.ZipInfo(f"mallory_{LAB}.ipynb")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(info, "../source/lab1/lab1.ipynb")
    assert main(["collect", str(course.root), LAB, str(archive)]) == 1
    assert "skipped: refused mallory_lab1.ipynb: a symbolic link" in capsys.readouterr().out


def test_coursera_refuses_a_symlink_to_the_grader_s_source(coursera_grader, tmp_path):
    root = tmp_path / "shared"
    (root / "submission").mkdir(parents=True)
    source = coursera_grader / "courses" / FIXTURE_COURSE.name / "source" / LAB / f"{LAB}.ipynb"
    (root / "submission" / f"{LAB}.ipynb").symlink_to(source)
    feedback = coursera.run(root, coursera_grader, PART, shared.Budget(1200, 4))
    assert feedback["fractionalScore"] == 0.0 and "symbolic link" in feedback["feedback"]
    page = (root / "htmlFeedback.html").read_text(encoding="utf-8")
    assert not [s for s in SECRET_TEXT if s in page + feedback["feedback"]]


def test_gradescope_refuses_a_symlink_to_the_grader_s_source(gradescope_zip, tmp_path):
    with zipfile.ZipFile(gradescope_zip) as z:
        z.extractall(tmp_path / "source")
    (tmp_path / "results").mkdir()
    (tmp_path / "submission").mkdir()
    source = tmp_path / "source" / "courses" / FIXTURE_COURSE.name / "source" / LAB / f"{LAB}.ipynb"
    (tmp_path / "submission" / f"{LAB}.ipynb").symlink_to(os.path.relpath(source, tmp_path / "submission"))
    results = gradescope.run(tmp_path)
    assert results["score"] == 0.0 and results["tests"] == [] and "symbolic link" in results["output"]
    assert not [s for s in SECRET_TEXT if s in json.dumps(results)]


# ---- the rogue scheduler ---
@pytest.mark.parametrize("address, expected", [
    ("tcp://10.1.2.3:8786", "refused, plain tcp:// to another machine"),
    ("tcp://[2001:db8::1]:8786", "refused, plain tcp:// to another machine"),
    ("tls://10.1.2.3:8786", "TLS needs this client's certificate: give --tls-ca-file, --tls-cert, --tls-key"),
])
def test_a_scheduler_without_tls_is_refused_before_anything_runs(course, address, expected, capsys):
    submit(course, "alice", right_answers(course))
    assert main(["autograde", str(course.root), LAB, "--scheduler", address]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err and "docs/instructors.md" in err
    with pytest.raises(DFAError, match="tcp://|TLS"):
        autograde(course, LAB, scheduler=address, tls={})
    assert not course.autograded_dir.exists()  # nothing prepared, nothing sent


def test_loopback_schedulers_and_tls_files_pass_the_check(tmp_path):
    from common.grading.gradebook.executors import check_target, is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("[::1]") and is_loopback("localhost")
    assert not is_loopback("10.1.2.3") and not is_loopback("no-such-host.invalid")
    check_target("tcp://127.0.0.1:8786", None, {})
    pems = {name: tmp_path / f"{name}.pem" for name in ("ca", "cert", "key")}
    for pem in pems.values():
        pem.write_text("-----BEGIN-----")
    check_target("tls://grader.example.org:8786", None, {k: str(v) for k, v in pems.items()})
    pems["key"].unlink()
    with pytest.raises(DFAError, match="--tls-key .*key.pem: no such file"):
        check_target("tls://grader.example.org:8786", None, {k: str(v) for k, v in pems.items()})


# ---- data safety ---
@pytest.mark.slow
@needs_sandbox
def test_failed_regrade_leaves_no_stale_grade_unwarned(course, tmp_path, monkeypatch, capsys):
    """alice is graded (5), hands in a new notebook, and the regrade fails on a full disk: `dfa grades` must not
    export the old 5 beside the new timestamp; it warns, exits 1, and the CSV says stale. Also: a due date gives
    seconds late, and a student with no submission reads 'not submitted', not 0."""
    config = course.root / "nbgrader_config.py"
    config.write_text(config.read_text() + '\nc.Offering.due = {"lab1": "2020-01-01 00:00:00 UTC"}\n')
    course = Course(course.root)
    submit(course, "alice", right_answers(course))
    (course.submitted_dir / "alice" / LAB / "timestamp.txt").write_text("2020-01-02 00:00:00.000000 UTC\n")
    assert [g.score for g in autograde(course, LAB, limits=FAST_LIMITS, report=lambda g: None)] == [AUTOGRADED_POINTS]
    with course.gradebook() as gb:
        gb.update_or_create_student("bob")  # on the roster, never handed lab1 in
    csv_path = tmp_path / "grades.csv"
    assert main(["grades", str(course.root), "--csv", str(csv_path)]) == 0
    rows = {r["student_id"]: r for r in csv.DictReader(csv_path.open())}
    assert rows["alice"]["score"] == "5.0" and rows["alice"]["status"] == "graded"
    assert float(rows["alice"]["seconds_late"]) == 86400.0  # a day after the due date
    assert rows["bob"]["score"] == rows["bob"]["status"] == "not submitted"

    download = tmp_path / "again"
    (download / "alice").mkdir(parents=True)
    (download / "alice" / f"{LAB}.ipynb").write_text(nbformat.writes(release_nb(course)))
    collect(course, LAB, download)
    assert "alice" in stale.read(course)[LAB]  # collected, not graded since

    def full_disk(self, folder, notebook, **kw):
        raise OSError(28, "No space left on device", str(folder / "x"))

    monkeypatch.setattr("common.grading.sandbox.sandbox.Sandbox.run", full_disk)
    assert main(["autograde", str(course.root), LAB, "--timeout", "6", "--memory", "2"]) == 1
    out = capsys.readouterr().out
    assert "grading_error" in out and "disk full:" in out and "MB free" in out
    assert main(["grades", str(course.root), "--csv", str(csv_path)]) == 1
    err = capsys.readouterr().err
    assert "stale: lab1/alice" in err
    rows = {r["student_id"]: r for r in csv.DictReader(csv_path.open())}
    assert rows["alice"]["score"] == "stale" and rows["alice"]["status"].startswith("stale: grading_error")

    monkeypatch.undo()
    assert [g.score for g in autograde(course, LAB, limits=FAST_LIMITS, report=lambda g: None)] == [0.0]
    assert stale.read(course) == {}  # graded again: the mark goes
    assert main(["grades", str(course.root), "--csv", str(csv_path)]) == 0


def test_a_full_disk_is_one_line(released, capsys):
    assert main(["grades", str(released.root), "--csv", "/dev/full"]) == 1  # writes fail with ENOSPC
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("disk full: /dev/full: ") and "free" in err
    assert "Traceback" not in err


def test_release_refuses_to_overwrite_a_hand_edited_release_notebook(course, capsys):
    notebook = course.release_notebook(LAB)
    record = json.loads((course.release_dir / ".dfa-release.json").read_text())
    assert set(record) == {LAB}  # what the release wrote, by lab
    edited = notebook.read_text(encoding="utf-8").replace("relu", "relu (edited by hand)", 1)
    notebook.write_text(edited, encoding="utf-8")
    assert main(["release", str(course.root)]) == 2
    assert "edited by hand since the last dfa release" in capsys.readouterr().err
    assert notebook.read_text(encoding="utf-8") == edited  # untouched
    assert main(["release", str(course.root), "--force"]) == 0
    assert "hand-edited release notebook it replaced is kept in" in capsys.readouterr().out
    backups = list((course.root / BACKUPS).glob(f"{LAB}-*.ipynb"))
    assert len(backups) == 1 and backups[0].read_text(encoding="utf-8") == edited
    assert "edited by hand" not in notebook.read_text(encoding="utf-8")
    assert main(["release", str(course.root)]) == 0  # released as recorded: no refusal


def test_platform_bridges_carry_the_review_flags():
    result = {"lab": LAB, "status": "completed", "seconds": 3.0, "review": ["builtins", "sys.modules"],
              "cells": [{"grade_id": "relu_tests", "score": 3.0, "max_score": 3.0}]}
    results = gradescope._results(result, {})
    staff = [t for t in results["tests"] if t["visibility"] == "hidden"]
    assert len(staff) == 1 and "builtins, sys.modules" in staff[0]["output"] and staff[0]["max_score"] == 0.0
    assert results["score"] == 3.0  # a flag takes no points
    assert "[review: builtins, sys.modules" in shared.review_note(result)
    assert shared.review_note({**result, "review": []}) == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="gives files to another uid: root only")
def test_fallback_cleanup_reaches_nested_world_writable_folders(tmp_path):
    from common.grading.sandbox import fallback

    uid = fallback.UIDS.stop - 1
    top = Path("/tmp") / f"dfa-nested-test-{os.getpid()}"
    deep = top / "a" / "b" / "c"
    deep.mkdir(parents=True)
    try:
        for folder in (top, top / "a", top / "a" / "b", deep):
            os.chmod(folder, 0o777)
        left = [top / "x", top / "a" / "b" / "y", deep / "z"]
        for path in left:
            path.write_text("left behind")
            os.chown(path, uid, uid)
        mine = deep / "mine"
        mine.write_text("someone else's")
        fallback.Slot(uid, -1).remove_files()
        assert not [p for p in left if p.exists()] and mine.exists()
    finally:
        subprocess.run(["rm", "-rf", str(top)], check=False)


# ---- inert feedback ---
INJECTED_MARKDOWN = """<script>alert('md')</script><iframe src="https://evil.example"></iframe>
[click](javascript:alert('link')) <img src="x" onerror="alert('img')"> the roof is **memory-bound**"""
INJECTED_CODE = """from IPython.display import HTML, Javascript, display
display(HTML("<script>alert('out')</script><iframe src='https://evil.example'></iframe><b>bold</b>"))
display(Javascript("alert('js')"))
def relu(x):
    return torch.where(x > 0, x, torch.zeros_like(x))
"""


@pytest.mark.slow
@needs_sandbox
def test_script_and_iframe_do_not_reach_the_feedback_page(tmp_path, monkeypatch):
    """The page grade-one writes is dfa feedback's page and Coursera's htmlFeedback.html."""
    copy_course(FIXTURE_COURSE, tmp_path / "repo")
    monkeypatch.chdir(tmp_path / "repo")  # grade-one finds the course by name from here
    nb = with_code(right_answers(Course(FIXTURE_COURSE)), relu=INJECTED_CODE, q_ridge=INJECTED_MARKDOWN)
    path = tmp_path / "lab1.ipynb"
    path.write_text(nbformat.writes(nb, version=4), encoding="utf-8")
    assert main(["grade-one", "--lab", LAB, "--submission", str(path), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "feedback.html").read_text(encoding="utf-8")
    body = page[page.index("<body"):]
    assert "<iframe" not in body and "javascript:" not in body and "onerror" not in body
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", body, flags=re.DOTALL)
    assert not [code for code in scripts if "alert(" in code]  # the template's own scripts only
    assert "memory-bound" in body  # the learner's own text stays
    assert json.loads((tmp_path / "out" / "result.json").read_text())["score"] == AUTOGRADED_POINTS


# ---- the TLS scheduler the docs describe, end to end ---
def _certificates(folder: Path, ca: str = "ca") -> dict[str, Path]:
    """docs/instructors.md's openssl lines: a CA, and a key and a certificate it signs per role."""
    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={ca}", "-keyout",
            f"{ca}.key", "-out", f"{ca}.pem")
    for who in ("scheduler", "worker", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={who}", "-keyout", f"{who}.key", "-out",
                f"{who}.csr")
        openssl("x509", "-req", "-in", f"{who}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-days", "2", "-out", f"{who}.pem")
    return {name: folder / name for name in os.listdir(folder)}


@pytest.mark.slow
@needs_sandbox
def test_a_tls_scheduler_with_client_certificates_grades_and_refuses_strangers(course, tmp_path):
    pytest.importorskip("distributed")
    if not shutil.which("openssl"):
        pytest.skip("no openssl to make certificates")
    from distributed import Client, LocalCluster
    from distributed.security import Security

    ours, stranger = _certificates(tmp_path / "ours"), _certificates(tmp_path / "stranger", ca="other-ca")
    server = Security(tls_ca_file=str(ours["ca.pem"]), tls_scheduler_cert=str(ours["scheduler.pem"]),
                      tls_scheduler_key=str(ours["scheduler.key"]), tls_worker_cert=str(ours["worker.pem"]),
                      tls_worker_key=str(ours["worker.key"]), tls_client_cert=str(ours["client.pem"]),
                      tls_client_key=str(ours["client.key"]), require_encryption=True)
    submit(course, "alice", right_answers(course))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, protocol="tls://", host="127.0.0.1",
                      security=server, dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tls://")
        tls = {"ca": str(ours["ca.pem"]), "cert": str(ours["client.pem"]), "key": str(ours["client.key"])}
        graded = autograde(course, LAB, scheduler=address, tls=tls, limits=FAST_LIMITS, report=lambda g: None)
        assert [(g.student, g.score) for g in graded] == [("alice", AUTOGRADED_POINTS)]
        # a client whose certificate another CA signed cannot connect, so it cannot Client.run anything
        rogue = Security(tls_ca_file=str(ours["ca.pem"]), tls_client_cert=str(stranger["client.pem"]),
                         tls_client_key=str(stranger["client.key"]), require_encryption=True)
        with pytest.raises((OSError, TimeoutError)):
            Client(address, security=rogue, timeout="5s")
