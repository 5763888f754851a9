"""``dfa collect``: downloaded submissions go where nbgrader wants them, ``COURSE/submitted/<student>/<lab>``.

Accepts an LMS zip or a folder, holding either one folder per student (``alice/lab1.ipynb``, Moodle style) or
flat files named after the student (``alice.ipynb``, or Canvas style ``alice_12345_67890_lab1.ipynb``). Other
layouts take a regular expression with a ``student_id`` group (``--pattern``), matched by nbgrader's
``FileNameCollectorPlugin`` against each file's path inside the zip or folder.

No student is dropped without a message, and the exit code says so (cli.py):

- ids are made by ``safe_student_id``; two different names that give the same id (``José``, ``Josè``; two
  Canvas students of the same name, told apart by their LMS user id) are refused, both files named;
- an entry that cannot be read, is over the size cap or is not a notebook is skipped with its reason, and
  the rest is collected;
- entries are copied in chunks of ``CHUNK`` bytes, never held in memory, and never extracted by their own
  name (``../../gradebook.db`` is only a name); files other than ``.ipynb`` are ignored, and a symlink, a
  hard link, a device or a FIFO is refused with one line (inputs.py), never followed;
- a re-collected submission that differs moves to ``submitted/.archive/<student>/<lab>/<UTC time>/``, which
  nbgrader never reads (its ``*`` glob skips dot names), and each submission gets nbgrader's
  ``timestamp.txt``.

Each notebook is saved under the lab's own notebook name (Colab renames files: "Copy of lab1.ipynb").
"""

from __future__ import annotations

import filecmp
import hashlib
import os
import re
import shutil
import tempfile
import unicodedata
import zipfile
import zlib
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import nbformat

from common.errors import DFAError
from common.grading.courses.course import Course
from common.grading.gradebook import inputs, stale

MB = 1024**2
# 250 times the largest lab notebook (course1's, 84 KB without outputs): more is a dumped tensor or a video.
MAX_NOTEBOOK_MB = 20.0
CHUNK = MB
ARCHIVE = ".archive"
# nbgrader's default ``Exchange.timestamp_format`` with its default timezone, UTC; nbgrader's parse_utc reads it
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"
READ_ERRORS = (inputs.RefusedEntry, zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError,
               RuntimeError)
# Tried in order; the first that matches a file names its student. ``lms_id`` tells same-named students apart.
DEFAULT_PATTERNS = (
    r"^(?P<student_id>[^/]+)/(?:.*/)?(?P<file_id>[^/]+)\.ipynb$",  # alice/lab1.ipynb
    r"^(?P<student_id>[^/_]+)_(?:late_)?(?P<lms_id>\d+)_\d+_(?P<file_id>[^/]+)\.ipynb$",  # Canvas
    r"^(?P<student_id>[^/_]+)_(?P<file_id>[^/]+)\.ipynb$",  # alice_lab1.ipynb
    r"^(?P<student_id>[^/_]+)\.ipynb$",  # alice.ipynb
)


@dataclass
class Collected:
    students: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "file: why"; anything here makes the exit code 1
    notes: list[str] = field(default_factory=list)


@dataclass
class _Entry:
    name: str  # POSIX path inside the zip or folder
    size: int  # as the zip or the file system states it; the copy counts again
    when: datetime  # UTC
    open: Callable


def safe_student_id(raw: str) -> str:
    """Letters, digits, '.', '_' and '-' only (a folder name and a gradebook key); the same name, the same id.

    Accents are dropped (José → Jose). A name with letters that have no ASCII form (王伟, Иван) keeps the rest
    and gets '-' plus 8 hex digits of the name's SHA-256 (``id-`` plus them when nothing is left), so
    different names stay different; an id over 64 characters is cut to 55 plus the same suffix. Empty when
    the name has nothing usable ('..').
    """
    name = unicodedata.normalize("NFC", raw.strip())
    plain = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", plain).strip("._-")
    foreign = any(not c.isascii() and unicodedata.category(c).startswith("L") for c in plain)
    if not foreign and len(cleaned) <= 64:
        return cleaned
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{cleaned[:55].rstrip('._-')}-{digest}" if cleaned else f"id-{digest}"


def _zip_name(info: zipfile.ZipInfo) -> str:
    """Names written as UTF-8 without the zip's UTF-8 flag (macOS does) read as cp437 mojibake: undo that."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except UnicodeError:
        return info.filename


def _zip_time(info: zipfile.ZipInfo) -> datetime:
    """The entry's UTC modification time (extra field 0x5455), else its DOS time, which has no zone, as UTC."""
    extra = info.extra
    while len(extra) >= 4:
        kind, size = int.from_bytes(extra[:2], "little"), int.from_bytes(extra[2:4], "little")
        data, extra = extra[4 : 4 + size], extra[4 + size :]
        if kind == 0x5455 and len(data) >= 5 and data[0] & 1:
            return datetime.fromtimestamp(int.from_bytes(data[1:5], "little", signed=True), UTC)
    return datetime(*info.date_time, tzinfo=UTC)


