"""The secret parts of a source notebook (solutions, hidden tests, mark schemes) and where they must not go.

nbgrader marks them with ``### BEGIN SOLUTION`` / ``### END SOLUTION``, ``### BEGIN HIDDEN TESTS`` / ``### END
HIDDEN TESTS`` and ``=== BEGIN MARK SCHEME ===`` / ``=== END MARK SCHEME ===``. A *secret line* is a line
inside such a region that appears nowhere outside one (so ``import torch`` in a solution is not a secret, but
the line that computes the answer is). ``dfa check`` looks for secret lines in release notebooks,
``dfa feedback`` in the HTML it writes.
"""

from __future__ import annotations

import html
import re

REGIONS = {
    "solution": ("BEGIN SOLUTION", "END SOLUTION"),
    "hidden tests": ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS"),
    "mark scheme": ("BEGIN MARK SCHEME", "END MARK SCHEME"),
}
MARKERS = tuple(marker for pair in REGIONS.values() for marker in pair)
# Shorter lines (``pass``, ``return x``) are too common to prove anything.
MIN_SECRET_LENGTH = 12


def normalize(text: str) -> str:
    """Collapse whitespace, so that re-indented or re-wrapped text still matches."""
    return " ".join(text.split())


def _split(source: str, kinds) -> tuple[list[str], list[str]]:
    """(lines inside regions of ``kinds``, lines outside every region) of one cell's source."""
    inside, outside = [], []
    current = None
    for line in source.splitlines():
        begin = next((k for k, (b, _) in REGIONS.items() if b in line), None)
        end = next((k for k, (_, e) in REGIONS.items() if e in line), None)
        if begin:
            current = begin
        elif end:
            current = None
        elif current is None:
            outside.append(line)
        elif current in kinds:
            inside.append(line)
    return inside, outside


def secret_lines(nb, kinds=tuple(REGIONS)) -> list[str]:
    """Normalized lines that occur only inside regions of ``kinds`` in ``nb`` (a source notebook)."""
    inside, outside = [], set()
    for cell in nb["cells"]:
        cell_inside, cell_outside = _split(cell.get("source", ""), kinds)
        inside.extend(cell_inside)
        outside.update(normalize(line) for line in cell_outside)
    secrets = []
    for line in inside:
        text = normalize(line)
        if len(text) >= MIN_SECRET_LENGTH and text not in outside and text not in secrets:
            secrets.append(text)
    return secrets


def notebook_text(nb) -> str:
    """All cell sources and text outputs of a notebook, normalized, for leak searches."""
    parts = []
    for cell in nb["cells"]:
        parts.append(cell.get("source", ""))
        for output in cell.get("outputs", []):
            parts.append(output.get("text", "") if isinstance(output.get("text", ""), str) else "")
            parts.extend(str(v) for v in output.get("data", {}).values())
            parts.extend(output.get("traceback", []))
    return normalize("\n".join(parts))


def html_text(page: str) -> str:
    """The visible text of an HTML page (tags removed, entities decoded), normalized."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S | re.I)
    return normalize(html.unescape(re.sub(r"<[^>]+>", "", page)))


def find_leaks(text: str, secrets: list[str], markers: tuple[str, ...] = MARKERS) -> list[str]:
    """Which ``markers`` and secret lines occur in ``text`` (already normalized)."""
    found = [marker for marker in markers if marker in text]
    return found + [line for line in secrets if line in text]
