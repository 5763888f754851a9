"""Grader-side answers of the Course 3 Deep Dive (instructor edition only: ``source/`` is never released or
published). Hidden tests import from here (``from answers import device_layout as _ref``).

* ``device_layout(shape, dtype, dim=-1, stick_bytes=128)`` — sticks of ``stick_bytes`` along dimension ``dim``
  (a 0-d shape is (1,)): per = stick_bytes // element bytes; per_row = ceil(shape[dim] / per); sticks = per_row x
  product of the other dims; device_shape = (per_row, *other dims in order, per); padding = sticks x stick_bytes -
  numel x element bytes. (``common.sim.machines.spyre.stick_layout`` is the simulator's own: 128-B sticks, innermost dim
  only.)
* ``divide_work(dims, cores, forced=None)`` — the ``forced`` pieces first; then, with cores // prod(forced) cores,
  every order of the other dims of size > 1, each taking its largest divisor that fits the cores left; the order
  using most cores wins, ties keep the listed priority; the result holds forced and chosen pieces > 1.
* ``lowering_summary(program)`` — coverage counts of the decompose stage, device primitives (the decomposition's
  parts, a custom op's ``+``-separated parts, else 1) of the non-fallback ops, and non-fallback kernels.
* ``needs_restickify(shape, strides, is_weight)`` — at least 2 dims, innermost stride not 1, innermost size > 1, not
  a weight.
* ``lx_working_set(tile, dtype)`` — (tm tk + tk tn + tm tn) x element bytes; ``fits_lx`` — that + resident <= budget.
* ``option_effect(cmp)`` — the ratios, spills, most slowed events (all ties) and bound changes of a Comparison.

Hidden tests are probe + judgement (``common.grading.verdicts.probe``): the judgement rebuilds every input from the seed the
probe used and calls these on it, never on an object the learner's kernel held.
"""

from __future__ import annotations

import itertools
import math

from common.chips import DTYPE_BYTES
from common.compile.lowering import CUSTOM_OPS


def device_layout(shape, dtype="fp16", dim=-1, stick_bytes=128) -> dict:
    shape = tuple(int(s) for s in shape) or (1,)
    d = dim % len(shape)
    elem = DTYPE_BYTES[dtype]
    per = stick_bytes // elem
    per_row = -(-shape[d] // per)
    others = shape[:d] + shape[d + 1 :]
    sticks = math.prod(others) * per_row
    return {
        "device_shape": (per_row, *others, per),
        "sticks": sticks,
        "padding_bytes": sticks * stick_bytes - math.prod(shape) * elem,
    }


def divide_work(dims, cores, forced=None) -> dict:
    forced = {label: int(n) for label, n in (forced or {}).items() if int(n) > 1}
    free0 = cores // math.prod(forced.values())
    dims = [(label, int(size)) for label, size in dims if int(size) > 1 and label not in forced]
    best_used, best = 1, {}
    for order in itertools.permutations(dims):
        free, used, parts = free0, 1, {}
        for label, size in order:
            d = max(x for x in range(1, min(size, free) + 1) if size % x == 0)
            if d > 1:
                used, free, parts[label] = used * d, free // d, d
        if used > best_used:
            best_used, best = used, parts
    return {**forced, **best}


def lowering_summary(program) -> dict:
    ops = program.stages["decompose"]
    device = [o for o in ops if o.coverage != "fallback"]
    return {**{c: sum(o.coverage == c for o in ops) for c in ("native", "decomposed", "fallback")},
            "primitives": sum(len(o.decomposed_into) or len(CUSTOM_OPS.get(o.op, "x").split("+")) for o in device),
            "bundles": sum(k.kind != "fallback" for k in program.kernels)}


def needs_restickify(shape, strides, is_weight) -> bool:
    return len(shape) >= 2 and strides[-1] != 1 and shape[-1] > 1 and not is_weight


def lx_working_set(tile: str, dtype: str = "fp16") -> int:
    tm, tk, tn = (int(v) for v in tile.split("x"))
    return (tm * tk + tk * tn + tm * tn) * DTYPE_BYTES[dtype]


def fits_lx(tile: str, resident_bytes, budget, dtype: str = "fp16") -> bool:
    return lx_working_set(tile, dtype) + resident_bytes <= budget


def option_effect(cmp) -> dict:
    """The expected values; ``most_slowed_op`` is the list of every event tied for the largest growth."""
    c, tl = cmp.counters, cmp.timeline
    lp = c.loc["lpddr_to_lx_bytes"] + c.loc["lx_to_lpddr_bytes"]
    grow = tl["duration_s_after"] / tl["duration_s_before"]
    return {"time_ratio": float(cmp.after.time_s / cmp.before.time_s), "lpddr_ratio": float(lp["after"] / lp["before"]),
            "spill_bytes_added": float(c.loc["lx_spill_bytes", "change"]),
            "most_slowed_op": [str(e) for e in tl["event"][grow >= grow.max() * (1 - 1e-9)]],
            "bound_changes": int((tl["bound_before"] != tl["bound_after"]).sum())}
