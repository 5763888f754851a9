"""Run one notebook of untrusted student code in a sandbox, and read back what each cell printed.

``Sandbox.mode`` says how the code is confined, and ``describe()`` says it in one line for the instructor:

- ``bubblewrap`` (bwrap.py): Linux namespaces. The code sees only a private copy of its own submission
  folder, size-limited tmpfs for home, /tmp and /dev/shm, and read-only the system and the Python
  environment; no network (its own network namespace), its own PID and IPC namespaces, no capabilities, a
  fresh session, and it dies with the grader.
- ``fallback-user`` (fallback.py): where bubblewrap cannot make namespaces (inside Docker) and dfa runs as
  root, the runner and kernel run as an unprivileged uid of their own, with the same rlimits, the network cut
  where a network namespace can still be made; it refuses unless that uid is shut out of the course folders.
- ``unsafe``: ``--unsafe-no-sandbox`` (``isolated=False``), the same runner and limits in a throw-away
  folder, unconfined: for trusted notebooks only.

``mode=`` or the ``DFA_SANDBOX`` environment variable (``auto``, ``bubblewrap`` or ``fallback``) forces one;
``auto`` takes bubblewrap where it works, else the fallback as root, else refuses. Never unconfined unless
asked. The limits of limits.py apply in every mode. Only the runner's private pipe carries results out; the
parent keeps what arrived even if the sandbox is killed, so a submission keeps what it earned before it
crashed or hung. The sandbox's own stdout and stderr go to a pipe the parent drains, keeping only the last
``LOG_TAIL_BYTES`` for error messages: code that reaches them (``/proc/1/fd/1``) fills no file of the host.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import pwd
import shutil
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path

import nbformat

from common.errors import DFAError
from common.grading.sandbox import bwrap, cgroups, fallback, scratch
from common.grading.sandbox.bwrap import SYSTEM_DIRS, package_dir, python_env_dirs  # noqa: F401 (public names)
from common.grading.sandbox.limits import Limits, scaled_seconds
from common.grading.sandbox.runner import copy_regular_files
from common.grading.sandbox.sandbox_events import Execution, LogTail, read_events
from common.grading.sandbox.sandbox_events import apply_event as _apply_event  # noqa: F401 (tests use it)

_env_readable = False  # the fallback's uid imported the runner's packages once in this process
MODES = ("auto", "bubblewrap", "fallback")  # what mode= and DFA_SANDBOX accept; unsafe only via isolated=False
LOG_TAIL_BYTES = 64 * 1024


class SandboxUnavailable(DFAError):
    """This machine cannot isolate student code; the message says why and what to do."""


def host_course_folders() -> list[Path]:
    """The repository holding this package, when it holds course folders: closed to the fallback's uid too,
    whatever ``protect`` says (grade-one grades a copy, but the originals sit here)."""
    root = package_dir().parent
    return [root] if any(root.glob("course*_*/nbgrader_config.py")) else []


@lru_cache(maxsize=1)
def matplotlib_cache() -> str | None:
    """A font cache built once per grading run, copied into each sandbox (saves seconds per submission)."""
    cache = scratch.make_dir("mplcache")
    atexit.register(scratch.remove_dir, cache)
    try:
        subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"],
                       env={**os.environ, "MPLCONFIGDIR": str(cache)}, timeout=120, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)  # fmt: skip
    except (subprocess.SubprocessError, OSError):
        return None
    _open_to_all(cache)  # the fallback's uid copies it too
    return str(cache)


@lru_cache(maxsize=1)
def _package_copy() -> Path:
    """A world-readable copy of ``common`` for the fallback's uid: the repository around it stays closed."""
    root = scratch.make_dir("pkg")
    atexit.register(scratch.remove_dir, root)
    shutil.copytree(package_dir(), root / "common", ignore=shutil.ignore_patterns("__pycache__"))
    _open_to_all(root)
    return root


