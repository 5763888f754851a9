"""What the Coursera and Gradescope graders share.

- the learner's notebook (``find_notebook``): exactly one ``.ipynb``, readable as a notebook;
- a ``Budget``: the platform's time and memory for one container, turned into the sandbox's ``Limits`` so that a
  notebook that hits every limit (and its retry at doubled time limits) still ends before the platform's
  deadline, and a memory bomb meets the kernel's limit before the container's;
- ``grade``: ``grade_one`` in a child process that the platform's entry stops at the deadline. The entry (this
  parent) alone writes the platform's result files, after the child has ended: no process of the submission is
  left to change them, bubblewrap never shows them (``visible_in_sandbox``), and a sandbox without namespaces
  (the fallback's other user) can neither read the course sources nor write there (``close_to_others``);
- the grade ids of a lab's cells, with their section, and whether they hold hidden tests or a written answer;
- what an export copies: the package's source and a course's lab sources.

Run as ``python -m common.grading.platforms.shared SPEC`` it is that child.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from common.errors import DFAError

GB = 1024**3
# After the grading child is stopped, time to write the result files before the platform's own deadline.
MARGIN_S = 60
# Release, prepare and score around the notebook's run: 37-44 s measured on one CPU of a 2-core machine at load 6
# (docs/instructors.md, "Grading on Coursera and Gradescope"); twice that, for a slower platform CPU.
OVERHEAD_S = 90
# A platform's container has its CPU to itself, so only a slower CPU than the reference stretches the time limits.
PLATFORM_MAX_LOAD = 1.5
# Memory outside the kernel's limit: the grader's Python processes (nbgrader, the runner) and the two scratch tmpfs.
RESERVE_GB = 1.5
SCRATCH_BYTES = 256 * 1024**2
MIN_KERNEL_GB = 2  # limits.py: below 2 GB, importing torch fails
MIN_NOTEBOOK_S = 30


BROKEN = "The grader failed before it could grade your notebook. This is not your fault: tell the course staff."
MISCONFIGURED = "The grader is set up wrongly, so it did not grade your notebook. This is not your fault: tell the " \
                "course staff."


class GradingFailed(Exception):
    """No grade: ``learner`` is what the learner reads (what to do next), ``detail`` goes to the grader's log."""

    def __init__(self, learner: str, detail: str = ""):
        super().__init__(learner)
        self.learner, self.detail = learner, detail or learner


@dataclass(frozen=True)
class Budget:
    timeout_s: int  # the platform's limit on one container's run
    memory_gb: float  # the container's memory

    def __post_init__(self):
        if self.memory_gb - RESERVE_GB < MIN_KERNEL_GB:
            raise DFAError(f"memory {self.memory_gb:g} GB is too small: the grader needs at least "
                           f"{RESERVE_GB + MIN_KERNEL_GB:g} GB ({MIN_KERNEL_GB} GB for the notebook)")
        if self.notebook_s < MIN_NOTEBOOK_S:
            shortest = MARGIN_S + OVERHEAD_S + MIN_NOTEBOOK_S * self.runs
            raise DFAError(f"timeout {self.timeout_s} s is too short: a notebook needs at least {shortest} s")

    @property
    def deadline_s(self) -> float:
        """Seconds after the grader starts by which the grading child must be stopped."""
        return self.timeout_s - MARGIN_S

    @property
    def runs(self) -> float:
        """Notebook times the deadline must hold: a run, its retry at doubled limits, each stretched by load."""
        from common.grading.sandbox.limits import RETRY_TIME_SCALE

        return (1 + RETRY_TIME_SCALE) * PLATFORM_MAX_LOAD

    @property
    def notebook_s(self) -> int:
        return int((self.deadline_s - OVERHEAD_S) / self.runs)

    def limits(self, cell_timeout_s: int):
        from common.grading.sandbox.limits import Limits

        return Limits(cell_timeout_s=min(cell_timeout_s, self.notebook_s), notebook_timeout_s=self.notebook_s,
                      memory_bytes=int((self.memory_gb - RESERVE_GB) * GB), scratch_bytes=SCRATCH_BYTES,
                      max_load_factor=PLATFORM_MAX_LOAD)


def _notebooks(folder: Path) -> list[Path]:
    """The ``.ipynb`` entries under ``folder``, walked without following links (hidden folders skipped); a link
    or any other entry that is not a regular, singly linked file is GradingFailed (inputs.py)."""
    from common.grading.gradebook import inputs

    found = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names) + [d for d in dirs if d.endswith(".ipynb")]:
            path = Path(root, name)
            if not name.endswith(".ipynb") or name.startswith("."):
                continue
            why = inputs.entry_problem(os.lstat(path))
            if why:
                raise GradingFailed(f"{path.relative_to(folder)} is {why.split(' (')[0]}, not a notebook file: submit "
                                    "the lab's .ipynb file itself (download it from Jupyter or Colab).",
                                    inputs.refusal(path, why))
            found.append(path)
    return sorted(found)


