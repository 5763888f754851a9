"""``dfa autograde``: grade every submission of a lab, in parallel, each one inside its own sandbox.

nbgrader's ``autograde`` does three things in one process: sanitize the submission (clear outputs, restore
test cells and points from the gradebook), execute it, and save the scores. Here the middle step moves into a
sandbox and the two others stay in this trusted process, which alone opens the gradebook:

1. **prepare** (parent, one at a time) — nbgrader autograde with no execution step: ``RestoreCellMetadata``
   and nbgrader's sanitizing preprocessors write the notebook to be run into ``autograded/<student>/<lab>/``.
2. **execute** (worker threads, ``--workers`` at a time, or Dask workers: executors.py) — each runs that
   folder's notebook in a sandbox (sandbox.py); nothing here touches the gradebook. A run that hits a time
   limit is run once more with doubled limits, and the second run is the one that counts: a busy machine
   should not cost points. A submission whose Dask worker was lost is sent once more, then marked
   ``worker_lost``: not scored, so nbgrader leaves its test cells ungraded and lists it as needing grading.
3. **score** (parent, as each execution finishes) — nbgrader autograde again, ``Execute`` replaced by
   ``MergeSandboxOutputs``: the same sanitized notebook gets the sandbox's outputs, and nbgrader's own
   ``SaveAutoGrades`` records the scores. Each submission's grades are committed before the next one's, so a
   crash or kill loses nothing recorded before it, and running again gives the same grades.

One submission more than there are workers is prepared and queued ahead, so a worker that finishes starts the
next one at once instead of waiting while the parent scores and prepares.
"""

from __future__ import annotations

import json
import shutil
from collections import deque
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from traitlets.config import Config

from common.errors import DFAError
from common.grading.courses.course import Course, locked, quiet_nbgrader
from common.grading.gradebook import inputs, stale, tamper
from common.grading.gradebook.executors import WorkerLost, check_target, open_executions
from common.grading.sandbox.limits import Limits
from common.grading.sandbox.sandbox import Execution, Sandbox, SandboxUnavailable, matplotlib_cache
from common.grading.verdicts import answerkeys, judge

# How each run ended, worst last: a submission shows the worst of its notebooks.
STATUS_ORDER = ("completed", "time_limit", "kernel_died", "error")
NOT_SCORED = ("grading_error", "worker_lost", "refused")  # the gradebook keeps its earlier scores: marked stale


@dataclass
class Graded:
    student: str
    # an execution status (STATUS_ORDER); not scored (NOT_SCORED): "grading_error" (nbgrader or the worker's task
    # failed), "worker_lost" (its Dask worker died twice) or "refused" (an entry that is not a regular file)
    status: str
    score: float = 0.0
    max_score: float = 0.0
    needs_manual_grade: bool = False
    message: str = ""
    seconds: float = 0.0
    review: list[str] = field(default_factory=list)
    load_factor: float = 1.0  # the largest stretch of the wall-time limits among its runs (limits.py)

    def line(self) -> str:
        manual = " (+ manual)" if self.needs_manual_grade else ""
        text = f"{self.student:<24} {self.score:6.1f} / {self.max_score:<6.1f}{manual:<11} {self.status:<13}"
        text += f" {self.seconds:6.1f} s"
        if round(self.load_factor, 1) > 1:  # an idle machine measures a few percent either side of 1
            text += f"  (time limits x{self.load_factor:.1f} for this machine's load)"
        if self.message:
            text += f"  {self.message}"
        if self.review:
            text += f"  [review: {', '.join(self.review)}]"
        return text


@dataclass
class Prepared:
    student: str
    folder: Path
    digests: dict[str, str]  # notebook name → cells_digest of the notebook to execute
    review: list[str]
    judgements: dict[str, dict] = field(default_factory=dict)  # notebook name → {cell index: judge.Judgement}


