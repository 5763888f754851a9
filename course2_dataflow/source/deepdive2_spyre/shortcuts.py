"""Shortcuts a student who does not do the Course 2 Deep Dive's work would try; each must score 0 on the cells
it names (tests/test_shortcut_notebooks.py inserts each one after its test cells, reruns them, then restores the
honest cell)."""

NOT_LISTED = {
    "predict_programs": "ungraded: the learner's own ranking (Analysis Q1), committed before the simulator runs and "
    "judged only in the reveal (kept beside the map, timed and hashed; a change after the reveal is flagged), "
    "no points",
}

SHORTCUTS = [
    # edge_table: the visible program's table, whatever program comes in
    dict(
        cell="edge_table",
        kind="hard-code-visible",
        code="""
_VISIBLE_EDGES = EDGES.copy()


def edge_table(program):
    return _VISIBLE_EDGES.copy()
""",
        fails=["edge_table_tests"],
    ),
    # dma_summary: the visible summary, whatever table comes in
    dict(
        cell="dma_summary",
        kind="hard-code-visible",
        code="""
_VISIBLE_SUMMARY = SUMMARY.copy()


def dma_summary(edges):
    return _VISIBLE_SUMMARY.copy()
""",
        fails=["dma_summary_tests"],
    ),
    # stick_plan: the simulator's own layout (the catalog's 128-byte stick, whatever stick_bytes says)
    dict(
        cell="stick_plan",
        kind="call-reference",
        code="""
def stick_plan(shape, cores, dtype="fp16", stick_bytes=STICK):
    from common.sim.machines.spyre import stick_layout
    lay = stick_layout(tuple(shape), dtype)
    per = -(-lay["sticks"] // cores)
    return {"sticks": lay["sticks"], "device_bytes": lay["device_bytes"], "padding_bytes": lay["padding_bytes"],
            "sticks_per_core": per, "bytes_per_core": per * STICK}
""",
        fails=["stick_plan_tests"],
    ),
    # core_busy: the library's per-core table
    dict(
        cell="core_busy",
        kind="call-reference",
        code="""
def core_busy(report):
    return torch.tensor(gv.core_work(report)["busy_s"].to_numpy(), dtype=torch.float64)
""",
        fails=["core_busy_tests"],
    ),
    # predict_restickify: read the compiled program's restickify copies instead of predicting from the ops
    dict(
        cell="predict_restickify",
        kind="read-off-object",
        code="""
def predict_restickify(ops):
    return {(r.source, c) for r in gv.restickify_edges(PROGRAM).itertuples() for c in r.consumers.split(", ")}
""",
        fails=["predict_restickify_tests"],
    ),
    # ---- attacks on the probe channel, each as a shortcut of this Deep Dive's own ----
    # the argument emptied: any program but the visible one loses its kernels (a reference rebuilt afterwards from
    # the same object finds no edge either)
    dict(
        cell="edge_table",
        kind="read-off-object",
        code="""
_lazy_honest_edges = edge_table


def edge_table(program):
    if program is PROGRAM:
        return _lazy_honest_edges(program)
    program.kernels.clear()
    return pd.DataFrame(columns=["producer", "consumer", "same_kernel", "via"])
""",
        fails=["edge_table_tests"],
    ),
    # the argument emptied in place: the table handed in loses its rows, the summary of nothing is empty
    dict(
        cell="dma_summary",
        kind="read-off-object",
        code="""
_lazy_honest_summary = dma_summary


def dma_summary(edges):
    if len(edges) == len(DMA) and list(edges["bytes"]) == list(DMA["bytes"]):
        return _lazy_honest_summary(edges)
    edges.drop(edges.index, inplace=True)
    return pd.DataFrame(columns=["reads", "read_bytes", "writes", "write_bytes"])
""",
        fails=["dma_summary_tests"],
    ),
    # the argument emptied: an unseen report loses its events, and no event means no busy core
    dict(
        cell="core_busy",
        kind="read-off-object",
        code="""
def core_busy(report):
    if report is not REPORT:
        report.events.clear()
    return torch.tensor(gv.core_work(report)["busy_s"].to_numpy(), dtype=torch.float64)
""",
        fails=["core_busy_tests"],
    ),
    # the simulator's private layout helper, handed a catalog chip copied with the stick width asked for
    dict(
        cell="stick_plan",
        kind="call-reference",
        code="""
import dataclasses as _lazy_dc
from types import MappingProxyType as _LazyMP

from common.sim.machines.spyre import _layout as _lazy_layout


def stick_plan(shape, cores, dtype="fp16", stick_bytes=STICK):
    chip = _lazy_dc.replace(SPYRE, facts=_LazyMP({**SPYRE.facts, "stick_bytes": stick_bytes}))
    lay = _lazy_layout(tuple(shape), DTYPE_BYTES[dtype], chip)
    per = -(-lay["sticks"] // cores)
    return {"sticks": lay["sticks"], "device_bytes": lay["device_bytes"], "padding_bytes": lay["padding_bytes"],
            "sticks_per_core": per, "bytes_per_core": per * stick_bytes}
""",
        fails=["stick_plan_tests"],
    ),
    # an answer that claims to equal anything: a dict whose every entry equals whatever it is compared with
    dict(
        cell="stick_plan",
        kind="echo-expected",
        code="""
class _LazyNumber(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class _LazyPlan(dict):
    def __getitem__(self, key):
        return _LazyNumber(0)

    def __eq__(self, other):
        return True

    __hash__ = None


def stick_plan(shape, cores, dtype="fp16", stick_bytes=STICK):
    return _LazyPlan.fromkeys(("sticks", "device_bytes", "padding_bytes", "sticks_per_core", "bytes_per_core"),
                              _LazyNumber(0))
""",
        fails=["stick_plan_tests"],
    ),
    # the checker's comparisons rebound in the kernel, put back once the test cell has run
    dict(
        cell="predict_restickify",
        kind="echo-expected",
        code="""
import common.checks as _lazy_checks

_LAZY_SAVED = {n: vars(_lazy_checks)[n] for n in ("_compare_scalar", "_compare_in_range", "_compare_equal",
                                                   "_compare_tensor", "_compare_type")}
for _lazy_name in _LAZY_SAVED:
    vars(_lazy_checks)[_lazy_name] = lambda *a, **k: None
_lazy_cells = [0]


def _lazy_restore(*_):
    _lazy_cells[0] += 1
    if _lazy_cells[0] == 3:   # this cell, then the test cell it must fail (its probe, then its visible checks)
        vars(_lazy_checks).update(_LAZY_SAVED)
        get_ipython().events.unregister("post_run_cell", _lazy_restore)


get_ipython().events.register("post_run_cell", _lazy_restore)


def predict_restickify(ops):
    return set()
""",
        fails=["predict_restickify_tests"],
    ),
    # the compiler's own passes run on the ops: fuse them into bundles, tile each (which inserts the restickify
    # copies), read the copies back
    dict(
        cell="predict_restickify",
        kind="call-reference",
        code="""
from common.sim.pipeline import fuse as _lazy_fuse


def predict_restickify(ops):
    policy, out = make_policy("spyre"), set()
    for k in _lazy_fuse(list(ops), policy):
        policy.tile(k)
        for o in k.ops:
            if o.op == "spyre.restickify":
                out |= {(next(iter(o.in_bytes)), c.name) for c in k.ops if o.name in c.in_bytes}
    return out
""",
        fails=["predict_restickify_tests"],
    ),
]
