"""A reference: torch-spyre's published analytical kernel cost model, re-implemented from its documentation.

Source: torch-spyre/torch-spyre, ``docs/source/compiler/cost_model.md`` (https://github.com/torch-spyre/torch-spyre/
blob/main/docs/source/compiler/cost_model.md; sections "How a kernel is priced", "Two limitations worth knowing",
"Accuracy") and the module docstring + ``CostParams`` field comments of ``torch_spyre/_inductor/cost_model.py`` at
commit 92c8b3fd2d5d7b33382e57f4f95f9fe893df09da, which that page names as "the derivation of every term". Written
from the formulas as documented; no code is taken from there. Every fitted number below is one of ``CostParams``'
fields (named in its comment). The hardware numbers it shares with the simulator (the 150 GB/s one-directional
LPDDR5 rate, the read/write turnaround, the 1140 and 160 MAC/ns/core matmul rates, the slow rate's batch and core
gates) are read from the catalog (``common/chips/catalog/ibm.py``), where they are cited once. The rest are the
model's own fitted effective rates and shapes, which no simulator uses; they stay here, with the model.

The model prices one fused kernel (device time, torch.profiler "Self SPYRE"; no launch or host setup):

    T = max(compute, mem / (eff x s_lx)) + split                                        (matmul only: compute, split)
    mem = (R + W) / BW + alpha x min(R, W)              R, W = LPDDR5 bytes read / written (each input once per kernel)

with per-class overrides of the memory term, each a measured effective rate that folds the turnaround in:
broadcast-operand ops (R + W) / bw_bcast(ROWS, COLS), a transpose (restickify) (R + W) / 116 GB/s, a standalone
row reduction (R + W) / (min(150, 114 + 61 exp(-ROWS / 3700)) x g(cores)), a column reduction (R + W) / 113 GB/s.
A matmul adds compute = MACs / cores / (mac_peak x pt_eff), pt_eff = min(1, (M/m / 64) ** 0.35), and re-reads its
operands once the per-core output tile (M/m) x (N/n) passes 64 K elements: (|A| + |B|) x min(1.5, 0.45 log2(area /
65536)) more read bytes. A coarse-tiled softmax divides mem by eff = min(1.08, (rpc / 7.9) ** 0.5 x (COLS / 2048) **
0.38), rpc = ROWS / (cores x tiles), and by s_lx = min(1, (512 KB / ws) ** 0.06), ws = 2 x rpc x COLS x 2 B.

Published accuracy (the page's "Accuracy" table, RMS of the relative error over ~1,500 measured kernels):
``PUBLISHED_RMS``. The matmul rows are a one-way under-prediction (max(compute, memory) hides the shorter stream
completely), not scatter.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from common.chips import get_chip

DOC = ("torch-spyre docs/source/compiler/cost_model.md (https://github.com/torch-spyre/torch-spyre/blob/main/docs/"
       "source/compiler/cost_model.md)")
PARAMS = "torch-spyre torch_spyre/_inductor/cost_model.py @92c8b3f, CostParams"

# The page's "Accuracy" table: RMS of the relative error per category, in percent.
PUBLISHED_RMS = {"broadcast": 5.0, "transport": 6.1, "reduction": 7.2, "pointwise": 8.5, "softmax": 21.1,
                 "matmul, row-tiled": 25.1, "matmul, split": 29.8, "bmm": (26.5, 40.0)}


@dataclass(frozen=True)
class Fitted:
    """The model's fitted coefficients (``CostParams`` fields, named after each value; GB/s unless stated)."""
    bw_restickify: float = 116.0  # bw_restickify_gbps: a transpose (the stick moves to the other dim)
    bw_reduce_outer: float = 113.0  # bw_reduce_outer_gbps: a cross-row (dim 0) reduction
    red_floor: float = 114.0  # red_read_bw_floor_gbps
    red_amp: float = 61.0  # red_read_bw_amp_gbps
    red_scale_rows: float = 3700.0  # red_read_bw_scale_rows
    red_cores_g: tuple = ((1, 0.11), (2, 0.22), (4, 0.43), (8, 0.54), (16, 0.54), (32, 1.0))  # red_bw_cores_g
    bcast_min_rows: float = 1024.0  # bcast_bw_min_rows: the well-filled regime starts here
    bcast_row: tuple = (183.5, 2.8, 2.6, 100.0, 135.0)  # bcast_bw_a/_b/_d, clamp: b[1, C] operand (bcast, mulbcast)
    bcast_col: tuple = (162.0, 1.8, 2.2, 95.0, 130.0)  # cbc_bw_a/_b/_d, clamp: scalar or b[R, 1] (copy, bcastcol)
    underfill_pass_rows: float = 8.0  # underfill_pass_rows
    underfill_passes_mm: float = 8.0  # underfill_target_passes_matmul: full array fill at 64 rows per core
    underfill_exp: float = 0.35  # underfill_exponent
    coarse_rfull: float = 7.9  # coarse_underfill_rfull
    coarse_exp: float = 0.50  # coarse_underfill_exp
    coarse_col_ref: float = 2048.0  # coarse_underfill_col_ref
    coarse_col_exp: float = 0.38  # coarse_underfill_col_exp
    coarse_cap: float = 1.08  # coarse_underfill_cap
    lx_spill_cap: float = 524288.0  # lx_spill_cap_bytes (a fitted knee, not an LX capacity)
    lx_spill_exp: float = 0.06  # lx_spill_exp
    mm_area0: float = 65536.0  # mm_spill_area0: per-core output-tile elements before operands are re-read
    mm_slope: float = 0.45  # mm_spill_slope
    mm_cap: float = 1.50  # mm_spill_cap
    split_area0: float = 131072.0  # mm_split_area0
    split_long: float = 2.62e-3  # mm_split_reread_us_per_elem
    split_short: float = 2.88e-3  # mm_split_short_us_per_elem
    split_long_knee: float = 8.0  # mm_split_long_knee
    split_short_knee: float = 16.0  # mm_split_short_knee
    mm_coarse_rfull: float = 13.0  # coarse_underfill_rfull_matmul (the frozen rows-only curve)
    mm_coarse_exp: float = 0.68  # coarse_underfill_exp_matmul
    mm_coarse_cap: float = 0.95  # coarse_underfill_cap_matmul
    mm_ws_cap: float = 2097152.0  # mm_spill_ws_cap_bytes
    mm_ws_exp: float = 0.15  # mm_spill_ws_exp
    loop_reread_scale: float = 0.85  # loop_reread_scale: a loop-invariant operand re-read per extra tile