def _entries(source: Path, stack: ExitStack) -> tuple[list[_Entry], list[str], list[str]]:
    """The .ipynb entries of a zip or folder (a lone top folder dropped from their names), the names of the
    other files, which are ignored, and one line per refused entry (a link, a hard link, a device: inputs.py)."""
    entries, ignored, refused = [], [], []
    if source.is_file() and zipfile.is_zipfile(source):
        archive = stack.enter_context(zipfile.ZipFile(source))
        for info in archive.infolist():
            name = PurePosixPath(_zip_name(info))
            if info.is_dir() or "__MACOSX" in name.parts or ".ipynb_checkpoints" in name.parts:
                continue
            if (info.external_attr >> 16) & 0o170000 == 0o120000:  # a symlink entry: its text is a path
                refused.append(inputs.refusal(name, "a symbolic link"))
                continue
            if name.suffix != ".ipynb":
                ignored.append(str(name))
                continue
            entries.append(_Entry(str(name), info.file_size, _zip_time(info), lambda i=info: archive.open(i)))
    elif source.is_dir():
        for root, dirs, names in os.walk(source):  # links to folders are not followed: they land in dirs
            dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints")
            for entry in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
                path = Path(root, entry)
                name = path.relative_to(source).as_posix()
                info = os.lstat(path)
                why = inputs.entry_problem(info)
                if why:  # a link, a hard link, a device, a FIFO: one line each, never read
                    refused.append(inputs.refusal(name, why))
                    continue
                if path.suffix != ".ipynb":
                    ignored.append(name)
                    continue
                when = datetime.fromtimestamp(info.st_mtime, UTC)
                entries.append(_Entry(name, info.st_size, when, lambda p=path: inputs.open_regular(p)))
    elif source.is_file():
        raise DFAError(f"{source} is not a readable zip file (its directory is missing or damaged)")
    else:
        raise DFAError(f"{source} is neither a zip file nor a folder")
    parts = [PurePosixPath(e.name).parts for e in entries]
    if len({p[0] for p in parts}) == 1 and all(len(p) > 2 for p in parts):
        for entry, p in zip(entries, parts, strict=True):
            entry.name = str(PurePosixPath(*p[1:]))
    return entries, ignored, refused


def _match(name: str, patterns: list[str]) -> dict | None:
    from nbgrader.plugins import FileNameCollectorPlugin

    for pattern in patterns:
        plugin = FileNameCollectorPlugin(named_regexp=pattern)
        plugin.log.disabled = True  # it warns on every non-matching pattern
        groups = plugin.collect(name)
        if groups and groups.get("student_id"):
            return groups
    return None


def _copy(entry: _Entry, dest: Path, cap_mb: float) -> str | None:
    """Copy ``entry`` to ``dest`` in chunks, stopping past ``cap_mb`` MB; why it failed, or None."""
    cap, over = int(cap_mb * MB), f"over the {cap_mb:g} MB limit (--max-notebook-mb)"
    if entry.size > cap:
        return f"{entry.size / MB:.3g} MB, {over}"
    try:
        src = entry.open()
    except READ_ERRORS as exc:
        return f"cannot be read ({type(exc).__name__}: {exc})"
    copied = 0
    with src, dest.open("wb") as out:
        while True:
            try:
                chunk = src.read(CHUNK)
            except READ_ERRORS as exc:  # a damaged entry: bad CRC, bad deflate data, truncated
                return f"cannot be read ({type(exc).__name__}: {exc})"
            if not chunk:
                return None
            copied += len(chunk)
            if copied > cap:  # the zip's stated size was wrong
                return f"more than {cap_mb:g} MB, {over}"
            out.write(chunk)


def _when(groups: dict, entry: _Entry) -> datetime:
    """The submission time: a ``timestamp`` group of --pattern (as nbgrader reads it), else the entry's time."""
    if groups.get("timestamp"):
        from nbgrader.utils import parse_utc

        try:
            return parse_utc(groups["timestamp"]).replace(tzinfo=UTC)
        except (ValueError, OverflowError):
            pass
    return entry.when


