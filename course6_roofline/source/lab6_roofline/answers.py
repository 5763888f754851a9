"""Grader-side answers of Lab 6 (common/grading/answerkeys.py): what its hidden tests compare with.

* ``ridge_table`` / ``system_ridges``: main-memory ridge point = peak FLOP/s of the chip's native 16-bit dtype
  (bf16, else fp16) / main-memory bandwidth (bytes/s), from the catalog. (Formerly ``common.roofline.ridge_table``:
  nothing but this lab's grading used it.)
* ``op_points``: per compute event with FLOPs > 0 and bytes > 0 at ``level`` (default main memory), intensity =
  flops / bytes and attained FLOP/s = flops / duration, in event order.
* ``verdicts``: the binding level of a report's first compute event with FLOPs, on the roofline of the slowest level
  alone and on the hierarchical one: the level l with the lowest I_l * beta_l, or "compute" when that is >= peak.
"""

from __future__ import annotations

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
    table = ridge_table(list(system_chips.values())).set_index("chip")["ridge"]
    return {system: float(table[get_chip(chip).name]) for system, chip in system_chips.items()}


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
