"""The grader's half of a hidden test: take the judgements out before the sandbox, judge the probes' data after.

Every autograded test cell holds, in its hidden-test region, a probe and a judgement separated by a
``### JUDGEMENT`` line (probe.py has the format). Around one submission's sandbox run:

1. ``take_out(nb, ...)`` (trusted parent, on the prepared notebook) keeps each probe in the notebook, with this
   learner's seed set in its first line and ``probe.finish()`` as its last, and returns the judgements. The
   notebook that enters the sandbox (or goes to a Dask worker) holds no judgement, no answer key, no salt.
2. The runner executes each probe in the learner's kernel (runner.py) and reports the data it printed.
3. ``judge_execution(...)`` (trusted parent) decodes each test's data (probe.decode: checked by type and
   size), runs the judgement in a fresh namespace with the answer key built here, and appends its verdict to
   the cell's outputs (the visible checks' feedback, every error turned into text): nothing more when it
   passed, one error saying why when it did not. nbgrader scores those outputs. A judgement has a wall-time
   limit (``JUDGEMENT_TIMEOUT_S``, stretched by the run's load factor like the sandbox's limits): one that
   runs past it fails its test ("judgement timed out after N s") and grading goes on (``run_limited``).

No part of a verdict is computed where learner code runs, so nothing the learner's code does in the kernel
(rebinding names, mutating arguments, lying ``__eq__``, hijacking a channel) reaches a judgement: at most it
sends wrong data, which the judgement compares with references it made itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import math
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from nbformat.v4 import new_output

from common.grading.courses.regions import REGIONS
from common.grading.courses.standard import is_autograded_test, nbgrader_meta
from common.grading.verdicts import answerkeys
from common.grading.verdicts.probe import PROBE_MIME, ProbeDataError, Received, decode, variant_seed

BEGIN_HIDDEN, END_HIDDEN = REGIONS["hidden tests"]
JUDGEMENT = "### JUDGEMENT"
SEED_LINE = "__import__('os').environ['DFA_PROBE_SEED'] = '{seed}'  # this learner's variant, set by the grader"
FINISH_LINE = "probe.finish()  # hands the data to the grader"
MAX_MESSAGE = 300  # characters of a failed judgement's message kept in the feedback
# Wall time one judgement may take on an idle machine. A judgement compares at most 1 MiB of decoded data with
# references it rebuilds (a few simulator runs at most). Measured on the 2-core reference VM at load 3 (Lab 1
# and Lab 6 graded from source): the slowest took 2.2 s, the first of its run (torch and the simulators
# imported), the rest under 1.7 s. 30 s leaves more than ten times that; a judgement that never ends then costs
# this much per submission (times the load factor) instead of stalling `dfa autograde`.
JUDGEMENT_TIMEOUT_S = 30
# The clamp of the load factor, as sandbox/limits.py's Limits.max_load_factor (this group may not import it;
# tests/test_grading_judge.py checks they agree): a run's factor only ever raises the limit, at most this much.
MAX_LOAD_FACTOR = 4.0
STOP_GRACE_S = 5  # how long a judgement thread past its limit gets to stop once interrupted


@dataclass
class Judgement:
    """One test cell's grader half: its judgement's source ("" when the cell has none) and its seed."""

    grade_id: str
    source: str
    seed: int


def split_hidden(source: str) -> tuple[str, str, str]:
    """``(cell without its hidden region's judgement, probe, judgement)`` of a test cell's source. The probe
    and judgement of every hidden region are joined; the first value keeps the hidden markers and the probe."""
    kept, probe, judgement = [], [], []
    where = "visible"
    for line in source.splitlines():
        if BEGIN_HIDDEN in line:
            where = "probe"
        elif END_HIDDEN in line:
            where = "visible"
        elif where == "probe" and line.strip() == JUDGEMENT:
            where = "judgement"
            continue
        if where == "judgement":
            judgement.append(line)
            continue
        kept.append(line)
        if where == "probe" and BEGIN_HIDDEN not in line:
            probe.append(line)
    return "\n".join(kept), "\n".join(probe), "\n".join(judgement)


def probe_cell_source(probe: str, seed: int) -> str:
    """What the kernel runs as a test's probe: this learner's seed first, ``probe.finish()`` last."""
    return "\n".join([SEED_LINE.format(seed=seed), probe, FINISH_LINE]) if probe.strip() else ""


def parts(source: str) -> tuple[str, str, str]:
    """``(visible checks, probe, judgement)`` of a test cell's source."""
    kept, probe, judgement = split_hidden(source)
    visible, hidden = [], False
    for line in kept.splitlines():
        if BEGIN_HIDDEN in line or END_HIDDEN in line:
            hidden = BEGIN_HIDDEN in line
        elif not hidden:
            visible.append(line)
    return "\n".join(visible), probe, judgement


def take_out(nb, *, salt: str, lab: str, student: str) -> dict[int, Judgement]:
    """Remove the judgements from ``nb``'s test cells in place and set each probe's seed; return them by
    cell index."""
    judgements = {}
    for index, cell in enumerate(nb.cells):
        if not is_autograded_test(cell):
            continue
        grade_id = str(nbgrader_meta(cell).get("grade_id", index))
        seed = variant_seed(salt, lab, student, grade_id)
        kept, probe, judgement = split_hidden(cell.source)
        lines, out = kept.splitlines(), []
        for line in lines:
            if END_HIDDEN in line and probe.strip():
                out.append(FINISH_LINE)
            out.append(line)
            if BEGIN_HIDDEN in line:
                out.append(SEED_LINE.format(seed=seed))
        cell.source = "\n".join(out)
        judgements[index] = Judgement(grade_id, judgement if judgement.strip() else "", seed)
    return judgements


def _as_feedback(output: dict) -> dict:
    """The kernel's own output of a test cell (its visible checks), kept for the learner; an error or stderr
    becomes stdout text, so no output of the learner's kernel decides the grade (the runner does this too)."""
    if output.get("output_type") == "error":
        return new_output("stream", name="stdout", text=f"{output.get('ename', '')}: {output.get('evalue', '')}\n")
    if output.get("output_type") == "stream" and output.get("name") != "stdout":
        return new_output("stream", name="stdout", text=str(output.get("text", "")))
    return output


def _error(ename: str, evalue: str):
    return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _probe_problem(record: dict | None) -> tuple[str | None, str]:
    """(the one payload of a test cell's probe, or None; why not)."""
    probe = (record or {}).get("probe")
    if not isinstance(probe, dict):
        return None, "its probe did not run"
    payloads = probe.get("data")
    if probe.get("timed_out"):
        return None, "its probe ran past the cell's time limit"
    if isinstance(payloads, list) and len(payloads) == 1 and isinstance(payloads[0], str):
        return payloads[0], ""
    error = probe.get("error")
    if isinstance(error, str) and error:
        return None, f"your code raised {error[:500]} when the grader's probe called it"
    if isinstance(payloads, list) and len(payloads) > 1:
        return None, "its probe's data was sent more than once"
    return None, "its probe sent no data"


@contextlib.contextmanager
def _answers_module(answers: str | None, salt: str, student: str):
    """``answers`` importable by the judgement (``from answers import ...``), built here, for its run only."""
    module = answerkeys.build_module({"answers": answers, "salt": salt, "student": student}) if answers else None
    saved = sys.modules.get(answerkeys.MODULE)
    if module is not None:
        sys.modules[answerkeys.MODULE] = module
    try:
        yield
    finally:
        if saved is not None:
            sys.modules[answerkeys.MODULE] = saved
        else:
            sys.modules.pop(answerkeys.MODULE, None)


class JudgementTimeout(BaseException):
    """Raised into a judgement past its time limit: a BaseException, so its own ``except Exception`` keeps it."""


def judgement_limit_s(load_factor: float = 1.0) -> int:
    """A judgement's wall-time limit in whole seconds: ``JUDGEMENT_TIMEOUT_S`` times the run's load factor
    (sandbox/limits.py measures it before the learner's code runs), clamped to [1, ``MAX_LOAD_FACTOR``]."""
    return math.ceil(JUDGEMENT_TIMEOUT_S * min(max(float(load_factor), 1.0), MAX_LOAD_FACTOR))


def _with_alarm(run: Callable[[], None], seconds: float) -> None:
    """``run()`` in this (the main) thread; SIGALRM raises ``JudgementTimeout`` into it after ``seconds``, and
    again every second after that should the judgement swallow it (a bare ``except:``)."""

    def expire(signum, frame):
        raise JudgementTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    previous = signal.SIG_DFL if previous is None else previous  # None: a handler set outside Python
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
        try:
            run()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)


