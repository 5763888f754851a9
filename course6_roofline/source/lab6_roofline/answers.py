"""Grader-side answers of Lab 6 (common/grading/verdicts/answerkeys.py): what its hidden tests compare with.

* ``ridge_table`` / ``system_ridges``: main-memory ridge point = peak FLOP/s of the chip's native 16-bit dtype
  (bf16, else fp16) / main-memory bandwidth (bytes/s), from the catalog. (Formerly ``common.roofline.ridge_table``:
  nothing but this lab's grading used it.)
* ``op_points``: per compute event with FLOPs > 0 and bytes > 0 at ``level`` (default main memory), intensity =
  flops / bytes and attained FLOP/s = flops / duration, in event order.
* ``verdicts``: the binding level of a report's first compute event with FLOPs, on the roofline of the slowest level
  alone and on the hierarchical one: the level l with the lowest I_l * beta_l, or "compute" when that is >= peak.
* ``attainable`` / ``ridge_point``: min(P, I * beta) and P / beta, for any (also infinite) P and beta.
* ``decode_sweep``: one simulated decode step per batch: step intensity at main memory, attained FLOP/s per chip,
  tokens/s and the bottleneck.
* ``first_batch_off_memory``: the smallest batch whose decode step (per chip) has a lowest ceiling other than
  memory, of memory I * beta, compute P and scheduling F / t_s (the roofline explorer's three ceilings).
* ``level_intensities`` / ``binding_level``: I_l = flops / bytes at level l (inf where none) per compute event with
  FLOPs; the level with the lowest roof I_l * beta_l, or "compute" when none is below the peak.
* ``attribute`` / ``optimum``: one engine's timeline inside a window split by bound (idle gaps and the tail are
  scheduling; ``Report.attribution`` gives only the critical engine's whole step); the critical engine's sum of
  non-scheduling floors over the step time.
"""

from __future__ import annotations

import math

import pandas as pd

from common.chips import get_chip
from common.roofline import roofline_for_chip

DTYPES = ("bf16", "fp16")


def ridge_table(chips, dtype=DTYPES) -> pd.DataFrame:
    """chip, dtype, peak_flops, estimate, level, bandwidth, ridge per chip (``dtype`` may be a preference list)."""
    rows = []
    for c in chips:
        rl = roofline_for_chip(c, dtype)
        rows.append({"chip": rl.name, "dtype": rl.dtype, "peak_flops": rl.peak_flops, "estimate": rl.peak_is_estimate,
                     "level": rl.main_level,
                     "bandwidth": rl.bandwidth(), "ridge": rl.peak_flops / rl.bandwidth()})
    return pd.DataFrame(rows)


def system_ridges(system_chips: dict) -> dict:
    """{system: main-memory ridge point} of each catalog chip at its native 16-bit dtype."""
    return {system: float(ridge_table([chip])["ridge"].iloc[0]) for system, chip in system_chips.items()}


def op_points(report, level=None) -> pd.DataFrame:
    """name, flops, bytes, intensity, flops_per_s of every compute event with FLOPs and bytes at ``level``."""
    level = level or get_chip(report.chip).main_memory.name
    rows = [{"name": e.name, "flops": e.flops, "bytes": e.bytes[level], "intensity": e.flops / e.bytes[level],
             "flops_per_s": e.flops / e.duration}
            for e in report.events
            if e.kind == "compute" and e.flops > 0 and e.bytes.get(level, 0.0) > 0 and e.duration > 0]
    return pd.DataFrame(rows, columns=["name", "flops", "bytes", "intensity", "flops_per_s"])


def _binding(event, levels, peak_flops, bandwidths) -> str:
    roofs = {lv: event.flops / event.bytes[lv] * bandwidths[lv] for lv in levels if event.bytes.get(lv, 0.0) > 0}
    if not roofs:
        return "compute"
    lowest = min(roofs, key=roofs.get)
    return "compute" if roofs[lowest] >= peak_flops else lowest


def verdicts(report, peak_flops, bandwidths) -> tuple[str, str]:
    """(verdict of the slowest level's roofline alone, verdict of the hierarchical roofline)."""
    event = next(e for e in report.events if e.kind == "compute" and e.flops > 0)
    slowest = min(bandwidths, key=bandwidths.get)
    return (_binding(event, [slowest], peak_flops, bandwidths),
            _binding(event, list(bandwidths), peak_flops, bandwidths))


