"""The sandbox on its own: what student code can see and do inside it, and what happens when it misbehaves;
the fallback sandbox (an unprivileged uid, where bubblewrap cannot run); and the cleanup of what a grading
run leaves behind when it is killed or interrupted."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from fixtures.grading_support import needs_bubblewrap, needs_sandbox

from common.errors import DFAError
from common.grading.sandbox import bwrap, cgroups, fallback, scratch
from common.grading.sandbox import sandbox as sandbox_module
from common.grading.sandbox.limits import GB, MB, Limits
from common.grading.sandbox.runner import _drop_overwritten, coalesce_streams
from common.grading.sandbox.sandbox import LOG_TAIL_BYTES, Sandbox, SandboxUnavailable

REPO = Path(__file__).resolve().parents[1]

SMALL = Limits(cell_timeout_s=8, notebook_timeout_s=120, memory_bytes=1 * GB, max_processes=48)


def run_cells(tmp_path: Path, cells: list[str], limits: Limits = SMALL, *, isolated: bool = True, files=None,
              mode: str | None = None):  # fmt: skip
    folder = tmp_path / "submission"
    folder.mkdir(exist_ok=True)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) if isinstance(c, str) else c for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / "probe.ipynb")
    return Sandbox(limits, isolated=isolated, protect=[tmp_path], mode=mode).run(folder, "probe.ipynb")


def text(execution, index: int) -> str:
    outs = execution.cells[index]["outputs"]
    return "".join(o.get("text", "") + o.get("evalue", "") + str(o.get("data", "")) for o in outs)


def host_processes_with(marker: str) -> int:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return len(found)


@pytest.mark.slow
@needs_bubblewrap
def test_student_code_sees_only_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("DFA_HOST_SECRET", "hunter2")
    (tmp_path / "gradebook.db").write_text("SQLite format 3 secret grades")
    execution = run_cells(
        tmp_path,
        [
            "import os; print(sorted(os.listdir('.')), sorted(os.listdir('/')))",
            f"print(sorted(os.listdir({str(REPO)!r})))",
            f"open({str(tmp_path / 'gradebook.db')!r}).read()",
            "open('../../gradebook.db').read()",
            "print(os.environ.get('DFA_HOST_SECRET'), os.getuid(), os.uname().nodename)",
            "import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)",
            "open('/usr/lib/dfa-was-here', 'w')",
            "open('notes.txt', 'w').write('mine'); print(open('notes.txt').read())",
            "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))",
            "import resource as r; print(r.getrlimit(r.RLIMIT_DATA)[0], r.getrlimit(r.RLIMIT_CORE))",
        ],
        files={"data.csv": "1,2\n"},
    )
    assert execution.status == "completed", execution.message
    assert text(execution, 0).startswith("['data.csv', 'probe.ipynb'] [")
    assert text(execution, 1) == "['common']\n"  # the package, not the repository with its courses and tests
    assert "No such file" in text(execution, 2) and "No such file" in text(execution, 3)
    assert text(execution, 4) == "None 1000 sandbox\n"
    assert "unreachable" in text(execution, 5).lower() or "Errno" in text(execution, 5)
    assert "Read-only file system" in text(execution, 6)
    assert text(execution, 7) == "mine\n"
    assert len(text(execution, 8).split(",")) < 15  # its own PID namespace: a handful of processes
    assert text(execution, 9).startswith(f"{1 * GB} (0, 0)")
    assert not Path("/usr/lib/dfa-was-here").exists()


@pytest.mark.slow
@needs_sandbox
def test_fork_bomb_is_capped_and_cleaned_up(tmp_path):
    marker = f"dfa-fork-{os.getpid()}-{time.monotonic_ns()}"
    execution = run_cells(
        tmp_path,
        [
            f"import os, time\nMARK = {marker!r}\nkids = 0\n"
            "for _ in range(1000):\n"
            "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
            "    if pid == 0:\n        os.execvp('sleep', [MARK, '600'])\n    kids += 1\n"
            "print('forked', kids)",
            "print('still alive')",
        ],
    )
    forked = int(text(execution, 0).split()[1])
    assert 10 < forked < SMALL.max_processes, forked
    # the kernel still answers (at the cap it may not start a thread for the cell: the learner's own doing)
    assert 1 in execution.cells and execution.status == "completed"
    time.sleep(0.5)
    assert host_processes_with(marker) == 0  # the whole sandbox went away with the run


@pytest.mark.slow
@needs_sandbox
def test_memory_bomb_gets_memory_error_and_the_kernel_goes_on(tmp_path):
    execution = run_cells(
        tmp_path,
        [
            "hog = []\ntry:\n    while True:\n        hog.append(bytearray(2**26))\nexcept MemoryError:\n"
            "    print('refused after', len(hog) * 64, 'MB')\nhog = None",
            "print('after')",
        ],
    )
    assert "refused after" in text(execution, 0)
    assert int(text(execution, 0).split()[2]) <= 1024
    assert text(execution, 1) == "after\n"


@pytest.mark.slow
@needs_sandbox
def test_kernel_death_keeps_earlier_cells(tmp_path):
    execution = run_cells(tmp_path, ["print('first')", "import os; os._exit(3)", "print('never')"])
    assert execution.status == "kernel_died" and execution.failed_cell == 1
    assert text(execution, 0) == "first\n" and 2 not in execution.cells


@pytest.mark.slow
@needs_sandbox
def test_runaway_output_is_capped_and_the_notebook_time_limit_kills(tmp_path):
    execution = run_cells(tmp_path, ["print('x' * (8 * 2**20))"])
    assert "[output truncated by the grader]" in text(execution, 0)
    assert len(text(execution, 0)) < 3 * 2**20
    limits = Limits(cell_timeout_s=100, notebook_timeout_s=12, memory_bytes=GB, max_processes=48)
    started = time.monotonic()
    execution = run_cells(tmp_path, ["print('ok')", "import time; time.sleep(1000)"], limits)
    assert execution.status == "time_limit" and text(execution, 0) == "ok\n"
    assert time.monotonic() - started < 60  # the kernel's start and a busy machine's load factor, not 1000 s


@pytest.mark.slow
@needs_sandbox
def test_going_further_cells_are_not_run_unless_a_graded_cell_follows(tmp_path):
    from common.grading.sandbox.runner import NOT_RUN

    heading = nbformat.v4.new_markdown_cell("## Going further (optional)\n\nUngraded.")
    graded = nbformat.v4.new_code_cell("print('graded')", metadata={"nbgrader": {"grade": True, "grade_id": "t",
                                                                                "points": 1, "solution": False}})
    execution = run_cells(tmp_path, ["print('core')", heading, "print('optional')"])
    assert execution.status == "completed" and text(execution, 0) == "core\n"
    assert text(execution, 2) == NOT_RUN
    # a heading above a graded cell (a learner's, say) skips nothing
    execution = run_cells(tmp_path, ["print('core')", heading, "print('optional')", graded])
    assert text(execution, 2) == "optional\n" and text(execution, 3) == "graded\n"


@pytest.mark.slow
def test_unsafe_mode_runs_without_bubblewrap(tmp_path):
    execution = run_cells(tmp_path, ["import os; print(os.environ['NBGRADER_EXECUTION'])"], isolated=False)
    assert execution.status == "completed" and text(execution, 0) == "autograde\n"


def test_missing_bubblewrap_is_refused_with_advice(monkeypatch):
    monkeypatch.setattr(bwrap.shutil, "which", lambda name: None)
    bwrap.probe.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap.*as root.*--unsafe-no-sandbox"):
            Sandbox(mode="bubblewrap").check_available()
        ordinary = Sandbox()
        ordinary.as_root = False  # not root and no bubblewrap: no fallback either
        with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
            ordinary.check_available()
        forced = Sandbox(mode="fallback")
        forced.as_root = False
        with pytest.raises(SandboxUnavailable, match="only root can do"):
            forced.check_available()
    finally:
        bwrap.probe.cache_clear()


def test_modes_are_named_and_said(monkeypatch):
    monkeypatch.setenv("DFA_SANDBOX", "docker")
    with pytest.raises(DFAError, match="DFA_SANDBOX='docker'.*auto, bubblewrap, fallback"):
        Sandbox()
    with pytest.raises(DFAError, match="mode='none'"):
        Sandbox(mode="none")
    monkeypatch.delenv("DFA_SANDBOX")
    unsafe = Sandbox(isolated=False)
    assert unsafe.mode == "unsafe" and unsafe.describe().startswith("UNSAFE")


@pytest.mark.slow
@needs_sandbox
def test_a_warning_on_stderr_in_a_test_cell_costs_nothing():
    """The fixture's relu test makes PyTorch warn on stderr, which nbgrader would score 0. A test cell's own
    outputs are feedback only: the runner turns its stderr into stdout, so only the judgement decides."""
    from fixtures.grading_support import FIXTURE_COURSE, LAB, cell_index, read

    from common.grading.courses.course import Course

    course = Course(FIXTURE_COURSE)
    torch_sized = Limits(cell_timeout_s=30, memory_bytes=2 * GB)  # the lower bound docs/instructors.md gives
    sandbox = Sandbox(torch_sized, protect=[FIXTURE_COURSE.parent])
    execution = sandbox.run(course.source_dir / LAB, f"{LAB}.ipynb")
    tests = cell_index(read(course.source_notebook(LAB)), "relu_tests")
    outputs = execution.cells[tests]["outputs"]
    assert [o.get("name") for o in outputs] == ["stdout"] and "✔" in outputs[0]["text"], outputs


# ---- long output lines ---
def test_carriage_returns_are_dropped_as_nbclient_drops_them_in_linear_time():
    from nbclient.client import _RGX_CARRIAGERETURN

    rng = random.Random(17)
    for _ in range(2000):
        sample = "".join(rng.choice("ab\r\n\b") for _ in range(rng.randrange(12)))
        assert _drop_overwritten(sample) == _RGX_CARRIAGERETURN.sub("", sample), repr(sample)
    started = time.perf_counter()
    assert _drop_overwritten("y" * 2_000_000 + "\rdone\n") == "done\n"
    assert time.perf_counter() - started < 1  # nbclient's regex takes hours on this line
    outputs = [
        {"output_type": "stream", "name": "stderr", "text": "warn\n"},
        {"output_type": "stream", "name": "stdout", "text": "10%\r"},
        {"output_type": "execute_result", "data": {"text/plain": "1"}},
        {"output_type": "stream", "name": "stdout", "text": "100%\n"},
        {"output_type": "stream", "name": "stderr", "text": "again\n"},
    ]
    merged = coalesce_streams(outputs)
    assert [(o["output_type"], o.get("name"), o.get("text")) for o in merged] == [
        ("stream", "stdout", "100%\n"),  # moved before the stderr stream it followed, as nbclient does
        ("stream", "stderr", "warn\nagain\n"),
        ("execute_result", None, None),
    ]


# ---- long lines, full scratch space, the host's log ---
FILL = """import errno, os
def fill(path):
    written = 0
    try:
        with open(path, 'wb') as f:
            while written < 64 * 2**20:
                f.write(b'0' * 2**20); f.flush(); written += 2**20
    except OSError as e:
        return errno.errorcode[e.errno], written // 2**20
    return 'none', written // 2**20