FIT = Fitted()


class Hardware:
    """The shared hardware numbers, from the catalog's Spyre record (cited there to the same CostParams)."""

    def __init__(self, chip="spyre"):
        c = get_chip(chip)
        self.cores = c.compute_units
        self.bw = c.main_memory.bandwidth * c.estimate("achievable_bandwidth_fraction")  # ~150 GB/s, B/s
        self.alpha = c.estimate("lpddr_turnaround_s_per_byte")  # s per byte of min(R, W)
        per_core_macs = c.estimate("dense_fp16_flops") / 2 / self.cores  # MAC/s per core at the datasheet rate
        self.mac_peak = per_core_macs * c.estimate("matmul_efficiency_fp16")  # 1140 MAC/ns/core sustained
        self.mac_bmm_default = per_core_macs * c.estimate("bmm_default_layout_efficiency")  # 160 MAC/ns/core
        self.bmm_min_batch = c.fact("bmm_default_min_batch")  # the slow rate from batch 4 ...
        self.bmm_min_cores = c.fact("bmm_default_min_cores")  # ... on 8 cores or more


HW = Hardware()


def _gbps(x: float) -> float:
    return x * 1e9


def turnaround_s(r: float, w: float, hw: Hardware = HW) -> float:
    """(R + W) / BW + alpha x min(R, W): one shared bus that turns around between reads and writes."""
    return (r + w) / hw.bw + hw.alpha * min(r, w)


def pointwise_s(r: float, w: float, hw: Hardware = HW) -> float:
    """An elementwise kernel (or any kernel with no override): the turnaround memory term alone."""
    return turnaround_s(r, w, hw)


def broadcast_bw(rows: int, cols: int, row_operand: bool, fit: Fitted = FIT) -> float:
    """Effective rate (B/s) of a full input plus a broadcast operand, well-filled regime (ROWS >= 1024):
    a - b log2(COLS) - d log2(ROWS), clamped. The short-tensor regime (a V-valley) is not reproduced here."""
    if rows < fit.bcast_min_rows:
        raise ValueError(f"rows={rows}: only the well-filled broadcast regime (rows >= {fit.bcast_min_rows:g})")
    a, b, d, lo, hi = fit.bcast_row if row_operand else fit.bcast_col
    return _gbps(max(lo, min(hi, a - b * math.log2(cols) - d * math.log2(rows))))


def broadcast_s(r: float, w: float, rows: int, cols: int, row_operand: bool) -> float:
    return (r + w) / broadcast_bw(rows, cols, row_operand)


def transpose_s(r: float, w: float, fit: Fitted = FIT) -> float:
    """A hardware restickify: one flat measured rate."""
    return (r + w) / _gbps(fit.bw_restickify)