def attainable(intensity, peak_flops, bandwidth) -> float:
    """min(peak, intensity * bandwidth); an unlimited bandwidth leaves the peak."""
    return float(peak_flops if math.isinf(bandwidth) else min(peak_flops, intensity * bandwidth))


def ridge_point(peak_flops, bandwidth) -> float:
    """peak / bandwidth: 0 for an unlimited bandwidth, inf for an unlimited peak."""
    return float(peak_flops / bandwidth)


def decode_sweep(model, backend, batches, seq, **options) -> pd.DataFrame:
    """batch, intensity, flops_per_s (per chip), tokens_per_s, bound of one decode step per batch size."""
    from common.sim import simulate_llm

    rows = []
    for b in batches:
        r = simulate_llm(model, backend, phase="decode", batch=b, seq=seq, **options)
        level = get_chip(r.chip).main_memory.name
        rows.append({"batch": b, "intensity": r.flops / r.bytes[level], "flops_per_s": r.achieved_flops / r.chips,
                     "tokens_per_s": r.tokens_per_s, "bound": r.bottleneck})
    return pd.DataFrame(rows, columns=["batch", "intensity", "flops_per_s", "tokens_per_s", "bound"])


def level_intensities(report, levels) -> pd.DataFrame:
    """name, flops, duration_s, I_<level> of every compute event with FLOPs (inf where it moves no bytes)."""
    rows = []
    for e in report.events:
        if e.kind == "compute" and e.flops > 0:
            row = {"name": e.name, "flops": e.flops, "duration_s": e.duration}
            row.update({f"I_{lv}": e.flops / e.bytes[lv] if e.bytes.get(lv, 0.0) > 0 else math.inf for lv in levels})
            rows.append(row)
    return pd.DataFrame(rows, columns=["name", "flops", "duration_s", *[f"I_{lv}" for lv in levels]])


def binding_level(intensities: dict, peak_flops: float, bandwidths: dict) -> str:
    """The level with the lowest roof I_l * beta_l, or "compute" when that roof is at or above the peak."""
    roofs = {lv: i * bandwidths[lv] for lv, i in intensities.items()}
    lowest = min(roofs, key=roofs.get)
    return "compute" if roofs[lowest] >= peak_flops else lowest


def attribute(report, engine=None, window=None) -> dict:
    """Seconds of ``window`` (default (0, report.time_s)) by bound on one engine's timeline; idle gaps are
    scheduling."""
    engine = engine or report.critical_engine
    t0, t1 = window if window is not None else (0.0, report.time_s)
    out = dict.fromkeys(("compute", "memory", "scheduling", "communication"), 0.0)
    busy_until = t0
    for e in sorted((e for e in report.events if e.engine == engine), key=lambda e: e.start):
        start, end = max(e.start, t0), min(e.start + e.duration, t1)
        if end > start:
            out["scheduling"] += max(0.0, start - busy_until)
            out[e.bound] += max(0.0, end - max(start, busy_until))
            busy_until = max(busy_until, end)
    out["scheduling"] += max(0.0, t1 - busy_until)
    return out


def optimum(report) -> dict:
    """attained_s, sum_floors_s (critical engine, non-scheduling events) and their ratio."""
    floors = sum(e.floor for e in report.events if e.engine == report.critical_engine and e.bound != "scheduling")
    return {"attained_s": report.time_s, "sum_floors_s": floors, "efficiency": floors / report.time_s}


def first_batch_off_memory(model, backend, seq, dtype, batches) -> int | None:
    """The smallest batch of ``batches`` whose decode step's lowest ceiling per chip is not memory: of
    memory I * beta (I = FLOPs / main-memory bytes), compute P (catalog peak at the step's dtype) and scheduling
    F / t_s (t_s = the step's scheduling seconds); None when every batch is memory-bound."""
    from common.sim import simulate_llm

    for b in sorted(batches):
        r = simulate_llm(model, backend, phase="decode", batch=b, seq=seq, dtype=dtype)
        roof = roofline_for_chip(r.chip, r.dtype)
        level = get_chip(r.chip).main_memory.name
        flops, moved, t_s = r.flops / r.chips, r.bytes[level] / r.chips, r.attribution["scheduling"]
        ceilings = {"memory": flops / moved * roof.bandwidth(level), "compute": roof.peak_flops,
                    "scheduling": flops / t_s if t_s > 0 else math.inf}
        if min(ceilings, key=ceilings.get) != "memory":
            return b
    return None
