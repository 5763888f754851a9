"""Grader-side answers of the Course 6 Deep Dive (common/grading/verdicts/answerkeys.py): what its hidden tests compare with.

* ``counter_point``: the whole step from the hardware counters: LPDDR5 bytes = LPDDR5->LX + LX->LPDDR5 counters,
  LX bytes = the ``lx_bytes`` counter, intensities = report.flops / those bytes, attained = flops / time.
* ``op_counters``: per compute event on the ``cores`` engine with FLOPs: the per-op counters (``detail``
  lpddr_read + lpddr_write; LX bytes of the event) and its duration.
* ``tile_sweep``: one row per {coarse_tiles: report}, LPDDR5 bytes from the counters (so that
  ``common.memory.traffic.sweep``, which re-simulates, cannot answer a profiler's counters).
* ``level_ridges``: peak / bandwidth per memory level with a published bandwidth or a catalog estimate
  (``ESTIMATED_LEVELS``); levels with neither are left out.
"""

from __future__ import annotations

import pandas as pd

from common.chips import get_chip

ESTIMATED_LEVELS = {"LX": "lx_bandwidth", "VMEM": "vmem_bandwidth"}  # level -> the catalog estimate of its bandwidth


def _lpddr(counters: dict) -> float:
    return counters["lpddr_to_lx_bytes"] + counters["lx_to_lpddr_bytes"]


def counter_point(report) -> dict:
    """flops, lpddr_bytes, lx_bytes, I_LPDDR5, I_LX, flops_per_s of the whole step, from the counters."""
    lp, lx = _lpddr(report.counters), report.counters["lx_bytes"]
    return {"flops": report.flops, "lpddr_bytes": lp, "lx_bytes": lx, "I_LPDDR5": report.flops / lp,
            "I_LX": report.flops / lx, "flops_per_s": report.flops / report.time_s}


def op_counters(report) -> pd.DataFrame:
    """name, flops, lpddr_bytes, lx_bytes, duration_s of every compute op on the cores with FLOPs."""
    rows = [{"name": e.name, "flops": e.flops, "lpddr_bytes": e.detail["lpddr_read"] + e.detail["lpddr_write"],
             "lx_bytes": e.bytes.get("LX", 0.0), "duration_s": e.duration}
            for e in report.events if e.kind == "compute" and e.engine == "cores" and e.flops > 0]
    return pd.DataFrame(rows, columns=["name", "flops", "lpddr_bytes", "lx_bytes", "duration_s"])


def tile_sweep(reports: dict) -> pd.DataFrame:
    """coarse_tiles, lpddr_bytes, I_LPDDR5, time_s of each {coarse_tiles: Spyre prefill report}, from its counters."""
    rows = []
    for t, r in reports.items():
        lp = _lpddr(r.counters)
        rows.append({"coarse_tiles": t, "lpddr_bytes": lp, "I_LPDDR5": r.flops / lp, "time_s": r.time_s})
    return pd.DataFrame(rows, columns=["coarse_tiles", "lpddr_bytes", "I_LPDDR5", "time_s"])


def level_ridges(chip_name, dtype) -> dict:
    """{level: peak / bandwidth} for levels with a published bandwidth or a catalog estimate of it."""
    chip = get_chip(chip_name)
    peak = chip.compute_peak(dtype)[0]
    out = {}
    for lv in chip.memory_levels:
        bw = lv.bandwidth or (chip.estimates[ESTIMATED_LEVELS[lv.name]].value
                              if ESTIMATED_LEVELS.get(lv.name) in chip.estimates else None)
        if bw:
            out[lv.name] = peak / bw
    return out
