"""A course folder as nbgrader sees it, and how ``dfa`` finds one and talks to nbgrader about it.

Each ``courseN_*`` folder is one nbgrader course: ``nbgrader_config.py`` (course id, gradebook, limits),
``source/<lab>/<lab>.py`` (the lab source, jupytext) and the ``<lab>.ipynb`` it renders,
``release/<lab>/<lab>.ipynb`` (student notebooks,
committed), and — never committed — ``gradebook.db``, ``submitted/``, ``autograded/``, ``feedback/`` and
``grades/``.

One ``dfa`` command at a time changes a course: ``Course.lock`` holds an exclusive ``flock`` on
``COURSE/.dfa.lock`` while autograde, collect or release runs (see ``lock``).
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import sysconfig
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from traitlets.config import Config, PyFileConfigLoader

from common.errors import DFAError, unknown

CONFIG_FILE = "nbgrader_config.py"
COURSE_GLOB = "course*_*"
LOCK_FILE = ".dfa.lock"  # in the course root: nbgrader neither releases nor collects it
_held: dict[Path, int] = {}  # lock file → nesting depth in this process (a locked command may call another)


def repo_root() -> Path:
    """The checkout this package was installed from (``pip install -e .``): it holds the course folders."""
    return Path(__file__).resolve().parents[3]


def _scripts_on_path() -> None:
    """nbgrader runs the ``alembic`` command when it creates a gradebook: make this environment's one findable
    even when ``dfa`` was started by its full path from a virtual environment that is not activated."""
    scripts = sysconfig.get_path("scripts")
    path = os.environ.get("PATH", "")
    if scripts and scripts not in path.split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + path


@contextmanager
def quiet_nbgrader():
    """nbgrader's SQLAlchemy session emits warnings that mean nothing to an instructor: keep stderr clean."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"nbgrader\..*")
        warnings.filterwarnings("ignore", message=r".*not in session.*")
        # notebooks saved by Colab have no cell ids; RestoreCellMetadata gives them the release's
        warnings.filterwarnings("ignore", message=r"Cell is missing an id field")
        yield


def _quiet_logger() -> logging.Logger:
    """nbgrader logs a lot; ``capture_log`` keeps each call's log in its result, so nothing needs printing."""
    log = logging.getLogger("dfa.nbgrader")
    log.propagate = False
    if not log.handlers:
        log.addHandler(logging.NullHandler())
    log.setLevel(logging.INFO)
    return log


