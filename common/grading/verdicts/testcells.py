"""Test cells as the sandbox runs them: the probe apart from the visible checks (judge.py has the whole story).

``split(nb)`` is called on the notebook about to run, whose test cells hold, by then, only their visible
checks and their probe (judge.take_out removed the judgements in the trusted parent). Each autograded test
cell is replaced in ``nb`` by what later cells need of it, and ``split`` returns, per cell index:

* ``probe`` — the hidden region's code: it calls the learner's functions on fresh inputs and prints the
  results as plain data (probe.py); the runner executes it in the kernel on its own;
* ``visible`` — the checks the release shows, which the kernel runs after the probe: their output is the
  learner's feedback (an error there is turned into text, runner.py), and later cells may use their names.
  They earn nothing: only the judgement does, in the grader.
"""

from __future__ import annotations

from common.grading.courses.regions import REGIONS
from common.grading.courses.standard import is_autograded_test

BEGIN_HIDDEN, END_HIDDEN = REGIONS["hidden tests"]


def _python(source: str) -> str:
    """A cell's source without IPython's magics and shell escapes (a probe is plain Python)."""
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))


def segments(source: str) -> list[tuple[bool, str]]:
    """``(hidden, text)`` pieces of a test cell, in order, each valid Python on its own; if a piece is not
    (a hidden region cut through a block), the whole cell as one hidden piece."""
    pieces, hidden, lines = [], False, []
    for line in source.splitlines():
        marker = BEGIN_HIDDEN in line or END_HIDDEN in line
        if marker:
            if lines:
                pieces.append((hidden, "\n".join(lines)))
            hidden, lines = BEGIN_HIDDEN in line, []
        else:
            lines.append(line)
    if lines:
        pieces.append((hidden, "\n".join(lines)))
    pieces = [(h, _python(text)) for h, text in pieces if text.strip()]
    try:
        for _, text in pieces:
            compile(text, "<test cell>", "exec")
    except SyntaxError:
        whole = "\n".join(text for _, text in pieces)
        return [(True, whole)]
    return pieces


def split(nb) -> dict[str, dict]:
    """Take each test cell's probe out of ``nb`` in place, leaving its visible checks; return
    ``{index: {"probe", "visible"}}``."""
    tests = {}
    for index, cell in enumerate(nb.cells):
        if is_autograded_test(cell):
            pieces = segments(cell.source)
            visible = "\n".join(text for hidden, text in pieces if not hidden)
            probe = "\n".join(text for hidden, text in pieces if hidden)
            tests[str(index)] = {"probe": probe, "visible": visible}
            cell.source = visible
    return tests
