"""Grader-side answers of the Course 4 Deep Dive (instructor edition only: ``source/`` is never published).

* ``padding_bytes(shape, elem, stick)`` — rows x (ceil(n / e) e - n) x elem, e = stick // elem elements per
  stick, n the last dim, rows the product of the others.
* ``tile_traffic(a, b, mc, nc, tm, tn)`` — A x ceil(nc / tn) + B x ceil(mc / tm).
* ``largest_tile_rows(lx, tn, tk, elem)`` — the largest tm with (tm tk + tk tn + tm tn) elem <= lx, 0 if none:
  floor((lx / elem - tk tn) / (tk + tn)).
* ``traffic_per_useful_byte(m, k, n)`` — the simulated fp16 matmul (m, k) @ (k, n) on one Spyre card: its LPDDR5
  counters (read + write) over (m k + k n + m n) x 2 bytes, read off ``simulate_op``, not off the explorer.
* ``chain_lpddr_bytes(nbytes, k, cores, budget)`` — 2 nbytes, plus 2 k nbytes when nbytes / cores > budget.

tests/test_sim_traffic.py checks that the simulated Spyre counters obey these formulas.
"""

from __future__ import annotations

import math

from common.chips import DTYPE_BYTES
from common.sim.run import simulate_op


def padding_bytes(shape, elem_bytes: int, stick_bytes: int) -> int:
    *outer, n = (int(x) for x in shape)
    e = max(1, stick_bytes // elem_bytes)
    return math.prod(outer) * (-(-n // e) * e - n) * elem_bytes


def tile_traffic(a_bytes: float, b_bytes: float, mc: int, nc: int, tm: int, tn: int) -> float:
    return float(a_bytes * math.ceil(nc / tn) + b_bytes * math.ceil(mc / tm))


def largest_tile_rows(lx_bytes: float, tn: int, tk: int, elem_bytes: int) -> int:
    return max(0, int((lx_bytes // elem_bytes - tk * tn) // (tk + tn)))


def chain_lpddr_bytes(nbytes: float, n_intermediates: int, cores: int, lx_budget: float) -> float:
    spilled = nbytes / cores > lx_budget
    return float(2 * nbytes + (2 * n_intermediates * nbytes if spilled else 0.0))


def traffic_per_useful_byte(m: int, k: int, n: int) -> float:
    c = simulate_op("matmul", (m, k, n), "spyre", dtype="fp16").counters
    return (c["lpddr_to_lx_bytes"] + c["lx_to_lpddr_bytes"]) / ((m * k + k * n + m * n) * DTYPE_BYTES["fp16"])
