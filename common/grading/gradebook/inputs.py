"""What a grading path accepts from a learner: regular files inside the submission folder, copied without
following links; and the one-line error a full disk gives, wherever grading writes.

A submission arrives as files the learner controls, and the grader runs as root on a platform (and often on an
instructor's server). A symbolic link named ``lab1.ipynb`` that points at ``../source/<lab>/<lab>.ipynb``, or a
hard link to a file elsewhere, would be read with the grader's rights before any sandbox starts, and graded (and
shown back in feedback) as if the learner had written it. So every grading path (``dfa collect``, ``dfa
autograde``, ``dfa grade-one``, the Coursera and Gradescope graders, the Dask workers) refuses, with one line
naming it, any entry that is not a regular file with a single link: symlinks, hard links (``st_nlink > 1``),
devices, FIFOs, sockets. Files are opened with ``O_NOFOLLOW`` and checked on the open descriptor, so a link
swapped in between the check and the copy is refused too.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path

from common.errors import DFAError

DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


class RefusedEntry(DFAError):
    """A submission entry that is not a regular file of its own (one line: the entry and why)."""


def entry_problem(info: os.stat_result) -> str | None:
    """Why an entry with this (``lstat``/``fstat``) status is refused, or None for a regular, singly linked file."""
    if stat.S_ISREG(info.st_mode):
        if info.st_nlink > 1:
            return f"a hard link ({info.st_nlink} names for one file: it may be a file from outside the submission)"
        return None
    return next((what for test, what in _KINDS if test(info.st_mode)), "not a regular file")


def refusal(path: Path | str, why: str) -> str:
    return f"refused {path}: {why}; submit the notebook file itself (a copy, not a link)"


def check_tree(folder: Path) -> None:
    """RefusedEntry for the first entry under ``folder`` (walked without following links) that is not a regular,
    singly linked file; folders themselves are walked, not refused. ``folder`` itself must be a real folder."""
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise RefusedEntry(refusal(folder, entry_problem(info) or "not a folder"))
    for root, dirs, names in os.walk(folder):  # os.walk does not follow links to folders; they land in dirs
        for name in sorted(dirs + names):
            path = Path(root, name)
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                continue
            why = entry_problem(info)
            if why:
                raise RefusedEntry(refusal(path, why))


def check_file(path: Path) -> None:
    """RefusedEntry unless ``path`` is a regular, singly linked file (its last component is not followed)."""
    why = entry_problem(os.lstat(path))
    if why:
        raise RefusedEntry(refusal(path, why))


def open_regular(path: Path):
    """``path`` opened for reading without following a link, checked on the descriptor (no check-then-use race)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW on a symlink
            raise RefusedEntry(refusal(path, "a symbolic link")) from None
        raise
    why = entry_problem(os.fstat(fd))
    if why:
        os.close(fd)
        raise RefusedEntry(refusal(path, why))
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def copy_regular(source: Path, dest: Path) -> None:
    """Copy one submitted file, refusing anything ``open_regular`` refuses; ``dest`` is written afresh."""
    with open_regular(source) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out)


# ---- a full disk, named ---
def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def _free(path: str) -> str:
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        usage = shutil.disk_usage(probe)
    except OSError:
        return "free space unknown"
    return f"{usage.free / 1024**2:.0f} MB free of {usage.total / 1024**3:.1f} GB"


def disk_full_message(exc: OSError, fallback: str = ".") -> str:
    """One line: 'disk full: <path>: <free space>; what to do'."""
    path = str(exc.filename or fallback)
    quota = " (over quota)" if exc.errno == errno.EDQUOT else ""
    return (f"disk full{quota}: {path}: {_free(path)}; free some space there (or point TMPDIR elsewhere) and run "
            "the command again: what was recorded before stays recorded")


@contextmanager
def writing(path: Path):
    """Around writes to ``path``: a full disk's OSError without a file name (raised by a flush or close) gets
    ``path``, so ``disk_full_message`` can say where."""
    try:
        yield
    except OSError as exc:
        if is_disk_full(exc) and not exc.filename:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def text_disk_full(text: str) -> bool:
    """Whether an error's text (a log nbgrader captured) is a full disk's."""
    return "No space left on device" in text or "Disk quota exceeded" in text or "[Errno 28]" in text
