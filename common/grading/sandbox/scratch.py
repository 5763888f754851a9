"""Scratch folders and cgroups of a grading run: named after their owner, swept when the owner is dead.

Every folder a grading run makes in the temporary folder (``dfa-sandbox-*``, ``dfa-results-*``,
``dfa-mplcache-*``, ``dfa-pkg-*``) and every sandbox cgroup is named ``dfa-<kind>-<pid>-<start>-<random>``:
the pid of the process that made it and that process's start time (field 22 of ``/proc/<pid>/stat``, so a
reused pid is not mistaken for the owner). ``sweep`` removes those whose owner is no longer running — what a
``kill -9`` left behind — and never one of a live run.

A normal interruption cleans up at once: the first folder made from the main thread installs handlers for
SIGTERM and SIGINT (only where none but Python's default is set) that kill the running sandboxes (each
registers how, with ``on_interrupt``), remove this process's folders, and then let the signal do what it
did before (KeyboardInterrupt for SIGINT, exit for SIGTERM). Sandboxes started after that refuse to run.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

KINDS = ("sandbox", "results", "mplcache", "pkg")
_NAME = re.compile(r"^dfa-(?P<kind>[a-z]+)-(?P<pid>\d+)-(?P<start>\d+)-")

_lock = threading.RLock()  # re-entrant: the signal handler runs on the main thread, which may hold it
_dirs: set[Path] = set()
_cleanups: dict[int, Callable[[], None]] = {}
_next_token = 0
_interrupted: list[int] = []  # the signal that interrupted this process, once one did
_previous: dict[int, object] = {}


class Interrupted(RuntimeError):
    """The grading run was interrupted (SIGTERM or SIGINT): no new sandbox starts."""


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None when no such process runs."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the command name in parentheses may hold spaces
    return int(fields[19]) if len(fields) > 19 else None  # field 22 overall; state is field 3


def owner_tag() -> str:
    pid = os.getpid()
    return f"{pid}-{start_time(pid) or 0}"


def owner_alive(name: str) -> bool | None:
    """Whether the process that made ``name`` still runs; None when ``name`` carries no owner record."""
    match = _NAME.match(name)
    if not match:
        return None
    return start_time(int(match["pid"])) == int(match["start"])


def make_dir(kind: str) -> Path:
    """A new private folder ``<tmp>/dfa-<kind>-<pid>-<start>-XXXX``, removed on interruption."""
    if kind not in KINDS:
        raise ValueError(f"unknown scratch kind {kind!r}: choose one of {', '.join(KINDS)}")
    _install_handlers()
    path = Path(tempfile.mkdtemp(prefix=f"dfa-{kind}-{owner_tag()}-"))
    with _lock:
        _dirs.add(path)
    return path


def remove_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with _lock:
        _dirs.discard(path)


def kill_until_gone(list_pids: Callable[[], object], rounds: int, pause_s: float) -> None:
    """SIGKILL every pid ``list_pids()`` names, again and again, until it names none (a fork bomb keeps
    forking while it is being killed) or ``rounds`` passes are spent."""
    for _ in range(rounds):
        pids = list(list_pids())
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(pause_s)


def raise_if_interrupted() -> None:
    with _lock:
        if _interrupted:
            raise Interrupted(f"grading was interrupted by signal {_interrupted[0]}")


def on_interrupt(cleanup: Callable[[], None]) -> int:
    """Register ``cleanup`` (e.g. kill a running sandbox) to run on interruption; returns a token for
    ``forget``. Raises Interrupted when the run was interrupted already, so nothing new starts."""
    global _next_token
    with _lock:
        raise_if_interrupted()
        _next_token += 1
        _cleanups[_next_token] = cleanup
        return _next_token


def forget(token: int) -> None:
    with _lock:
        _cleanups.pop(token, None)


def cleanup_now() -> None:
    """Kill every registered sandbox and remove this process's folders (what an interruption does)."""
    with _lock:
        cleanups, dirs = list(_cleanups.values()), list(_dirs)
        _cleanups.clear()
    for cleanup in cleanups:
        try:
            cleanup()
        except Exception:  # one sandbox that cannot be stopped must not keep the others running
            pass
    for path in dirs:
        remove_dir(path)


def _on_signal(signum, frame) -> None:
    with _lock:
        _interrupted.append(signum)
    cleanup_now()
    previous = _previous.get(signum)
    if callable(previous):
        previous(signum, frame)  # Python's SIGINT handler: KeyboardInterrupt
    else:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _install_handlers() -> None:
    """Handlers for SIGTERM and SIGINT, from the main thread only, and only over Python's defaults."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum, default in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
        current = signal.getsignal(signum)
        if current is _on_signal or current is not default:
            continue
        _previous[signum] = current
        signal.signal(signum, _on_signal)


def sweep(root: Path | None = None) -> list[Path]:
    """Remove the scratch folders under ``root`` (default: the temporary folder) whose owner is dead.

    Only folders of this user are touched: another user's are theirs to sweep.
    """
    root = Path(root or tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        match = _NAME.match(entry.name)
        if not match or match["kind"] not in KINDS:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not entry.is_dir(follow_symlinks=False) or info.st_uid != os.geteuid():
            continue
        if owner_alive(entry.name) is False:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return removed
