"""Flag submissions whose own code reaches for the interpreter's machinery, for an instructor to look at.

Tests run in the same interpreter as the learner's code. ``common.checks`` resists the usual tricks (objects
that claim equality, monkeypatched torch functions, redefined helpers), but code that rewires Python itself —
``sys.modules``, builtins, IPython's exception or input hooks, ``ctypes`` — could in principle fake a passing
test. Honest lab code never needs these, so their use is reported next to the grade (no points are taken:
an instructor decides). Only the learner's cells are scanned, not the read-only cells of the lab.
"""

from __future__ import annotations

import re

from common.grading.standard import nbgrader_meta

SUSPICIOUS = {
    "sys.modules": r"\bsys\s*\.\s*modules\b",
    "builtins": r"\b__builtins__\b|\bimport\s+builtins\b|\bbuiltins\s*\.",
    "IPython exception/input hooks": (
        r"set_custom_exc|\bexcepthook\b|input_transformers|\bevents\s*\.\s*register"
    ),
    "module internals": r"__dict__\s*\[|\bvars\s*\(|(?:object|ModuleType)\s*\.\s*__setattr__|__class__\s*=",
    "ctypes": r"\bctypes\b",
    "stack frames": r"sys\s*\.\s*_getframe|inspect\s*\.\s*(?:currentframe|stack)|\bf_locals\b|\bf_globals\b",
    "garbage collector": r"gc\s*\.\s*get_(?:referrers|objects)",
    "the grader's files": r"gradebook|/source/",
}
_PATTERNS = {name: re.compile(pattern) for name, pattern in SUSPICIOUS.items()}


def flags(nb) -> list[str]:
    """Names of the suspicious things the learner's code cells use, in a stable order."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code" or nbgrader_meta(cell).get("locked"):
            continue
        for name, pattern in _PATTERNS.items():
            if name not in found and pattern.search(cell.source):
                found.append(name)
    return found
