"""Shortcuts a student who does not do the Course 1 Deep Dive's work would try; each must score 0 on the cells it
names (tests/test_shortcut_notebooks.py inserts each one after its test cells, reruns them, then restores the honest
cell).

The second half attacks the channel between a hidden test and the learner's kernel: an argument emptied
after use, objects whose comparisons lie, the grader's own functions replaced, a catalog record copied with another
stick so that the simulator's private layout answers. Each root cause is named in a comment; ``kind`` is the
nearest of the harness's KINDS.
"""

SHORTCUTS = [
    # the simulator's own layout function: right for the catalog's 128-byte stick only
    dict(
        cell="sticks",
        kind="call-reference",
        code="""
from common.sim.machines.spyre import stick_layout


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
    # --- the channel between the hidden test and the kernel -----------------------------------------
    # mutate the argument: the program handed in loses its kernels, so a reference rebuilt from it afterwards agrees
    dict(
        cell="bundle_table",
        kind="read-off-object",
        code="""
_SEEN_TABLE = bundle_table(PROGRAM)


def bundle_table(program):
    if program is PROGRAM:
        return _SEEN_TABLE.copy()
    program.kernels.clear()
    return _SEEN_TABLE.iloc[:0].copy()
""",
        fails=["bundle_table_tests"],
    ),
    # a library function that computes the answer: the private layout, on a catalog record copied with another stick
    dict(
        cell="sticks",
        kind="call-reference",
        code="""
import dataclasses

from common.sim.machines.spyre import _layout


def sticks(shape, dtype="fp16", stick_bytes=None):
    chip = SPYRE
    if stick_bytes:
        chip = dataclasses.replace(SPYRE, facts={**SPYRE.facts, "stick_bytes": stick_bytes})
    lay = _layout(tuple(shape), DTYPE_BYTES[dtype], chip)
    return {k: int(lay[k]) for k in ("sticks", "device_bytes", "padding_bytes")}
""",
        fails=["sticks_tests"],
    ),
    # lying numbers: ints equal to anything
    dict(
        cell="sticks",
        kind="echo-expected",
        code="""
class _Any(int):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


def sticks(shape, dtype="fp16", stick_bytes=None):  # the catalog stick's answer, whatever stick is asked for
    import math
    stick, elem = int(SPYRE.fact("stick_bytes")), DTYPE_BYTES[dtype]
    n = math.prod(shape[:-1]) * math.ceil(shape[-1] / (stick // elem))
    pad = n * stick - math.prod(shape) * elem
    return {"sticks": _Any(n), "device_bytes": _Any(n * stick), "padding_bytes": _Any(pad)}
""",
        fails=["sticks_tests"],
    ),
    # replace the grader's checks in the kernel (every assert a no-op), then the visible program's traffic for any
    # program. The last test of the Deep Dive: in a direct run the patched class stays patched for later cells
    dict(
        cell="spyre_traffic",
        kind="hard-code-visible",
        code="""
from common.checks import _Grader

for _name in ("assert_scalar", "assert_equal", "assert_in_range", "assert_type", "assert_tensor"):
    setattr(_Grader, _name, staticmethod(lambda *a, **k: None))
_honest_traffic = spyre_traffic


def spyre_traffic(program):
    return _honest_traffic(PROGRAM)
""",
        fails=["spyre_traffic_tests"],
    ),
]
