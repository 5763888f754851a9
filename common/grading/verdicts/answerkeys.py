"""Grader-side answer keys: a lab's ``source/<lab>/answers.py``, the offering's secret, and how they reach a test.

A graded stub's reference implementation, and any answer key the judgements need (probe.py), live in
``courseN_*/source/<lab>/answers.py``. ``source/`` belongs to the instructor edition only: nbgrader releases no
``.py`` (config.py) and ``dfa publish`` copies no ``source/``, so nothing a learner installs or opens holds them.

Judgements import it by its bare name, ``from answers import run_tokens as _ref``:

* **while grading**, only the trusted grader process builds the module (judge.py), for one judgement at a
  time; nothing of it enters the sandbox or a Dask worker, where only the probes run (probe.py).
* **in a direct run** of the source notebook (an author in Jupyter, papermill with the lab folder as working
  directory) Python imports ``answers.py`` from the working directory.

The grader pre-sets ``GRADER_SALT`` and ``GRADER_STUDENT`` in the module before its body runs; a direct run
has neither, and answers.py falls back to ``DFA_SALT`` / a development salt. The salt is the offering's secret:
``c.Offering.salt`` in the course's ``nbgrader_config.py`` (or the ``DFA_SALT`` environment variable, which
wins). It never appears in a release notebook: per-learner variants are derived from it on the grader side
(probe.variant_seed), and only the derived seed reaches a probe.
"""

from __future__ import annotations

import os
import warnings

MODULE = "answers"  # the bare name hidden tests import


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


def build_module(grader: dict):
    """The answers module for one judgement (judge.py, in the grader): a fresh module object with
    ``GRADER_SALT`` and ``GRADER_STUDENT`` set before its body runs. None if there is no answers text."""
    import types

    text = grader.get("answers")
    if not text:
        return None
    module = types.ModuleType(MODULE, "the lab's grader-side answers (instructor edition)")
    module.__file__ = f"<{MODULE}>"
    module.GRADER_SALT = str(grader.get("salt", ""))
    module.GRADER_STUDENT = str(grader.get("student", ""))
    code = compile(text, f"<{MODULE}>", "exec")
    exec(code, vars(module))  # noqa: S102 (instructor code, grader side)
    return module
