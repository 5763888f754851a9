"""A second off the start of every process that reads notebooks: skip an import nbformat never uses.

nbformat validates notebooks with jsonschema, and jsonschema, on import, loads ``rfc3987_syntax`` where it is
installed (Jupyter's ``jsonschema[format-nongpl]`` brings it) to check the "iri" and "iri-reference" string
formats. Building that package's grammar takes 1.0-1.8 s on a 2-core machine (``python -X importtime -c "import
nbformat"``: 1.4-2.1 s, against 0.2 s without it), and a sandboxed grading pays it in its runner, a ``dfa``
command in its own process. The notebook schema uses neither format, so nothing nbformat checks changes.

``skip_unused_iri_check()`` makes ``import rfc3987_syntax`` fail in this process only (a ``None`` entry in
``sys.modules`` is how Python marks a module as not importable), and only if nothing imported it yet; jsonschema
then leaves the two format checks out, as it does wherever the package is not installed. Call it first thing
in a process of our own (the sandbox runner, the ``dfa`` command), never on import: a learner's or an
instructor's own Python keeps every check it had.
"""
from __future__ import annotations

import sys

UNUSED = "rfc3987_syntax"


def skip_unused_iri_check() -> None:
    if "jsonschema" not in sys.modules:  # too late once jsonschema chose its format checks
        sys.modules.setdefault(UNUSED, None)
