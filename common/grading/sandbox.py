"""Run one notebook of untrusted student code inside bubblewrap, and read back what each cell printed.

What the student's code can see: a private, writable scratch home holding a copy of its own submission folder,
a private /tmp, and read-only the system (/usr) and the Python environment (interpreter, site-packages, the
``common`` package) — nothing else of the grading machine: no gradebook, no ``source/``, no other students, no
home directories. It has no network (its own network namespace has only loopback), its own PID and IPC
namespaces, no capabilities, a fresh session (no terminal to inject into), and it dies with the grader. The
limits of limits.py apply. Only the runner's private pipe carries results out; the parent keeps what arrived
even if the sandbox is killed, so a submission keeps what it earned before it crashed or hung.

``Sandbox(limits, isolated=False)`` is ``--unsafe-no-sandbox``: the same runner and kernel limits in a
throw-away directory, but no namespaces — for machines without bubblewrap, and only for trusted notebooks.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from common.errors import DFAError
from common.grading import cgroups
from common.grading.limits import Limits, scaled_seconds
from common.grading.runner import copy_regular_files

SANDBOX_HOME = "/home/learner"
SUBMISSION_MOUNT = "/submission"
CACHE_MOUNT = "/opt/dfa-cache"
SANDBOX_UID = 1000
# Results are a few MB at most; anything beyond this is a runaway and is cut.
MAX_RESULT_BYTES = 256 * 1024**2
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/fonts",
    "/etc/alternatives",
)


class SandboxUnavailable(DFAError):
    """This machine cannot isolate student code; the message says why and what to do."""


@dataclass
class Execution:
    """What came back from one notebook: the outputs of each cell that finished, and how the run ended."""

    cells: dict[int, dict] = field(default_factory=dict)
    status: str = "error"  # completed | time_limit | kernel_died | error
    message: str = ""
    failed_cell: int | None = None
    seconds: float = 0.0
    load_factor: float = 1.0  # how much the runner's calibration stretched the wall-time limits
    retried: bool = False  # this is the second run, at doubled limits, after the first hit a time limit

    def to_json(self) -> dict:
        return {
            "cells": {str(i): c for i, c in self.cells.items()},
            "status": self.status,
            "message": self.message,
            "failed_cell": self.failed_cell,
            "seconds": self.seconds,
            "load_factor": self.load_factor,
            "retried": self.retried,
        }


def package_dir() -> Path:
    """The ``common`` package folder; only it (not the repository around it) is visible in the sandbox."""
    return Path(__file__).resolve().parents[1]


def _essential_dirs() -> set[Path]:
    return {
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.exec_prefix),
        Path(os.path.realpath(sys.executable)).parent.parent,
    }


def python_env_dirs(protect: tuple[Path, ...] = ()) -> list[Path]:
    """Folders the interpreter needs, read-only in the sandbox: its prefixes and site-packages, nothing taken
    from ``sys.path`` (which may hold anything, e.g. the repository with its tests). None may contain a
    ``protect`` path or the repository root, which holds every course folder."""
    candidates = set(_essential_dirs()) | {Path(p) for p in site.getsitepackages()}
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        candidates.add(Path(site.getusersitepackages()))
    guarded = [Path(p).resolve() for p in (*protect, package_dir().parent)]
    dirs = sorted(
        {
            p.resolve()
            for p in candidates
            if p.is_dir() and not any(g == p.resolve() or g.is_relative_to(p.resolve()) for g in guarded)
        }
        - {Path("/")}
    )
    system = [Path(d) for d in SYSTEM_DIRS]
    # drop folders inside another one on the list, and folders the system binds already cover
    return [d for d in dirs if not any(d != o and d.is_relative_to(o) for o in dirs + system)]


@lru_cache(maxsize=1)
def matplotlib_cache() -> str | None:
    """A font cache built once per grading run, copied into each sandbox (saves seconds per submission)."""
    cache = tempfile.mkdtemp(prefix="dfa-mplcache-")
    atexit.register(shutil.rmtree, cache, True)
    env = {**os.environ, "MPLCONFIGDIR": cache}
    try:
        subprocess.run(
            [sys.executable, "-c", "import matplotlib.font_manager"],
            env=env,
            timeout=120,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
    except (subprocess.SubprocessError, OSError):
        return None
    return cache


def _sandbox_env(tmp: str) -> dict[str, str]:
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": SANDBOX_HOME,
        "USER": "learner",
        "LOGNAME": "learner",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(package_dir().parent),
        "PYTHONDONTWRITEBYTECODE": "1",
        "NBGRADER_EXECUTION": "autograde",
        # one thread each: parallel workers then share the cores instead of fighting over them
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "MPLCONFIGDIR": f"{tmp}/matplotlib",
        "IPYTHONDIR": f"{tmp}/ipython",
        "XDG_CACHE_HOME": f"{tmp}/cache",
        "JUPYTER_RUNTIME_DIR": f"{tmp}/jupyter",
        "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor",
        "TMPDIR": tmp,
    }


class Sandbox:
    def __init__(self, limits: Limits | None = None, *, isolated: bool = True, protect: list[Path] = ()):
        """``protect``: folders that must stay invisible, e.g. the one holding the course folders."""
        self.limits = limits or Limits()
        self.isolated = isolated
        self.protect = tuple(Path(p).resolve() for p in protect)
        self.as_root = os.geteuid() == 0

    # ---- availability ---
    def check_available(self) -> None:
        """Raise SandboxUnavailable (saying why and what to do) unless student code can be isolated here."""
        if not self.isolated:
            return
        visible = python_env_dirs(self.protect) + [Path(d) for d in SYSTEM_DIRS]
        hidden = [d for d in _essential_dirs() if not any(d.resolve().is_relative_to(v) for v in visible)]
        if hidden:
            raise SandboxUnavailable(
                f"the Python environment ({hidden[0]}) contains the course folders, so the sandbox cannot "
                "show one without the other: install the environment outside the repository's parent folder"
            )
        reason = _probe_bwrap(tuple(self._bwrap_mounts()))
        if reason:
            raise SandboxUnavailable(
                f"bubblewrap cannot isolate student code here ({reason}). Install it (apt-get install "
                "bubblewrap), allow unprivileged user namespaces, or pass --unsafe-no-sandbox for trusted "
                "notebooks only"
            )
        if self.as_root:
            group = cgroups.create(self.limits.cgroup_memory_bytes, self.limits.max_processes)
            if group is None:
                raise SandboxUnavailable(
                    "running as root, but no cgroup can be created for the sandbox: Linux does not apply "
                    "process limits to root, so a fork bomb could take the machine down. Run dfa as an "
                    "ordinary user, or give root a writable cgroup (memory and pids controllers)"
                )
            group.destroy()

    # ---- the bubblewrap command ---
    def _bwrap_mounts(self) -> list[str]:
        args: list[str] = []
        for d in SYSTEM_DIRS:
            if os.path.islink(d):
                args += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                args += ["--ro-bind", d, d]
        for f in ETC_FILES:
            args += ["--ro-bind-try", f, f]
        for d in python_env_dirs(self.protect) + [package_dir()]:
            args += ["--ro-bind", str(d), str(d)]
        return args

    def _bwrap_command(self, staging: Path, runner_config: dict, result_fd: int) -> list[str]:
        size = str(self.limits.scratch_bytes)
        # fmt: off
        uid = str(SANDBOX_UID)
        command = ["bwrap", "--unshare-all", "--unshare-user", "--uid", uid, "--gid", uid,
                   "--hostname", "sandbox", "--die-with-parent", "--new-session"]
        if self.as_root:
            command += ["--cap-drop", "ALL"]
        # The private /tmp comes first: a Python environment or checkout that lives under /tmp (a CI venv)
        # is then bound on top of it instead of being hidden by it.
        command += ["--size", size, "--tmpfs", "/tmp"]
        command += self._bwrap_mounts()
        command += ["--proc", "/proc", "--dev", "/dev",
                    "--size", size, "--tmpfs", SANDBOX_HOME,
                    "--ro-bind", str(staging / "submission"), SUBMISSION_MOUNT]
        # fmt: on
        if runner_config.get("mpl_cache"):
            command += ["--ro-bind", runner_config["mpl_cache"], f"{CACHE_MOUNT}/matplotlib"]
            runner_config = {**runner_config, "mpl_cache": f"{CACHE_MOUNT}/matplotlib"}
        command += ["--chdir", SANDBOX_HOME, "--clearenv"]
        for key, value in _sandbox_env("/tmp").items():
            command += ["--setenv", key, value]
        return command + ["--", *self._runner_command(runner_config, result_fd)]

    @staticmethod
    def _runner_command(runner_config: dict, result_fd: int) -> list[str]:
        return [sys.executable, "-m", "common.grading.runner", "run",
                "--result-fd", str(result_fd), "--config", json.dumps(runner_config)]  # fmt: skip

    def _command(
        self, staging: Path, notebook: str, result_fd: int, time_scale: float = 1.0
    ) -> tuple[list[str], dict | None]:
        """The command that runs the notebook, and its environment (None: bubblewrap sets it inside)."""
        if self.isolated:
            workdir = f"{SANDBOX_HOME}/{Path(notebook).stem}"
            config = self._runner_config(SUBMISSION_MOUNT, workdir, notebook, count_processes=True,
                                         time_scale=time_scale)  # fmt: skip
            return self._bwrap_command(staging, config, result_fd), None
        (staging / "tmp").mkdir()
        config = self._runner_config(str(staging / "submission"), str(staging / "work"), notebook,
                                     count_processes=False, time_scale=time_scale)  # fmt: skip
        return self._runner_command(config, result_fd), {**_sandbox_env(str(staging / "tmp")),
                                                          "HOME": str(staging / "tmp")}  # fmt: skip

    # ---- running ---
    def run(self, submission_dir: Path, notebook: str, *, time_scale: float = 1.0) -> Execution:
        """Execute ``submission_dir/notebook`` (a folder nbgrader prepared) and collect its cells' outputs.

        ``time_scale`` multiplies both wall-time limits (a retry doubles them), before the load factor.
        """
        started = time.monotonic()
        staging = Path(tempfile.mkdtemp(prefix="dfa-sandbox-"))
        group = None
        try:
            copy_regular_files(submission_dir, staging / "submission")
            if self.isolated and self.as_root:
                group = cgroups.create(self.limits.cgroup_memory_bytes, self.limits.max_processes)
                if group is None:
                    raise SandboxUnavailable("could not create a cgroup for the sandbox")
            read_fd, write_fd = os.pipe()
            try:
                command, env = self._command(staging, notebook, write_fd, time_scale)
                if group is not None:
                    command = group.join_prefix() + command
                with open(staging / "sandbox.log", "wb") as log:
                    process = subprocess.Popen(command, pass_fds=(write_fd,), stdin=subprocess.DEVNULL,
                                               stdout=log, stderr=log, env=env, cwd=staging,
                                               start_new_session=True)  # fmt: skip
            except BaseException:
                os.close(read_fd)
                raise
            finally:
                os.close(write_fd)  # only the runner holds it now
            try:
                notebook_s = self.limits.notebook_timeout_s * time_scale
                execution = _read_events(read_fd, started, notebook_s, self.limits.max_load_factor)
            finally:
                os.close(read_fd)
                _kill_group(process)
            if execution.status == "error" and not execution.message:
                log_text = (staging / "sandbox.log").read_text(errors="replace").strip()
                execution.message = log_text.splitlines()[-1] if log_text else "the sandbox reported nothing"
            execution.seconds = round(time.monotonic() - started, 2)
            return execution
        finally:
            if group is not None:
                group.destroy()
            shutil.rmtree(staging, ignore_errors=True)

    def _runner_config(
        self, source: str, workdir: str, notebook: str, *, count_processes: bool, time_scale: float = 1.0
    ) -> dict:
        return {
            "source": source,
            "workdir": workdir,
            "notebook": notebook,
            "cell_timeout": scaled_seconds(self.limits.cell_timeout_s, time_scale),
            "max_load_factor": self.limits.max_load_factor,
            "max_cell_output_bytes": self.limits.max_cell_output_bytes,
            "kernel_limits": self.limits.kernel_rlimits(count_processes=count_processes),
            "mpl_cache": matplotlib_cache(),
        }


def _read_events(fd: int, started: float, notebook_s: float, max_factor: float) -> Execution:
    """Read the runner's JSON lines until it closes the pipe, the notebook's time is up, or too much arrives.

    The time allowed is ``notebook_s`` stretched by the load factor the runner reports when it starts (checked
    against the clamp here too); its calibration runs before any student code, so that code cannot change it.
    """
    execution = Execution(status="error", message="")
    buffer, total = b"", 0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            allowed = scaled_seconds(notebook_s, execution.load_factor)
            remaining = started + allowed - time.monotonic()
            if remaining <= 0:
                execution.status, execution.message = (
                    "time_limit",
                    f"the notebook ran past its {allowed} s total time limit",
                )
                break
            if not selector.select(timeout=min(remaining, 1.0)):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_RESULT_BYTES:
                execution.status, execution.message = "error", "the notebook produced too much output"
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                _apply_event(execution, line, max_factor)
    if execution.status == "running":
        execution.status, execution.message = "error", "the sandbox stopped without finishing the notebook"
    return execution


def _apply_event(execution: Execution, line: bytes, max_factor: float) -> None:
    try:
        event = json.loads(line)
    except ValueError:
        return
    kind = event.get("event")
    if kind == "start":
        execution.status = "running"
        factor = event.get("load_factor")
        if isinstance(factor, (int, float)) and 1.0 <= factor <= max_factor:  # (NaN fails both)
            execution.load_factor = float(factor)
    elif kind == "cell" and isinstance(event.get("index"), int) and isinstance(event.get("outputs"), list):
        execution.cells[event["index"]] = {
            "outputs": event["outputs"],
            "execution_count": event.get("execution_count"),
        }
    elif kind == "end":
        execution.status = str(event.get("status", "error"))
        execution.message = str(event.get("message", ""))
        cell = event.get("cell")
        execution.failed_cell = cell if isinstance(cell, int) else None


def _kill_group(process: subprocess.Popen) -> None:
    """Stop the sandbox (bubblewrap takes its whole PID namespace with it) and reap it."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


@lru_cache(maxsize=4)
def _probe_bwrap(mounts: tuple[str, ...]) -> str | None:
    """None when bubblewrap can start a sandbox like ours here, else the reason it cannot."""
    if shutil.which("bwrap") is None:
        return "the bwrap command is not installed"
    command = [
        "bwrap",
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--tmpfs",
        "/tmp",
        *mounts,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        sys.executable,
        "-c",
        "pass",
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if result.returncode != 0:
        return (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
    return None
