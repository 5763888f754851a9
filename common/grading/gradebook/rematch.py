"""Give a submission back the nbgrader metadata of its release notebook, cell by cell.

Google Colab drops cell metadata it does not know (nbgrader's included) and rewrites cell ids; a learner can
also copy, move, delete or tamper with cells. nbgrader alone would then miss the test cells and score 0, or
believe edited points. So before nbgrader sees a submission, every cell is matched to the release cell it
came from, and only the release's metadata is kept:

1. a cell whose nbgrader ``grade_id`` or cell ``id`` names a release cell (same type) is that cell;
2. the rest are aligned in order with the remaining release cells by the lines they share (an ordered
   alignment, like ``diff``): a read-only cell must still mostly match; an editable stub may have changed
   completely, as long as it stays in its place;
3. matched cells get the release cell's nbgrader metadata and id; unmatched cells (the learner's own) lose any
   nbgrader metadata, so a learner cannot mint a graded cell or change points;
4. release stubs and read-only cells missing from the submission are put back (nbgrader restores missing
   *test* cells itself from the gradebook: ``OverwriteCells.add_missing_cells``).
"""

from __future__ import annotations

import copy
import re

from common.grading.courses.standard import nbgrader_meta

_LOCKED_MIN_SIMILARITY = 0.5
_ID_OK = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")


def _lines(cell) -> frozenset[str]:
    return frozenset(line.strip() for line in cell.get("source", "").splitlines() if line.strip())


def _similarity(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _editable(release_cell) -> bool:
    meta = nbgrader_meta(release_cell)
    return bool(meta.get("solution")) or not meta.get("locked")


def _claimed_by_name(release, submission) -> dict[int, int]:
    """Submission index → release index for cells that name their release cell by grade id or cell id."""
    by_grade_id = {nbgrader_meta(c).get("grade_id"): i for i, c in enumerate(release) if nbgrader_meta(c)}
    by_cell_id = {c.get("id"): i for i, c in enumerate(release) if c.get("id")}
    claimed: dict[int, int] = {}
    taken: set[int] = set()
    for s, cell in enumerate(submission):
        for key, table in ((nbgrader_meta(cell).get("grade_id"), by_grade_id), (cell.get("id"), by_cell_id)):
            r = table.get(key) if key else None
            if r is not None and r not in taken and release[r].cell_type == cell.cell_type:
                claimed[s] = r
                taken.add(r)
                break
    return claimed


def _align(release, submission, rel_free: list[int], sub_free: list[int]) -> dict[int, int]:
    """Order-preserving alignment maximizing total similarity (dynamic programming, gaps cost nothing)."""
    rel_lines = {r: _lines(release[r]) for r in rel_free}
    sub_lines = {s: _lines(submission[s]) for s in sub_free}

    def score(r: int, s: int) -> float | None:
        if release[r].cell_type != submission[s].cell_type:
            return None
        sim = _similarity(rel_lines[r], sub_lines[s])
        if _editable(release[r]):
            return 0.01 + sim  # a stub may be rewritten entirely and still be its cell
        return sim if sim >= _LOCKED_MIN_SIMILARITY else None

    n, m = len(rel_free), len(sub_free)
    best = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            options = [best[i - 1][j], best[i][j - 1]]
            pair = score(rel_free[i - 1], sub_free[j - 1])
            if pair is not None:
                options.append(best[i - 1][j - 1] + pair)
            best[i][j] = max(options)
    matched: dict[int, int] = {}
    i, j = n, m
    while i > 0 and j > 0:
        pair = score(rel_free[i - 1], sub_free[j - 1])
        if pair is not None and abs(best[i][j] - (best[i - 1][j - 1] + pair)) < 1e-12:
            matched[sub_free[j - 1]] = rel_free[i - 1]
            i, j = i - 1, j - 1
        elif best[i][j] == best[i - 1][j]:
            i -= 1
        else:
            j -= 1
    return matched


def restore(submission, release) -> list[str]:
    """Rewrite ``submission``'s nbgrader metadata from ``release`` in place; returns notes on what changed."""
    notes: list[str] = []
    rel, sub = release.cells, submission.cells
    matched = _claimed_by_name(rel, sub)
    rel_free = [r for r in range(len(rel)) if r not in matched.values()]
    sub_free = [s for s in range(len(sub)) if s not in matched]
    matched.update(_align(rel, sub, rel_free, sub_free))

    for s, cell in enumerate(sub):
        meta = cell.metadata
        if s in matched:
            source = rel[matched[s]]
            wanted = copy.deepcopy(source.metadata.get("nbgrader"))
            if meta.get("nbgrader") != wanted:
                notes.append(f"cell {s}: nbgrader metadata restored from release cell {matched[s]}")
            if wanted is None:
                meta.pop("nbgrader", None)
            else:
                meta["nbgrader"] = wanted
            cell["id"] = source.get("id")
        elif "nbgrader" in meta:
            notes.append(f"cell {s}: nbgrader metadata removed (no such cell in the release)")
            del meta["nbgrader"]

    # put back missing stubs and read-only cells, after the cell that precedes them in the release
    position_of = {r: s for s, r in matched.items()}
    for r, cell in enumerate(rel):
        meta = nbgrader_meta(cell)
        if r in position_of or not meta or meta.get("grade"):
            continue
        before = [position_of[p] for p in range(r) if p in position_of]
        at = (max(before) + 1) if before else 0
        sub.insert(at, copy.deepcopy(cell))
        position_of = {p: (q + 1 if q >= at else q) for p, q in position_of.items()}
        position_of[r] = at
        notes.append(f"cell {meta.get('grade_id')!r} was missing: restored from the release")

    _normalize_ids(submission)
    return notes


def _normalize_ids(nb) -> None:
    """nbformat 4.5 wants a unique, well-formed id on every cell (Colab saves 4.0 notebooks without any)."""
    nb.nbformat, nb.nbformat_minor = 4, max(5, nb.get("nbformat_minor", 0) if nb.get("nbformat") == 4 else 5)
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        cell_id = cell.get("id")
        if not cell_id or not _ID_OK.match(str(cell_id)) or cell_id in seen:
            cell_id = f"dfa-{index:04d}"
            while cell_id in seen:
                cell_id += "x"
            cell["id"] = cell_id
        seen.add(cell_id)
