"""Shortcuts a student who does not do the Course 6 Deep Dive's work would try; each must score 0 on the cells it
names (tests/test_shortcut_notebooks.py inserts each one after its test cells, reruns them, then restores the honest
cell)."""

NOT_LISTED = {
    "predict_ratio": "ungraded: the learner's own number (Analysis Q1), judged only in the reveal, no points",
}

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
_SEEN = []
for _t, _r in tiled.items():
    _lp = _r.counters["lpddr_to_lx_bytes"] + _r.counters["lx_to_lpddr_bytes"]
    _SEEN.append({"coarse_tiles": _t, "lpddr_bytes": _lp, "I_LPDDR5": _r.flops / _lp, "time_s": _r.time_s})


def tile_sweep(reports):  # the visible tilings' table, whatever reports are passed
    return pd.DataFrame(_SEEN)
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
    # ---- attacks on the probe channel, each as a shortcut of this Deep Dive's own ----
    # the argument's counters overwritten to agree with a made-up answer (a reference read from them afterwards
    # agrees too)
    dict(
        cell="counter_point",
        kind="read-off-object",
        code="""
def counter_point(report):
    report.counters.update(lpddr_to_lx_bytes=1.0, lx_to_lpddr_bytes=0.0, lx_bytes=1.0)
    return dict(flops=report.flops, lpddr_bytes=1.0, lx_bytes=1.0, I_LPDDR5=report.flops, I_LX=report.flops,
                flops_per_s=report.flops / report.time_s)
""",
        fails=["counter_point_tests"],
    ),
    # the argument emptied (any report but the visible check's): a reference rebuilt from it has no rows either
    dict(
        cell="op_counters",
        kind="read-off-object",
        code="""
def op_counters(report):
    if report is not prefill:
        report.events.clear()
    rows = [{"name": e.name, "flops": e.flops, "lpddr_bytes": e.detail["lpddr_read"] + e.detail["lpddr_write"],
             "lx_bytes": e.bytes.get("LX", 0.0), "duration_s": e.duration}
            for e in report.events if e.kind == "compute" and e.engine == "cores" and e.flops > 0]
    return pd.DataFrame(rows, columns=["name", "flops", "lpddr_bytes", "lx_bytes", "duration_s"])
""",
        fails=["op_counters_tests"],
    ),
    # Course 4's traffic sweep re-simulates each tiling: the same bytes and times as the counters of a simulated
    # report, but not a profiler's counters
    dict(
        cell="tile_sweep",
        kind="call-reference",
        code="""
from common.memory.traffic import sweep as _lazy_traffic_sweep


def tile_sweep(reports):
    r0 = next(iter(reports.values()))
    t = _lazy_traffic_sweep(r0.workload, "coarse_tiles", list(reports), phase=r0.phase, batch=r0.batch, seq=r0.seq)
    t["I_LPDDR5"] = [r.flops / lp for r, lp in zip(reports.values(), t["lpddr_bytes"], strict=True)]
    return t[["coarse_tiles", "lpddr_bytes", "I_LPDDR5", "time_s"]]
""",
        fails=["tile_sweep_tests"],
    ),
    # the checker's comparisons rebound in the kernel (the module's dict, past its read-only __setattr__)
    dict(
        cell="level_ridges",
        kind="echo-expected",
        code="""
import common.checks as _lazy_checks

for _lazy_name in ("_compare_scalar", "_compare_equal", "_compare_type", "_compare_tensor", "_compare_in_range"):
    vars(_lazy_checks)[_lazy_name] = lambda *a, **k: None


def level_ridges(chip_name, dtype):
    return {"LX": 1.0, "LPDDR5": 1.0}
""",
        fails=["level_ridges_tests"],
    ),
]