def find_notebook(folder: Path) -> Path:
    """The one notebook in ``folder`` (hidden folders such as .ipynb_checkpoints aside), or GradingFailed."""
    if folder.is_symlink() or not folder.is_dir():
        raise GradingFailed("No submission arrived at the grader: submit the lab's notebook (.ipynb) again.",
                            f"no folder {folder} (or a link)")
    found = _notebooks(folder)
    if not found:
        raise GradingFailed("Your submission holds no notebook: submit the lab's .ipynb file.")
    names = ", ".join(str(p.relative_to(folder)) for p in found)
    if len(found) > 1:
        raise GradingFailed(f"Your submission holds {len(found)} notebooks ({names}): submit only the lab's one.")
    try:
        nb = json.loads(found[0].read_text(encoding="utf-8"))
        readable = isinstance(nb, dict) and isinstance(nb.get("cells"), list)
    except (UnicodeDecodeError, ValueError):
        readable = False
    if not readable:
        raise GradingFailed(f"{names} is not a Jupyter notebook: in Jupyter or Colab, use File > Download .ipynb "
                            "and submit that file.")
    return found[0]


@dataclass(frozen=True)
class LabCell:
    grade_id: str
    section: str  # the "## ..." heading above it
    hidden: bool  # holds hidden tests
    manual: bool  # a written answer, graded by hand


def lab_cells(course, lab: str) -> dict[str, LabCell]:
    """The graded cells of ``lab``'s source notebook, by grade id."""
    import nbformat

    from common.grading.courses import regions, standard

    cells, section = {}, ""
    for cell in nbformat.read(course.source_notebook(lab), as_version=4).cells:
        if cell.cell_type == "markdown":
            headings = [ln[3:].strip() for ln in cell.source.splitlines() if ln.startswith("## ")]
            section = headings[-1] if headings else section
        meta = standard.nbgrader_meta(cell)
        if meta.get("grade"):
            cells[meta["grade_id"]] = LabCell(meta["grade_id"], section,
                                              regions.REGIONS["hidden tests"][0] in cell.source,
                                              standard.is_manual_answer(cell))
    return cells


def visible_in_sandbox(path: Path) -> bool:
    """Whether a sandbox could see ``path``: it lies in a folder the sandbox binds (the superset, no ``protect``)."""
    from common.grading.sandbox.sandbox import SYSTEM_DIRS, package_dir, python_env_dirs

    binds = [*python_env_dirs(), *(Path(d).resolve() for d in SYSTEM_DIRS), package_dir()]
    target = path.resolve()
    return any(target.is_relative_to(b) for b in binds)


def close_to_others(private: list[Path], outputs: list[Path]) -> None:
    """As root, close ``private`` (the course sources: hidden tests) to every other user, and let no other user
    write in ``outputs`` (where the result files go). A sandbox without namespaces (the fallback) runs the
    kernel as another user, who sees the machine's files as permissions allow; bubblewrap shows neither."""
    if os.geteuid() != 0:
        return
    for path in private:
        os.chmod(path, 0o700)
    for path in outputs:
        if path.is_dir():
            os.chmod(path, stat.S_IMODE(path.stat().st_mode) & ~0o022)


def status_note(result: dict) -> str:
    """What the learner should know about how the run ended (empty when it completed)."""
    status, message = result["status"], result.get("message") or ""
    notes = {
        "time_limit": "Your notebook ran past a time limit ({m}); the test cells after that count as not run. "
                      "Look for a loop that never ends, or work much bigger than the lab asks for.",
        "kernel_died": "Python stopped while running your notebook ({m}), for instance out of memory; the test "
                       "cells after that count as not run.",
        "error": "Your notebook could not run to its end ({m}); the test cells after that count as not run.",
    }
    return notes[status].format(m=message or "no detail") if status in notes else ""


def review_note(result: dict) -> str:
    """`` [review: ...]`` for the staff when the learner's code used machinery honest lab code never needs
    (tamper.py), else empty: the flag takes no points, it asks a person to read the notebook."""
    flags = result.get("review") or []
    return f"  [review: {', '.join(flags)}: read this notebook]" if flags else ""


