"""``dfa collect``: downloaded submissions go where nbgrader wants them, ``COURSE/submitted/<student>/<lab>``.

Accepts an LMS zip or a folder, holding either one folder per student (``alice/lab1.ipynb``, Moodle style) or
flat files named after the student (``alice.ipynb``, or Canvas style ``alice_12345_67890_lab1.ipynb``). Other
layouts take a regular expression with a ``student_id`` group (``--pattern``), matched by nbgrader's
``FileNameCollectorPlugin`` against each file's path inside the zip or folder.

Each student's notebook is saved under the lab's own notebook name (Colab renames files: "Copy of
lab1.ipynb"), after checking it parses as a notebook. Zip members are read in memory, never extracted, so a
member named ``../../gradebook.db`` cannot land anywhere; symlinks and files other than ``.ipynb`` are
ignored.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import nbformat

from common.errors import DFAError
from common.grading.course import Course

MAX_NOTEBOOK_BYTES = 50 * 1024**2
# Tried in order; the first that matches a file names its student.
DEFAULT_PATTERNS = (
    r"^(?P<student_id>[^/]+)/(?:.*/)?(?P<file_id>[^/]+)\.ipynb$",  # alice/lab1.ipynb
    r"^(?P<student_id>[^/_]+)_(?P<file_id>[^/]+)\.ipynb$",  # alice_12345_67890_lab1.ipynb (Canvas)
    r"^(?P<student_id>[^/_]+)\.ipynb$",  # alice.ipynb
)


@dataclass
class Collected:
    students: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "file: why"
    notes: list[str] = field(default_factory=list)


def safe_student_id(raw: str) -> str:
    """Letters, digits, '.', '_' and '-' only: the id becomes a folder name and a gradebook key."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", raw.strip()).strip("._-")
    return cleaned[:64]


def _members(source: Path) -> dict[str, bytes | Path]:
    """Relative POSIX path → content (zip) or file (folder) of every .ipynb; a lone top folder is dropped."""
    found: dict[str, bytes | Path] = {}
    if source.is_file() and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            for info in archive.infolist():
                name = PurePosixPath(info.filename)
                if info.is_dir() or name.suffix != ".ipynb" or "__MACOSX" in name.parts:
                    continue
                if info.file_size > MAX_NOTEBOOK_BYTES:
                    found[str(name)] = b""  # reported as unreadable below
                    continue
                found[str(name)] = archive.read(info)
    elif source.is_dir():
        for path in sorted(source.rglob("*.ipynb")):
            if path.is_file() and not path.is_symlink() and ".ipynb_checkpoints" not in path.parts:
                found[path.relative_to(source).as_posix()] = path
    else:
        raise DFAError(f"{source} is neither a zip file nor a folder")
    tops = {PurePosixPath(name).parts[0] for name in found}
    if len(tops) == 1 and all(len(PurePosixPath(n).parts) > 2 for n in found):
        found = {str(PurePosixPath(*PurePosixPath(n).parts[1:])): v for n, v in found.items()}
    return found


def _match(name: str, patterns: list[str]) -> dict | None:
    from nbgrader.plugins import FileNameCollectorPlugin

    for pattern in patterns:
        plugin = FileNameCollectorPlugin(named_regexp=pattern)
        plugin.log.disabled = True  # it warns on every non-matching pattern
        groups = plugin.collect(name)
        if groups and groups.get("student_id"):
            return groups
    return None


def collect(course: Course, lab: str, source: Path, *, pattern: str | None = None) -> Collected:
    lab = course.require_lab(lab)  # a unique prefix names the lab
    if pattern and "(?P<student_id>" not in pattern:
        raise DFAError("--pattern needs a (?P<student_id>...) group")
    patterns = [pattern] if pattern else list(DEFAULT_PATTERNS)
    report = Collected()
    chosen: dict[str, tuple[str, bytes | Path]] = {}
    for name, content in sorted(_members(source).items()):
        groups = _match(name, patterns)
        student = safe_student_id(groups["student_id"]) if groups else ""
        if not student:
            report.skipped.append(f"{name}: no student id in the name")
            continue
        if student in chosen:
            keep = min((chosen[student][0], name), key=lambda n: (lab not in PurePosixPath(n).name, n))
            report.notes.append(f"{student}: several notebooks; kept {keep}")
            if keep == chosen[student][0]:
                continue
        chosen[student] = (name, content)
    for student, (name, content) in sorted(chosen.items()):
        data = content if isinstance(content, bytes) else content.read_bytes()
        try:
            nbformat.reads(data.decode("utf-8"), as_version=4)
        except Exception as exc:  # not JSON, not a notebook, too big
            report.skipped.append(f"{name}: not a readable notebook ({type(exc).__name__})")
            continue
        folder = course.submitted_dir / student / lab
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{lab}.ipynb"
        if target.exists():
            report.notes.append(f"{student}: replaced the earlier submission")
        target.write_bytes(data)
        report.students.append(student)
    return report