for p in ['/x', '/dev/x', '/opt/x', '/dev/shm/x', '/tmp/x', '/home/learner/x']:
    print(p, *fill(p))
    if os.path.exists(p):
        os.unlink(p)
"""
HOST_LOG = """with open('/proc/1/fd/1', 'ab') as out, open('/proc/1/fd/2', 'ab') as err:
    for _ in range(50):
        out.write(b'o' * 2**20); err.write(b'e' * 2**20)
print('wrote 100 MB')
"""


@pytest.mark.slow
@needs_bubblewrap
def test_long_lines_take_seconds_scratch_writes_stop_at_the_limit_and_the_host_log_stays_small(tmp_path):
    limits = Limits(cell_timeout_s=20, notebook_timeout_s=120, memory_bytes=GB, max_processes=48,
                    scratch_bytes=32 * MB)  # fmt: skip
    started = time.monotonic()
    execution = run_cells(tmp_path, [
        "print('y' * 2_000_000)",  # nbclient's coalescing took hours on it, after the cell's timeout
        "import numpy as np\nbig = np.arange(80_000) / 7\nprint(big.tolist())",  # an honest 1.7 MB line
        FILL, HOST_LOG, "print('after')",
    ], limits)  # fmt: skip
    elapsed = time.monotonic() - started
    assert execution.status == "completed", execution.message
    assert text(execution, 0) == "y" * 2_000_000 + "\n"
    assert text(execution, 1).startswith("[0.0, 0.14285714285714285, ") and text(execution, 1).endswith("]\n")
    assert elapsed < 60, elapsed  # 15 s here on a busy 2-core machine, the sandbox's start included
    results = {p: (err, int(mb)) for p, err, mb in (line.split() for line in text(execution, 2).splitlines())}
    split = {k: v // MB for k, v in limits.scratch_split.items()}
    assert sum(split.values()) == 32 and results["/x"] == results["/dev/x"] == results["/opt/x"] == ("EROFS", 0)
    assert results["/dev/shm/x"] == ("ENOSPC", split["shm"])
    for path, mount in (("/tmp/x", "tmp"), ("/home/learner/x", "home")):  # both hold a few files already
        assert results[path][0] == "ENOSPC" and split[mount] - 4 <= results[path][1] <= split[mount], path
    # (IPython's history thread may say the disk was full while /tmp was)
    assert text(execution, 3).endswith("wrote 100 MB\n") and text(execution, 4) == "after\n"
    assert execution.log_bytes >= 100 * MB and len(execution.log.encode()) <= LOG_TAIL_BYTES


# ---- cleanup after a kill, and on interruption ---
OWNER = """import sys, time
from common.grading.sandbox import scratch
folder = scratch.make_dir(sys.argv[1])
scratch.on_interrupt(lambda: open(folder.parent / (folder.name + '.stopped'), 'w').close())
print(folder, flush=True)
time.sleep(60)
"""


def _owner(kind: str) -> tuple[subprocess.Popen, Path]:
    process = subprocess.Popen([sys.executable, "-c", OWNER, kind], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, cwd=REPO)  # fmt: skip
    return process, Path(process.stdout.readline().strip())


def test_a_killed_runs_folders_and_cgroups_are_swept_and_a_live_runs_are_not(tmp_path):
    killed, left = _owner("results")
    killed.kill()
    killed.wait()
    live, kept = _owner("sandbox")
    try:
        assert left.is_dir() and scratch.owner_alive(left.name) is False and scratch.owner_alive(kept.name)
        dead_owner = re.match(r"dfa-results-(\d+-\d+)-", left.name)[1]
        alive_pid_reused = f"dfa-pkg-{os.getpid()}-1-x"  # this pid, but not its start time: a reused pid
        (tmp_path / alive_pid_reused).mkdir()
        (tmp_path / f"dfa-mplcache-{scratch.owner_tag()}-y").mkdir()
        (tmp_path / "dfa-results-legacy").mkdir()  # no owner record: not ours to judge
        removed = scratch.sweep(tmp_path)
        assert [p.name for p in removed] == [alive_pid_reused]
        assert left in scratch.sweep() and not left.exists() and kept.is_dir()
        # cgroups: a fake v2 hierarchy holding one dead run's cgroup and this run's
        own = tmp_path / "sys" / "grader"
        (own / f"dfa-sandbox-{dead_owner}-a").mkdir(parents=True)
        (own / f"dfa-sandbox-{scratch.owner_tag()}-b").mkdir()
        (tmp_path / "sys" / "cgroup.controllers").write_text("memory pids")
        swept = cgroups.sweep(sysfs=tmp_path / "sys", proc_cgroup="0::/grader\n")
        assert [p.name for p in swept] == [f"dfa-sandbox-{dead_owner}-a"]
        assert sorted(p.name for p in own.iterdir()) == [f"dfa-sandbox-{scratch.owner_tag()}-b"]
    finally:
        live.kill()
        live.wait()
        scratch.remove_dir(kept)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_run_stops_its_sandboxes_and_removes_its_folders_at_once(signum):
    process, folder = _owner("sandbox")
    try:
        assert folder.is_dir()
        process.send_signal(signum)
        assert process.wait(timeout=10) != 0
        assert not folder.exists() and (folder.parent / (folder.name + ".stopped")).exists()
    finally:
        process.kill()
        (folder.parent / (folder.name + ".stopped")).unlink(missing_ok=True)


# ---- the fallback sandbox: an unprivileged uid where bubblewrap cannot run ---
def _fallback_problem() -> str | None:
    if os.geteuid() != 0:
        return "the fallback sandbox runs as root only"
    slot = fallback.claim()
    try:
        fallback.probe(slot.uid, [], cut_network=False, imports=False)
    except OSError as exc:
        return str(exc)
    finally:
        slot.release()
    return None


@pytest.fixture
def fallback_ready(monkeypatch):
    """Root, and a Python other users can run; no cgroup, as in Docker (then only the uid finds what a sandbox
    left running); the repository's own course folders are not checked (here they are readable, as a
    checkout is: an instructor's grader would close them)."""
    problem = _fallback_problem()
    if problem:
        pytest.skip(f"no fallback sandbox here: {problem}")
    monkeypatch.setattr(sandbox_module, "host_course_folders", lambda: [])
    monkeypatch.setattr(cgroups, "create", lambda *args, **kwargs: None)