def _in_thread(run: Callable[[], None], seconds: float) -> None:
    """``run()`` in a thread of its own, waited for ``seconds``; past that, ``JudgementTimeout`` is raised into
    it (CPython's PyThreadState_SetAsyncExc, seen at its next bytecode) and here. A thread stuck in one C call
    stays behind as a daemon until that call returns; its judgement has failed by then."""
    outcome: dict[str, BaseException] = {}

    def target():
        try:
            run()
        except BaseException as exc:  # noqa: BLE001 (handed to the caller's thread)
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="dfa-judgement", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        with contextlib.suppress(AttributeError):  # no ctypes.pythonapi outside CPython
            stop = ctypes.pythonapi.PyThreadState_SetAsyncExc
            stop(ctypes.c_ulong(worker.ident), ctypes.py_object(JudgementTimeout))
        worker.join(STOP_GRACE_S)
        raise JudgementTimeout
    if "error" in outcome:
        raise outcome["error"]


def run_limited(run: Callable[[], None], seconds: float) -> None:
    """``run()``, raising ``JudgementTimeout`` once it has run ``seconds``; its own exceptions pass through.
    In the main thread (``dfa autograde``, ``grade-one``) a SIGALRM interval timer (Linux, macOS) interrupts
    it where it runs; elsewhere (a worker thread, Windows, a timer already set) it runs in a thread."""
    main = threading.current_thread() is threading.main_thread()
    if main and hasattr(signal, "setitimer") and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0):
        _with_alarm(run, seconds)
    else:
        _in_thread(run, seconds)