def submitted_students(course: Course, lab: str) -> list[str]:
    root = course.submitted_dir
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / lab).is_dir() and any((p / lab).glob("*.ipynb")))


def _pipelines(course: Course, results_dir: str) -> tuple[Config, Config]:
    """nbgrader configs for the prepare and the score steps (see the module docstring)."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute

    from common.grading.gradebook.preprocessors import MergeSandboxOutputs, RestoreCellMetadata

    sanitize = [RestoreCellMetadata, *Autograde.sanitize_preprocessors.default()]
    prepare, score = Config(), Config()
    for config in (prepare, score):
        config.RestoreCellMetadata.release_dir = str(course.release_dir)
        config.OverwriteCells.add_missing_cells = True
    prepare.Autograde.sanitize_preprocessors = sanitize
    prepare.Autograde.autograde_preprocessors = []
    score.Autograde.sanitize_preprocessors = [*sanitize, MergeSandboxOutputs]
    score.Autograde.autograde_preprocessors = [
        p for p in Autograde.autograde_preprocessors.default() if p is not Execute
    ]
    score.MergeSandboxOutputs.results_dir = results_dir
    return prepare, score


def _nbgrader_error(result: dict, where: Path) -> str:
    text = result.get("log", "") + "\n" + result.get("error", "")
    if inputs.text_disk_full(text):
        return inputs.disk_full_message(OSError(28, "No space left on device", str(where)))
    lines = [ln.strip() for ln in text.splitlines()]
    useful = [ln for ln in lines if ln and not ln.startswith(("Traceback", "File ", "^", "~"))]
    errors = [ln for ln in useful if "ERROR" in ln or "Error" in ln or "Exception" in ln]
    return (errors or useful or ["unknown nbgrader error"])[0][:300]


def _prepare(api, course: Course, lab: str, student: str, notebooks: list[str], salt: str) -> Prepared | Graded:
    from common.grading.gradebook.preprocessors import cells_digest

    folder = course.autograded_dir / student / lab
    try:  # nbgrader copies the folder following links, as root: a link to the lab's source would be graded
        if (course.submitted_dir / student).is_symlink():
            raise inputs.RefusedEntry(inputs.refusal(course.submitted_dir / student, "a symbolic link"))
        inputs.check_tree(course.submitted_dir / student / lab)
    except inputs.RefusedEntry as exc:
        return Graded(student, "refused", message=str(exc))
    result = api.autograde(lab, student, force=True, create=True)
    if not result["success"]:
        return Graded(student, "grading_error", message=_nbgrader_error(result, folder))
    digests, review, judgements = {}, [], {}
    for name in notebooks:
        path = folder / f"{name}.ipynb"
        if path.is_file():
            nb = nbformat.read(path, as_version=4)
            digests[name] = cells_digest(nb)  # of the notebook the score step rebuilds: judgements included
            review += [flag for flag in tamper.flags(nb) if flag not in review]
            # the judgements stay here; what goes to the sandbox (or a Dask worker) holds only the probes
            judgements[name] = judge.take_out(nb, salt=salt, lab=lab, student=student)
            nbformat.write(nb, path)
    return Prepared(student, folder, digests, review, judgements)


def _score(
    api, course: Course, lab: str, prepared: Prepared, executions: dict[str, Execution], results_dir: Path,
    salt: str,
) -> Graded:
    folder = results_dir / prepared.student
    folder.mkdir(parents=True, exist_ok=True)
    answers = answerkeys.source(course, lab)
    for name, execution in executions.items():
        judge.judge_execution(execution, prepared.judgements.get(name, {}), answers=answers, salt=salt,
                              student=prepared.student)  # here, outside every sandbox and worker
        record = {**execution.to_json(), "digest": prepared.digests[name]}
        (folder / f"{name}.json").write_text(json.dumps(record), encoding="utf-8")
    worst = max(
        executions.values(),
        key=lambda e: STATUS_ORDER.index(e.status) if e.status in STATUS_ORDER else len(STATUS_ORDER),
        default=Execution(status="completed"),
    )
    seconds = sum(e.seconds for e in executions.values())
    result = api.autograde(lab, prepared.student, force=True, create=True)
    if not result["success"]:
        return Graded(prepared.student, "grading_error", message=_nbgrader_error(result, prepared.folder),
                      seconds=seconds)
    with course.gradebook() as gb:
        submission = gb.find_submission(lab, prepared.student)
        graded = Graded(
            prepared.student,
            worst.status,
            float(submission.score),
            float(submission.max_score),
            bool(submission.needs_manual_grade),
            worst.message,  # a completed run has none, unless it needed the retry
            seconds,
            prepared.review,
            max((e.load_factor for e in executions.values()), default=1.0),
        )
    return graded


def assignment_notebooks(course: Course, lab: str) -> list[str]:
    """The lab's notebooks as the gradebook knows them; an error if ``dfa release`` never recorded the lab."""
    from nbgrader.api import MissingEntry

    with course.gradebook() as gb:
        try:
            return [nb.name for nb in gb.find_assignment(lab).notebooks]
        except MissingEntry:
            raise DFAError(
                f"{course.name}/{lab} is not in the gradebook yet: run `dfa release {course.name}`"
            ) from None


