"""Shortcuts a student who does not do the Course 3 Deep Dive's work would try; each must score 0 on the cells it
names (tests/test_shortcut_notebooks.py inserts each one after its test cells, reruns them, then restores the honest
cell)."""

NOT_LISTED = {
    "predict_bytes": "ungraded: the learner's own ranking (Analysis Q3), committed before the simulator runs and "
    "judged only in the reveal (kept beside the map, timed and hashed; a change after the reveal is flagged), "
    "no points",
}

SHORTCUTS = [
    dict(
        cell="lowering_summary",
        kind="read-off-object",
        code="""
def lowering_summary(dec, fus):  # read the block's compiled program, whatever tables come in
    ops = PROGRAM.stages["decompose"]
    return {**{c: sum(o.coverage == c for o in ops) for c in ("native", "decomposed", "fallback")},
            "primitives": SUMMARY["primitives"], "bundles": sum(k.kind != "fallback" for k in PROGRAM.kernels)}
""",
        fails=["lowering_summary_tests"],
    ),
    dict(
        cell="lowering_summary",
        kind="hard-code-visible",
        code="_printed = dict(SUMMARY)\n\n\ndef lowering_summary(dec, fus):  # the block's numbers, copied\n"
        "    return dict(_printed)",
        fails=["lowering_summary_tests"],
    ),
    dict(
        cell="device_layout",
        kind="call-reference",
        code="""
from common.sim.machines.spyre import stick_layout


def device_layout(shape, dtype="fp16", dim=-1, stick_bytes=STICK):  # the simulator's own layout
    lay = stick_layout(tuple(shape), dtype)
    return {k: lay[k] for k in ("device_shape", "sticks", "padding_bytes")}
""",
        fails=["device_layout_tests"],
    ),
    dict(
        cell="device_layout",
        kind="call-reference",
        code="""
from common.sim.machines.spyre import _layout


def device_layout(shape, dtype="fp16", dim=-1, stick_bytes=STICK):  # the private helper, sticks moved to the end
    shape = tuple(shape) or (1,)
    d = dim % len(shape)
    lay = _layout((*shape[:d], *shape[d + 1:], shape[d]), DTYPE_BYTES[dtype])
    return {k: lay[k] for k in ("device_shape", "sticks", "padding_bytes")}
""",
        fails=["device_layout_tests"],
    ),
    dict(
        cell="device_layout",
        kind="read-off-object",
        code="""
_rows = {tuple(r.shape): r for r in STAGE["layout"].itertuples()}


def device_layout(shape, dtype="fp16", dim=-1, stick_bytes=STICK):  # look the shape up in the layout stage
    r = _rows.get(tuple(shape))
    if r is None:
        return {}
    return {"device_shape": tuple(int(v) for v in r.device_shape), "sticks": int(r.sticks),
            "padding_bytes": int(r.padding_bytes)}
""",
        fails=["device_layout_tests"],
    ),
    dict(
        cell="needs_restickify",
        kind="read-off-object",
        code="""
_rs = STAGE["restickify"][STAGE["restickify"]["restickify"] != ""]
_pairs = set(zip(_rs["producer"], _rs["consumer"]))
_known = {(tuple(e.shape), tuple(e.strides), bool(e.is_weight)): (e.producer, e.consumer) in _pairs
          for e in EDGES.itertuples()}


def needs_restickify(shape, strides, is_weight):  # look the edge up in the compiler's restickify stage
    return _known.get((tuple(shape), tuple(strides), bool(is_weight)), False)
""",
        fails=["needs_restickify_tests"],
    ),
    dict(
        cell="divide_work",
        kind="call-reference",
        code="""
from common.sim.machines.spyre import SpyrePolicy


def divide_work(dims, cores, forced=None):  # the simulator's own work division
    return SpyrePolicy(cores=cores)._divide([(label, int(size)) for label, size in dims])[2]
""",
        fails=["divide_work_tests"],
    ),
    dict(
        cell="lx_tiles",
        kind="read-off-object",
        code="""
_ws = {}
for _prog, _lx in ((PROGRAM, STAGE["lx"]), (TIGHT, lowering.lx_table(TIGHT))):
    _m = _lx.merge(lowering.work_table(_prog)[["op", "tile"]], on="op")
    _ws.update({t: int(w) for t, w in zip(_m["tile"], _m["ws_bytes_per_core"]) if t})


def lx_working_set(tile, dtype="fp16"):  # look the tile up in the compiler's LX stage
    return _ws.get(tile, 0)
""",
        fails=["lx_tiles_tests"],
    ),
    dict(
        cell="option_effect",
        kind="hard-code-visible",
        code="_printed = dict(option_effect(CMP))\n\n\ndef option_effect(cmp):  # the printed effect, copied\n"
        "    return dict(_printed)",
        fails=["option_effect_tests"],
    ),
]

