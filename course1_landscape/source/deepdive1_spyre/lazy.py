"""Shortcuts a student who does not do the Course 1 Deep Dive's work would try; each must score 0 on the cells it
names (tests/test_lazy_notebooks.py inserts each one after its test cells, reruns them, then restores the honest
cell)."""

SHORTCUTS = [
    # the simulator's own layout function: right for the catalog's 128-byte stick only
    dict(
        cell="sticks",
        kind="call-reference",
        code="""
from common.sim.spyre import stick_layout


def sticks(shape, dtype="fp16", stick_bytes=None):
    lay = stick_layout(tuple(shape), dtype)
    return {k: int(lay[k]) for k in ("sticks", "device_bytes", "padding_bytes")}
""",
        fails=["sticks_tests"],
    ),
    dict(
        cell="sticks",
        kind="hard-code-visible",
        code="""
import math


def sticks(shape, dtype="fp16", stick_bytes=None):  # the catalog stick, whatever stick is asked for
    stick, elem = int(SPYRE.fact("stick_bytes")), DTYPE_BYTES[dtype]
    n = math.prod(shape[:-1]) * math.ceil(shape[-1] / (stick // elem))
    return {"sticks": n, "device_bytes": n * stick, "padding_bytes": n * stick - math.prod(shape) * elem}
""",
        fails=["sticks_tests"],
    ),
    # the visible program's table, whatever program is passed
    dict(
        cell="bundle_table",
        kind="hard-code-visible",
        code="""
_SEEN = bundle_table(PROGRAM)


def bundle_table(program):
    return _SEEN.copy()
""",
        fails=["bundle_table_tests"],
    ),
    # the report's counters read off for the visible program
    dict(
        cell="spyre_traffic",
        kind="read-off-object",
        code="""
def spyre_traffic(program):
    c = REPORT.counters
    plans = [p for k in PROGRAM.kernels if k.kind != "fallback" for p in k.tiling["sdsc"]]
    return {"lpddr_read": float(c["lpddr_to_lx_bytes"]), "lpddr_write": float(c["lx_to_lpddr_bytes"]),
            "spill": float(c["lx_spill_bytes"]), "lx_peak_per_core": float(max(p["lx_bytes_per_core"] for p in plans)),
            "lx_budget_per_core": float(min(k.tiling["lx_budget_bytes"] for k in PROGRAM.kernels
                                            if k.kind != "fallback"))}
""",
        fails=["spyre_traffic_tests"],
    ),
]