def due_dates(course: Course) -> dict[str, str]:
    """``c.Offering.due`` of the course config, ``{lab or a unique prefix: "YYYY-MM-DD HH:MM[:SS] [zone]"}``,
    by lab id."""
    due = course.config.get("Offering", {}).get("due", {}) or {}
    if not isinstance(due, dict):
        raise DFAError(f"c.Offering.due of {course.name} must be a dict {{lab: 'YYYY-MM-DD HH:MM UTC'}}, "
                       f"got {due!r}")
    return {course.require_lab(lab): str(when) for lab, when in due.items()}


def apply_due_date(course: Course, lab: str) -> None:
    """Record the lab's due date (if the course config sets one) in the gradebook, where nbgrader's autograde
    compares each submission's ``timestamp.txt`` with it (late submissions, and a penalty if
    ``c.LateSubmissionPlugin.penalty_method`` asks for one)."""
    from nbgrader.utils import parse_utc

    when = due_dates(course).get(lab)
    if when is None:
        return
    try:
        duedate = parse_utc(when)
    except (ValueError, OverflowError):
        raise DFAError(f"c.Offering.due[{lab!r}] of {course.name}: {when!r} is not a date; "
                       "write e.g. '2026-03-01 23:59:00 UTC'") from None
    with course.gradebook() as gb:
        gb.update_or_create_assignment(lab, duedate=duedate)


