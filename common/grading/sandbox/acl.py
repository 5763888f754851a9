"""Opening a Python environment in a private home (pyenv or conda under a 0700 /root) to the fallback sandbox,
and to it alone: ``dfa sandbox setup`` and ``dfa sandbox undo``.

The fallback's uids are given one supplementary group, ``GROUP`` (fallback.enter), and POSIX ACL entries for
that group only, never for every user:

- ``x`` (enter, not list) on each folder above an environment folder that other users cannot enter;
- ``---`` (a deny entry: a member of a named group the ACL lists gets that entry's rights, not "other"'s) on
  everything other users could open inside those folders that leads to no environment folder, so entering
  ``/root`` reveals no ``/root/.cache`` or ``/root/.bashrc``, and entering ``.pyenv`` no other Python;
- ``rX`` on an environment tree, recursively, only where something in it is closed to other users.

The sandbox then sees of the machine what bubblewrap's sandbox sees of the environment (bwrap.python_env_dirs),
plus what other users see anyway. Before changing a path, ``setup`` saves its ACL (getfacl) next to a record of
the changes in the instructor's state folder; ``undo`` puts every saved ACL back (setfacl --restore) and deletes
the group if setup created it.
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import site
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from common.errors import DFAError
from common.grading.sandbox.fallback import SANDBOX_GROUP as GROUP

RECORD_NAME = "sandbox-acl.json"
BACKUP_NAME = "sandbox-acl.backup"


@dataclass(frozen=True)
class Change:
    """One ACL entry for ``GROUP``: ``perm`` x (enter), - (deny) or rX (read a tree, recursively)."""

    path: str
    perm: str
    why: str

    @property
    def recursive(self) -> bool:
        return self.perm == "rX"

    def command(self, group: str = GROUP) -> list[str]:
        # a deny entry needs no mask change (--- under any mask stays ---): -n leaves the mask as it is
        flags = ["-R"] if self.recursive else ["-n"] if self.perm == "-" else []
        return ["setfacl", *flags, "-m", f"g:{group}:{self.perm}", self.path]


def state_dir() -> Path:
    """The instructor's own folder for the undo record: $XDG_STATE_HOME/dataflow-labs (~/.local/state)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "dataflow-labs"


def environment_dirs() -> list[Path]:
    """What the fallback's uid must read: the folders bubblewrap binds read-only, less root's user site (the
    sandbox has a home of its own, so its Python never looks there)."""
    from common.grading.sandbox.bwrap import python_env_dirs

    user_site = Path(site.getusersitepackages()).resolve() if site.ENABLE_USER_SITE else None
    return [d for d in python_env_dirs() if d != user_site]


def _other_can_enter(mode: int) -> bool:
    return bool(mode & stat.S_IXOTH)


def _opens_to_others(info: os.stat_result) -> bool:
    """Whether other users can do anything with this entry: list or enter a folder, read or write a file."""
    return bool(info.st_mode & (stat.S_IROTH | stat.S_IWOTH | stat.S_IXOTH))


def closed_ancestors(targets: list[Path]) -> list[Path]:
    """The folders above ``targets`` that other users cannot enter (what keeps the fallback's uid out)."""
    closed = []
    for target in targets:
        for folder in reversed(Path(target).parents):
            if folder not in closed and not _other_can_enter(os.stat(folder).st_mode):
                closed.append(folder)
    return closed


