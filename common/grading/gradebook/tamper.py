"""Flag submissions whose own code reaches for the interpreter's machinery, for an instructor to look at.

No grade depends on these flags: a test cell's verdict is made by its judgement in the grader, on plain data
(judge.py), so nothing the learner's kernel does can change it. Code that rewires Python itself (``sys.modules``,
builtins, IPython's hooks, ``ctypes``, frames) or reaches for the grader's files is still worth a look: honest
lab code never needs it, and it is how a learner would probe the sandbox. Its use is reported next to the grade
(no points are taken: an instructor decides). Only the learner's cells are scanned, not the lab's locked cells.
"""

from __future__ import annotations

import re

from common.grading.courses.standard import nbgrader_meta

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
