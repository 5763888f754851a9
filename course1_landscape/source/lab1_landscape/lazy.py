"""Shortcuts a student who does not do Lab 1's work would try; each must score 0 on the cells it names
(tests/test_lazy_notebooks.py inserts each one after its test cells, reruns them, then restores the honest cell)."""

NOT_LISTED = {
    "decoder_cost": "optional (Going further), ungraded",
    "gemm_spec": "optional (Going further), ungraded",
    "tensor_core_peak": "optional (Going further), ungraded",
}

SHORTCUTS = [
    # measure: the library's harness, which knows no sync but CUDA's
    dict(
        cell="measure",
        kind="call-reference",
        code="""
def measure(fn, *args, warmup=3, min_run_time=0.2, device=None, sync=None):
    r = bench.measure(fn, *args, warmup=warmup, min_run_time=min_run_time, device=device, num_threads=1)
    return {"median_s": float(r.median_s), "iqr_s": float(r.iqr_s), "n_runs": int(r.n_runs)}
""",
        fails=["measure_tests"],
    ),
    dict(
        cell="measure",
        kind="hard-code-visible",
        code="""
def measure(fn, *args, warmup=3, min_run_time=0.2, device=None, sync=None):  # the printed GEMM time, always
    return {"median_s": 2.1e-4, "iqr_s": 4e-6, "n_runs": 9}
""",
        fails=["measure_tests"],
    ),
    # gemm_cost / softmax_cost: common.costs counts one captured op (only for dtypes torch has)
    dict(
        cell="op_costs",
        kind="call-reference",
        code="""
_DT = {8: torch.float64, 4: torch.float32, 2: torch.float16, 1: torch.float8_e4m3fn}


def gemm_cost(m, k, n, dtype_bytes=4):
    c = counted(torch.mm, (m, k), (k, n), dtype=_DT[dtype_bytes])
    return {"flops": float(c["flops"]), "bytes": float(c["bytes"]), "intensity": float(c["intensity"])}


def softmax_cost(rows, cols, dtype_bytes=4):
    c = counted(lambda x: torch.softmax(x, dim=-1), (rows, cols), dtype=_DT[dtype_bytes])
    return {"flops": float(c["flops"]), "bytes": float(c["bytes"]), "intensity": float(c["intensity"])}
""",
        fails=["op_costs_tests"],
    ),
    # achieved: the BenchResult's own rates
    dict(
        cell="achieved",
        kind="read-off-object",
        code="""
def achieved(result, rl):
    roof = float(rl.attainable(result.intensity))
    return {"flops_per_s": float(result.flops_per_s), "bytes_per_s": float(result.bytes_per_s),
            "intensity": float(result.intensity), "attainable_flops_per_s": roof,
            "fraction": float(result.flops_per_s / roof)}
""",
        fails=["achieved_tests"],
    ),
    # profile_summary: the ops and peak printed for the visible forward pass, whatever profile is passed
    dict(
        cell="profile",
        kind="hard-code-visible",
        code="""
def profile_run(fn):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return prof


_VISIBLE = profile_summary(PROF)


def profile_summary(prof, k=3):
    return {"peak_bytes": _VISIBLE["peak_bytes"], "top_ops": _VISIBLE["top_ops"][:k]}
""",
        fails=["profile_tests"],
    ),
    # the biggest number in the profiler's table (one op's allocations) instead of what the call held at once
    dict(
        cell="profile",
        kind="read-off-object",
        code="""
def profile_run(fn):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return prof


def profile_summary(prof, k=3):
    rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    return {"peak_bytes": int(max(e.cpu_memory_usage for e in prof.key_averages())), "top_ops": [e.key for e in rows[:k]]}
""",
        fails=["profile_tests"],
    ),
    # a fixed verdict: every op "compute"-bound, as the visible GEMM is
    dict(
        cell="gpu_terms",
        kind="hard-code-visible",
        code="""
def expected_time(flops, nbytes, chip, dtype="fp16"):
    c = get_chip(chip)
    compute_s, memory_s = float(flops / c.peak(dtype)), float(nbytes / c.main_memory.bandwidth)
    return {"compute_s": compute_s, "memory_s": memory_s, "time_s": max(compute_s, memory_s), "bound": "compute"}
""",
        fails=["gpu_terms_tests"],
    ),
    dict(
        cell="gpu_terms",
        kind="echo-expected",
        code="""
def expected_time(flops, nbytes, chip, dtype="fp16"):  # the GEMM of the visible check is compute-bound
    c = get_chip(chip)
    compute_s, memory_s = float(flops / c.peak("fp16")), float(nbytes / c.main_memory.bandwidth)
    return {"compute_s": compute_s, "memory_s": memory_s, "time_s": compute_s, "bound": "compute"}
""",
        fails=["gpu_terms_tests"],
    ),
    # the five-machine table of the visible reports, whatever is passed
    dict(
        cell="five_machines",
        kind="hard-code-visible",
        code="""
_TABLE = five_machine_table(REPORTS, ERRORS)


def five_machine_table(reports, errors):
    return _TABLE.copy()
""",
        fails=["five_machines_tests"],
    ),
    # one placeholder phrase everywhere instead of describing the five machines
    dict(
        cell="qualitative",
        kind="hard-code-visible",
        code="""
QUALITATIVE = {system: {attribute: "a short phrase" for attribute in ATTRIBUTES} for system in SYSTEMS}
""",
        fails=["landscape_rows_tests"],
    ),
    # landscape rows for every visible report, whatever is passed
    dict(
        cell="landscape_rows",
        kind="hard-code-visible",
        code="""
_own_rows = add_course1_rows


def add_course1_rows(lm, qualitative, reports):
    _own_rows(lm, qualitative, REPORTS)
""",
        fails=["landscape_rows_tests"],
    ),
]
