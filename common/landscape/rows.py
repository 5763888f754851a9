"""Landscape rows a learner writes in their own words, and how they are checked.

A course's rows are a dict ``rows[attribute][system] = text``. Two checks, the way a reader would judge them:

- ``row_problems`` (visible, structural): every attribute and all five systems, in a few words of one's own
  (``MIN_WORDS`` to ``MAX_WORDS``), no placeholder, no two systems with the same text in a row (a row that says
  the same thing about five machines says nothing about any of them), and no system with the same text under
  two attributes.
- ``vocabulary_misses`` (hidden, on the grader's side): each cell must use a term that names the mechanism (any
  of the cell's ``accept`` patterns) and none that contradicts it (``reject``: a static machine described as
  scheduling at run time). The vocabulary lives with the grader, in the lab's ``answers.py``, never here.

    from common.landscape.rows import add_rows, row_problems
    row_problems(MY_ROWS, ATTRIBUTES)            # [] when the rows are complete
    add_rows(lm, MY_ROWS, course=2)              # into the landscape map, tagged 'learner'
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from common.landscape.map import SYSTEMS

MIN_WORDS, MAX_WORDS = 3, 25  # a phrase of one's own; long enough to name a mechanism, short enough for the map
PLACEHOLDERS = re.compile(r"^\s*(\.\.\.|…|todo|tbd|fill (me|in)|your (text|words)|\?+)\s*$", re.IGNORECASE)


def _words(text: str) -> int:
    return len(re.findall(r"[\w/+.-]+", text))


def row_problems(rows, attributes: Sequence[str]) -> list[str]:
    """What is missing or malformed in ``rows`` (attribute -> system -> text); empty when complete."""
    if not isinstance(rows, Mapping):
        return [f"the rows must be a dict attribute -> {{system: text}}, got {type(rows).__name__}"]
    problems = []
    unknown = sorted(set(rows) - set(attributes), key=str)
    if unknown:
        problems.append(f"unknown attributes {unknown}; valid: {list(attributes)}")
    for attribute in attributes:
        per_system = rows.get(attribute)
        if not isinstance(per_system, Mapping):
            problems.append(f"{attribute!r}: missing (a dict with the systems {', '.join(SYSTEMS)})")
            continue
        missing = [s for s in SYSTEMS if s not in per_system]
        if missing:
            problems.append(f"{attribute!r}: no text for {', '.join(missing)}")
        for system in SYSTEMS:
            text = per_system.get(system)
            if system not in per_system:
                continue
            if not isinstance(text, str) or PLACEHOLDERS.match(text) or not text.strip():
                problems.append(f"{attribute!r} / {system}: write a phrase of your own, got {text!r}")
            elif not MIN_WORDS <= _words(text) <= MAX_WORDS:
                problems.append(f"{attribute!r} / {system}: {_words(text)} words; write {MIN_WORDS} to {MAX_WORDS}")
        texts = [str(per_system.get(s, "")).strip().lower() for s in SYSTEMS if s in per_system]
        if len(texts) == len(SYSTEMS) and len(set(texts)) < len(SYSTEMS):
            problems.append(f"{attribute!r}: two or more systems have the same text; say how each one differs")
    for system in SYSTEMS:  # one sentence pasted under every attribute answers none of them
        texts = [str(rows[a][system]).strip().lower() for a in attributes
                 if isinstance(rows.get(a), Mapping) and system in rows[a]]
        if len(texts) == len(attributes) > 1 and len(set(texts)) < len(texts):
            problems.append(f"{system}: the same text under two attributes; each attribute asks something else")
    return problems


def vocabulary_misses(rows, vocabulary) -> list[tuple[str, str]]:
    """The (attribute, system) cells whose text names no accepted term or names a rejected one.

    ``vocabulary[attribute][system] = (accept, reject)``: tuples of regular expressions, matched
    case-insensitively anywhere in the text. A cell passes when some ``accept`` matches and no ``reject`` does.
    """
    misses = []
    for attribute, per_system in vocabulary.items():
        for system, (accept, reject) in per_system.items():
            text = str(rows.get(attribute, {}).get(system, "")) if isinstance(rows, Mapping) else ""
            found = any(re.search(p, text, re.IGNORECASE) for p in accept)
            wrong = any(re.search(p, text, re.IGNORECASE) for p in reject)
            if not found or wrong:
                misses.append((attribute, system))
    return misses


def add_rows(lm, rows, *, course: int) -> None:
    """Add complete rows to a LandscapeMap as the learner's own (overwriting this course's earlier ones)."""
    for attribute, per_system in rows.items():
        for system in SYSTEMS:
            lm.add(system, attribute, per_system[system], course=course, source="learner", overwrite=True)
