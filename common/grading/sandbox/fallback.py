"""The fallback sandbox: when bubblewrap cannot make namespaces (inside Docker, typically) and dfa runs as root,
the runner and the kernel run as an unprivileged user instead, with the runner's rlimits.

Each sandbox gets a user of its own for its run: a uid from ``UIDS`` that names no account in /etc/passwd or
/etc/group, claimed with a lock (``claim``) so that two sandboxes, of this run or of another, never share one.
Its own uid means RLIMIT_NPROC counts only its processes, it cannot signal or read another sandbox's, and at
the end everything it started and every file it left in the world-writable folders can be found and removed
by uid alone (``Slot.clean``) without touching anyone else's.

The switch is this file run as a script (``python -I -S fallback.py enter --uid U [--net] -- COMMAND``), by
root: optionally a new network namespace with only loopback (``unshare(CLONE_NEWNET)``; Docker usually forbids
it, and then the sandbox says so), then no supplementary groups, gid and uid U, no_new_privs (no setuid
program can give root back), death with the grader, and exec. It imports nothing but the standard library.

What it cannot give without namespaces: the kernel sees the machine's files as user U sees them (so the
course folders must be closed to it: ``probe``), the process list, and it can write to world-writable
folders (/tmp, /dev/shm) beyond the scratch limit, up to RLIMIT_FSIZE per file; those files go at the end.
"""

from __future__ import annotations

import ctypes
import fcntl
import grp
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

# Debian Policy 9.2.2 lists 65000-65533 as "Reserved": no package and no adduser allocates them.
UIDS = range(65000, 65534)
LOCK_DIRS = (Path("/run/dfa-sandbox-uids"), Path(tempfile.gettempdir()) / "dfa-sandbox-uids")
WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", tempfile.gettempdir())
NESTED_DEPTH = 8  # how deep Slot.remove_files looks for world-writable folders inside those
SANDBOX_GROUP = "dfa-sandbox"  # acl.GROUP: only its ACL entries name it
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1

_PROBE = """
import json, os, sys
if sys.argv[1] == "imports":
    import ipykernel, nbclient, nbformat  # what the runner and kernel import: the environment must be readable
open_ = []
for path in sys.argv[2:]:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, "rb").close()
        open_.append(path)
        continue
    except (PermissionError, FileNotFoundError, NotADirectoryError):
        pass
    try:
        os.stat(os.path.join(path, ".dfa-probe"))
    except FileNotFoundError:
        open_.append(path)  # not listable, yet a known name inside would open
    except OSError:
        pass
print(json.dumps(open_))
"""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _cut_network() -> None:
    """A new network namespace for this process, with its loopback up (the kernel talks to the runner on it)."""
    if _libc().unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"unshare(CLONE_NEWNET): {os.strerror(ctypes.get_errno())}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def sandbox_groups() -> list[int]:
    """The sandbox's supplementary groups: ``SANDBOX_GROUP`` where it exists, nothing else."""
    try:
        return [grp.getgrnam(SANDBOX_GROUP).gr_gid]
    except KeyError:
        return []


