"""Test cells leave the notebook before it enters the sandbox; the runner hands them to the checker alone.

``split(nb)`` is called by the parent on the notebook it is about to run. Each autograded test cell keeps
only its visible part (what the release notebook shows anyway), and ``split`` returns, per cell index:

* ``segments`` — the cell as ``(hidden, source)`` pieces in order, hidden tests as their own pieces, so the
  checker can run them with their printed output discarded;
* ``imports`` — the import statements of the instructor's locked cells above it, re-run by the checker so
  ``check_scalar`` or ``bench`` mean what the instructor imported, whatever the learner rebound;
* ``visible`` — what the learner's kernel still runs after the check (``kernel_source``), only when a later
  cell uses a name it defines (``needed_later``): running it twice would double the test's time.

The runner reads them from a descriptor the parent passes (sandbox.py); the learner's kernel never sees them.
"""

from __future__ import annotations

import ast

from common.grading import answerkeys
from common.grading.regions import REGIONS
from common.grading.standard import is_autograded_test, nbgrader_meta

BEGIN_HIDDEN, END_HIDDEN = REGIONS["hidden tests"]
TRIGGER = "__import__('sys').audit('dfa.check', {index})  # the grader checks this cell here\n"


def _python(source: str) -> str:
    """A cell's source without IPython's magics and shell escapes (the checker runs plain Python)."""
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


def _imports(source: str) -> list[str]:
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return []
    return [ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell binds at any depth, names it reads)."""
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return set(), set()
    stored, loaded = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (stored if isinstance(node.ctx, ast.Store) else loaded).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored.update((a.asname or a.name).split(".")[0] for a in node.names)
    return stored, loaded


def _instructor_locked(cell) -> bool:
    meta = nbgrader_meta(cell)
    return cell.cell_type == "code" and bool(meta.get("locked")) and not meta.get("solution")


def split(nb) -> dict[str, dict]:
    """Strip hidden tests from ``nb`` in place; return the test cells as the checker needs them. The
    grader-side answers the prepare step attached (answerkeys.attach) leave the notebook too, and go with
    each test as ``grader``."""
    grader = answerkeys.detach(nb)
    tests, imports = {}, []
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    reads = [_names(c.source)[1] for _, c in code]  # parsed once, not once per test cell after it
    for position, (index, cell) in enumerate(code):
        if is_autograded_test(cell):
            pieces = segments(cell.source)
            visible = "\n".join(text for hidden, text in pieces if not hidden)
            stored, _ = _names(visible)
            later = set().union(*reads[position + 1 :])
            tests[str(index)] = {
                "segments": pieces,
                "imports": list(imports),
                "visible": visible if stored & later else "",
                "grader": grader,
            }
            cell.source = visible
        elif _instructor_locked(cell):
            imports += [line for line in _imports(cell.source) if line not in imports]
    return tests


def imported_modules(tests: dict) -> list[str]:
    """The modules the test cells and the instructor's cells import, by name: the grading kernel imports
    them before its snapshot (checker.py), so the snapshot covers what tests use. Only names reach the
    kernel, never a test's text."""
    names = []
    for test in tests.values():
        for source in [*test["imports"], *(text for _, text in test["segments"])]:
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names += [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.append(node.module)
    # answers is built in the checker's child alone: importing it in the kernel would find a learner's file
    return sorted(set(names) - {answerkeys.MODULE})


def kernel_source(index: int, test: dict) -> str:
    """What the learner's kernel runs in a test cell's place: the check, then the part later cells need."""
    return TRIGGER.format(index=index) + test["visible"]
