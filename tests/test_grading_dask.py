"""``dfa autograde --cluster local:N``: the sandboxes on Dask workers, the grades those of the local pool.

A real LocalCluster of 2 worker processes grades a batch of the fixture lab like the embedded thread pool,
while a worker killed under one submission gets it retried once, and one killed every time leaves it marked
``worker_lost``: not dropped, not scored. A worker that cannot sandbox stops the run. The files that cross
to a worker stay inside the submission, and the flags reject bad values in one line.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from fixtures.grading_support import (
    FAST_LIMITS,
    FIXTURE_COURSE,
    LAB,
    RIGHT_RELU,
    colab_stripped,
    copy_course,
    needs_sandbox,
    release_nb,
    right_answers,
    source_nb,
    submit,
    with_code,
)

from common.cli import main
from common.grading.gradebook.autograde import autograde
from common.grading.gradebook.executors import execute_files, folder_files, stage_files
from common.grading.sandbox.sandbox import SandboxUnavailable

distributed = pytest.importorskip("distributed", reason="the cluster extra is not installed")

KILL_ONCE, KILL_ALWAYS = "# dask-test: kill my worker once", "# dask-test: kill my worker every time"


def gradebook(course) -> dict[str, float]:
    with course.gradebook() as gb:
        return {s.student.id: s.score for s in gb.find_assignment(LAB).submissions}


def killing_task(marker_dir: str):
    """A Dask task that SIGKILLs its own worker process for marked submissions, else runs the real one."""

    def task(files, notebooks, *args):
        text = files[f"{LAB}.ipynb"].decode()
        marker = Path(marker_dir) / "killed-once"
        if KILL_ALWAYS in text or (KILL_ONCE in text and not marker.exists()):
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return execute_files(files, notebooks, *args)

    return task


def no_bubblewrap_task(files, notebooks, *args):
    raise SandboxUnavailable("on Dask worker w1: bubblewrap cannot isolate student code here (test)")


def test_files_cross_to_the_worker_and_nothing_outside(tmp_path):
    (tmp_path / "src" / "data").mkdir(parents=True)
    (tmp_path / "src" / "lab1.ipynb").write_text("{}")
    (tmp_path / "src" / "data" / "x.bin").write_bytes(b"\0\1")
    (tmp_path / "src" / "link").symlink_to("/etc/passwd")
    files = folder_files(tmp_path / "src")
    assert files == {"lab1.ipynb": b"{}", "data/x.bin": b"\0\1"}  # the symlink is not followed
    stage_files(files, tmp_path / "dest")
    assert folder_files(tmp_path / "dest") == files
    for bad in ("../escape", "/etc/evil"):
        with pytest.raises(ValueError, match="outside the submission folder"):
            stage_files({bad: b""}, tmp_path / "dest")


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--cluster", "local:0"], "needs at least one worker, got 'local:0'"),
        (["--cluster", "foo"], "--cluster takes local:N"),
        (["--scheduler", "localhost"], "--scheduler takes a Dask scheduler address tls://HOST:PORT"),
        (["--cluster", "local:2", "--scheduler", "tcp://h:8786"], "not both"),
        (["--cluster", "local:2", "--workers", "2"], "--workers sizes the local pool"),
    ],
)
def test_bad_dask_flags_are_one_line_errors(flags, message, capsys):
    assert main(["autograde", str(FIXTURE_COURSE), LAB, *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.slow
@needs_sandbox
def test_local_cluster_grades_like_the_local_pool_and_survives_a_killed_worker(released, tmp_path):
    """One batch (CI time is short): dave's worker is killed on his first attempt, so his grade also shows the
    retry; "lost" kills every worker it lands on and is graded by neither run."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    batch = {
        "alice": source_nb(released),
        "bob": release_nb(released),
        "dave": with_code(release_nb(released), relu=RIGHT_RELU + "\n" + KILL_ONCE),
        "frank": colab_stripped(right_answers(released)),
    }
    local, dask = copy_course(released.root, tmp_path / "local"), copy_course(released.root, tmp_path / "dask")
    for course in (local, dask):
        for student, nb in batch.items():
            submit(course, student, nb)
    submit(dask, "lost", with_code(right_answers(released), relu=RIGHT_RELU + "\n" + KILL_ALWAYS))
    pooled = {g.student: g for g in autograde(local, LAB, workers=2, limits=FAST_LIMITS, report=print)}
    task = killing_task(str(tmp_path))
    clustered = {g.student: g for g in autograde(dask, LAB, cluster="local:2", limits=FAST_LIMITS, dask_task=task,
                                                 report=print)}  # fmt: skip

    assert (tmp_path / "killed-once").exists()  # dave's first worker did die
    assert sorted(clustered) == ["alice", "bob", "dave", "frank", "lost"]  # nobody dropped
    graded = {s: (g.score, g.status) for s, g in clustered.items() if s != "lost"}
    assert graded == {s: (g.score, g.status) for s, g in pooled.items()}
    assert "resent once: its first Dask worker was lost" in clustered["dave"].message  # the resend is noted
    # a submission that shared dave's worker when it died is resent too (Dask loses every task on a dead worker):
    # each resend names the lost worker, and a resend never changes a grade (compared with the pool above)
    assert all("resent" not in g.message or "Dask worker was lost" in g.message for g in clustered.values())
    assert {s: g.score for s, g in pooled.items()} == {"alice": 5.0, "bob": 0.0, "dave": 3.0, "frank": 5.0}
    assert gradebook(dask) == {**gradebook(local), "lost": 0.0}  # the parent alone wrote both gradebooks
    lost = clustered["lost"]
    assert lost.status == "worker_lost" and "lost twice" in lost.message and "--student lost" in lost.message
    with dask.gradebook() as gb:  # marked, not scored as zero: its test cells stay ungraded
        record = gb.find_submission(LAB, "lost")
        assert record.needs_manual_grade and {g.auto_score for nb in record.notebooks for g in nb.grades} == {None}


@pytest.mark.slow
def test_a_worker_without_a_sandbox_stops_the_run(released, tmp_path):
    """Such a worker would fail every submission in milliseconds and so drain the queue: stop, say where."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    course = copy_course(released.root, tmp_path)
    submit(course, "alice", right_answers(course))
    with pytest.raises(SandboxUnavailable, match="on Dask worker w1: bubblewrap cannot"):
        autograde(course, LAB, cluster="local:1", limits=FAST_LIMITS, dask_task=no_bubblewrap_task)
