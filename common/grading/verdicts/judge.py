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
   passed, one error saying why when it did not. nbgrader scores those outputs.

No part of a verdict is computed where learner code runs, so nothing the learner's code does in the kernel
(rebinding names, mutating arguments, lying ``__eq__``, hijacking a channel) reaches a judgement: at most it
sends wrong data, which the judgement compares with references it made itself.
"""

from __future__ import annotations

import contextlib
import io
import sys
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


def _failure_line(exc: AssertionError, grade_id: str) -> str:
    """What the learner reads of a failed judgement: which check failed, never the value it expected (a
    learner who resubmits would copy it). ``grader.assert_*`` name their check: "hidden test 'NAME' failed: WHAT";
    an instructor's own ``assert`` message is shown as written, up to its first colon."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    head = text.split(":", 1)[0].strip()[:MAX_MESSAGE]
    return head or f"hidden test {grade_id} failed"


def verdict(judgement: Judgement, record: dict | None, *, answers: str | None, salt: str = "",
            student: str = "") -> list:  # fmt: skip
    """A test cell's outputs: ``[]`` when its judgement passed on the probe's data, else one error."""
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
    try:
        with _answers_module(answers, salt, student), contextlib.redirect_stdout(sink):
            exec(compile(judgement.source, f"<judgement {judgement.grade_id}>", "exec"), namespace)  # noqa: S102
    except AssertionError as exc:
        return [_error("AssertionError", _failure_line(exc, judgement.grade_id))]
    except Exception as exc:  # noqa: BLE001 (data of the wrong shape fails the test, never the grader)
        return [_error(type(exc).__name__, f"the grader's check of your results failed: {str(exc)[:MAX_MESSAGE]}")]
    return []


def judge_execution(execution, judgements: dict[int, Judgement], *, answers: str | None, salt: str,
                    student: str) -> None:  # fmt: skip
    """Replace each judged test cell's outputs in ``execution`` (sandbox_events.Execution) with its verdict.
    A cell the run never reached keeps no record (the score step says it did not run)."""
    for index, judgement in judgements.items():
        record = execution.cells.get(index)
        if record is None:
            continue
        shown = [_as_feedback(o) for o in record.get("outputs", []) if isinstance(o, dict)]
        record["outputs"] = shown + verdict(judgement, record, answers=answers, salt=salt, student=student)
        record.pop("probe", None)


def probe_payloads(outputs: list) -> list[str]:
    """The probe data among a cell's outputs (display data of ``PROBE_MIME``)."""
    found = []
    for output in outputs:
        data = output.get("data") if isinstance(output, dict) else None
        if isinstance(data, dict) and isinstance(data.get(PROBE_MIME), str):
            found.append(data[PROBE_MIME])
    return found