@locked("autograde")  # one command at a time per course (Course.lock)
def autograde(
    course: Course,
    lab: str,
    *,
    workers: int = 1,
    limits: Limits | None = None,
    unsafe_no_sandbox: bool = False,
    students: list[str] | None = None,
    report=print,
    scheduler: str | None = None,
    cluster: str | None = None,
    dask_task=None,
    announce=None,
    tls: dict[str, str] | None = None,
) -> list[Graded]:
    """Grade the submissions of ``lab`` (all, or ``students``); ``report`` is called with each result, and
    ``announce`` (if given) once with the sandbox's one-line description, so a fallback is never silent.

    ``scheduler`` (a Dask address) or ``cluster`` (``local:N``) sends the executions to Dask workers instead
    of ``workers`` local threads; ``dask_task`` replaces the function the workers run (tests wrap it); ``tls``
    ({"ca", "cert", "key"} file paths; default Dask's configuration) is the client's certificate for a tls://
    scheduler. A tcp:// scheduler that is not on loopback is refused (executors.check_target).
    """
    check_target(scheduler, cluster, tls)
    lab = course.require_lab(lab)  # a unique prefix names the lab
    notebooks = assignment_notebooks(course, lab)
    apply_due_date(course, lab)
    available = submitted_students(course, lab)
    missing = sorted(set(students or []) - set(available))
    if missing:
        raise DFAError(f"no submission of {lab} for {', '.join(missing)} in {course.submitted_dir}")
    queue = deque(students or available)
    limits = limits or Limits(cell_timeout_s=int(course.config.Execute.get("timeout", Limits.cell_timeout_s)))
    # the folder holding the course folders stays invisible (all courses, not only this one)
    sandbox = Sandbox(limits, isolated=not unsafe_no_sandbox, protect=[course.root.parent])
    if scheduler is None and cluster is None:  # Dask workers check their own sandbox (executors.py)
        sandbox.check_available()
        matplotlib_cache()  # build it once, before the workers start
    if announce is not None:
        announce(sandbox.describe())
    salt = answerkeys.offering_salt(course)  # the learners' variants (judge.take_out): derived here alone
    results_dir = Sandbox.scratch_dir("results")  # named after its owner: swept if this run is killed
    prepare_config, score_config = _pipelines(course, str(results_dir))
    prepare_api, score_api = course.api(prepare_config), course.api(score_config)
    graded: list[Graded] = []

    def done(result: Graded) -> None:
        if result.status in NOT_SCORED:  # the gradebook still holds an earlier notebook's scores, if any
            stale.mark(course, lab, result.student, f"{result.status}: {result.message}"[:300])
        else:
            stale.clear(course, lab, result.student)
        graded.append(result)
        report(result)

    try:
        with quiet_nbgrader():
            pool = open_executions(sandbox, workers, scheduler, cluster, dask_task, tls)
            try:
                running: dict = {}  # future -> (Prepared, attempt, why the first attempt was lost)
                while queue or running:
                    # one ahead of the workers: it starts as soon as one is free (see the module docstring)
                    while queue and len(running) < pool.slots() + 1:
                        prepared = _prepare(prepare_api, course, lab, queue.popleft(), notebooks, salt)
                        if isinstance(prepared, Graded):
                            done(prepared)
                        else:
                            running[pool.submit(prepared.folder, list(prepared.digests))] = (prepared, 1, "")
                    if not running:
                        continue
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        prepared, attempt, lost_first = running.pop(future)
                        try:
                            executions = pool.outcome(future)
                        except WorkerLost as lost:
                            if attempt == 1:
                                running[pool.submit(prepared.folder, list(prepared.digests))] = (prepared, 2,
                                                                                                 str(lost))
                            else:
                                done(Graded(prepared.student, "worker_lost", review=prepared.review,
                                            message=f"its Dask worker was lost twice ({lost}); not graded: "
                                                    f"grade it again with --student {prepared.student}"))  # fmt: skip
                            continue
                        except SandboxUnavailable:  # a worker that cannot isolate would fail the whole queue fast
                            raise
                        except Exception as exc:  # the worker's task failed: say so, grade nothing
                            why = inputs.disk_full_message(exc) if inputs.is_disk_full(exc) else \
                                f"{type(exc).__name__}: {exc}"[:300]
                            done(Graded(prepared.student, "grading_error", review=prepared.review, message=why))
                            continue
                        try:
                            result = _score(score_api, course, lab, prepared, executions, results_dir, salt)
                        except OSError as exc:
                            if not inputs.is_disk_full(exc):
                                raise
                            result = Graded(prepared.student, "grading_error", review=prepared.review,
                                            message=inputs.disk_full_message(exc))
                        if lost_first:  # graded by the resend: say so, the first worker's loss may recur
                            note = f"resent once: its first Dask worker was lost ({lost_first})"
                            result.message = f"{result.message}; {note}" if result.message else note
                        done(result)
            finally:
                pool.close()
    finally:
        shutil.rmtree(results_dir, ignore_errors=True)
    return graded
