"""Grader-side answer keys: a lab's ``source/<lab>/answers.py``, the offering's secret, and how they reach a test.

A graded stub's reference implementation, and any answer key or secret variant the hidden tests need, live in
``courseN_*/source/<lab>/answers.py``. ``source/`` belongs to the instructor edition only: nbgrader releases no
``.py`` (config.py) and ``dfa publish`` copies no ``source/``, so nothing a learner installs or opens holds them.

Hidden tests import it by its bare name, ``from answers import run_tokens as _ref``:

* **while grading**, the prepare step (autograde.py) attaches the module's text, the offering's salt and the
  student's id to the prepared notebook (``attach``); before the notebook enters the sandbox, testcells.split
  takes them off again with the hidden tests, and only the checker's forked child builds the module
  (checker.py), bound in the test's namespace alone and never in ``sys.modules``. Learner code can neither
  import it (no such file in the sandbox) nor find it.
* **in a direct run** of the source notebook (an author in Jupyter, papermill with the lab folder as working
  directory) Python imports ``answers.py`` from the working directory.

The grader pre-sets ``GRADER_SALT`` and ``GRADER_STUDENT`` in the module before its body runs; a direct run
has neither, and answers.py falls back to ``DFA_SALT`` / a development salt. The salt is the offering's secret:
``c.Offering.salt`` in the course's ``nbgrader_config.py`` (or the ``DFA_SALT`` environment variable, which
wins). It never appears in a release notebook: per-learner variants that a hidden test plants are derived from
it on the grader side.
"""

from __future__ import annotations

import os
import warnings

MODULE = "answers"  # the bare name hidden tests import
METADATA_KEY = "dfa_grader"  # notebook metadata the prepare step sets and testcells.split removes


def source(course, lab: str) -> str | None:
    """The text of ``source/<lab>/answers.py``, or None when the lab has none."""
    path = course.source_dir / lab / f"{MODULE}.py"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def offering_salt(course) -> str:
    """The offering's secret: ``DFA_SALT``, else ``c.Offering.salt`` of the course config, else (with a
    warning: anyone can recompute the variants) the course's name."""
    salt = os.environ.get("DFA_SALT") or course.config.get("Offering", {}).get("salt")
    if salt:
        return str(salt)
    warnings.warn(
        f"{course.name}: no offering secret (set c.Offering.salt in nbgrader_config.py or DFA_SALT); "
        "the hidden variants are derived from the course name, which learners know",
        stacklevel=2,
    )
    return course.name


def attach(nb, course, lab: str, student: str) -> bool:
    """Put the lab's answers module, the salt and the student id into ``nb``'s metadata (the prepared
    notebook, instructor side); False when the lab has no answers.py."""
    text = source(course, lab)
    if text is None:
        return False
    salt = offering_salt(course) if "GRADER_SALT" in text else ""  # asked for (and warned about) only if used
    nb.metadata[METADATA_KEY] = {"answers": text, "salt": salt, "student": student}
    return True


def detach(nb) -> dict:
    """Remove and return what ``attach`` put in ``nb`` (``{}`` if nothing)."""
    value = nb.metadata.pop(METADATA_KEY, None)
    return dict(value) if isinstance(value, dict) else {}


def build_module(grader: dict, trust=None):
    """The answers module for one test (checker.py, in the forked child): a fresh module object, not in
    ``sys.modules``, with ``GRADER_SALT`` and ``GRADER_STUDENT`` set before its body runs; ``trust`` (the
    checker's CodeTrust.trust) is given its code, which is the instructor's like the tests'. None if there is
    no answers text."""
    import types

    text = grader.get("answers")
    if not text:
        return None
    module = types.ModuleType(MODULE, "the lab's grader-side answers (instructor edition)")
    module.__file__ = f"<{MODULE}>"
    module.GRADER_SALT = str(grader.get("salt", ""))
    module.GRADER_STUDENT = str(grader.get("student", ""))
    code = compile(text, f"<{MODULE}>", "exec")
    if trust is not None:
        trust(code)
    exec(code, vars(module))  # noqa: S102 (instructor code, grader side)
    return module
