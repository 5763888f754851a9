"""The sandbox on its own: what student code can see and do inside it, and what happens when it misbehaves."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import nbformat
import pytest
from fixtures.grading_support import needs_sandbox

from common.grading import sandbox as sandbox_module
from common.grading.limits import GB, Limits
from common.grading.sandbox import Sandbox, SandboxUnavailable

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow]

SMALL = Limits(cell_timeout_s=8, notebook_timeout_s=120, memory_bytes=1 * GB, max_processes=48)


def run_cells(tmp_path: Path, cells: list[str], limits: Limits = SMALL, *, isolated: bool = True, files=None):
    folder = tmp_path / "submission"
    folder.mkdir(exist_ok=True)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / "probe.ipynb")
    return Sandbox(limits, isolated=isolated, protect=[tmp_path]).run(folder, "probe.ipynb")


def text(execution, index: int) -> str:
    outs = execution.cells[index]["outputs"]
    return "".join(o.get("text", "") + o.get("evalue", "") + str(o.get("data", "")) for o in outs)


def host_processes_with(marker: str) -> int:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return len(found)


@needs_sandbox
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


@needs_sandbox
def test_fork_bomb_is_capped_and_cleaned_up(tmp_path):
    marker = f"dfa-fork-{os.getpid()}-{time.monotonic_ns()}"
    execution = run_cells(
        tmp_path,
        [
            f"import os, time\nMARK = {marker!r}\nkids = 0\n"
            "for _ in range(1000):\n"
            "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
            "    if pid == 0:\n        os.execvp('sleep', ['sleep', '600', MARK])\n    kids += 1\n"
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


@needs_sandbox
def test_kernel_death_keeps_earlier_cells(tmp_path):
    execution = run_cells(tmp_path, ["print('first')", "import os; os._exit(3)", "print('never')"])
    assert execution.status == "kernel_died" and execution.failed_cell == 1
    assert text(execution, 0) == "first\n" and 2 not in execution.cells


@needs_sandbox
def test_runaway_output_is_capped_and_the_notebook_time_limit_kills(tmp_path):
    execution = run_cells(tmp_path, ["print('x' * (8 * 2**20))"])
    assert "[output truncated by the grader]" in text(execution, 0)
    assert len(text(execution, 0)) < 3 * 2**20
    limits = Limits(cell_timeout_s=100, notebook_timeout_s=12, memory_bytes=GB, max_processes=48)
    started = time.monotonic()
    execution = run_cells(tmp_path, ["print('ok')", "import time; time.sleep(1000)"], limits)
    assert execution.status == "time_limit" and text(execution, 0) == "ok\n"
    assert time.monotonic() - started < 30


def test_unsafe_mode_runs_without_bubblewrap(tmp_path):
    execution = run_cells(tmp_path, ["import os; print(os.environ['NBGRADER_EXECUTION'])"], isolated=False)
    assert execution.status == "completed" and text(execution, 0) == "autograde\n"


def test_missing_bubblewrap_is_refused_with_advice(monkeypatch):
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None)
    sandbox_module._probe_bwrap.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap.*--unsafe-no-sandbox"):
            Sandbox().check_available()
    finally:
        sandbox_module._probe_bwrap.cache_clear()


@needs_sandbox
def test_honest_fixture_code_warns_on_stderr_and_the_course_filter_drops_it():
    """The fixture's relu test makes PyTorch warn on stderr; without the filter nbgrader would score it 0."""
    import re

    from fixtures.grading_support import FIXTURE_COURSE, LAB, cell_index, read

    from common.grading.course import Course

    course = Course(FIXTURE_COURSE)
    torch_sized = Limits(cell_timeout_s=30, memory_bytes=2 * GB)  # the lower bound docs/instructors.md gives
    sandbox = Sandbox(torch_sized, protect=[FIXTURE_COURSE.parent])
    execution = sandbox.run(course.source_dir / LAB, f"{LAB}.ipynb")
    tests = cell_index(read(course.source_notebook(LAB)), "relu_tests")
    stderr = [o["text"] for o in execution.cells[tests]["outputs"] if o.get("name") == "stderr"]
    assert stderr and "UserWarning" in stderr[0]
    assert re.search(course.config.IgnorePattern.pattern, stderr[0])
