"""Shortcuts a student who does not do Lab 1's work would try; each must score 0 on the cells it names
(tests/test_shortcut_notebooks.py inserts each one after its test cells, reruns them, then restores the honest cell).

The second half attacks the channel between a hidden test and the learner's kernel: an argument emptied
after use, a name a test once read rebound, the grader's own functions replaced, objects whose comparisons lie, a
library function that computes the answer, descriptions made of the course's own text. Each root cause is named in
a comment; ``kind`` is the nearest of the harness's KINDS.
"""

NOT_LISTED = {
    "decoder_cost": "optional (Going further), ungraded",
    "gemm_spec": "optional (Going further), ungraded",
    "tensor_core_peak": "optional (Going further), ungraded",
    "predict_70b": "optional (Going further), ungraded: the learner's own ranking, judged only in the reveal",
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
    # The project's harness with the sync smuggled in through its clock: the timed median comes out right on the
    # pretend device; the cold call is not something bench.measure times.
    dict(
        cell="measure",
        kind="call-reference",
        code="""
import timeit as _timeit


def measure(fn, *args, warmup=3, min_run_time=0.2, device=None, sync=None):
    def clock():
        if sync is not None:
            sync()
        return _timeit.default_timer()

    r = bench.measure(fn, *args, warmup=warmup, min_run_time=min_run_time, device=device, timer=clock)
    return {"median_s": float(r.median_s), "iqr_s": float(r.iqr_s), "n_runs": int(r.n_runs),
            "cold_s": float(r.median_s)}
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
    # gemm_cost / softmax_cost: common.graph.costs counts one captured op (only for dtypes torch has)
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
    peak = int(max(e.cpu_memory_usage for e in prof.key_averages()))
    return {"peak_bytes": peak, "top_ops": [e.key for e in rows[:k]]}
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
    # --- the explorer question (Part 5) ------------------------------------------------------------
    # echo the number the explorer and the visible check printed (the LPU at DECODE_SEQ), whatever is asked
    dict(
        cell="explorer_batch",
        kind="hard-code-visible",
        code="""
_SEEN = first_compute_bound_batch(explore(LLM_NAME, interactive=False, show=False), "lpu", DECODE_SEQ)


def first_compute_bound_batch(explorer, machine, seq):
    return _SEEN
""",
        fails=["explorer_batch_tests"],
    ),
    # a constant: "decode is memory-bound, it never turns compute-bound"
    dict(
        cell="explorer_batch",
        kind="hard-code-visible",
        code="""
def first_compute_bound_batch(explorer, machine, seq):
    return None
""",
        fails=["explorer_batch_tests"],
    ),
    # common's roofline instead of the explorer: the first batch whose weight-streaming intensity (2 FLOP per
    # weight of b bytes, times the batch) passes the chip's catalog ridge point; blind to the KV cache and overheads
    dict(
        cell="explorer_batch",
        kind="call-reference",
        code="""
from common.chips import DTYPE_BYTES as _BYTES
from common.errors import DFAError as _DFAError


def first_compute_bound_batch(explorer, machine, seq):
    r = simulate_llm(LLM_NAME, machine, phase="decode", batch=1, seq=seq)
    chip = get_chip(r.chip)
    try:
        ridge = chip.peak(r.dtype) / chip.main_memory.bandwidth
    except _DFAError:  # a chip the catalog gives no dense peak for: call it never compute-bound
        return None
    return next((b for b in BATCHES if 2 * b / _BYTES[r.dtype] >= ridge), None)
""",
        fails=["explorer_batch_tests"],
    ),
    # the CPU's answer: this machine's measured roofline (Part 3) for every machine asked
    dict(
        cell="explorer_batch",
        kind="cpu-reference",
        code="""
def first_compute_bound_batch(explorer, machine, seq):
    return next((b for b in BATCHES if 2 * b / 4 >= ROOF.ridge_point()), None)
""",
        fails=["explorer_batch_tests"],
    ),
    # a misreading of the table: "no longer memory-bound" (scheduling or communication count) for compute-bound
    dict(
        cell="explorer_batch",
        kind="read-off-object",
        code="""
def first_compute_bound_batch(explorer, machine, seq):
    explorer.update(backends=(machine,), seq=seq)
    for batch in BATCHES:
        if explorer.update(batch=batch)["bottleneck"].iloc[0] != "memory":
            return batch
    return None
""",
        fails=["explorer_batch_tests"],
    ),
    # a lying answer: an int equal to anything, the visible LPU number underneath
    dict(
        cell="explorer_batch",
        kind="echo-expected",
        code="""
class _AnyBatch(int):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


def first_compute_bound_batch(explorer, machine, seq):
    return _AnyBatch(128)
""",
        fails=["explorer_batch_tests"],
    ),
    # --- the channel between the hidden test and the kernel -----------------------------------------
    # mutate the argument: empty the profile it is handed, so a reference rebuilt from it afterwards agrees
    dict(
        cell="profile",
        kind="read-off-object",
        code="""
def profile_run(fn):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return prof


def profile_summary(prof, k=3):
    prof.profiler.function_events.clear()  # nothing left to compare with
    return {"peak_bytes": 0, "top_ops": [e.key for e in prof.key_averages()][:k]}
""",
        fails=["profile_tests"],
    ),
    # lying objects: a top-ops list equal to anything, a peak that passes every range
    dict(
        cell="profile",
        kind="echo-expected",
        code="""
class _Same(list):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False


def profile_run(fn):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return prof


def profile_summary(prof, k=3):
    return {"peak_bytes": 2 << 20, "top_ops": _Same(["aten::mm", "aten::addmm", "aten::linear"][:k])}
""",
        fails=["profile_tests"],
    ),
    # mutate the argument: the reports handed in are emptied, so rows rebuilt from them afterwards agree
    dict(
        cell="five_machines",
        kind="read-off-object",
        code="""
def five_machine_table(reports, errors):
    table = pd.DataFrame({s: {"chip": r.chip, "time_s": r.time_s} for s, r in reports.items()}).T
    reports.clear()
    errors.clear()
    return table
""",
        fails=["five_machines_tests"],
    ),
    # lying numbers: every value a float that equals anything
    dict(
        cell="op_costs",
        kind="echo-expected",
        code="""
class _Any(float):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = float.__hash__


def gemm_cost(m, k, n, dtype_bytes=4):
    return {"flops": _Any(2.0 * m * k * n), "bytes": _Any(3.0 * m * n * 4), "intensity": _Any(1.0)}


def softmax_cost(rows, cols, dtype_bytes=4):
    return {"flops": _Any(5.0 * rows * cols), "bytes": _Any(8.0 * rows * cols), "intensity": _Any(0.625)}
""",
        fails=["op_costs_tests"],
    ),
    # a library function that computes the answer: common's rebuildable Course 1 rows (its own model and seq)
    dict(
        cell="landscape_rows",
        kind="call-reference",
        code="""
from common.landscape.courses import fill_course


def add_course1_rows(lm, qualitative, reports):
    for system, attrs in qualitative.items():
        for attribute, text in attrs.items():
            lm.add(system, attribute, text, course=1, source="learner", overwrite=True)
    fill_course(lm, 1)
    for system, r in reports.items():
        b = DTYPE_BYTES[r.dtype]
        lm.add(system, "peak memory: weights + KV (bytes)",
               LLM_CFG.n_params * b + LLM_CFG.kv_bytes_per_token(b) * (DECODE_SEQ + 1),
               course=1, source="learner", overwrite=True)
""",
        fails=["landscape_rows_tests"],
    ),
    # rebind a name the hidden test once looped over: no reports, so no simulated rows to check
    dict(
        cell="landscape_rows",
        kind="hard-code-visible",
        code="""
def add_course1_rows(lm, qualitative, reports):
    for system, attrs in qualitative.items():
        for attribute, text in attrs.items():
            lm.add(system, attribute, text, course=1, source="learner", overwrite=True)
    reports.clear()  # and empty the argument too


REPORTS = {}
""",
        fails=["landscape_rows_tests"],
    ),
    # descriptions copied from the GPU's worked example, made unique with the machine's name
    dict(
        cell="qualitative",
        kind="hard-code-visible",
        code="""
for _system in ("TPU", "WSE", "LPU", "Spyre"):
    QUALITATIVE[_system] = {a: f"{text}, as on the {_system}" for a, text in QUALITATIVE["GPU"].items()}
""",
        fails=["landscape_rows_tests"],
    ),
    # descriptions collaged from the lab's own text (introduction, Part 5, wrap-up): keywords, no mechanism per cell
    dict(
        cell="qualitative",
        kind="echo-expected",
        code="""
_INTRO = {"TPU": "XLA, systolic matrix units, HBM", "WSE": "~900,000 cores on one wafer, weights in on-wafer SRAM",
          "LPU": "no caches; the compiler schedules every cycle",
          "Spyre": "32 dataflow cores, software-managed scratchpads, LPDDR5"}
_WRAP = {"TPU": "XLA's static graph", "WSE": "the WSE's placement", "LPU": "the LPU's cycle-exact schedule",
         "Spyre": "Spyre's bundles"}
for _system in _INTRO:
    QUALITATIVE[_system] = {a: f"{a}: {_INTRO[_system]}; {_WRAP[_system]}" for a in ATTRIBUTES}
""",
        fails=["landscape_rows_tests"],
    ),
    # replace the grader's checks in the kernel (every assert a no-op), then a wrong answer. The last test of the
    # lab: in a direct run the patched class stays patched for every later cell of the kernel
    dict(
        cell="landscape_rows",
        kind="hard-code-visible",
        code="""
from common.checks import _Grader

for _name in ("assert_scalar", "assert_equal", "assert_in_range", "assert_type", "assert_tensor"):
    setattr(_Grader, _name, staticmethod(lambda *a, **k: None))
_honest_rows = add_course1_rows


def add_course1_rows(lm, qualitative, reports):
    _honest_rows(lm, qualitative, REPORTS)  # the visible reports, whatever is passed
""",
        fails=["landscape_rows_tests"],
    ),
]
