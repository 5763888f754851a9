"""Shortcuts a student who does not do the Course 3 Deep Dive's work would try; each must score 0 on the cells it
names (tests/test_lazy_notebooks.py inserts each one after its test cells, reruns them, then restores the honest
cell)."""

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
from common.sim.spyre import stick_layout


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
from common.sim.spyre import _layout


def device_layout(shape, dtype="fp16", dim=-1, stick_bytes=STICK):  # the private helper: any stick width
    lay = _layout(tuple(shape), DTYPE_BYTES[dtype], stick_bytes)
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
from common.sim.spyre import SpyrePolicy


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