# Attacks on the probe channel: arguments emptied so a reference rebuilt from them agrees, the answer key and module
# constants rebound in the kernel, values whose __eq__ lies. The judgement runs outside the kernel on inputs it
# builds itself: none of these reaches it.
SHORTCUTS += [
    dict(
        cell="lowering_summary",
        kind="read-off-object",
        code="""
_honest_summary = lowering_summary


def lowering_summary(dec, fus):  # the notebook's tables honestly; any other: emptied, then counted
    if dec is STAGE["decompose"]:
        return _honest_summary(dec, fus)
    dec.drop(dec.index, inplace=True)
    fus.drop(fus.index, inplace=True)
    return {"native": 0, "decomposed": 0, "fallback": 0, "primitives": 0, "bundles": 0}
""",
        fails=["lowering_summary_tests"],
    ),
    dict(
        cell="option_effect",
        kind="read-off-object",
        code="""
_honest_effect = option_effect


def option_effect(cmp):  # the notebook's CMP honestly; any other: overwritten with 'no change', then reported
    if cmp is CMP:
        return _honest_effect(cmp)
    cmp.timeline["duration_s_after"] = cmp.timeline["duration_s_before"]
    cmp.timeline["bound_after"] = cmp.timeline["bound_before"]
    cmp.counters["after"] = cmp.counters["before"]
    return {"time_ratio": 1.0, "lpddr_ratio": 1.0, "spill_bytes_added": 0.0,
            "most_slowed_op": str(cmp.timeline["event"].iloc[0]), "bound_changes": 0}
""",
        fails=["option_effect_tests"],
    ),
    dict(
        cell="divide_work",
        kind="echo-expected",
        code="""
try:  # the answer key, where the kernel can import it: made to agree with the shortcut
    import answers as _lazy_answers

    _lazy_answers.divide_work = lambda dims, cores, forced=None: {}
except ImportError:
    pass


_honest_divide = divide_work
_SHOWN = {(tuple(map(tuple, d)), c) for c, w in ((32, STAGE["work"]), (12, lowering.work_table(REPORT12)))
          for d in w["dims"]} | {((("d0", 3), ("d1", 32), ("stick", 1)), 32)}


def divide_work(dims, cores, forced=None):  # what the notebook checks honestly; anything else: nothing split
    if (tuple(map(tuple, dims)), cores) in _SHOWN:
        return _honest_divide(dims, cores, forced)
    return {}
""",
        fails=["divide_work_tests"],
    ),
    dict(
        cell="needs_restickify",
        kind="echo-expected",
        code="""
class _LazyBool(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__

    def __bool__(self):
        return False


_honest_rs = needs_restickify
_SHOWN = {(tuple(e.shape), tuple(e.strides), bool(e.is_weight)) for e in EDGES.itertuples()}


def needs_restickify(shape, strides, is_weight):  # the block's edges honestly; others: equal to True and to False
    if (tuple(shape), tuple(strides), bool(is_weight)) in _SHOWN | {((2, 8, 64, 256), (131072, 64, 1, 512), False)}:
        return _honest_rs(shape, strides, is_weight)
    return _LazyBool(0)
""",
        fails=["needs_restickify_tests"],
    ),
    dict(  # the last graded cell: the patches stay in the kernel for the rest of the run
        cell="option_effect",
        kind="echo-expected",
        code="""
import math as _lazy_math

import common.checks as _lazy_checks

for _lazy_name in ("assert_equal", "assert_scalar", "assert_tensor", "assert_type", "assert_in_range"):
    setattr(type(_lazy_checks.grader), _lazy_name, lambda *a, **k: None)  # the class: the instance is locked
_lazy_math.isclose = lambda *a, **k: True
STICK = 64  # a rebound module constant
_printed = dict(option_effect(CMP))


def option_effect(cmp):  # the printed effect, for every comparison
    return dict(_printed)
""",
        fails=["option_effect_tests"],
    ),
]
