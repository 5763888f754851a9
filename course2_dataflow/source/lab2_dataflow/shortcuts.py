"""Shortcuts a student who does not do Lab 2's work would try; each must score 0 on the cells it names
(tests/test_shortcut_notebooks.py inserts each one after its test cells, reruns them, then restores the honest cell).

``chain_prediction`` (1 point) has one shortcut only (the stream simulator rebound to agree with a guess): a
prediction the learner gets by running ``run_stream`` on the chain before answering is the right answer, and no
test can tell it from the work; only the order of cells asks them not to (NOT_LISTED says so).
"""

NOT_LISTED = {
    "chain_prediction": "a prediction the learner can also get by running run_stream on the chain first; only the "
    "order of cells asks them not to, and no test can tell the two apart",
    "winner": "optional (Going further), ungraded",
    "kernel_graph": "optional (Going further), ungraded",
    "predict_block": "ungraded: the learner's own ranking, committed before the simulator runs and judged only in "
    "the reveal (kept beside the map, timed and hashed; a change after the reveal is flagged)",
}

SHORTCUTS = [
    # qk_intensity: the worked example hard-coded, and a curve that passes the visible invariants
    dict(cell="qk_intensity", kind="hard-code-visible", fails=["qk_intensity_tests"], code='''
def qk_intensity(seq, head_dim, bytes_per_el):
    if (seq, head_dim, bytes_per_el) == (2, 1, 4):
        return 0.25
    return 2.0 * head_dim / bytes_per_el * seq / (seq + 64.0)
'''),
    # graph_stats: the printed stats of the visible block (and the worked example), whatever graph comes in
    dict(
        cell="graph_stats",
        kind="hard-code-visible",
        code="""
_VISIBLE = dict(graph_stats(gm))
_EXAMPLE = {"placeholder": 1, "get_attr": 0, "call_function": 2, "call_method": 0, "call_module": 0, "output": 1,
            "nodes": 4, "edges": 4}


def graph_stats(g):
    return dict(_EXAMPLE) if len(g.graph.nodes) == 4 else dict(_VISIBLE)
""",
        fails=["graph_stats_tests"],
    ),
    # node_annotations: the library's table on the catalog chip of the lab (the shortcut)
    dict(
        cell="node_annotations",
        kind="call-reference",
        code="""
def node_annotations(gm, args, peak, bandwidth):
    t = node_table(annotate(gm, *args), CHIP, DTYPE)
    return t[["node", "op", "shape", "flops", "bytes", "intensity", "bound"]]
""",
        fails=["node_annotations_tests"],
    ),
    # fusion_bytes: the visible block's numbers and the worked example, by heart
    dict(
        cell="fusion_bytes",
        kind="hard-code-visible",
        code="""
def fusion_bytes(chain, numel, bytes_per_el):
    if (len(chain), numel, bytes_per_el) == (3, 10, 2):
        return 120, 40
    return 4 * 2 * x.numel() * 4, 2 * x.numel() * 4
""",
        fails=["fusion_bytes_tests"],
    ),
    # run_dataflow: the reference the notebook used to import (now grader-side only)
    dict(
        cell="run_dataflow",
        kind="call-reference",
        code="""
def run_dataflow(gm, *args):
    from common.dataflow.interpreter import run_tokens
    return run_tokens(gm, *args)
""",
        fails=["run_dataflow_tests"],
    ),
    # run_dataflow: eager execution, nodes listed in graph order
    dict(
        cell="run_dataflow",
        kind="cpu-reference",
        code="""
def run_dataflow(gm, *args):
    with torch.no_grad():
        return fx.Interpreter(gm).run(*args), [n.name for n in gm.graph.nodes]
""",
        fails=["run_dataflow_tests"],
    ),
    # run_dataflow: the visible first firings, then graph order
    dict(
        cell="run_dataflow",
        kind="hard-code-visible",
        code="""
def run_dataflow(gm, *args):
    head = ["x", "ln1", "q_proj", "k_proj", "v_proj"]
    names = [n.name for n in gm.graph.nodes]
    if names[:2] == ["x", "ln1"]:
        names = head + [n for n in names if n not in head]
    with torch.no_grad():
        return gm(*args), names
""",
        fails=["run_dataflow_tests"],
    ),
    # skew_capacities: the reference the notebook used to import
    dict(
        cell="skew_capacities",
        kind="call-reference",
        code="""
def skew_capacities(sg):
    from common.dataflow.interpreter import full_throughput_capacities
    return full_throughput_capacities(sg)
""",
        fails=["skew_capacities_tests"],
    ),
    # skew_capacities: measure each edge's peak occupancy with unbounded buffers and add one slot
    dict(
        cell="skew_capacities",
        kind="call-reference",
        code="""
def skew_capacities(sg):
    saved = {k: e.capacity for k, e in sg.edges.items()}
    r = run_stream(sg.set_capacity(10**6), keep_trace=False)
    sg.set_capacity(saved)
    return {(u, v): r.peak[f"{u}->{v}"] + 1 for (u, v) in sg.edges}
""",
        fails=["skew_capacities_tests"],
    ),
    # skew_capacities: every edge as deep as the visible graph's depth (no stall, never checked per edge)
    dict(
        cell="skew_capacities",
        kind="hard-code-visible",
        code="""
def skew_capacities(sg):
    return {k: depth + 1 for k in sg.edges}
""",
        fails=["skew_capacities_tests"],
    ),
    # static_list_schedule: the reference the notebook used to import
    dict(
        cell="static_list_schedule",
        kind="call-reference",
        code="""
def static_list_schedule(g, P):
    from common.dataflow.schedule import list_schedule
    return list_schedule(g, P)
""",
        fails=["static_list_schedule_tests"],
    ),
    # static_list_schedule: a rank-priority ready queue at exact costs (what the library's dynamic scheduler was)
    dict(
        cell="static_list_schedule",
        kind="call-reference",
        code="""
def static_list_schedule(g, P):
    s = dynamic_schedule(g, P, g.costs(), priority="rank")
    return Schedule(s.slots, P, "static", s.work)
""",
        fails=["static_list_schedule_tests"],
    ),
    # static_list_schedule: the library's first-ready-first-served run, relabelled as a plan
    dict(
        cell="static_list_schedule",
        kind="call-reference",
        code="""
def static_list_schedule(g, P):
    s = dynamic_schedule(g, P, g.costs(), priority="fifo")
    return Schedule(s.slots, P, "static", s.work)
""",
        fails=["static_list_schedule_tests"],
    ),
    # static_list_schedule: the worked example by heart, first-ready-first-served otherwise
    dict(
        cell="static_list_schedule",
        kind="hard-code-visible",
        code="""
def static_list_schedule(g, P):
    if set(g.tasks) == {"a", "b", "c", "d", "e"} and P == 2:
        return Schedule({"a": Slot("a", 0, 0.0, 2.0), "b": Slot("b", 0, 2.0, 7.0), "c": Slot("c", 1, 2.0, 3.0),
                         "e": Slot("e", 1, 3.0, 6.0), "d": Slot("d", 0, 7.0, 8.0)}, 2, "static")
    s = dynamic_schedule(g, P, g.costs(), priority="fifo")
    return Schedule(s.slots, P, "static", s.work)
""",
        fails=["static_list_schedule_tests"],
    ),
    # mxu_plan: ask the simulated TPU compiler for its tiling of the same matmul on a catalog chip
    dict(
        cell="mxu_plan",
        kind="call-reference",
        code="""
def mxu_plan(b, m, k, n, mxu, sublanes):
    from common.sim import simulate_op
    chip_name = "tpu-v5e" if mxu == 128 else "tpu-v6e"
    t = simulate_op("matmul", (m, k, n), "tpu", chip=chip_name).programs[0].kernels[0].tiling
    mp, kp, np_ = t["M_padded"], t["K_padded"], t["N_padded"]
    return {"M_padded": mp, "K_padded": kp, "N_padded": np_, "passes": b * t["mxu_passes"],
            "efficiency": m * k * n / (mp * kp * np_)}
""",
        fails=["mxu_plan_tests"],
    ),
    # dma_edges: the simulator's own DMA table, turned into pairs (the shortcut)
    dict(
        cell="dma_edges",
        kind="call-reference",
        code="""
def dma_edges(program):
    from common.dataflow import graphview as gv
    t = gv.dma_edges(program)
    t = t[(t["kind"] != "pcie") & ~t["tensor"].str.endswith(".internal")]
    return sorted({(r.tensor, r.op) if r.direction == "LPDDR5->LX" else (r.op, "LPDDR5") for r in t.itertuples()})
""",
        fails=["dma_edges_tests"],
    ),
    # landscape_rows: one phrase for all five systems (says nothing about any of them)
    dict(
        cell="landscape_rows",
        kind="hard-code-visible",
        code="""
MY_ROWS = {a: dict.fromkeys(SYSTEMS, "compiled into a graph and scheduled") for a in ATTRIBUTES}
""",
        fails=["landscape_rows_tests"],
    ),
    # landscape_rows: keyword stuffing, every mechanism word of the lab in every cell (distinct per system, 22 words)
    dict(
        cell="landscape_rows",
        kind="hard-code-visible",
        code="""
_WORDS = ("eager Dynamo XLA HLO traced wafer spatial ahead-of-time SuperDSC bundle kernel launch run-time static "
          "compile-time cycle-exact fabric fusion fallback host lax.cond")
MY_ROWS = {a: {s: f"{s}: {_WORDS}" for s in SYSTEMS} for a in ATTRIBUTES}
""",
        fails=["landscape_rows_tests"],
    ),
    # landscape_rows: read off the Analysis table the notebook shows (kernels, engines, bound of each simulated run)
    dict(
        cell="landscape_rows",
        kind="read-off-object",
        code="""
_shown = {}
for _b in ("gpu", "tpu", "lpu", "wse", "spyre"):
    _r = simulate(workload, _b, dtype=make_policy(_b).dtype)
    _shown[{"spyre": "Spyre"}.get(_b, _b.upper())] = (f"{len(_r.programs[0].kernels)} kernels on "
                                                     f"{', '.join(sorted({e.engine for e in _r.events}))}, "
                                                     f"{_r.bottleneck}-bound")
MY_ROWS = {a: dict(_shown) for a in ATTRIBUTES}
""",
        fails=["landscape_rows_tests"],
    ),
    # ---- attacks on the probe channel, each as a shortcut of this lab's own ----
    # the argument emptied: any program but the visible one loses its kernels, so a reference rebuilt afterwards
    # from the same object finds no DMA edge either
    dict(
        cell="dma_edges",
        kind="read-off-object",
        code="""
_lazy_honest_dma = dma_edges


def dma_edges(program):
    if program is spyre.programs[0]:
        return _lazy_honest_dma(program)
    program.kernels.clear()
    return []
""",
        fails=["dma_edges_tests"],
    ),
    # the argument emptied: an unseen task graph loses its tasks, and an empty schedule is valid for it
    dict(
        cell="static_list_schedule",
        kind="read-off-object",
        code="""
_lazy_honest_schedule = static_list_schedule


def static_list_schedule(tg, P):
    if tg is g or tg is hand:
        return _lazy_honest_schedule(tg, P)
    tg.tasks.clear()
    tg.succs.clear()
    return Schedule({}, P, "static")
""",
        fails=["static_list_schedule_tests"],
    ),
    # the argument replaced: an unseen stream graph is cut down to its first actor, whose capacities are none
    dict(
        cell="skew_capacities",
        kind="read-off-object",
        code="""
_lazy_honest_skew = skew_capacities


def skew_capacities(graph):
    if graph is sg:
        return _lazy_honest_skew(graph)
    first = next(iter(graph.actors))
    for name in list(graph.actors)[1:]:
        del graph.actors[name]
    graph.edges.clear()
    return {}
""",
        fails=["skew_capacities_tests"],
    ),
    # the simulated TPU compiler asked for an MXU of the caller's choosing: a catalog chip copied with another
    # mxu_dim and sublane count
    dict(
        cell="mxu_plan",
        kind="call-reference",
        code="""
import dataclasses as _lazy_dc
from types import MappingProxyType as _LazyMP

from common.sim import simulate_op as _lazy_so


def mxu_plan(b, m, k, n, mxu, sublanes):
    base = get_chip("tpu-v6e")
    fake = _lazy_dc.replace(base, facts=_LazyMP({**base.facts, "mxu_dim": mxu, "sublanes": sublanes}))
    t = _lazy_so("matmul", (m, k, n), "tpu", chip=fake).programs[0].kernels[0].tiling
    mp, kp, np_ = t["M_padded"], t["K_padded"], t["N_padded"]
    return {"M_padded": mp, "K_padded": kp, "N_padded": np_, "passes": b * t["mxu_passes"],
            "efficiency": m * k * n / (mp * kp * np_)}
""",
        fails=["mxu_plan_tests"],
    ),
    # the printed table echoed for any graph and any roofline
    dict(
        cell="node_annotations",
        kind="echo-expected",
        code="""
_LAZY_SHOWN = table.copy()


def node_annotations(gm, args, peak, bandwidth):
    return _LAZY_SHOWN.copy()
""",
        fails=["node_annotations_tests"],
    ),
    # answers that claim to equal anything
    dict(
        cell="fusion_bytes",
        kind="echo-expected",
        code="""
class _LazyPair(tuple):
    def __eq__(self, other):
        return True

    __hash__ = tuple.__hash__


def fusion_bytes(chain, numel, bytes_per_el):
    return _LazyPair((1, 1))
""",
        fails=["fusion_bytes_tests"],
    ),
    dict(
        cell="graph_stats",
        kind="echo-expected",
        code="""
class _LazyStats(dict):
    def __eq__(self, other):
        return True

    __hash__ = None


def graph_stats(gm):
    return _LazyStats(nodes=len(gm.graph.nodes))
""",
        fails=["graph_stats_tests"],
    ),
    # the comparisons the hidden test ran in the kernel rebound (the checker module's functions, torch's); put
    # back once the test cell has run (IPython's post_run_cell), so that the rest of the notebook runs honestly
    dict(
        cell="run_dataflow",
        kind="echo-expected",
        code="""
import common.checks as _lazy_checks

_LAZY_SAVED = {n: vars(_lazy_checks)[n] for n in ("_compare_scalar", "_compare_in_range", "_compare_equal",
                                                   "_compare_tensor", "_compare_type")}
_LAZY_TORCH = torch.allclose, torch.equal
for _lazy_name in _LAZY_SAVED:
    vars(_lazy_checks)[_lazy_name] = lambda *a, **k: None
torch.allclose = torch.equal = lambda *a, **k: True
_lazy_cells = [0]


def _lazy_restore(*_):
    _lazy_cells[0] += 1
    if _lazy_cells[0] == 3:   # this cell, then the test cell it must fail (its probe, then its visible checks)
        vars(_lazy_checks).update(_LAZY_SAVED)
        torch.allclose, torch.equal = _LAZY_TORCH
        get_ipython().events.unregister("post_run_cell", _lazy_restore)


get_ipython().events.register("post_run_cell", _lazy_restore)


def run_dataflow(gm, *args):
    return torch.zeros(1), [n.name for n in reversed(gm.graph.nodes)]
""",
        fails=["run_dataflow_tests"],
    ),
    # a guess, and the stream simulator the old hidden test replayed the chain with rebound to agree with it
    dict(
        cell="chain_prediction",
        kind="echo-expected",
        code="""
import common.dataflow.interpreter as _lazy_df

CHAIN_ROUNDS, CHAIN_STALLS = 5, 0
_lazy_real_run_stream = _lazy_df.run_stream


class _LazyRun:
    rounds, total_stalls = 5, 0


_lazy_df.run_stream = lambda sg, **kw: _LazyRun()
_lazy_cells = [0]


def _lazy_restore(*_):
    _lazy_cells[0] += 1
    if _lazy_cells[0] == 3:   # this cell, then the test cell it must fail (its probe, then its visible checks)
        _lazy_df.run_stream = _lazy_real_run_stream
        get_ipython().events.unregister("post_run_cell", _lazy_restore)


get_ipython().events.register("post_run_cell", _lazy_restore)
""",
        fails=["chain_prediction_tests"],
    ),
    # the reports the old hidden test read, rebound: a Spyre run without a fallback asks nothing of the Spyre row
    dict(
        cell="landscape_rows",
        kind="echo-expected",
        code="""
MY_ROWS = {a: dict(r) for a, r in MY_ROWS.items()}
MY_ROWS["fusion boundaries"]["Spyre"] = "a bundle holds what fits the LX scratchpad"
spyre.counters["fallback_count"] = 0
spyre.programs[0].kernels[:] = [k for k in spyre.programs[0].kernels if k.kind != "fallback"]
""",
        fails=["landscape_rows_tests"],
    ),
]