def enter(uid: int, cut_network: bool, command: list[str]) -> None:
    """Become user ``uid`` (after cutting the network if asked) and exec ``command``; root only."""
    parent = os.getppid()
    if cut_network:
        _cut_network()
    os.setgroups(sandbox_groups())
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    libc = _libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # set after the uid change, which clears it
    if os.getppid() != parent:  # the grader died before that took effect
        os._exit(1)
    try:
        os.execv(command[0], command)
    except OSError as exc:
        print(f"uid {uid} cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        os._exit(126)


def enter_prefix(uid: int, cut_network: bool) -> list[str]:
    return [sys.executable, "-I", "-S", str(Path(__file__).resolve()), "enter", "--uid", str(uid),
            *(["--net"] if cut_network else []), "--"]  # fmt: skip


def network_problem() -> str | None:
    """None when a sandbox's network can be cut here (a new network namespace), else why not."""
    try:
        result = subprocess.run([sys.executable, "-I", "-S", str(Path(__file__).resolve()), "probe-net"],
                                capture_output=True, text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if result.returncode == 0:
        return None
    return (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]


def probe(uid: int, paths: list[Path], cut_network: bool, *, imports: bool = True) -> list[str]:
    """The ``paths`` that user ``uid`` can list, read or walk into (run as that user, in a subprocess);
    with ``imports``, first check that it can import what the runner needs (about a second)."""
    what = "imports" if imports else "paths"
    command = enter_prefix(uid, cut_network) + [sys.executable, "-I", "-c", _PROBE, what, *map(str, paths)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd="/")
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        raise OSError(
            f"{detail}: the Python environment ({sys.base_prefix}, {sys.prefix}) must be readable by other users, "
            "or by the fallback's group: run `dfa sandbox setup` as root (docs/instructors.md)"
        )
    return json.loads(result.stdout)


# ---- users: claiming one, and removing what it left ---
def _unassigned(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return False
        except KeyError:
            pass
    return True


def _lock_dir() -> Path:
    """Root's private folder of uid locks: under /run where only root writes there, else the temporary folder."""
    run = LOCK_DIRS[0].parent
    candidates = LOCK_DIRS if run.is_dir() and not run.stat().st_mode & stat.S_IWOTH else LOCK_DIRS[1:]
    for folder in candidates:
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError:
            continue
        info = folder.lstat()
        if stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and info.st_mode & 0o077 == 0:
            return folder
        raise PermissionError(f"{folder} must be a folder of root's that only root can open; remove it")
    raise PermissionError(f"none of {', '.join(map(str, candidates))} can be created")


def processes_of(uids) -> dict[int, list[int]]:
    """Live processes by real uid, for the uids in ``uids`` (zombies are dead already: no signal reaches them)."""
    found: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if line.startswith(("State:", "Uid:")))
            uid, zombie = int(fields["Uid"].split()[0]), fields["State"].split()[0] in ("Z", "X")
        except (OSError, KeyError, ValueError, IndexError):
            continue
        if uid in uids and not zombie:
            found.setdefault(uid, []).append(int(entry.name))
    return found


class Slot:
    """A claimed uid: held (by an open, locked file) until ``release``, or until this process dies."""

    def __init__(self, uid: int, fd: int):
        self.uid, self._fd = uid, fd

    def kill_all(self) -> None:
        """SIGKILL every process of this uid, until none is left (a fork bomb is capped by RLIMIT_NPROC)."""
        from common.grading.sandbox.scratch import kill_until_gone  # the parent's side: the script stays stdlib-only

        kill_until_gone(lambda: processes_of({self.uid}).get(self.uid, []), rounds=100, pause_s=0.01)

    def remove_files(self) -> None:
        """Remove what this uid left in the world-writable folders, and in every world-writable folder nested in
        them (another user's ``/tmp/a/b/c``, each of mode 777 or 1777), down to ``NESTED_DEPTH`` levels."""
        pending = [(Path(d), 0) for d in sorted(set(WORLD_WRITABLE)) if os.path.isdir(d)]
        seen: set[tuple[int, int]] = set()
        while pending:
            folder, depth = pending.pop()
            try:
                info = os.lstat(folder)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) in seen:  # /tmp is also tempfile.gettempdir()
                continue
            seen.add((info.st_dev, info.st_ino))
            writable = bool(info.st_mode & stat.S_IWOTH)  # (the top folders are; a nested one is by choice)
            for entry in _scan(folder):
                try:
                    entry_info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry_info.st_uid == self.uid and writable:
                    _remove(entry)
                elif (stat.S_ISDIR(entry_info.st_mode) and entry_info.st_mode & stat.S_IWOTH
                      and entry_info.st_uid != self.uid and depth < NESTED_DEPTH):
                    pending.append((Path(entry.path), depth + 1))

    def clean(self) -> None:
        self.kill_all()
        self.remove_files()

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _remove(entry: os.DirEntry) -> None:
    if entry.is_dir(follow_symlinks=False):
        shutil.rmtree(entry.path, ignore_errors=True)
        return
    try:
        os.unlink(entry.path)
    except OSError:
        pass


def _scan(folder: Path) -> list[os.DirEntry]:
    try:
        return list(os.scandir(folder))
    except OSError:
        return []


def _try_lock(folder: Path, uid: int) -> Slot | None:
    fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return Slot(uid, fd)


def claim() -> Slot:
    """A uid of ``UIDS`` no account uses and no other sandbox holds, cleared of a dead run's leftovers."""
    folder = _lock_dir()
    for uid in UIDS:
        if _unassigned(uid):
            slot = _try_lock(folder, uid)
            if slot is not None:
                slot.clean()  # a grader killed with -9 may have left processes or files under this uid
                return slot
    raise PermissionError(f"every uid {UIDS.start}-{UIDS.stop - 1} is taken by an account or a running sandbox")


def sweep() -> list[int]:
    """Kill the processes, and remove the files, a killed grader's sandboxes left under uids no run holds."""
    leftover = processes_of(set(UIDS))
    if not leftover:
        return []
    folder, cleaned = _lock_dir(), []
    for uid in sorted(leftover):
        slot = _try_lock(folder, uid) if _unassigned(uid) else None
        if slot is not None:
            slot.clean()
            slot.release()
            cleaned.append(uid)
    return cleaned


def main(argv: list[str]) -> int:
    if argv[:1] == ["probe-net"]:
        try:
            _cut_network()
        except OSError as exc:
            print(f"{exc}", file=sys.stderr)
            return 1
        return 0
    if argv[:1] == ["enter"] and "--" in argv:
        options, command = argv[1 : argv.index("--")], argv[argv.index("--") + 1 :]
        uid = int(options[options.index("--uid") + 1])
        enter(uid, "--net" in options, command)
    print("usage: fallback.py probe-net | enter --uid UID [--net] -- COMMAND...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