def test_the_fallback_refuses_protected_folders_its_uid_can_read(fallback_ready):
    course = Path(tempfile.mkdtemp(prefix="dfa-test-course-"))  # in /tmp, reachable by every user
    try:
        (course / "nbgrader_config.py").write_text("")
        (course / "gradebook.db").write_text("grades")
        os.chmod(course, 0o755)
        sandbox = Sandbox(protect=[course], mode="fallback")
        assert sandbox.mode == "fallback-user"
        with pytest.raises(SandboxUnavailable, match=f"could read {course}.*chmod 700 {course}"):
            sandbox.check_available()
        os.chmod(course, 0o711)  # walkable: the gradebook's known name still opens
        with pytest.raises(SandboxUnavailable, match="could read .*gradebook.db"):
            sandbox.check_available()
        os.chmod(course, 0o700)
        sandbox.check_available()
        assert re.match(r"fallback: forced by mode=fallback; kernel runs as a uid of 65000-65533 with rlimits, "
                        r"no namespaces; network (cut|NOT cut \(.+\)); no cgroup$", sandbox.describe())
    finally:
        subprocess.run(["rm", "-rf", str(course)], check=True)


@pytest.mark.slow
def test_fallback_user_is_unprivileged_offline_and_leaves_nothing(tmp_path, fallback_ready):
    (tmp_path / "gradebook.db").write_text("secret grades")
    marker = f"dfa-fallback-{os.getpid()}-{time.monotonic_ns()}"
    execution = run_cells(tmp_path, [
        "import os; print(os.getuid() != 0, os.getgid() != 0, os.getgroups())",
        f"open({str(tmp_path / 'gradebook.db')!r}).read()",
        "import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)",
        f"import subprocess, time; open('/tmp/{marker}', 'w').write('x'); open('/dev/shm/{marker}', 'w')\n"
        f"kid = subprocess.Popen([{marker!r}, '300'], executable='sleep', start_new_session=True)\n"
        "time.sleep(0.5); print(kid.poll())",  # detached, its mark in argv[0]
        "import os; os.kill(1, 9)",  # not its process
    ], mode="fallback")  # fmt: skip
    assert execution.status == "completed", execution.message
    assert text(execution, 0) in ("True True []\n", f"True True {fallback.sandbox_groups()}\n")  # dfa-sandbox at most
    assert "Permission denied" in text(execution, 1)
    assert "unreachable" in text(execution, 2).lower() or "Errno" in text(execution, 2)
    assert text(execution, 3) == "None\n"  # the detached processes were running when the notebook ended
    assert "Operation not permitted" in text(execution, 4)
    time.sleep(0.2)
    assert host_processes_with(marker) == 0
    assert not Path(f"/tmp/{marker}").exists() and not Path(f"/dev/shm/{marker}").exists()


@pytest.mark.slow
def test_fallback_grades_the_fixture_lab_end_to_end(tmp_path, fallback_ready, monkeypatch):
    from fixtures.grading_support import AUTOGRADED_POINTS, FIXTURE_COURSE, copy_course, release_nb, right_answers
    from fixtures.grading_support import submit as submit_nb

    from common.grading.authoring.release import release
    from common.grading.gradebook.autograde import autograde

    monkeypatch.setenv("DFA_SANDBOX", "fallback")
    course = copy_course(FIXTURE_COURSE, tmp_path)
    release([course])
    submit_nb(course, "honest", right_answers(course))
    submit_nb(course, "blank", release_nb(course))
    limits = Limits(cell_timeout_s=30, notebook_timeout_s=240, memory_bytes=2 * GB, max_processes=64)
    graded = {g.student: g for g in autograde(course, "lab1", workers=2, limits=limits)}
    assert graded["honest"].score == AUTOGRADED_POINTS and graded["honest"].status == "completed"
    assert graded["blank"].score == 0.0
    assert not list(Path(tempfile.gettempdir()).glob(f"dfa-sandbox-{scratch.owner_tag()}-*"))
