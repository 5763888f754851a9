"""One notebook's final run in a sandbox, shared by both executors (threads and Dask workers): a run that hits a
time limit is retried once at doubled limits (``RETRY_TIME_SCALE``), and a sandbox failure becomes that
submission's error instead of the whole run's."""
from __future__ import annotations

from pathlib import Path

from common.grading.gradebook import inputs
from common.grading.sandbox.limits import RETRY_TIME_SCALE
from common.grading.sandbox.sandbox import Execution, Sandbox


def _run_once(sandbox: Sandbox, folder: Path, notebook: str, time_scale: float) -> Execution:
    try:
        return sandbox.run(folder, notebook, time_scale=time_scale)
    except OSError as exc:
        if inputs.is_disk_full(exc):  # the grader's disk, not the learner's doing: not scored (grading_error)
            raise
        return Execution(status="error", message=f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a sandbox failure is this submission's error, not the whole run's
        return Execution(status="error", message=f"{type(exc).__name__}: {exc}")


def run_notebook(sandbox: Sandbox, folder: Path, notebook: str) -> Execution:
    """One notebook's final execution: a run that hits a time limit is retried once at doubled limits.

    The load factor only follows the load at a run's start; the retry covers load that comes later (another
    worker's fork bomb, a colleague's build). The second run counts whatever it gives: re-running is fair
    to the learner, since the notebook starts from scratch.
    """
    first = _run_once(sandbox, folder, notebook, 1.0)
    if first.status != "time_limit":
        return first
    second = _run_once(sandbox, folder, notebook, RETRY_TIME_SCALE)
    second.retried, second.seconds = True, round(first.seconds + second.seconds, 2)
    second.load_factor = max(first.load_factor, second.load_factor)
    if second.status == "completed":
        second.message = f"completed when retried at doubled time limits (first run: {first.message})"
    else:
        second.message += " (retried once at doubled time limits)"
    return second
