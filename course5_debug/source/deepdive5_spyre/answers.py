"""Grader-side answers of the Course 5 Deep Dive (instructor edition only; imported by hidden tests).

* ``sticks_needed(n, dtype, stick_bytes)``: ceil(n / (stick_bytes // element bytes)), for any stick size (the
  library's ``stick_layout`` knows only the catalog's 128-byte stick).
* ``stick_copy_range(n, stick, dtype)``: ``(start, stop)`` of the elements stick ``stick`` of an ``n``-element
  row holds with the catalog's stick, or ``None`` where the stub must raise ``ValueError``.
* ``first_uncovered(ranges, n)``: the first element of ``range(n)`` that no half-open ``(start, stop)`` range
  covers, or ``None`` (a boolean mask of ``n`` elements, each range clipped to ``[0, n)``).
"""

from __future__ import annotations

import torch

from common.chips import DTYPE_BYTES, get_chip


def sticks_needed(n: int, dtype: str = "fp16", stick_bytes: int = 128) -> int:
    return -(-int(n) // (int(stick_bytes) // DTYPE_BYTES[dtype]))


def stick_copy_range(n: int, stick: int, dtype: str = "fp16") -> tuple[int, int] | None:
    per = int(get_chip("spyre").fact("stick_bytes")) // DTYPE_BYTES[dtype]
    if not 0 <= stick < sticks_needed(n, dtype, per * DTYPE_BYTES[dtype]):
        return None
    return stick * per, min((stick + 1) * per, n)


def first_uncovered(ranges, n: int) -> int | None:
    covered = torch.zeros(n, dtype=torch.bool)
    for a, b in ranges:
        covered[max(0, a) : max(0, min(b, n))] = True
    missing = (~covered).nonzero()
    return int(missing[0]) if len(missing) else None