def _tree_is_open(root: Path) -> bool:
    """Every folder of ``root`` enterable and listable by other users, every file readable."""
    for folder, _, files in os.walk(root):
        if os.stat(folder).st_mode & (stat.S_IROTH | stat.S_IXOTH) != stat.S_IROTH | stat.S_IXOTH:
            return False
        for name in files:
            info = os.stat(os.path.join(folder, name), follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and not info.st_mode & stat.S_IROTH:
                return False
    return True


def plan(targets: list[Path]) -> list[Change]:
    """The ACL entries that let ``GROUP`` read ``targets`` and nothing more than other users could already."""
    targets = [Path(t).resolve() for t in targets]
    on_path = {p for t in targets for p in (t, *t.parents)}
    changes: dict[str, Change] = {}
    for target in targets:
        chain = list(reversed(target.parents))  # / first
        closed = [f for f in chain if not _other_can_enter(os.stat(f).st_mode)]
        for folder in closed:
            changes.setdefault(str(folder), Change(str(folder), "x", f"enter, towards {target}"))
        if closed:  # from the first closed folder down, what others could open there becomes reachable
            for folder in chain[chain.index(closed[0]) :]:
                for entry in sorted(os.scandir(folder), key=lambda e: e.name):
                    path = Path(entry.path)
                    info = entry.stat(follow_symlinks=False)
                    if path in on_path or stat.S_ISLNK(info.st_mode) or not _opens_to_others(info):
                        continue  # a symbolic link grants nothing: its target is checked where it lies
                    changes.setdefault(str(path), Change(str(path), "-", f"hide: next to the way to {target}"))
        if not _tree_is_open(target):
            changes[str(target)] = Change(str(target), "rX", "read the environment (closed to other users)")
    return list(changes.values())


# ---- applying and undoing ---
def _require_tools(command: str) -> None:
    if os.geteuid() != 0:
        raise DFAError(
            f"dfa sandbox {command} adds a group and ACL entries, which only root can do (the fallback sandbox "
            f"runs as root only): run `sudo {sys.executable} -m common.cli sandbox {command}`"
        )
    for tool in ("setfacl", "getfacl"):
        if shutil.which(tool) is None:
            raise DFAError(f"{tool} is not installed: install the acl package (apt-get install acl), then rerun")


def _run(command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        if "not supported" in detail.lower():
            detail += " (this filesystem has no POSIX ACLs)"
        raise DFAError(f"{' '.join(command)} failed: {detail}")
    return result.stdout


def _has_entry(acl_text: str, group: str) -> bool:
    """Whether every path getfacl printed (one, or a tree's) has an entry for ``group``."""
    blocks = [b for b in acl_text.split("\n\n") if b.strip()]
    return bool(blocks) and all(f"\ngroup:{group}:" in b for b in blocks)


def _extended(acl_text: str) -> bool:
    return any(line.startswith("mask::") for line in acl_text.splitlines())


def _load(folder: Path) -> dict:
    record = folder / RECORD_NAME
    return json.loads(record.read_text()) if record.is_file() else {"group": GROUP, "created_group": False,
                                                                    "changes": []}  # fmt: skip


def setup(targets: list[Path] | None = None, *, folder: Path | None = None, dry_run: bool = False) -> list[str]:
    """Create ``GROUP`` if needed and add the plan's ACL entries that are not there yet; return what was done,
    line by line, ending with the commands that undo it."""
    targets = environment_dirs() if targets is None else targets
    changes = plan(targets)
    if dry_run:
        return [" ".join(c.command()) + f"   # {c.why}" for c in changes] or ["nothing to change"]
    _require_tools("setup")
    folder = folder or state_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    record = _load(folder)
    lines = []
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        _run(["groupadd", "--system", GROUP])
        record["created_group"] = True
        lines.append(f"groupadd --system {GROUP}   # the fallback sandbox's uids get it as their only group")
    done = []
    try:
        for change in changes:
            before = _run(["getfacl", "--absolute-names", "-p", *(["-R"] if change.recursive else []), change.path])
            if _has_entry(before, GROUP):
                continue  # a previous setup did it
            if _extended(before) and change.perm == "x":
                raise DFAError(f"{change.path} has an ACL of its own (getfacl {change.path}): add "
                               f"`group:{GROUP}:--x` to it by hand, or keep Python outside it")  # fmt: skip
            with open(folder / BACKUP_NAME, "a") as backup:
                backup.write(before + "\n")
            _run(change.command())
            done.append(asdict(change))
            lines.append(" ".join(change.command()) + f"   # {change.why}")
    finally:
        record["changes"] += done
        (folder / RECORD_NAME).write_text(json.dumps(record, indent=1) + "\n")
    if not lines:
        lines.append(f"nothing to change: the fallback sandbox's group {GROUP} can read {', '.join(map(str, targets))}")
    lines.append(f"undo record: {folder / RECORD_NAME}; to undo: dfa sandbox undo, or by hand:")
    lines += [f"  {c}" for c in undo_commands(folder)]
    return lines


def undo_commands(folder: Path | None = None) -> list[str]:
    folder = folder or state_dir()
    record = _load(folder)
    commands = [f"setfacl --restore={folder / BACKUP_NAME}"] if record["changes"] else []
    if record["created_group"]:
        commands.append(f"groupdel {record['group']}")
    return commands + [f"rm {folder / RECORD_NAME} {folder / BACKUP_NAME}"]


def undo(*, folder: Path | None = None) -> list[str]:
    """Put back every ACL that setup changed, and delete the group if setup created it."""
    _require_tools("undo")
    folder = folder or state_dir()
    if not (folder / RECORD_NAME).is_file():
        return [f"nothing to undo: no {folder / RECORD_NAME}"]
    record, lines = _load(folder), []
    if record["changes"]:
        _run(["setfacl", f"--restore={folder / BACKUP_NAME}"])
        lines.append(f"setfacl --restore={folder / BACKUP_NAME}   # {len(record['changes'])} path(s) as before setup")
    if record["created_group"]:
        _run(["groupdel", record["group"]])
        lines.append(f"groupdel {record['group']}")
    for name in (RECORD_NAME, BACKUP_NAME):
        (folder / name).unlink(missing_ok=True)
    try:
        folder.rmdir()  # setup made it; kept if anything else lives there
    except OSError:
        pass
    return lines + [f"removed {folder / RECORD_NAME}"]
