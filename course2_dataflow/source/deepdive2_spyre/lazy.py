"""Shortcuts a student who does not do the Course 2 Deep Dive's work would try; each must score 0 on the cells
it names (tests/test_lazy_notebooks.py inserts each one after its test cells, reruns them, then restores the
honest cell)."""

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
    from common.sim.spyre import stick_layout
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
]
