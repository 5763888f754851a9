"""Shortcuts a student who does not do Lab 2's work would try; each must score 0 on the cells it names
(tests/test_lazy_notebooks.py inserts each one after its test cells, reruns them, then restores the honest cell).

Not listed, because no test can tell it from the work: ``chain_prediction`` (1 point) is a prediction the learner
can also get by running ``run_stream`` on the chain before answering; only the order of cells asks them not to.
"""

NOT_LISTED = {
    "chain_prediction": "a prediction the learner can also get by running run_stream on the chain first; only the "
    "order of cells asks them not to, and no test can tell the two apart",
    "winner": "optional (Going further), ungraded",
    "kernel_graph": "optional (Going further), ungraded",
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
    from common.dataflow import run_tokens
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
    from common.dataflow import full_throughput_capacities
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
    from common.schedule import list_schedule
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
    from common.sim import graphview as gv
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
]