def _failure_line(exc: AssertionError, grade_id: str) -> str:
    """What the learner reads of a failed judgement: which check failed, never the value it expected (a
    learner who resubmits would copy it). ``grader.assert_*`` name their check: "hidden test 'NAME' failed: WHAT";
    an instructor's own ``assert`` message is shown as written, up to its first colon."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    head = text.split(":", 1)[0].strip()[:MAX_MESSAGE]
    return head or f"hidden test {grade_id} failed"


def verdict(judgement: Judgement, record: dict | None, *, answers: str | None, salt: str = "",
            student: str = "", limit_s: float | None = None) -> list:  # fmt: skip
    """A test cell's outputs: ``[]`` when its judgement passed on the probe's data, else one error.
    ``limit_s``: its wall-time limit (default ``judgement_limit_s()``)."""
    if not judgement.source:
        return [_error("NoJudgement", "this test cell has no judgement (instructor: split its hidden tests with "
                                      f"a '{JUDGEMENT}' line); it earns no points")]  # fmt: skip
    payload, why = _probe_problem(record)
    if payload is None:
        return [_error("NotChecked", f"this test cell earned no points: {why}")]
    try:
        data = decode(payload)
    except ProbeDataError as exc:
        return [_error("NotChecked", f"this test cell earned no points: its probe's data was refused ({exc})")]
    namespace = {"__name__": "__judgement__", "probe": Received(data, judgement.seed)}
    sink = io.StringIO()  # a judgement's printed text may name expected values: never shown
    limit = judgement_limit_s() if limit_s is None else limit_s
    try:
        code = compile(judgement.source, f"<judgement {judgement.grade_id}>", "exec")
        with _answers_module(answers, salt, student), contextlib.redirect_stdout(sink):
            run_limited(lambda: exec(code, namespace), limit)  # noqa: S102
    except JudgementTimeout:
        why = f"the judgement timed out after {limit:g} s (the grader's check of your results; tell your instructor)"
        return [_error("JudgementTimeout", f"this test cell earned no points: {why}")]
    except AssertionError as exc:
        return [_error("AssertionError", _failure_line(exc, judgement.grade_id))]
    except Exception as exc:  # noqa: BLE001 (data of the wrong shape fails the test, never the grader)
        return [_error(type(exc).__name__, f"the grader's check of your results failed: {str(exc)[:MAX_MESSAGE]}")]
    return []


def judge_execution(execution, judgements: dict[int, Judgement], *, answers: str | None, salt: str,
                    student: str) -> None:  # fmt: skip
    """Replace each judged test cell's outputs in ``execution`` (sandbox_events.Execution) with its verdict.
    A cell the run never reached keeps no record (the score step says it did not run). Each judgement's time
    limit follows the run's load factor, as the sandbox's limits do."""
    limit = judgement_limit_s(getattr(execution, "load_factor", 1.0))
    for index, judgement in judgements.items():
        record = execution.cells.get(index)
        if record is None:
            continue
        shown = [_as_feedback(o) for o in record.get("outputs", []) if isinstance(o, dict)]
        record["outputs"] = shown + verdict(
            judgement, record, answers=answers, salt=salt, student=student, limit_s=limit
        )
        record.pop("probe", None)


def probe_payloads(outputs: list) -> list[str]:
    """The probe data among a cell's outputs (display data of ``PROBE_MIME``)."""
    found = []
    for output in outputs:
        data = output.get("data") if isinstance(output, dict) else None
        if isinstance(data, dict) and isinstance(data.get(PROBE_MIME), str):
            found.append(data[PROBE_MIME])
    return found