def _open_to_all(root: Path) -> None:
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


def _chown_tree(root: Path, uid: int) -> None:
    for folder, dirs, files in os.walk(root):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.chown(name, uid, uid, follow_symlinks=False)


def _sandbox_env(tmp: str, home: str = bwrap.SANDBOX_HOME, pythonpath: Path | None = None) -> dict[str, str]:
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "USER": "learner",
        "LOGNAME": "learner",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(pythonpath or package_dir().parent),
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
    def __init__(self, limits: Limits | None = None, *, isolated: bool = True, protect: list[Path] = (),
                 mode: str | None = None):  # fmt: skip
        """``protect``: folders that must stay invisible, e.g. the one holding the course folders.
        ``mode``: auto, bubblewrap or fallback (default: ``$DFA_SANDBOX``, else auto)."""
        self.limits = limits or Limits()
        self.isolated = isolated
        self.protect = tuple(Path(p).resolve() for p in protect)
        self.as_root = os.geteuid() == 0
        source = "mode=" if mode else "DFA_SANDBOX="
        requested = mode or os.environ.get("DFA_SANDBOX") or "auto"
        if requested not in MODES:
            raise DFAError(f"unknown sandbox mode {source}{requested!r}: choose one of {', '.join(MODES)}")
        self.requested, self._forced_by = requested, f"{source}{requested}"
        self._chosen: tuple[str, str] | None = None
        self._network: str | None = None  # fallback: why its network is not cut (None: it is)
        self._cgroup: bool | None = None  # fallback: whether a cgroup also caps it (known after the check)
        self._fallback_checked = False  # run() checks the protected folders itself if nobody did

    @staticmethod
    def scratch_dir(kind: str) -> Path:
        """A scratch folder of this grading run (scratch.py): removed on SIGTERM/SIGINT, swept after a kill."""
        return scratch.make_dir(kind)

    # ---- which mode, and saying so ---
    @property
    def mode(self) -> str:
        """bubblewrap, fallback-user or unsafe; raises SandboxUnavailable when no mode can run here."""
        if self._chosen is None:
            self._chosen = self._choose()
        return self._chosen[0]

    def _choose(self) -> tuple[str, str]:
        if not self.isolated:
            return "unsafe", "--unsafe-no-sandbox"
        why = f"forced by {self._forced_by}"
        if self.requested != "fallback":
            reason = bwrap.probe(self.protect)
            if reason is None:
                return "bubblewrap", ""
            why = f"bubblewrap unavailable ({reason})"
            if self.requested == "bubblewrap" or not self.as_root:
                raise SandboxUnavailable(
                    f"bubblewrap cannot isolate student code here ({reason}). Install it (apt-get install "
                    "bubblewrap), allow unprivileged user namespaces, run dfa as root (student code then runs "
                    "as an unprivileged user: the fallback sandbox), or pass --unsafe-no-sandbox for trusted "
                    "notebooks only"
                )
        if not self.as_root:
            raise SandboxUnavailable(
                f"the fallback sandbox ({why}) runs student code as another user, which only root can do: "
                "run dfa as root, or make bubblewrap work here"
            )
        self._network = fallback.network_problem()
        return "fallback-user", why

    def describe(self) -> str:
        """One line saying how student code is confined here (for autograde and grade-one to print)."""
        mode = self.mode
        if mode == "unsafe":
            try:
                user = pwd.getpwuid(os.geteuid()).pw_name
            except KeyError:  # a container's arbitrary uid
                user = f"uid {os.geteuid()}"
            return f"UNSAFE, no sandbox (--unsafe-no-sandbox): student code runs as {user}, rlimits only"
        if mode == "bubblewrap":
            cgroup = ", a cgroup (root)" if self.as_root else ""
            return ("bubblewrap: namespaces (no network, own PID/IPC, only its own folder), read-only /, "
                    f"size-limited tmpfs, rlimits{cgroup}")  # fmt: skip
        network = "network cut" if self._network is None else f"network NOT cut ({self._network})"
        cgroup = {True: "; a cgroup", False: "; no cgroup", None: ""}[self._cgroup]
        uids = f"{fallback.UIDS.start}-{fallback.UIDS.stop - 1}"
        return f"fallback: {self._chosen[1]}; kernel runs as a uid of {uids} with rlimits, no namespaces; " + (
            network + cgroup
        )

    # ---- availability ---
    def check_available(self) -> None:
        """Raise SandboxUnavailable (saying why and what to do) unless student code can be confined here.
        First removes what killed runs left behind (scratch folders, cgroups, the fallback's users)."""
        scratch.sweep()
        if self.as_root:
            cgroups.sweep()
            fallback.sweep()
        if not self.isolated:
            return
        visible = python_env_dirs(self.protect) + [Path(d) for d in SYSTEM_DIRS]
        hidden = [d for d in bwrap.essential_dirs() if not any(d.resolve().is_relative_to(v) for v in visible)]
        if hidden:
            raise SandboxUnavailable(
                f"the Python environment ({hidden[0]}) contains the course folders, so the sandbox cannot "
                "show one without the other: install the environment outside the repository's parent folder"
            )
        mode = self.mode
        if mode == "fallback-user":
            self._check_fallback()
        elif self.as_root:
            group = cgroups.create(self.limits.cgroup_memory_bytes, self.limits.max_processes)
            if group is None:
                raise SandboxUnavailable(
                    "running as root, but no cgroup can be created for the sandbox: Linux does not apply "
                    "process limits to root, so a fork bomb could take the machine down. Run dfa as an "
                    "ordinary user, or give root a writable cgroup (memory and pids controllers)"
                )
            group.destroy()

    def _fallback_protected(self) -> list[Path]:
        roots = [*self.protect, *host_course_folders()]
        paths = list(roots)
        for root in roots:
            for config in [*root.glob("nbgrader_config.py"), *root.glob("course*_*/nbgrader_config.py")]:
                course = config.parent
                paths += [course, course / "gradebook.db", course / "source", course / "submitted"]
        return [p for p in dict.fromkeys(paths) if p.exists()]

    def _check_fallback(self) -> None:
        """The fallback's uid must not reach any protected folder, and must be able to run the Python
        environment (checked once per process): probed as that uid, in a subprocess."""
        global _env_readable
        paths = self._fallback_protected()
        try:
            slot = fallback.claim()
        except OSError as exc:
            raise SandboxUnavailable(f"the fallback sandbox cannot claim a uid: {exc}") from None
        try:
            readable = fallback.probe(slot.uid, paths, self._network is None, imports=not _env_readable)
            _env_readable = True
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            raise SandboxUnavailable(self._unreadable_environment(slot.uid, exc)) from None
        finally:
            slot.clean()
            slot.release()
        if readable:
            top = next(p for p in paths if Path(readable[0]).is_relative_to(p))
            more = f" and {len(readable) - 3} more" if len(readable) > 3 else ""
            raise SandboxUnavailable(
                f"the fallback sandbox runs student code as uid {slot.uid}, which could read "
                f"{', '.join(readable[:3])}{more}: close them to other users (chmod 700 {top}), or make "
                "bubblewrap work here"
            )
        self._fallback_checked = True
        group = cgroups.create(self.limits.cgroup_memory_bytes, self.limits.max_processes)
        self._cgroup = group is not None
        if group is not None:
            group.destroy()

    def _unreadable_environment(self, uid: int, exc: Exception) -> str:
        """Why the fallback's uid cannot run Python, and the command that fixes it where a private home is why."""
        from common.grading.sandbox import acl

        envs = acl.environment_dirs()
        closed = acl.closed_ancestors(envs)
        if not closed:
            return f"the fallback sandbox cannot run student code as uid {uid}: {exc}"
        # where the group exists already, setup ran for another environment, or the cause is another: say both
        again = f" again ({exc})" if fallback.sandbox_groups() else ""
        return (f"the fallback sandbox ({self._chosen[1]}) cannot run student code as uid {uid}: other users "
                f"cannot enter {closed[0]}, which holds the Python environment ({envs[0]}): run `dfa sandbox setup` "
                f"as root{again} (a group of the sandbox's and traverse-only ACLs, docs/instructors.md), install "
                "bubblewrap, or keep Python outside a private home")  # fmt: skip

    # ---- the command ---
    @staticmethod
    def _runner_command(runner_config: dict, result_fd: int) -> list[str]:
        return [sys.executable, "-m", "common.grading.sandbox.runner", "run",
                "--result-fd", str(result_fd), "--config", json.dumps(runner_config)]  # fmt: skip

    def _command(self, mode: str, staging: Path, notebook: str, result_fd: int, time_scale: float,
                 uid: int | None, tests_fd: int) -> tuple[list[str], dict | None]:  # fmt: skip
        """The command that runs the notebook, and its environment (None: bubblewrap sets it inside)."""
        config = functools.partial(self._runner_config, notebook=notebook, time_scale=time_scale, tests_fd=tests_fd)
        if mode == "bubblewrap":
            runner = config(bwrap.SUBMISSION_MOUNT, f"{bwrap.SANDBOX_HOME}/{Path(notebook).stem}",
                            count_processes=True)  # fmt: skip
            mpl = runner["mpl_cache"]
            if mpl:
                runner["mpl_cache"] = f"{bwrap.CACHE_MOUNT}/matplotlib"
            inner = self._runner_command(runner, result_fd)
            return bwrap.command(self.limits, self.protect, as_root=self.as_root, submission=staging / "submission",
                                 mpl_cache=mpl, env=_sandbox_env("/tmp"), inner=inner), None  # fmt: skip
        if mode == "fallback-user":
            user = staging / "user"  # its own uid's, 0700: other sandboxes' uids cannot enter
            runner = config(str(user / "submission"), str(user / "home" / Path(notebook).stem), count_processes=True)
            env = _sandbox_env(str(user / "tmp"), str(user / "home"), _package_copy())
            return fallback.enter_prefix(uid, self._network is None) + self._runner_command(runner, result_fd), env
        (staging / "tmp").mkdir()
        runner = config(str(staging / "submission"), str(staging / "work"), count_processes=False)
        return self._runner_command(runner, result_fd), _sandbox_env(str(staging / "tmp"), str(staging / "tmp"))

    def _runner_config(self, source: str, workdir: str, *, notebook: str, count_processes: bool,
                       time_scale: float = 1.0, tests_fd: int | None = None) -> dict:  # fmt: skip
        return {
            "tests_fd": tests_fd,
            "source": source,
            "workdir": workdir,
            "notebook": notebook,
            "cell_timeout": scaled_seconds(self.limits.cell_timeout_s, time_scale),
            "max_load_factor": self.limits.max_load_factor,
            "max_cell_output_bytes": self.limits.max_cell_output_bytes,
            "kernel_limits": self.limits.kernel_rlimits(count_processes=count_processes),
            "mpl_cache": matplotlib_cache(),
        }

    def _stage(self, mode: str, submission_dir: Path, staging: Path, uid: int | None) -> None:
        if mode != "fallback-user":
            copy_regular_files(submission_dir, staging / "submission")
            return
        os.chmod(staging, 0o711)  # root's: the uid may pass through, not list or write
        user = staging / "user"
        copy_regular_files(submission_dir, user / "submission")
        for name in ("home", "tmp"):
            (user / name).mkdir()
        _chown_tree(user, uid)
        os.chmod(user, 0o700)

    # ---- running ---
    def run(self, submission_dir: Path, notebook: str, *, time_scale: float = 1.0) -> Execution:
        """Execute ``submission_dir/notebook`` (a folder nbgrader prepared) and collect its cells' outputs.

        ``time_scale`` multiplies both wall-time limits (a retry doubles them), before the load factor.
        """
        scratch.raise_if_interrupted()  # nothing new starts once the run was interrupted
        started = time.monotonic()
        mode = self.mode
        if mode == "fallback-user" and not self._fallback_checked:
            self._check_fallback()
        staging = scratch.make_dir("sandbox")
        group = slot = process = token = None
        try:
            if mode == "fallback-user":
                slot = fallback.claim()
            self._stage(mode, submission_dir, staging, slot and slot.uid)
            tests_fd = _take_out_tests(staging / ("user" if mode == "fallback-user" else "") / "submission" / notebook)
            if self.as_root and mode != "unsafe":
                group = cgroups.create(self.limits.cgroup_memory_bytes, self.limits.max_processes)
                if group is None and mode == "bubblewrap":
                    raise SandboxUnavailable("could not create a cgroup for the sandbox")
            read_fd, write_fd = os.pipe()
            log_read, log_write = os.pipe()
            try:
                command, env = self._command(mode, staging, notebook, write_fd, time_scale, slot and slot.uid,
                                             tests_fd)  # fmt: skip
                if group is not None:
                    command = group.join_prefix() + command
                process = subprocess.Popen(command, pass_fds=(write_fd, tests_fd), stdin=subprocess.DEVNULL,
                                           stdout=log_write, stderr=log_write, env=env, cwd=staging,
                                           start_new_session=True)  # fmt: skip
            except BaseException:
                os.close(read_fd)
                os.close(log_read)
                raise
            finally:
                os.close(write_fd)  # only the runner holds these now
                os.close(log_write)
                os.close(tests_fd)
            log = LogTail(log_read, LOG_TAIL_BYTES)
            try:
                token = scratch.on_interrupt(functools.partial(_stop, process, group, slot, wait=False))
                notebook_s = self.limits.notebook_timeout_s * time_scale
                execution = read_events(read_fd, started, notebook_s, self.limits.max_load_factor)
            finally:
                os.close(read_fd)
                _stop(process, group, slot)
            log.join(timeout=5)
            execution.log, execution.log_bytes = log.text(), log.total
            if execution.status == "error" and not execution.message:
                lines = execution.log.strip().splitlines()
                execution.message = lines[-1] if lines else "the sandbox reported nothing"
            execution.seconds = round(time.monotonic() - started, 2)
            return execution
        finally:
            if token is not None:
                scratch.forget(token)
            if process is not None:
                _stop(process, group, slot)
            if group is not None:
                group.destroy()
            if slot is not None:
                slot.clean()
                slot.release()
            scratch.remove_dir(staging)


def _take_out_tests(path: Path) -> int:
    """Strip the test cells' hidden parts from the staged notebook (testcells.py) and return a memory file
    holding them, for the runner alone: nothing in the sandbox's folders holds a hidden test."""
    from common.grading.verdicts import testcells

    tests = {}
    if path.is_file():
        nb = nbformat.read(path, as_version=4)
        tests = testcells.split(nb)
        nbformat.write(nb, path)
    fd = os.memfd_create("dfa-tests", os.MFD_CLOEXEC)
    view = memoryview(json.dumps(tests).encode())
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _stop(process: subprocess.Popen, group, slot, *, wait: bool = True) -> None:
    """Stop the sandbox: its process group (bubblewrap takes its PID namespace along), its cgroup, and in
    the fallback every process of its uid; then reap it, unless ``wait`` is False (a signal handler, whose
    worker thread reaps it). Safe to call twice."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, 9)
        except ProcessLookupError:
            pass
    if slot is not None:
        slot.kill_all()
    if group is not None:
        group.destroy()
    if not wait:
        return
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
