"""``dfa check --published OUT``: prove that a student edition holds nothing graded. One line per problem.

Compared with the instructor edition's courses (the lab sources in this repository), ``OUT`` must have:

- every lab's release notebook, at ``courseN_*/release/<lab>/<lab>.ipynb``, and no other notebook;
- no solution, hidden-test or mark-scheme text (``regions``): in a release notebook, any marker or secret
  line of its lab's source, as ``dfa check`` tests the release tree; in any other text file, a marker, or
  ``BLOCK`` consecutive lines that are all secret lines of one lab (single lines such as ``for n in
  gm.graph.nodes:`` are too common in the package to prove anything; a copied solution body is not);
- no lab source or build source: nothing under a course's ``source/``, no ``.py`` file in a course folder
  (jupytext lab sources, ``nbgrader_config.py``), no notebook in text form anywhere (a ``.py`` or ``.md``
  with jupytext's header or nbgrader cell metadata), no ``common/grading/`` (the instructor tooling);
- no answer key or student data: no gradebook or other database, no ``submitted/``, ``autograded/``,
  ``feedback/`` or ``grades/`` folder, no file named like a solution, answer key or mark scheme;
- no salt: no string literal assigned to a name or keyword containing ``salt``, and none of the salt values
  the instructor sources hold;
- no reference of a graded stub: ``common`` defines none of ``grader_only.GRADER_ONLY``'s references;
- Colab badges and install sources that point at the published repository only;
- the licence: ``LICENSE``, the same text as the instructor edition's.

``.git`` is not looked at. ``--execute`` also runs every release notebook in a fresh virtual environment
holding only ``OUT`` (``published_run``).
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import nbformat

from common.grading.authoring import labsource
from common.grading.courses import regions
from common.grading.courses.course import COURSE_GLOB, Course
from common.grading.editions import grader_only

BLOCK = 3
TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".txt",
    ".json",
    ".toml",
    ".cfg",
    ".ini",
    ".yaml",
    ".yml",
    ".html",
    ".csv",
    ".sh",
    ".rst",
    ".tex",
    ".ipynb",
}
ANSWER_KEY_NAMES = (
    "*.db",
    "*.sqlite",
    "*.sqlite3",
    "*solution*",
    "*answer*key*",
    "*answers*",
    "*mark*scheme*",
    "*marking*",
)
STUDENT_FOLDERS = {"submitted", "autograded", "feedback", "grades"}
SALT_LITERAL = re.compile(r"""(?i)\b[\w.]*salt\w*\s*(?::\s*[\w.]+\s*)?=\s*[rbuRBU]?(['"])(?!\1)([^'"\n]+)\1""")
URL_SLUG = re.compile(r"colab\.research\.google\.com/github/([^/\s)\"']+/[^/\s)\"']+)/")
# A notebook in text form: jupytext's YAML header, or percent cells carrying nbgrader metadata.
TEXT_NOTEBOOK = re.compile(r"^\W*jupytext:\s*$|^# %%.*\bnbgrader=", re.MULTILINE)
INSTALL_SLUG = re.compile(r"git\+https://github\.com/([^/\s@\"']+/[^/\s@\"']+?)(?:\.git)?@")


def salt_lines(code: str) -> list[str]:
    """Lines of ``code`` that assign a string literal to a salt (``INSTRUCTOR_SALT = '…'``, ``salt="…"``)."""
    return [line.strip() for line in code.splitlines() if SALT_LITERAL.search(line)]


def _code(path: Path, text: str) -> str:
    """The code of a file: a notebook's cell sources, else the text itself."""
    if path.suffix != ".ipynb":
        return text
    try:
        return "\n".join(c.source for c in nbformat.reads(text, as_version=4).cells)
    except Exception:
        return text


def known_salts(courses: list[Course], package_parent: Path) -> set[str]:
    """Salt values in the instructor edition: each course's offering secret (``c.Offering.salt``,
    answerkeys.py) and literals given to a salt in lab sources and in ``common``."""
    texts = [p for c in courses for p in c.source_dir.rglob("*.py")]
    texts += [p for p in (package_parent / "common").rglob("*.py")]
    values = {str(s) for c in courses if (s := c.config.get("Offering", {}).get("salt")) and len(str(s)) >= 4}
    for path in texts:
        for match in SALT_LITERAL.finditer(path.read_text(encoding="utf-8")):
            if len(match.group(2)) >= 4:
                values.add(match.group(2))
    return values


def _secrets(course: Course, lab: str) -> list[str]:
    return regions.secret_lines(nbformat.read(course.source_notebook(lab), as_version=4))


def _blocks(text: str, secrets: dict[str, str]) -> list[tuple[int, str, str]]:
    """(line number, lab, first line) of each run of ``BLOCK`` or more secret lines of one lab (lines too short
    to be a secret, such as ``else:`` or blank ones, do not break a run)."""
    found, run = [], []  # run: (line number, normalized line, lab)

    def flush():
        if len(run) >= BLOCK:
            found.append((run[0][0], run[0][2], run[0][1]))

    for number, line in enumerate(text.splitlines(), 1):
        normal = regions.normalize(line)
        if len(normal) < regions.MIN_SECRET_LENGTH:  # too short to be a secret line: neither counts nor breaks
            continue
        lab = secrets.get(normal)
        if lab is None or (run and run[0][2] != lab):
            flush()
            run = []
        if lab is not None:
            run.append((number, normal, lab))
    flush()
    return found


def _forbidden(rel: Path) -> str | None:
    """Why a path must not be in the student edition, or None."""
    parts = rel.parts
    if parts[:2] == ("common", "grading"):
        return "instructor tooling (common/grading) is not published"
    in_course = fnmatch.fnmatch(parts[0], COURSE_GLOB) and len(parts) > 1
    if in_course and "source" in parts[1:]:
        return "a lab source folder (solutions and hidden tests)"
    if in_course and rel.suffix == ".py":
        return "a build source (lab .py or nbgrader_config.py)"
    if in_course and STUDENT_FOLDERS & set(parts[1:-1]):
        return "student work or grades"
    if any(fnmatch.fnmatch(rel.name.lower(), pattern) for pattern in ANSWER_KEY_NAMES):
        return "named like an answer key, a solution or a gradebook"
    return None


def _references(out: Path) -> list[str]:
    problems = {}
    for where, stub, reference in grader_only.GRADER_ONLY:
        module, qualname = grader_only.split(reference)
        path = grader_only.module_file(out, module)
        if path is not None and grader_only.defines(path, qualname):
            problems.setdefault(reference, (path.relative_to(out).as_posix(), []))[1].append(f"{where} {stub}")
    return [
        f"{rel}: defines {ref.split(':')[1]}, the reference of graded stub(s) {', '.join(stubs)} "
        "(grader_only.GRADER_ONLY)"
        for ref, (rel, stubs) in problems.items()
    ]


def check_published(out: Path, courses: list[Course], package_parent: Path, repo: str) -> list[str]:
    """Problems of the student edition in ``out`` against the instructor edition's ``courses``."""
    if not out.is_dir():
        return [f"{out}: no such folder (dfa publish writes it)"]
    problems = grader_only.registry_problems(courses, package_parent)
    labs = {labsource.repo_path(c.name, lab): (c, lab) for c in courses for lab in c.labs()}
    problems += [
        f"{rel}: missing (every lab's release notebook is published)" for rel in labs if not (out / rel).is_file()
    ]
    all_secrets: dict[str, str] = {}
    for course, lab in labs.values():
        for line in _secrets(course, lab):
            all_secrets.setdefault(line, f"{course.name}/{lab}")
    salts = known_salts(courses, package_parent)
    for path in sorted(p for p in out.rglob("*") if p.is_file() and ".git" not in p.relative_to(out).parts):
        rel = path.relative_to(out)
        why = _forbidden(rel)
        if why:
            problems.append(f"{rel.as_posix()}: {why}")
        if path.suffix not in TEXT_SUFFIXES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        problems += _text_problems(rel, path, text, labs, all_secrets, salts, repo)
    return problems + _references(out) + _licence_problems(out, package_parent)


def _licence_problems(out: Path, package_parent: Path) -> list[str]:
    from common.grading.editions.published_package import LICENSE_FILE

    theirs, ours = out / LICENSE_FILE, package_parent / LICENSE_FILE
    if not theirs.is_file():
        return [f"{LICENSE_FILE}: missing (the README and pyproject say Apache-2.0; dfa publish copies the licence)"]
    if ours.is_file() and theirs.read_text(encoding="utf-8") != ours.read_text(encoding="utf-8"):
        return [f"{LICENSE_FILE}: differs from the instructor edition's licence text (publish again)"]
    return []


def _text_problems(rel, path, text, labs, all_secrets, salts, repo) -> list[str]:
    where, problems = rel.as_posix(), []
    if path.suffix == ".ipynb":
        if where not in labs:
            problems.append(f"{where}: a notebook that is not a lab's release notebook (a source notebook?)")
            leaks = regions.find_leaks(regions.normalize(text), [])
        else:
            course, lab = labs[where]
            nb = nbformat.reads(text, as_version=4)
            leaks = regions.find_leaks(regions.notebook_text(nb), _secrets(course, lab))
        problems += [f"{where}: solution or hidden-test text: {leak[:80]!r}" for leak in leaks[:5]]
    else:
        if path.suffix in (".py", ".md") and TEXT_NOTEBOOK.search(text):
            problems.append(f"{where}: a notebook in text form (jupytext): a lab source, not published")
        normal = regions.normalize(text)
        problems += [f"{where}: marker {m!r} of a graded region" for m in regions.MARKERS if m in normal]
        problems += [
            f"{where}:{n}: {BLOCK}+ lines of {lab}'s solution or hidden tests, from {line[:60]!r}"
            for n, lab, line in _blocks(text, all_secrets)
        ]
    code = _code(path, text)
    problems += [f"{where}: a salt: {line[:80]!r}" for line in salt_lines(code)]
    problems += [
        f"{where}: holds the salt {value!r}"
        for value in sorted(salts)
        if value in text and not any(value in line for line in salt_lines(code))
    ]
    for pattern, what in ((URL_SLUG, "Colab badge"), (INSTALL_SLUG, "install source")):
        for slug in sorted(set(pattern.findall(text)) - {repo}):
            problems.append(f"{where}: {what} points at {slug}, not the published repository {repo}")
    return problems