def _archive(course: Course, student: str, lab: str) -> Path:
    """Move the earlier ``submitted/<student>/<lab>`` to the archive; its new path."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = course.submitted_dir / ARCHIVE / student / lab
    target, n = base / stamp, 1
    while target.exists():
        target, n = base / f"{stamp}-{n}", n + 1
    target.parent.mkdir(parents=True, exist_ok=True)
    (course.submitted_dir / student / lab).rename(target)
    return target


def _choose(course: Course, lab: str, entries: list[_Entry], patterns: list[str], report: Collected) -> dict:
    """student id → (entry, its match groups): one notebook per student; refused and unnamed ones reported."""
    by_id: dict[str, list[tuple[tuple[str, str], _Entry, dict]]] = {}
    for entry in sorted(entries, key=lambda e: e.name):
        groups = _match(entry.name, patterns)
        student = safe_student_id(groups["student_id"]) if groups else ""
        if not student:
            report.skipped.append(f"{entry.name}: no student id in its name (give --pattern)")
            continue
        who = (unicodedata.normalize("NFC", groups["student_id"].strip()), groups.get("lms_id") or "")
        by_id.setdefault(student, []).append((who, entry, groups))
    chosen = {}
    for student, found in sorted(by_id.items()):
        people = {}
        for who, entry, _ in found:
            people.setdefault(who, entry.name)
        if len(people) > 1:
            names = [f"{n} ({w[0]!r}{f', LMS id {w[1]}' if w[1] else ''})" for w, n in people.items()]
            report.skipped.append(
                f"{' and '.join(names)}: different students with the same id {student!r}; neither collected: "
                "rename one, or give --pattern a student_id that tells them apart"
            )
            continue
        best = min(found, key=lambda f: (lab not in PurePosixPath(f[1].name).name, f[1].name))
        if len(found) > 1:
            others = ", ".join(f[1].name for f in found if f is not best)
            report.notes.append(f"{student}: several notebooks; kept {best[1].name}, not {others}")
        chosen[student] = best[1:]
    return chosen


def collect(
    course: Course, lab: str, source: Path, *, pattern: str | None = None, max_notebook_mb: float = MAX_NOTEBOOK_MB
) -> Collected:
    lab = course.require_lab(lab)  # a unique prefix names the lab
    if pattern and "(?P<student_id>" not in pattern:
        raise DFAError("--pattern needs a (?P<student_id>...) group")
    if not max_notebook_mb > 0:
        raise DFAError(f"--max-notebook-mb must be above 0, got {max_notebook_mb}")
    patterns = [pattern] if pattern else list(DEFAULT_PATTERNS)
    report = Collected()
    changed = False
    with course.lock(f"dfa collect {lab}"), ExitStack() as stack:
        entries, ignored, refused = _entries(source, stack)
        report.skipped += refused
        if ignored:
            more = f" and {len(ignored) - 5} more" if len(ignored) > 5 else ""
            report.notes.append(f"ignored {len(ignored)} file(s) that are not notebooks: "
                                f"{', '.join(ignored[:5])}{more}")  # fmt: skip
        chosen = _choose(course, lab, entries, patterns, report)
        course.submitted_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".dfa-incoming-", dir=course.submitted_dir))
        stack.callback(shutil.rmtree, staging, ignore_errors=True)
        for student, (entry, groups) in sorted(chosen.items()):
            incoming = staging / student
            incoming.mkdir()
            notebook = incoming / f"{lab}.ipynb"
            problem = _copy(entry, notebook, max_notebook_mb)
            if problem is None:
                try:
                    nbformat.read(notebook, as_version=4)
                except Exception as exc:  # not UTF-8, not JSON, not a notebook
                    problem = f"not a readable notebook ({type(exc).__name__})"
            if problem:
                report.skipped.append(f"{entry.name}: {problem}")
                continue
            target = course.submitted_dir / student / lab
            earlier = target / f"{lab}.ipynb"
            if earlier.is_file() and filecmp.cmp(earlier, notebook, shallow=False):
                report.notes.append(f"{student}: unchanged since the last collect")
                report.students.append(student)
                continue
            (incoming / "timestamp.txt").write_text(_when(groups, entry).strftime(TIMESTAMP_FORMAT) + "\n")
            if target.exists():
                kept = _archive(course, student, lab)
                report.notes.append(f"{student}: replaced; the earlier submission is kept in "
                                    f"{kept.relative_to(course.root)}")  # fmt: skip
            target.parent.mkdir(parents=True, exist_ok=True)
            incoming.rename(target)
            # until it is graded, the gradebook's scores (if any) are the earlier notebook's (stale.py)
            stale.mark(course, lab, student, f"collected {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, not graded since")
            report.students.append(student)
            changed = True
    grades = course.root / "grades" / "grades.csv"
    if changed and grades.is_file():
        report.notes.append(f"{grades.relative_to(course.root)} predates this collect: "
                            "run `dfa autograde` and `dfa grades` again to update it")  # fmt: skip
    return report