def _cores_factor(cores: int, fit: Fitted = FIT) -> float:
    """g(cores) = reduction bandwidth at ``cores`` / at 32, piecewise linear in log2(cores) between anchors."""
    pts = fit.red_cores_g
    if cores >= pts[-1][0]:
        return 1.0
    if cores <= pts[0][0]:
        return pts[0][1]
    for (c0, g0), (c1, g1) in zip(pts, pts[1:], strict=False):
        if c0 <= cores <= c1:
            return g0 + (g1 - g0) * (math.log2(cores) - math.log2(c0)) / (math.log2(c1) - math.log2(c0))
    return 1.0


def reduction_s(r: float, w: float, rows: int, cores: int = 32, outer: bool = False, fit: Fitted = FIT,
                hw: Hardware = HW) -> float:
    """A standalone reduction. Over the last dim its read rate falls with ROWS; over dim 0 it is flat."""
    if outer:
        return (r + w) / _gbps(fit.bw_reduce_outer)
    bw = min(hw.bw, _gbps(fit.red_floor + fit.red_amp * math.exp(-rows / fit.red_scale_rows)))
    return (r + w) / (bw * _cores_factor(cores, fit))


def softmax_s(rows: int, cols: int, elem_bytes: int = 2, cores: int = 32, tiles: int = 1, fit: Fitted = FIT,
              hw: Hardware = HW) -> float:
    """A fused softmax (amax, sub, exp, sum, div in one kernel): the input read once, the output written once.
    Coarse-tiled (tiles > 1): the memory term is divided by the underfill and LX-spill derates."""
    r = w = rows * cols * elem_bytes
    mem = turnaround_s(r, w, hw)
    if tiles > 1:
        rpc = rows / (cores * tiles)
        eff = min(fit.coarse_cap, (rpc / fit.coarse_rfull) ** fit.coarse_exp *
                  (cols / fit.coarse_col_ref) ** fit.coarse_col_exp)
        ws = 2 * rpc * cols * elem_bytes
        s_lx = min(1.0, (fit.lx_spill_cap / ws) ** fit.lx_spill_exp)
        mem /= eff * s_lx
    return mem


def matmul_s(m: int, k: int, n: int, *, batch: int = 1, m_split: int = 32, n_split: int = 1, cores: int = 32,
             tiles: int = 1, elem_bytes: int = 2, both_batched: bool = False, fit: Fitted = FIT,
             hw: Hardware = HW) -> dict:
    """A (batched) matmul: T = max(compute, mem) + split. ``m_split`` x ``n_split`` is the work division (cores
    on M, on N; a batch split shrinks neither). ``tiles`` > 1: coarse row tiling of M, which re-reads B once per
    extra tile (at loop_reread_scale x BW, outside the derates), divides the rest of mem by the matmul underfill
    min(0.95, (rpc / 13) ** 0.68) and an LX-spill derate, and takes pt_eff = 1. Returns the terms and total_s."""
    a, b = batch * m * k * elem_bytes, (batch if both_batched else 1) * k * n * elem_bytes
    c = batch * m * n * elem_bytes
    rows_pc, cols_pc = m / m_split / tiles, n / n_split
    area = rows_pc * cols_pc
    reread = (a + b) * min(fit.mm_cap, fit.mm_slope * math.log2(max(1.0, area / fit.mm_area0)))
    mem = (a + b + reread + c) / hw.bw + hw.alpha * min(a + b, c)
    pt_eff = min(1.0, (rows_pc / (fit.underfill_pass_rows * fit.underfill_passes_mm)) ** fit.underfill_exp)
    loop_reread = 0.0
    if tiles > 1:
        pt_eff = 1.0
        eff = min(fit.mm_coarse_cap, (max(rows_pc, 2.0) / fit.mm_coarse_rfull) ** fit.mm_coarse_exp)
        ws = 2 * rows_pc * max(k, n) * elem_bytes
        mem /= eff * min(1.0, (fit.mm_ws_cap / ws) ** fit.mm_ws_exp)
        loop_reread = (tiles - 1) * b
        mem += fit.loop_reread_scale * loop_reread / hw.bw
    slow = both_batched and batch >= hw.bmm_min_batch and cores >= hw.bmm_min_cores
    peak = hw.mac_bmm_default if slow else hw.mac_peak
    compute = batch * m * k * n / cores / (peak * pt_eff)
    long_fan, short_fan = (m_split, n_split) if m >= n else (n_split, m_split)
    split_us = max(0.0, area - fit.split_area0) * (
        fit.split_long * max(0.0, math.log2(max(1, long_fan) / fit.split_long_knee)) +
        fit.split_short * max(0.0, math.log2(max(1, short_fan) / fit.split_short_knee)))
    return {"compute_s": compute, "mem_s": mem, "reread_bytes": reread, "loop_reread_bytes": loop_reread,
            "split_s": split_us * 1e-6, "pt_eff": pt_eff, "mac_peak": peak,
            "total_s": max(compute, mem) + split_us * 1e-6}