def grade(course_dir: Path, lab: str, submission: Path, budget: Budget, started: float) -> dict:
    """``grade_one``'s result for ``submission`` (plus ``feedback_html`` and ``sandbox_mode``), graded in a child
    process that is killed at ``budget``'s deadline (counted from ``started``, a ``time.monotonic`` reading)."""
    remaining = budget.deadline_s - (time.monotonic() - started)
    with tempfile.TemporaryDirectory(prefix="dfa-platform-") as tmp:
        out, log = Path(tmp) / "out", Path(tmp) / "child.log"
        spec = {"course": str(course_dir), "lab": lab, "submission": str(submission), "out": str(out),
                "budget": asdict(budget)}
        with open(log, "wb") as sink:
            child = subprocess.Popen([sys.executable, "-m", "common.grading.platforms.shared", json.dumps(spec)],
                                     stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                     start_new_session=True)
            timed_out = False
            try:
                child.wait(timeout=max(1.0, remaining))
            except subprocess.TimeoutExpired:
                # the sandbox (bubblewrap --die-with-parent) goes down with the child
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                timed_out = True
        sys.stderr.write(log.read_text(encoding="utf-8", errors="replace"))
        if timed_out:
            raise GradingFailed(f"Grading ran out of time (the grader has {budget.timeout_s} s in all), so no test "
                                "was scored. Look for a loop that never ends, or work much bigger than the lab "
                                "asks for.", f"grading child killed after {remaining:.0f} s")
        if (out / "error.json").is_file():
            raise GradingFailed(**json.loads((out / "error.json").read_text(encoding="utf-8")))
        if child.returncode == -signal.SIGKILL:  # not ours: the container's memory limit, most likely
            raise GradingFailed("The grader was stopped while grading, most likely because the notebook used more "
                                "memory than the grader has. Look for tensors much bigger than the lab asks for.",
                                "grading child killed by SIGKILL (the container's OOM killer?)")
        if child.returncode != 0 or not (out / "result.json").is_file():
            raise GradingFailed(BROKEN, f"grading child exited with {child.returncode}")
        result = json.loads((out / "result.json").read_text(encoding="utf-8"))
        page = out / "feedback.html"
        result["feedback_html"] = page.read_text(encoding="utf-8") if page.is_file() else ""
    if result["status"] in ("grading_error", "refused"):
        raise GradingFailed(f"Your notebook could not be graded ({result['message']}): submit the lab's .ipynb as "
                            "Jupyter or Colab saved it.", f"grading_error: {result['message']}")
    return result


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` in one step, so a platform never reads half a result file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():  # a folder where the file goes cannot be replaced by it
        shutil.rmtree(path)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def _child(spec: dict) -> int:
    from common.grading.courses.course import Course
    from common.grading.gradebook.grade_one import grade_one
    from common.grading.sandbox.limits import Limits
    from common.grading.sandbox.sandbox import Sandbox, SandboxUnavailable

    out = Path(spec["out"])
    out.mkdir(parents=True)
    course = Course(Path(spec["course"]))
    limits = Budget(**spec["budget"]).limits(int(course.config.Execute.get("timeout", Limits.cell_timeout_s)))
    sandbox = Sandbox(limits)
    try:
        sandbox.check_available()
    except SandboxUnavailable as exc:
        error = {"learner": "The grader cannot isolate your code on this machine, so it did not run it. This is "
                            "not your fault: tell the course staff.", "detail": str(exc)}
        (out / "error.json").write_text(json.dumps(error), encoding="utf-8")
        return 0
    # A Sandbox that chooses among several ways to isolate says which in ``mode`` (and ``describe()``); one
    # without them has only bubblewrap.
    mode = getattr(sandbox, "mode", "bubblewrap")
    how = sandbox.describe() if hasattr(sandbox, "describe") else mode
    print(f"dfa grader: sandbox {how}; limits {limits}", file=sys.stderr, flush=True)
    result = grade_one(spec["lab"], Path(spec["submission"]), out, limits=limits, courses=[course])
    result["sandbox_mode"] = mode
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


# ---- exports ---
def prepare_out(out: Path, force: bool) -> None:
    """``out`` exists and is empty afterwards; an existing non-empty one only with ``force``."""
    if out.exists() and not out.is_dir():
        raise DFAError(f"{out} is a file: name a folder for the export")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise DFAError(f"{out} is not empty: name an empty folder, or pass --force to replace what it holds")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def copy_package(dest: Path) -> None:
    """The package's source (``common``, ``pyproject.toml``, ``README.md``) into ``dest``, for ``pip install -e``.

    Editable, because the sandbox binds the folder holding ``common`` read-only and refuses one that holds the
    Python environment: a package installed inside the environment's site-packages would hide the environment.
    """
    from common.grading.sandbox.sandbox import package_dir

    root = package_dir().parent
    if not (root / "pyproject.toml").is_file():
        raise DFAError(f"{root} is not the project's checkout (no pyproject.toml): export from a `pip install -e .`")
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(root / name, dest / name)
    shutil.copytree(root / "common", dest / "common",
                    ignore=lambda d, names: [n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))])


def copy_course(course, labs: list[str], dest: Path) -> Path:
    """The course's ``nbgrader_config.py`` and the sources of ``labs`` into ``dest/<course>``; returns that folder."""
    from common.grading.courses.course import CONFIG_FILE

    target = dest / course.name
    (target / "source").mkdir(parents=True)
    shutil.copy2(course.root / CONFIG_FILE, target / CONFIG_FILE)
    for lab in labs:
        if not course.source_notebook(lab).is_file():
            raise DFAError(f"{course.name}/{lab} has no source notebook: run `dfa release {course.name}`")
        shutil.copytree(course.source_dir / lab, target / "source" / lab,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    return target


if __name__ == "__main__":
    sys.exit(_child(json.loads(sys.argv[1])))
