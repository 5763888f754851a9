"""One cgroup per sandbox when the grader runs as root: caps its tasks and memory, kills all of it at the end.

Root only needs this because RLIMIT_NPROC does not bind root (limits.py). Works with cgroup v2 (controllers
``memory`` and ``pids`` enabled for the grader's cgroup or its parent) and with cgroup v1 (``memory`` and
``pids`` hierarchies). The sandbox joins it race-free: a tiny shell writes its own pid into the cgroup and
then execs bubblewrap, so every process of the sandbox is born inside. Each cgroup is named after its owner
(scratch.py), so ``sweep`` can remove those a killed grader left behind, and only those.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from common.grading.sandbox import scratch

SYSFS = Path("/sys/fs/cgroup")

# $1.. are the cgroup directories, then "--", then the command to exec.
JOIN_SCRIPT = (
    'while [ "$1" != "--" ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; done; shift; exec "$@"'
)


def _own_cgroups(proc_text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` → {controller or "" for v2: path}."""
    paths = {}
    for line in proc_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                paths[controller] = parts[2]
    return paths


class Cgroup:
    """A sandbox's cgroup: one directory (v2) or one per controller (v1)."""

    def __init__(self, dirs: list[Path]):
        self.dirs = dirs

    def join_prefix(self) -> list[str]:
        return ["/bin/sh", "-c", JOIN_SCRIPT, "dfa-cgroup-join", *map(str, self.dirs), "--"]

    def _pids(self) -> set[int]:
        pids = set()
        for d in self.dirs:
            try:
                pids.update(int(p) for p in (d / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return pids

    def destroy(self) -> None:
        """Kill whatever is left inside (a forked child that outlived the kernel), then remove the cgroup."""
        scratch.kill_until_gone(self._pids, rounds=50, pause_s=0.02)
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _new_name() -> str:
    return f"dfa-sandbox-{scratch.owner_tag()}-{uuid.uuid4().hex[:8]}"


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def _create_v2(own: str, memory: int, tasks: int, sysfs: Path) -> Cgroup | None:
    here = sysfs / own.lstrip("/")
    for parent in (here, here.parent):
        if not (parent / "cgroup.subtree_control").exists():
            continue
        enabled = (parent / "cgroup.subtree_control").read_text().split()
        if not {"memory", "pids"} <= set(enabled):
            _write(parent / "cgroup.subtree_control", "+memory +pids")
        child = parent / _new_name()
        try:
            child.mkdir()
        except OSError:
            continue
        if _write(child / "memory.max", str(memory)) and _write(child / "pids.max", str(tasks)):
            _write(child / "memory.swap.max", "0")
            return Cgroup([child])
        Cgroup([child]).destroy()
    return None


def _create_v1(own: dict[str, str], memory: int, tasks: int, sysfs: Path) -> Cgroup | None:
    name = _new_name()
    dirs = []
    for controller, limit_file, value in (
        ("memory", "memory.limit_in_bytes", memory),
        ("pids", "pids.max", tasks),
    ):
        if controller not in own or not (sysfs / controller).is_dir():
            Cgroup(dirs).destroy()
            return None
        d = sysfs / controller / own[controller].lstrip("/") / name
        try:
            d.mkdir()
        except OSError:
            Cgroup(dirs).destroy()
            return None
        dirs.append(d)
        if not _write(d / limit_file, str(value)):
            Cgroup(dirs).destroy()
            return None
    _write(
        dirs[0] / "memory.memsw.limit_in_bytes", str(memory)
    )  # no swap either, where swap accounting exists
    return Cgroup(dirs)


def _parents(own: dict[str, str], sysfs: Path) -> list[Path]:
    """The folders this process makes its sandboxes' cgroups in (v2: its own cgroup or its parent)."""
    if (sysfs / "cgroup.controllers").exists() and "" in own:
        here = sysfs / own[""].lstrip("/")
        return [here, here.parent]
    return [sysfs / c / own[c].lstrip("/") for c in ("memory", "pids") if c in own]


def sweep(*, sysfs: Path = SYSFS, proc_cgroup: str | None = None) -> list[Path]:
    """Destroy the sandbox cgroups (and what runs in them) whose owner is dead; never a live run's."""
    try:
        text = proc_cgroup if proc_cgroup is not None else Path("/proc/self/cgroup").read_text()
    except OSError:
        return []
    removed = []
    for parent in _parents(_own_cgroups(text), sysfs):
        try:
            children = [p for p in parent.iterdir() if p.name.startswith("dfa-sandbox-") and p.is_dir()]
        except OSError:
            continue
        for child in children:
            if scratch.owner_alive(child.name) is False:
                Cgroup([child]).destroy()
                removed.append(child)
    return removed


def create(
    memory_bytes: int, max_tasks: int, *, sysfs: Path = SYSFS, proc_cgroup: str | None = None
) -> Cgroup | None:
    """A new cgroup with these caps, or None when this machine does not let us make one."""
    try:
        text = proc_cgroup if proc_cgroup is not None else Path("/proc/self/cgroup").read_text()
    except OSError:
        return None
    own = _own_cgroups(text)
    if (sysfs / "cgroup.controllers").exists() and "" in own:
        return _create_v2(own[""], memory_bytes, max_tasks, sysfs)
    return _create_v1(own, memory_bytes, max_tasks, sysfs)
