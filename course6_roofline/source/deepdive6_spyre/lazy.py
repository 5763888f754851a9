"""Shortcuts a student who does not do the Course 6 Deep Dive's work would try; each must score 0 on the cells it
names (tests/test_lazy_notebooks.py inserts each one after its test cells, reruns them, then restores the honest
cell)."""

SHORTCUTS = [
    # the simulated events' bytes instead of the hardware counters
    dict(
        cell="counter_point",
        kind="read-off-object",
        code="""
def counter_point(report):
    lp, lx = report.bytes["LPDDR5"], report.bytes["LX"]
    return dict(flops=report.flops, lpddr_bytes=lp, lx_bytes=lx, I_LPDDR5=report.flops / lp,
                I_LX=report.flops / lx, flops_per_s=report.achieved_flops)
""",
        fails=["counter_point_tests"],
    ),
    dict(
        cell="counter_point",
        kind="hard-code-visible",
        code="""
_SEEN = counter_point(decode)


def counter_point(report):  # the decode step of the visible check, whatever report is passed
    return dict(_SEEN)
""",
        fails=["counter_point_tests"],
    ),
    # the report's frame: event bytes, not the per-op counters
    dict(
        cell="op_counters",
        kind="read-off-object",
        code="""
def op_counters(report):
    f = report.frame()
    f = f[(f["kind"] == "compute") & (f["engine"] == "cores") & (f["flops"] > 0)]
    return f[["name", "flops", "bytes_LPDDR5", "bytes_LX", "duration_s"]].rename(
        columns={"bytes_LPDDR5": "lpddr_bytes", "bytes_LX": "lx_bytes"}).fillna(0.0).reset_index(drop=True)
""",
        fails=["op_counters_tests"],
    ),
    dict(
        cell="tile_sweep",
        kind="hard-code-visible",
        code="""
def tile_sweep(model, tiles, seq):  # the visible model and length, whatever is asked
    rows = []
    for t in tiles:
        r = simulate_llm(MODEL, "spyre", phase="prefill", batch=1, seq=SEQ, coarse_tiles=t)
        lp = r.counters["lpddr_to_lx_bytes"] + r.counters["lx_to_lpddr_bytes"]
        rows.append({"coarse_tiles": t, "lpddr_bytes": lp, "I_LPDDR5": r.flops / lp, "time_s": r.time_s})
    return pd.DataFrame(rows)
""",
        fails=["tile_sweep_tests"],
    ),
    # the catalog roofline's ridges: published levels only, no estimates
    dict(
        cell="level_ridges",
        kind="call-reference",
        code="""
def level_ridges(chip_name, dtype):
    rl = roofline_for_chip(chip_name, dtype, levels="all")
    return {lv: float(rl.ridge_point(lv)) for lv in rl.levels}
""",
        fails=["level_ridges_tests"],
    ),
]
