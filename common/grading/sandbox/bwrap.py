"""The bubblewrap command of a sandbox: what student code can see, and a probe that it can start here.

The sandbox's root is bubblewrap's own tmpfs, remounted read-only once every mount is in place, with read-only
binds of the system (/usr), a few files of /etc and the Python environment (interpreter, site-packages, the
``common`` package). The only writable places are three size-limited tmpfs — the home, /tmp and /dev/shm —
whose sizes add up to the scratch limit (``Limits.scratch_split``). /dev is read-only too (its device nodes
still work). Nothing else of the grading machine is visible: no gradebook, no ``source/``, no other
students, no home directories.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from common.grading.sandbox.limits import Limits

SANDBOX_HOME = "/home/learner"
SUBMISSION_MOUNT = "/submission"
CACHE_MOUNT = "/opt/dfa-cache"
SANDBOX_UID = 1000
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


def package_dir() -> Path:
    """The ``common`` package folder; only it (not the repository around it) is visible in the sandbox."""
    return Path(__file__).resolve().parents[2]


def essential_dirs() -> set[Path]:
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
    candidates = set(essential_dirs()) | {Path(p) for p in site.getsitepackages()}
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        candidates.add(Path(site.getusersitepackages()))
    # The folder around the package is guarded only when it is a checkout: after a plain `pip install .` it is
    # site-packages, which the interpreter needs (guarding it refused every sandbox).
    around = package_dir().parent
    checkout = (around / "pyproject.toml").is_file() or any(around.glob("course*_*"))
    guarded = [Path(p).resolve() for p in (*protect, *([around] if checkout else []))]
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


def read_only_mounts(protect: tuple[Path, ...]) -> list[str]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for f in ETC_FILES:
        args += ["--ro-bind-try", f, f]
    for d in python_env_dirs(protect) + [package_dir()]:
        args += ["--ro-bind", str(d), str(d)]
    return args


def _tmpfs(size: int, path: str) -> list[str]:
    return ["--size", str(size), "--tmpfs", path]


def command(limits: Limits, protect: tuple[Path, ...], *, as_root: bool, submission: Path | None,
            mpl_cache: str | None, env: dict[str, str], inner: list[str]) -> list[str]:  # fmt: skip
    """bwrap's arguments around ``inner`` (the command it runs); ``submission`` is bound read-only."""
    split = limits.scratch_split
    uid = str(SANDBOX_UID)
    args = ["bwrap", "--unshare-all", "--unshare-user", "--uid", uid, "--gid", uid,
            "--hostname", "sandbox", "--die-with-parent", "--new-session"]  # fmt: skip
    if as_root:
        args += ["--cap-drop", "ALL"]
    # The private /tmp comes first: a Python environment or checkout that lives under /tmp (a CI venv) is
    # then bound on top of it instead of being hidden by it.
    args += _tmpfs(split["tmp"], "/tmp") + read_only_mounts(protect)
    args += ["--proc", "/proc", "--dev", "/dev", *_tmpfs(split["shm"], "/dev/shm")]
    args += _tmpfs(split["home"], SANDBOX_HOME)
    if submission is not None:
        args += ["--ro-bind", str(submission), SUBMISSION_MOUNT]
    if mpl_cache:
        args += ["--ro-bind", mpl_cache, f"{CACHE_MOUNT}/matplotlib"]
    # last, once every mount point exists: nothing outside the three tmpfs stays writable
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", SANDBOX_HOME, "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + ["--", *inner]


@lru_cache(maxsize=4)
def probe(protect: tuple[Path, ...]) -> str | None:
    """None when bubblewrap can start a sandbox like ours here, else the reason it cannot."""
    if shutil.which("bwrap") is None:
        return "the bwrap command is not installed"
    probe_command = command(Limits(), protect, as_root=False, submission=None, mpl_cache=None, env={},
                            inner=[sys.executable, "-c", "pass"])  # fmt: skip
    try:
        result = subprocess.run(probe_command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if result.returncode != 0:
        return (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
    return None