@dataclass(frozen=True)
class Course:
    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def source_dir(self) -> Path:
        return self.root / "source"

    @property
    def release_dir(self) -> Path:
        return self.root / "release"

    @property
    def submitted_dir(self) -> Path:
        return self.root / "submitted"

    @property
    def autograded_dir(self) -> Path:
        return self.root / "autograded"

    @property
    def feedback_dir(self) -> Path:
        return self.root / "feedback"

    def labs(self) -> list[str]:
        """Lab ids: folders of ``source/`` that hold a jupytext source or a notebook of the same name."""
        if not self.source_dir.is_dir():
            return []
        return sorted(p.name for p in self.source_dir.iterdir()
                      if (p / f"{p.name}.py").is_file() or (p / f"{p.name}.ipynb").is_file())

    def require_lab(self, lab: str) -> str:
        """The lab ``lab`` names: itself, or the one lab it is a prefix of (``lab1`` -> ``lab1_landscape``).

        Every command that takes a lab resolves it here, so a short name works the same everywhere.
        """
        labs = self.labs()
        if lab in labs:
            return lab
        matches = [name for name in labs if lab and name.startswith(lab)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise DFAError(f"ambiguous lab {lab!r} of {self.name}: matches {', '.join(matches)}; "
                           f"valid: {', '.join(labs)}")
        raise unknown(f"lab of {self.name}", lab, labs or ["(none: add source/<lab>/<lab>.py)"])

    def source_notebook(self, lab: str) -> Path:
        return self.source_dir / lab / f"{lab}.ipynb"

    def release_notebook(self, lab: str) -> Path:
        return self.release_dir / lab / f"{lab}.ipynb"

    @cached_property
    def config(self) -> Config:
        """``nbgrader_config.py`` of this course, with the course root and gradebook pinned to this folder."""
        path = self.root / CONFIG_FILE
        if not path.is_file():
            raise DFAError(f"{self.root} has no {CONFIG_FILE}: it is not an nbgrader course folder")
        config = PyFileConfigLoader(CONFIG_FILE, path=str(self.root)).load_config()
        config.CourseDirectory.root = str(self.root)
        if "db_url" not in config.CourseDirectory:
            config.CourseDirectory.db_url = f"sqlite:///{self.root / 'gradebook.db'}"
        if "course_id" not in config.CourseDirectory:
            config.CourseDirectory.course_id = self.name
        return config

    @property
    def db_url(self) -> str:
        return self.config.CourseDirectory.db_url

    def api(self, overrides: Config | None = None):
        """An ``NbGraderAPI`` for this course; ``overrides`` (a traitlets Config) beat the course config."""
        from nbgrader.apps import NbGraderAPI
        from nbgrader.coursedir import CourseDirectory

        _scripts_on_path()
        config = Config(self.config)
        if overrides is not None:
            config.merge(overrides)
        coursedir = CourseDirectory(config=config)
        return NbGraderAPI(coursedir=coursedir, config=config, log=_quiet_logger())

    def gradebook(self):
        from nbgrader.api import Gradebook

        _scripts_on_path()
        return Gradebook(self.db_url, self.config.CourseDirectory.course_id)

    @contextmanager
    def lock(self, command: str):
        """Hold the course lock while ``command`` (e.g. ``"dfa autograde lab1"``) runs; DFAError if it is held.

        Two commands writing the same gradebook and folders at once would interleave their writes. The lock is
        an exclusive ``flock``, taken without waiting: the kernel drops it when its process ends, however it
        ends, so a killed command never blocks the next one. The file holds its holder's pid, command and
        start time for the error message, and is removed on release.
        """
        path = Path(os.path.realpath(self.root / LOCK_FILE))  # one key however the course was named
        if path in _held:
            _held[path] += 1
            try:
                yield
            finally:
                _held[path] -= 1
            return
        fd = _acquire(path, self.name)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}, {command}, since {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC\n".encode())
        _held[path] = 1
        try:
            yield
        finally:
            del _held[path]
            path.unlink(missing_ok=True)  # while still locked: see _acquire for the race this leaves safe
            os.close(fd)


def _acquire(path: Path, course: str) -> int:
    """An fd of ``path`` holding its flock; a holder that removes the file as we open it makes us retry."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)  # CLOEXEC: sandboxes must not hold it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 300, 0).decode(errors="replace").strip() or "another dfa command, starting"
            os.close(fd)
            raise DFAError(f"{course} is busy ({holder}): wait for it to end; {path} is its lock") from None
        try:
            current = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            return fd
        os.close(fd)  # we locked a file its last holder had already removed


def locked(name: str):
    """Decorator for ``fn(course, lab, ...)``: it runs holding ``course.lock("dfa <name> <lab>")``."""

    def wrap(fn):
        @functools.wraps(fn)
        def run(course: Course, lab: str, *args, **kwargs):
            with course.lock(f"dfa {name} {lab}"):
                return fn(course, lab, *args, **kwargs)

        return run

    return wrap


def find_course(name_or_path: str) -> Course:
    """A course given as a path, or as a folder name under the current directory or the repository root."""
    for candidate in (Path(name_or_path), Path.cwd() / name_or_path, repo_root() / name_or_path):
        if (candidate / CONFIG_FILE).is_file():
            return Course(candidate.resolve())
    raise DFAError(
        f"no course {name_or_path!r}: expected a folder with {CONFIG_FILE}; "
        f"valid: {', '.join(c.name for c in all_courses()) or '(none found)'}"
    )


def all_courses(base: Path | None = None) -> list[Course]:
    """Every ``course*_*`` folder with an nbgrader_config.py under ``base`` (default: cwd, else repo root)."""
    bases = [base] if base else [Path.cwd(), repo_root()]
    for folder in bases:
        found = sorted(p for p in folder.glob(COURSE_GLOB) if (p / CONFIG_FILE).is_file())
        if found:
            return [Course(p.resolve()) for p in found]
    return []


def courses_from_args(names: list[str] | None) -> list[Course]:
    courses = [find_course(n) for n in names] if names else all_courses()
    if not courses:
        raise DFAError("no course folders found (course*_*/nbgrader_config.py); run from the repository root")
    return courses
