# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: all
#     notebook_metadata_filter: kernelspec,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] include="badge"
# *(shared cell `badge`: `dfa release` writes it here)*

# %% [markdown]
# # Course 1 · Lab 1 — One model, five machines: the accelerator landscape
#
# A **GPU** runs a model as kernels that a host program launches one after another (control flow); the four
# others are, to different degrees, **dataflow** machines whose compiler lays the whole graph out ahead of time: a **Google TPU** (XLA, systolic matrix units, HBM), a **Cerebras WSE** (~900,000 cores on one wafer,
# weights in on-wafer SRAM), a **Groq LPU** (no caches; the compiler schedules every cycle) and an **IBM Spyre**
# (32 dataflow cores, software-managed scratchpads, LPDDR5).
#
# You build a **timer** and a **work counter**, measure your CPU, predict a GPU from its datasheet, time a real
# 0.5B LLM here and run it at its real size on the five simulated backends of `common.sim`. Numbers are labelled
# **measured** (this machine), **catalog** (a datasheet, sourced in `common.chips`) or **simulated**
# (`common.sim`'s cost model, not the real chip).
#
# **Learning objectives**
#
# - build a benchmark harness (warm-up, device sync, median and IQR) and say why a naive timer misleads
# - count the FLOPs and compulsory bytes of a GEMM and a softmax, and their arithmetic intensity
# - measure your CPU's roofline, place measured ops on it, and profile where a forward pass spends time and memory
# - predict GPU times from the catalog (compute term vs memory term) and explain why the CPU–GPU gap differs per op
# - time a real LLM's forward pass and `generate()` (latency, tokens/s, peak memory) and set it against the simulator
# - run that model at its real size on five simulated machines: time, throughput, bottleneck, bytes per memory
#   level, and with an explorer find the batch at which each turns compute-bound
# - start the accelerator landscape map that the next five courses extend
#
# **Expected time:** about 120 minutes (plus about 21 optional)  
# **Runtime:** a free Colab CPU runtime (2 vCPUs) or any laptop; a GPU is used when present

# %% [markdown] include="grading"
# *(shared cell `grading`: `dfa release` writes it here)*

# %% include="setup"
# %run -m common.grading.authoring.labsource setup

# %%
# Environment report: every measured figure below says which machine it came from.
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from common.measure import bench, roofs
from common import roofline
from common.chips import get_chip

INFO = bench.machine_info()
print(json.dumps(INFO, indent=1))
MACHINE = f"{INFO['cpu']}, {INFO['num_threads']} threads"


def attempt(what, fn, *args, **kwargs):
    """Run one of your functions; while it is not written yet, say so and return None (later cells skip it)."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        print(f"({what} is not written yet: this step is skipped until it is)")
        return None


# %% tags=["parameters"]
import os

# FAST: small sizes, short runs. CI and the autograder run it (nbgrader sets NBGRADER_EXECUTION; papermill
# passes FAST=True).
# DFA_FAST=1 picks the same FAST setting but keeps the explorer's widgets live (NBGRADER_EXECUTION makes it print).
FAST = bool(os.environ.get("NBGRADER_EXECUTION") or os.environ.get("DFA_FAST"))
MODEL = "tiny-block"  # Parts 1-4's small decoder (common.models): 2 layers, d_model 64, byte vocabulary
BATCH, SEQ = 4, 64  # the forward pass you measure on this CPU (batch, sequence length)
GEMM_SIZES = None  # N of the N x N GEMM sweep; None: 64 ... 1024 (fast: 64 ... 256)
MIN_RUN_TIME = None  # seconds each measurement runs for; None: 0.2 (fast: 0.02)
LANDSCAPE_PATH = None  # None: the map all six courses share ($DFA_LANDSCAPE, else ~/.local/share/dataflow-labs)
LLM_NAME = "qwen2.5-0.5b-instruct"  # the real model of Part 5 (common.models.LLMS): Qwen2.5-0.5B-Instruct
LLM_LAYERS = None  # None: all 24 layers (fast: a 2-layer cut of the same config)
PROMPT_LEN, NEW_TOKENS = 32, 16  # the prompt you time the real model on, and how many tokens generate() adds
DECODE_SEQ = 512  # tokens in the KV cache of the simulated decode step of Part 5
COMPARE_CHIP = "t4"  # on a CPU runtime only: the simulated GPU your CPU is set against (a GPU is its own chip)

# %%
# Resolve the parameters (papermill may have set FAST=True after the cell above).
import tempfile

if FAST:
    BATCH, SEQ = min(BATCH, 2), min(SEQ, 32)
    GEMM_SIZES = GEMM_SIZES or [64, 128, 256]
    MIN_RUN_TIME = MIN_RUN_TIME or 0.02
    PEAK_KW = {"gemm_n": 256, "copy_bytes": 16 << 20, "min_run_time": 0.05}  # a quick, rougher roofline
    SOFTMAX_SHAPE = (512, 1024)
    GAP_GEMM_N = 256  # the GEMM of Part 4 (large enough to be compute-bound on a GPU in the full run)
    # CI and the autograder write the map to a fresh scratch file, never into your workspace
    LANDSCAPE_PATH = LANDSCAPE_PATH or os.path.join(tempfile.mkdtemp(prefix="dfa_"), "landscape_map.json")
    LLM_LAYERS = LLM_LAYERS or 2
    PROMPT_LEN, NEW_TOKENS = min(PROMPT_LEN, 8), min(NEW_TOKENS, 4)
else:
    GEMM_SIZES = GEMM_SIZES or [64, 128, 256, 512, 1024]
    MIN_RUN_TIME = MIN_RUN_TIME or 0.2
    PEAK_KW = {}  # common.measure.bench.measure_peaks defaults: a 1024 GEMM and a 256 MiB copy (a few seconds)
    SOFTMAX_SHAPE = (4096, 1024)
    GAP_GEMM_N = 2048  # about 17 GFLOP: a second or so per call on a laptop CPU
print(f"FAST={FAST}: model {MODEL}, batch {BATCH}, seq {SEQ}, GEMM sizes {GEMM_SIZES}, "
      f"{MIN_RUN_TIME} s per measurement; real model {LLM_NAME} ({LLM_LAYERS or 'all'} layers), "
      f"prompt {PROMPT_LEN} + {NEW_TOKENS} new tokens")

# %% [markdown]
# ## Part 1 — A benchmark harness from scratch
#
# **Principle.** A comparable time needs four things: one-time work done before the clock starts (lazy
# initialisation, allocator and cache warm-up, autotuning), a clock that reads *finished* work (a GPU runs
# kernels asynchronously: sync before each read), many samples, and a robust summary — the **median**, with the
# **IQR** (75th − 25th percentile) as spread; one preempted run drags a mean.
#
# **Vendor.** `torch.utils.benchmark.Timer(stmt, globals, timer=...)`; its `.blocked_autorange(min_run_time)`
# picks how many calls go in one timed block and returns a `Measurement` with `.median`, `.iqr`, `.times`
# (seconds per call).
#
# **Spec.** `measure(fn, *args, warmup=3, min_run_time=0.2, device=None, sync=None)`:
# 1. finds the device (`device`, else that of the first tensor in `args`, else the CPU) and its **sync**: the
#    callable `sync` if given (every accelerator runtime has one: `xm.wait_device_ops()` on a TPU, torch-spyre's
#    own), else `torch.cuda.synchronize(device)` on CUDA and nothing on the CPU;
# 2. times the **first** call on its own — the cold call, which pays for lazy initialisation, compilation and
#    autotuning: sync, read `timeit.default_timer()`, call, sync, read again — then makes the other `warmup - 1`
#    warm-up calls untimed, and syncs (with `warmup=0` there is no cold call);
# 3. times with `Timer(..., timer=clock)`, where `clock()` syncs and then returns `timeit.default_timer()`,
#    using `blocked_autorange(min_run_time=min_run_time)`;
# 4. returns `{"median_s": float, "iqr_s": float, "n_runs": int, "cold_s": float or None}` (seconds per call;
#    `cold_s` is the first call's time, `None` when `warmup=0`).
#
# The checks time a pretend asynchronous device (work runs only when `sync` waits; the first call pays a setup
# cost). The project's `common.measure.bench.measure` has no `sync` for other devices and no cold-call time.
# Example: a 256 × 256 `torch.mm` on a laptop → `{"median_s": 0.00021, "iqr_s": 4e-06, "n_runs": 9, "cold_s": 0.0011}`.

# %% nbgrader={"grade": false, "grade_id": "measure", "locked": false, "schema_version": 3, "solution": true, "task": false}
import timeit

import torch.utils.benchmark as benchmark


def measure(fn, *args, warmup=3, min_run_time=0.2, device=None, sync=None):
    """Median and IQR (seconds per call) of fn(*args), after warm-up, with a device sync before every clock read
    (`sync`, else torch.cuda.synchronize on a GPU, nothing on the CPU)."""
    ### BEGIN SOLUTION
    first = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
    dev = torch.device(device) if device is not None else first
    if sync is None:
        sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)

    def clock():  # every read of the clock waits for the device first
        sync()
        return timeit.default_timer()

    cold = None
    if warmup > 0:  # the cold call, timed on its own
        t0 = clock()
        fn(*args)
        cold = clock() - t0
    for _ in range(warmup - 1):
        fn(*args)
    sync()
    timer = benchmark.Timer(stmt="fn(*args)", globals={"fn": fn, "args": args}, timer=clock)
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return {"median_s": float(m.median), "iqr_s": float(m.iqr), "n_runs": len(m.times), "cold_s": cold}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "measure_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
import time
import timeit
from contextlib import contextmanager

from common.checks import check_in_range, check_scalar, check_type

A = torch.randn(256, 256)
mine = measure(torch.mm, A, A, min_run_time=MIN_RUN_TIME)
check_type("measure(...) returns", mine, dict)
check_type("median_s", mine["median_s"], float, hint="return float(m.median)")
check_type("iqr_s", mine["iqr_s"], float, hint="return float(m.iqr)")
check_in_range("median of a 256x256 GEMM, in seconds", mine["median_s"], 1e-7, 10.0)
check_in_range("IQR in seconds", mine["iqr_s"], 0.0, 10.0, hint="the IQR is p75 - p25 of the per-call times")
print(f"256x256 GEMM: {mine['median_s'] * 1e6:.1f} µs (IQR {mine['iqr_s'] * 1e6:.1f} µs)")

# The checks below run on a pretend clock that only the pretend work moves, so their numbers are exact however
# busy this machine is: `measure` must read timeit.default_timer() inside its clock, as the spec says.
STEP_S, LAUNCH_S, SETUP_S = 1e-7, 1e-6, 1e-3  # pretend seconds per step of work, per launch, and of the first
# call's one-time setup (a compiler or autotuner running on the host before the first launch)


class PretendClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@contextmanager
def pretend_time(clock):
    saved = timeit.default_timer, time.perf_counter
    timeit.default_timer = time.perf_counter = clock
    try:
        yield clock
    finally:
        timeit.default_timer, time.perf_counter = saved


class PretendDevice:
    """An asynchronous device: launch(n) queues n steps of work and returns at once; sync() runs the queue."""

    def __init__(self, clock):
        self.clock, self.queued, self.launched = clock, 0, False

    def launch(self, n):
        self.clock.now += LAUNCH_S + (SETUP_S if not self.launched else 0.0)
        self.launched = True
        self.queued += n

    def sync(self):
        self.clock.now += self.queued * STEP_S
        self.queued = 0


with pretend_time(PretendClock()) as clock:
    def work(n):  # work run directly: it takes n steps
        clock.now += n * STEP_S

    direct = measure(work, 40_000, min_run_time=0.2)
    dev = PretendDevice(clock)
    queued = measure(dev.launch, 40_000, min_run_time=0.2, sync=dev.sync)
check_scalar("median seconds per call of work taking 40,000 x 1e-7 pretend seconds", direct["median_s"],
             40_000 * STEP_S, rel=0.01, hint="report seconds per call (Timer's m.median), read with timeit.default_timer")
check_scalar("pretend device: time per call with its sync / time of the same work run directly",
             queued["median_s"] / direct["median_s"], 1.0, rel=0.01,
             hint="call sync() after the warm-up and inside clock(), before every timeit.default_timer() read")
check_type("cold_s", queued["cold_s"], float, hint="the first warm-up call's time, synced before and after")
check_scalar("pretend device: cold_s, the first call's setup + launch + its work", queued["cold_s"],
             SETUP_S + LAUNCH_S + 40_000 * STEP_S, rel=0.01,
             hint="sync() before reading the clock after the first call, or its queued work is not in the time")
check_scalar("pretend device: median, with the setup left out", queued["median_s"], LAUNCH_S + 40_000 * STEP_S,
             rel=0.01, hint="the cold call is a warm-up call: the timed blocks start after all of them")
### BEGIN HIDDEN TESTS
import random as _random
import time as _time
import timeit as _timeit

from common.grading.verdicts.probe import Probe

probe = Probe()  # this half runs in your kernel: your measure on a pretend clock and device, results out as data
_rng = _random.Random(probe.seed)
_n, _scale, _step = _rng.randrange(10_000, 30_000), _rng.choice((2, 3, 4, 5)), _rng.choice((1e-7, 2e-7, 5e-7))
_warmup, _slow_every = _rng.randrange(4, 9), _rng.choice((7, 9, 11))
_setup = _rng.choice((2e-4, 5e-4, 2e-3))  # the first call's one-time host setup, pretend seconds


class _Clock:
    def __init__(self):
        self.now, self.calls, self.reads = 0.0, 0, []

    def __call__(self):
        self.reads.append(self.calls)  # how many calls had been made at each clock read
        return self.now


class _Async:  # the work of every call runs only when sync() waits for it; the first call pays _setup
    def __init__(self, clock, slow_every=0):
        self.clock, self.slow_every, self.queued = clock, slow_every, 0

    def launch(self, n):
        self.clock.calls += 1
        self.clock.now += 3e-7 + (_setup if self.clock.calls == 1 else 0.0)
        # after the first ten calls (warm-up and block sizing), one call in slow_every is preempted: 100x its time
        slow = self.slow_every and self.clock.calls > 10 and self.clock.calls % self.slow_every == 0
        self.queued += n * (100 if slow else 1)

    def sync(self):
        self.clock.now += self.queued * _step
        self.queued = 0


def _on_async(n, slow_every=0, min_run_time=0.05, **kw):
    _c = _Clock()
    _saved = _timeit.default_timer, _time.perf_counter
    _timeit.default_timer = _time.perf_counter = _c
    try:
        _d = _Async(_c, slow_every)
        _r = measure(_d.launch, n, min_run_time=min_run_time, sync=_d.sync, **kw)
        return {k: _r.get(k) for k in ("median_s", "iqr_s", "n_runs", "cold_s")}, _c.reads[:3]
    finally:
        _timeit.default_timer, _time.perf_counter = _saved


probe.send("gemm", dict(measure(torch.mm, torch.randn(128, 128), torch.randn(128, 128), min_run_time=0.02)))
probe.send("small", _on_async(_n)[0])
probe.send("big", _on_async(_n * _scale)[0])
probe.send("robust", _on_async(_n, slow_every=_slow_every, min_run_time=0.5)[0])  # long enough for slow calls
probe.send("reads", _on_async(_n // 4, warmup=_warmup)[1])  # calls made at the first three clock reads
probe.send("no_warmup", _on_async(_n // 4, warmup=0)[0])
### JUDGEMENT
import random

from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)  # the same draws as the probe's
n, scale, step = rng.randrange(10_000, 30_000), rng.choice((2, 3, 4, 5)), rng.choice((1e-7, 2e-7, 5e-7))
warmup, slow_every = rng.randrange(4, 9), rng.choice((7, 9, 11))
setup = rng.choice((2e-4, 5e-4, 2e-3))
for key in ("gemm", "small", "big", "robust"):
    r = data[key]
    grader.assert_type(r, dict, name="measure returns a dict")
    grader.assert_type(r["median_s"], float, name="median_s is a float")
    grader.assert_type(r["iqr_s"], float, name="iqr_s is a float")
    grader.assert_type(r["n_runs"], int, name="n_runs is an int")
    grader.assert_in_range(r["n_runs"], 1, 10**9, name="n_runs counts the timed runs")
grader.assert_in_range(data["gemm"]["median_s"], 1e-8, 10.0, name="median of a 128x128 GEMM, in seconds")
grader.assert_in_range(data["gemm"]["iqr_s"], 0.0, 10.0, name="IQR of a 128x128 GEMM, in seconds")
for key in ("small", "big"):  # every pretend call is identical: no spread
    grader.assert_in_range(data[key]["iqr_s"], 0.0, 0.01 * data[key]["median_s"], name="IQR of identical calls")
work_s = n * step + 3e-7  # the queued work of one call, plus its launch
grader.assert_scalar(data["small"]["median_s"], work_s, rel=0.01, name="synced time per call is the work's")
grader.assert_scalar(data["big"]["median_s"] / data["small"]["median_s"], (n * scale * step + 3e-7) / work_s,
                     rel=0.01, name="on an asynchronous device, k times the work takes k times the time")
grader.assert_in_range(data["robust"]["n_runs"], 3, 10**9, name="half a second of calls is several runs")
grader.assert_scalar(data["robust"]["median_s"], work_s, rel=0.01,
                     name="one preempted call in a few does not move the median")
# The cold call: timed alone, synced before and after, and left out of the timed blocks (a property the
# project's bench.measure does not have: it has no cold-call time and no sync for a non-CUDA device).
grader.assert_type(data["gemm"]["cold_s"], float, name="cold_s of a 128x128 GEMM is a float")
grader.assert_in_range(data["gemm"]["cold_s"], 1e-8, 10.0, name="cold_s of a 128x128 GEMM, in seconds")
for key, steps in (("small", n), ("big", n * scale)):
    grader.assert_type(data[key]["cold_s"], float, name="cold_s is a float")
    grader.assert_scalar(data[key]["cold_s"], setup + 3e-7 + steps * step, rel=0.01,
                         name="cold_s: the first call's setup, launch and queued work (synced before the read)")
grader.assert_scalar(data["big"]["median_s"], n * scale * step + 3e-7, rel=0.01,
                     name="the first call's setup stays out of the median")
grader.assert_equal(data["no_warmup"]["cold_s"], None, name="warmup=0: no cold call, cold_s is None")
reads = data["reads"]
grader.assert_type(reads, list, name="the clock was read")
grader.assert_equal(len(reads) == 3 and reads[:2] == [0, 1], True,
                    name="the first call is timed alone: clock read before it and right after it")
grader.assert_in_range(reads[2] if len(reads) == 3 else -1, warmup, 10**9,
                       name="every warm-up call made before the timed blocks read the clock")
### END HIDDEN TESTS

# %%
# Now the naive way: common.measure.bench.naive_time = time.perf_counter() around a loop, no warm-up, no sync, one mean.
from common.models import build_model, get_config, step_inputs

CFG = get_config(MODEL)
model = build_model(MODEL).eval()
margs, mkw = step_inputs(model, "prefill", BATCH, SEQ)


def forward():
    with torch.no_grad():
        return model(*margs, **mkw)


threads = torch.get_num_threads()
torch.set_num_threads(1)  # one thread for every row, as your harness times it
first_call = bench.naive_time(forward, n=1)  # the very first call: pays for lazy initialisation
repeats = [bench.naive_time(forward, n=3) for _ in range(5)]
yours = attempt("measure", measure, forward, min_run_time=MIN_RUN_TIME)
ref = bench.measure(forward, min_run_time=MIN_RUN_TIME, num_threads=1)
torch.set_num_threads(threads)
rows = [("naive, first call (n=1)", first_call, None),
        ("naive, 5 repeats of n=3: min", min(repeats), None), ("naive, 5 repeats of n=3: max", max(repeats), None),
        ("common.measure.bench.measure: median", ref.median_s, ref.iqr_s)]
if yours is not None:
    rows.append(("your measure: median", yours["median_s"], yours["iqr_s"]))
timing = pd.DataFrame(rows, columns=["method", "seconds per call", "IQR (s)"]).set_index("method")
print(f"MEASURED on {INFO['cpu']}, 1 thread: {MODEL} forward, batch {BATCH}, seq {SEQ}, fp32")
print(timing.to_string(float_format=lambda v: f"{v * 1e3:.3f} ms"))
if torch.cuda.is_available():  # on a GPU the naive timer reads the clock before the kernels finish
    g = build_model(MODEL, device="cuda")
    gargs, gkw = step_inputs(g, "prefill", BATCH, SEQ)
    with torch.no_grad():
        naive_gpu = bench.naive_time(lambda: g(*gargs, **gkw), n=10)
        synced_gpu = bench.measure(lambda: g(*gargs, **gkw), device="cuda", min_run_time=MIN_RUN_TIME).median_s
    print(f"MEASURED on {torch.cuda.get_device_name()}: naive (no sync) {naive_gpu * 1e3:.3f} ms, "
          f"synced median {synced_gpu * 1e3:.3f} ms")

# %% [markdown]
# Compare the rows: the first call is usually the slowest, and the naive repeats scatter by more than the
# harness's IQR. On a GPU, a loop without sync measures how fast Python *enqueues* kernels (Analysis, question 1).

# %% [markdown]
# ## Part 2 — Count the work: FLOPs, bytes, intensity
#
# **Principle.** Time says nothing about a machine without the amount of work. An op has **FLOPs** (a
# multiply-accumulate counts 2) and **compulsory bytes** (every input read once, every output written once: the
# least traffic any machine must move). Their ratio, **arithmetic intensity** (FLOP/byte), decides whether the op
# can ever be compute-bound: above the machine's ridge point (peak FLOP/s ÷ bandwidth) it can; below it, memory
# sets its speed.
#
# **Vendor.** `common.graph.costs` counts every node of a captured graph (matmuls via `torch.utils.flop_counter`; a
# softmax is 5 FLOPs per element: max, subtract, exp, sum, divide); `counted(fn, *shapes)` below sums it for one op.
#
# **Spec.** `gemm_cost(m, k, n, dtype_bytes=4)` for `(m, k) @ (k, n)` and `softmax_cost(rows, cols,
# dtype_bytes=4)` over the last dimension each return `{"flops": float, "bytes": float, "intensity": float}`,
# with compulsory bytes. `dtype_bytes` is any positive number (0.5: 4-bit weights). Example: `gemm_cost(2, 3, 4)` → 48 FLOPs,
# (6 + 12 + 8) × 4 = 104 bytes, intensity 0.46.

# %%
# common's counters: capture one function at aten level (on fake tensors), count every node, sum.
from common.graph.capture import capture_aten
from common.graph.costs import annotate, node_table, summarize


class OneOp(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def counted(fn, *shapes, dtype=torch.float32):
    """Totals of common.graph.costs for fn on tensors of these shapes: nodes, flops, bytes, intensity."""
    gm = capture_aten(OneOp(fn), tuple(torch.empty(s, dtype=dtype) for s in shapes))
    annotate(gm, *gm.meta["example_inputs"])
    return summarize(node_table(gm))


print("GEMM 128x256 @ 256x64:", counted(torch.mm, (128, 256), (256, 64)))


# %% nbgrader={"grade": false, "grade_id": "op_costs", "locked": false, "schema_version": 3, "solution": true, "task": false}
def gemm_cost(m, k, n, dtype_bytes=4):
    """FLOPs, compulsory bytes and intensity of (m, k) @ (k, n)."""
    ### BEGIN SOLUTION
    flops = 2.0 * m * k * n
    nbytes = float((m * k + k * n + m * n) * dtype_bytes)
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes}
    ### END SOLUTION


def softmax_cost(rows, cols, dtype_bytes=4):
    """FLOPs (5 per element), compulsory bytes and intensity of a softmax over the last dim of (rows, cols)."""
    ### BEGIN SOLUTION
    flops = 5.0 * rows * cols
    nbytes = 2.0 * rows * cols * dtype_bytes
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "op_costs_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_scalar, check_type

ref_mm = counted(torch.mm, (128, 256), (256, 64))
mine = gemm_cost(128, 256, 64)
check_type("gemm_cost(...)", mine, dict)
check_scalar("GEMM FLOPs", mine["flops"], ref_mm["flops"], hint="2 x m x k x n")
check_scalar("GEMM bytes", mine["bytes"], ref_mm["bytes"], hint="A, B read once, C written once")
check_scalar("GEMM intensity", mine["intensity"], ref_mm["intensity"], rel=1e-6)
ref_sm = counted(lambda x: torch.softmax(x, dim=-1), (64, 1000))
mine = softmax_cost(64, 1000)
check_type("softmax_cost(...)", mine, dict)
check_scalar("softmax FLOPs", mine["flops"], ref_sm["flops"], hint="5 per element")
check_scalar("softmax bytes", mine["bytes"], ref_sm["bytes"], hint="the input read once, the output written once")
check_scalar("softmax intensity", mine["intensity"], ref_sm["intensity"], rel=1e-6)
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)
_gemms = [(128, 256, 64, 4), (1000, 2000, 3000, 2), (_rng.randrange(1, 5000), _rng.randrange(1, 5000),
                                                    _rng.randrange(1, 5000), 0.5)]
_gemms += [(_rng.randrange(1, 9000), _rng.randrange(1, 9000), _rng.randrange(1, 9000), _b) for _b in (4, 2, 1)]
_softmaxes = [(64, 1000, 4), (10, 7, 2), (_rng.randrange(1, 5000), _rng.randrange(1, 5000), 1),
              (_rng.randrange(1, 5000), _rng.randrange(1, 5000), 0.5)]
probe.send("gemm", [gemm_cost(*_g) for _g in _gemms])
probe.send("softmax", [softmax_cost(*_s) for _s in _softmaxes])
### JUDGEMENT
import random

from answers import gemm_cost as ref_gemm
from answers import softmax_cost as ref_softmax
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
gemms = [(128, 256, 64, 4), (1000, 2000, 3000, 2), (rng.randrange(1, 5000), rng.randrange(1, 5000),
                                                  rng.randrange(1, 5000), 0.5)]
gemms += [(rng.randrange(1, 9000), rng.randrange(1, 9000), rng.randrange(1, 9000), b) for b in (4, 2, 1)]
softmaxes = [(64, 1000, 4), (10, 7, 2), (rng.randrange(1, 5000), rng.randrange(1, 5000), 1),
             (rng.randrange(1, 5000), rng.randrange(1, 5000), 0.5)]
for what, cases, ref, mine in (("gemm_cost", gemms, ref_gemm, data["gemm"]),
                               ("softmax_cost", softmaxes, ref_softmax, data["softmax"])):
    grader.assert_equal(len(mine), len(cases), name=f"{what}: one answer per case")
    for case, got in zip(cases, mine):
        grader.assert_type(got, dict, name=f"{what} returns a dict")
        want = ref(*case)
        for key in ("flops", "bytes", "intensity"):
            grader.assert_type(got[key], float, int, name=f"{what}: {key} is a number")
            grader.assert_scalar(got[key], want[key], rel=1e-6, name=f"{what}{case}: {key}")
### END HIDDEN TESTS

# %%
# The decoder, counted by common: every aten node of one prefill forward pass.
gm = capture_aten(model, margs, mkw)
annotate(gm, *gm.meta["example_inputs"])
DEC_TABLE = node_table(gm)
DEC = summarize(DEC_TABLE)
MATMUL_FLOPS = float(DEC_TABLE[DEC_TABLE["op"].isin(["aten.mm", "aten.bmm"])]["flops"].sum())


def _nbytes(val):
    leaves = torch.utils._pytree.tree_leaves(val)
    return sum(t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor))


placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
WEIGHT_BYTES = sum(_nbytes(n.meta["val"]) for n in placeholders if n.meta.get("kind") == "param")
TOKEN_BYTES = sum(_nbytes(n.meta["val"]) for n in placeholders if n.meta.get("kind") == "input")
LOGIT_BYTES = _nbytes(forward())  # the logits of one forward pass
DEC_MIN_BYTES = float(WEIGHT_BYTES + TOKEN_BYTES + LOGIT_BYTES)
print(f"{MODEL}, batch {BATCH}, seq {SEQ}: {DEC['nodes']} ops, {DEC['flops'] / 1e6:.2f} MFLOP in total, "
      f"{MATMUL_FLOPS / 1e6:.2f} MFLOP in matmuls")
print(f"unfused traffic (every op reads and writes DRAM): {DEC['bytes'] / 1e6:.2f} MB; compulsory: "
      f"{DEC_MIN_BYTES / 1e6:.2f} MB (weights {WEIGHT_BYTES / 1e6:.2f} MB)")
print(DEC_TABLE.groupby("op")[["flops", "bytes"]].sum().sort_values("flops", ascending=False).head(6).to_string())


# %%
# Intensity of the workloads you time in Part 3, fp32 (the decoder's from common's counts above).
work = {f"GEMM {GAP_GEMM_N}^3": attempt("gemm_cost", gemm_cost, GAP_GEMM_N, GAP_GEMM_N, GAP_GEMM_N),
        f"softmax {SOFTMAX_SHAPE}": attempt("softmax_cost", softmax_cost, *SOFTMAX_SHAPE),
        f"{MODEL} forward (compulsory bytes)": {"flops": DEC["flops"], "bytes": DEC_MIN_BYTES,
                                              "intensity": DEC["flops"] / DEC_MIN_BYTES},
        f"{MODEL} forward (unfused, all ops)": {k: DEC[k] for k in ("flops", "bytes", "intensity")}}
if all(v is not None for v in work.values()):
    print(pd.DataFrame(work).T.to_string(float_format=lambda v: f"{v:.3g}"))


# %% [markdown]
# ## Part 3 — Measure the CPU: roofline, three ops, profile
#
# **Principle.** A roofline bounds what a machine can do at a given intensity: `attainable = min(peak FLOP/s,
# intensity × bandwidth)`. Your CPU's two roofs are measured, not looked up. Each op you time becomes a point —
# x its intensity, y its achieved FLOP/s — and its distance to the roof is what is left on the table.
#
# **Vendor.** `common.measure.roofs.measure_roofline(device, dtype)` times a large GEMM (compute roof) and a copy far
# bigger than the caches (bandwidth roof) and returns a `Roofline`; `rl.attainable(intensity)` is the bound.
#
# **Spec.** `achieved(result, rl)` for a measurement `result` — anything with `.flops`, `.bytes` (counted work
# per call) and `.median_s` — and a `roofline.Roofline` →
# `{"flops_per_s", "bytes_per_s", "intensity", "attainable_flops_per_s", "fraction"}` as floats, where
# attainable = `rl.attainable(intensity)` and fraction = achieved ÷ attainable. Example: 1 GFLOP and 1 MB in
# 2 ms under roofs of 1 TFLOP/s and 10 GB/s → 0.5 TFLOP/s, intensity 1000, attainable 1 TFLOP/s, fraction 0.5.

# %%
# Measure this CPU's roofline, then three ops with the work common counts for them (Part 2).
ROOF = roofs.measure_roofline("cpu", torch.float32, **PEAK_KW)
n = GAP_GEMM_N
mm_work = counted(torch.mm, (n, n), (n, n))
soft_work = counted(lambda x: torch.softmax(x, dim=-1), SOFTMAX_SHAPE)
CPU_RESULTS = {
    "GEMM": bench.measure(torch.mm, torch.randn(n, n), torch.randn(n, n), label=f"GEMM {n}^3",
                          flops=mm_work["flops"], bytes=mm_work["bytes"], min_run_time=MIN_RUN_TIME),
    "softmax": bench.measure(torch.softmax, torch.randn(*SOFTMAX_SHAPE), -1, label=f"softmax {SOFTMAX_SHAPE}",
                             flops=soft_work["flops"], bytes=soft_work["bytes"], min_run_time=MIN_RUN_TIME),
    f"{MODEL} fwd": bench.measure(forward, label=f"{MODEL} forward", flops=DEC["flops"], bytes=DEC_MIN_BYTES,
                                  min_run_time=MIN_RUN_TIME)}
DEC_RESULT = CPU_RESULTS[f"{MODEL} fwd"]
# The probes are one GEMM and one copy: an op can beat them (a larger GEMM, a copy that fits a cache). The roof is
# the best of everything measured, so no measured op sits above it (the note says which op raised which roof).
ROOF = roofline.best_measured_roof(ROOF, list(CPU_RESULTS.values()))
print(f"MEASURED roofline of {MACHINE}: {ROOF.peak_flops / 1e9:.1f} GFLOP/s, {ROOF.bandwidth() / 1e9:.1f} GB/s, "
      f"ridge {ROOF.ridge_point():.1f} FLOP/byte ({ROOF.note})")
print(pd.DataFrame({r.label: {"median_s": r.median_s, "iqr_s": r.iqr_s, "GFLOP/s": r.flops_per_s / 1e9,
                              "GB/s": r.bytes_per_s / 1e9, "intensity": r.intensity}
                    for r in CPU_RESULTS.values()}).T.to_string(float_format=lambda v: f"{v:.3g}"))


# %% nbgrader={"grade": false, "grade_id": "achieved", "locked": false, "schema_version": 3, "solution": true, "task": false}
def achieved(result, rl):
    """Achieved FLOP/s and bytes/s of a BenchResult, its intensity, the roof above it and the fraction reached."""
    ### BEGIN SOLUTION
    flops_per_s = result.flops / result.median_s
    bytes_per_s = result.bytes / result.median_s
    intensity = result.flops / result.bytes
    roof = float(rl.attainable(intensity))
    return {"flops_per_s": float(flops_per_s), "bytes_per_s": float(bytes_per_s), "intensity": float(intensity),
            "attainable_flops_per_s": roof, "fraction": float(flops_per_s / roof)}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "achieved_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_in_range, check_scalar, check_type

mine = achieved(DEC_RESULT, ROOF)
check_type("achieved(...)", mine, dict)
check_scalar("achieved FLOP/s", mine["flops_per_s"], DEC_RESULT.flops_per_s, rel=1e-6)
check_scalar("achieved bytes/s", mine["bytes_per_s"], DEC_RESULT.bytes_per_s, rel=1e-6)
check_scalar("intensity", mine["intensity"], DEC_RESULT.intensity, rel=1e-6)
check_scalar("attainable FLOP/s", mine["attainable_flops_per_s"], ROOF.attainable(DEC_RESULT.intensity), rel=1e-6,
             hint="rl.attainable(intensity) = min(peak, intensity x bandwidth)")
check_in_range("fraction of the roof", mine["fraction"], 1e-5, 10.0)
print(f"the {MODEL} forward pass reaches {mine['fraction']:.1%} of this CPU's roof at its intensity")
### BEGIN HIDDEN TESTS
import random as _random
from types import SimpleNamespace as _SN

from common import roofline as _roofline
from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)
_peak, _bw = 10 ** _rng.uniform(11, 13), 10 ** _rng.uniform(9, 11)  # a roofline of another machine: ridge 1 .. 1e4
_cases = [(10 ** _rng.uniform(6, 10), _i, 10 ** _rng.uniform(-5, -1)) for _i in (0.05, 5e4, 10 ** _rng.uniform(0, 4))]
_out = []
for _flops, _intensity, _median in _cases:  # a measurement record of another harness: no derived rates
    _rl = _roofline.Roofline("t", _peak, (_roofline.Ceiling("mem", "bandwidth", _bw, level="DRAM"),), "measured", "fp32")
    _out.append(achieved(_SN(flops=_flops, bytes=_flops / _intensity, median_s=_median), _rl))
probe.send("achieved", [{_k: _a[_k] for _k in ("flops_per_s", "bytes_per_s", "intensity", "attainable_flops_per_s",
                                               "fraction")} for _a in _out])
### JUDGEMENT
import random

from answers import achieved as ref
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
peak, bw = 10 ** rng.uniform(11, 13), 10 ** rng.uniform(9, 11)
cases = [(10 ** rng.uniform(6, 10), i, 10 ** rng.uniform(-5, -1)) for i in (0.05, 5e4, 10 ** rng.uniform(0, 4))]
grader.assert_equal(len(data["achieved"]), len(cases), name="one answer per record")
for (flops, intensity, median), got, regime in zip(cases, data["achieved"], ("memory", "compute", "mixed")):
    want = ref(flops, flops / intensity, median, peak, bw)
    for key, value in want.items():
        grader.assert_type(got[key], float, name=f"{key} is a float")
        grader.assert_scalar(got[key], value, rel=1e-6, name=f"{regime}-bound record: {key}")
### END HIDDEN TESTS

# %%
# Your CPU's roofline with the three measured ops on it.
pts = pd.DataFrame([{"label": r.label, "flops": r.flops, "intensity": r.intensity, "flops_per_s": r.flops_per_s,
                     "source": "measured"} for r in CPU_RESULTS.values()])
ax = roofline.plot_roofline(ROOF, pts, point_label_col="label",
                            title=f"MEASURED roofline and ops of {INFO['cpu']}, fp32, {INFO['num_threads']} threads\n"
                                  f"GEMM {GAP_GEMM_N}^3, softmax {SOFTMAX_SHAPE}, {MODEL} forward at batch {BATCH}, "
                                  f"seq {SEQ}")
plt.show()

# %% [markdown]
# ### Where the time and the memory go: `torch.profiler`
#
# **Principle.** A harness gives one number per call; a **profiler** splits it by operator: each op's *self*
# time (in the op itself, not in the ops it calls) and, with memory profiling on, every allocation and free:
# the **top ops by self CPU time** and the **peak memory** the call holds at once.
#
# **Vendor.** `with torch.profiler.profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:`
# records the code inside. `prof.key_averages()` aggregates per op name: rows with `.key` (e.g. `"aten::mm"`),
# `.self_cpu_time_total` (µs) and `.self_cpu_memory_usage` (bytes). `prof.events()` lists every event; each has
# `.time_range.start` and `.self_cpu_memory_usage`: bytes the op allocated itself (positive) or, for a `[memory]`
# row, bytes freed outside any op (negative).
#
# **Spec.**
# - `profile_run(fn)` → the `profile` object of one call `fn()` on the CPU, memory profiling on.
# - `profile_summary(prof, k=3)` → `{"peak_bytes": int, "top_ops": [str, ...]}`: `top_ops` = the `.key`s of the
#   `k` rows of `prof.key_averages()` with the largest `self_cpu_time_total`, largest first; `peak_bytes` = the
#   largest running total of `self_cpu_memory_usage` over `prof.events()` sorted by `time_range.start` (never
#   below 0: the most the call held at once beyond what was live before it).
#
# Example: creating a 1 MiB tensor, adding 1 (a second 1 MiB tensor) and summing holds both at once: a peak of
# about 2 MiB, though no op allocates more than 1 MiB.

# %% nbgrader={"grade": false, "grade_id": "profile", "locked": false, "schema_version": 3, "solution": true, "task": false}
from torch.profiler import ProfilerActivity, profile


def profile_run(fn):
    """The torch.profiler record (CPU, memory on) of one call fn()."""
    ### BEGIN SOLUTION
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return prof
    ### END SOLUTION


def profile_summary(prof, k=3):
    """Peak memory held at once (bytes) and the k ops with the most self CPU time, largest first."""
    ### BEGIN SOLUTION
    live = peak = 0
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += e.self_cpu_memory_usage
        peak = max(peak, live)
    rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    return {"peak_bytes": int(peak), "top_ops": [e.key for e in rows[:k]]}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "profile_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_in_range, check_type

PROF = profile_run(forward)
check_equal("profile_run records memory (some event has self_cpu_memory_usage)",
            any(e.self_cpu_memory_usage for e in PROF.events()), True,
            hint="profile(activities=[ProfilerActivity.CPU], profile_memory=True)")
mine = profile_summary(PROF)
check_type("profile_summary(...)", mine, dict)
check_type("peak_bytes", mine["peak_bytes"], int)
allocated = sum(max(e.self_cpu_memory_usage, 0) for e in PROF.events())
check_in_range("peak_bytes (at most everything the call allocated)", mine["peak_bytes"], 1, allocated,
               hint="a running total of self_cpu_memory_usage in start-time order, and its maximum")
check_type("top_ops", mine["top_ops"], list)
check_equal("top_ops has k = 3 different names", len(set(mine["top_ops"])) == len(mine["top_ops"]) == 3, True)
self_us = {e.key: e.self_cpu_time_total for e in PROF.key_averages()}
check_equal("every name in top_ops is a row key of prof.key_averages()", all(o in self_us for o in mine["top_ops"]),
            True)
check_equal("top_ops are in decreasing self CPU time",
            all(self_us[a] >= self_us[b] for a, b in zip(mine["top_ops"], mine["top_ops"][1:])), True,
            hint="sort by self_cpu_time_total, not cpu_time_total (which includes the ops an op calls)")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)
_numel = _rng.choice((1 << 17, 3 << 16, 1 << 18, 3 << 17))  # fp32: two tensors of 4 x numel bytes alive at once


def _plain(prof):  # the profile as data, read before any function of yours sees it
    return {"events": [[int(e.time_range.start), int(e.self_cpu_memory_usage)] for e in prof.events()],
            "rows": [[str(e.key), float(e.self_cpu_time_total)] for e in prof.key_averages()]}


_p = profile_run(lambda: (torch.ones(_numel) + 1).sum())
probe.send("run", _plain(_p))
_s = profile_summary(_p)
probe.send("run_summary", {"peak_bytes": _s["peak_bytes"], "top_ops": list(_s["top_ops"])})
_ch, _len = _rng.choice((16, 24, 32)), _rng.choice((48, 64, 96))
_net = torch.nn.Sequential(torch.nn.Conv1d(8, _ch, 5), torch.nn.GELU(), torch.nn.Flatten(),
                           torch.nn.Linear(_ch * (_len - 4), 10)).eval()
with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as _q:
    _net(torch.randn(16, 8, _len))
probe.send("net", _plain(_q))
for _k in (2, 3, 5):
    _s = profile_summary(_q, k=_k)
    probe.send(f"net_summary_{_k}", {"peak_bytes": _s["peak_bytes"], "top_ops": list(_s["top_ops"])})
### JUDGEMENT
import random

from answers import profile_summary_of
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
numel = rng.choice((1 << 17, 3 << 16, 1 << 18, 3 << 17))
run = data["run"]
grader.assert_equal(any(nbytes != 0 for _, nbytes in run["events"]), True, name="profile_run records memory")
grader.assert_in_range(profile_summary_of(run["events"], run["rows"])["peak_bytes"], 8 * numel, 12 * numel,
                       name="profile_run records one call of fn")
mine = data["run_summary"]
grader.assert_type(mine["peak_bytes"], int, name="peak_bytes is an int")
grader.assert_in_range(mine["peak_bytes"], 8 * numel, 12 * numel, name="peak of ones + 1: both tensors at once")
for k in (3, 2, 5):
    name, mine = ("run", data["run_summary"]) if k == 3 else ("net", data[f"net_summary_{k}"])
    want = profile_summary_of(data[name]["events"], data[name]["rows"], k)
    self_us = dict(data[name]["rows"])
    grader.assert_type(mine["top_ops"], list, name="top_ops is a list")
    grader.assert_equal(len(set(mine["top_ops"])) == len(mine["top_ops"]) == len(want["top_ops"]), True,
                        name=f"top {k} ops: k different names")
    grader.assert_equal(all(op in self_us for op in mine["top_ops"]), True, name=f"top {k} ops: row keys of the profile")
    grader.assert_equal([self_us[op] for op in mine["top_ops"]], want["top_us"],  # ties may come in any order
                        name=f"top {k} ops of the {name} profile, by self CPU time")
    if name == "net":
        grader.assert_scalar(mine["peak_bytes"], want["peak_bytes"], rel=0.05, name="peak bytes of a conv net")
### END HIDDEN TESTS

# %%
# The profile of your forward pass: the ops that take the time, and what it held at once.
PROF_SUMMARY = attempt("profile_summary", profile_summary, PROF) if "PROF" in globals() else None
if PROF_SUMMARY is None:
    print("(profile_run / profile_summary are not written yet: the profile is skipped until they are)")
else:
    print(f"MEASURED on {MACHINE}: {MODEL} forward, batch {BATCH}, seq {SEQ}, fp32 — peak memory "
          f"{PROF_SUMMARY['peak_bytes'] / 2**20:.2f} MiB, top ops by self CPU time: {', '.join(PROF_SUMMARY['top_ops'])}")
    print(PROF.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))

# %% [markdown]
# ## Part 4 — The CPU–GPU gap from first principles
#
# **Principle.** Predict a GPU before running on one. An op cannot finish faster than its **compute term**
# (FLOPs ÷ peak FLOP/s) or its **memory term** (bytes ÷ memory bandwidth); the larger is its bound. A GPU is a
# **SIMT** machine (single instruction, multiple threads): each SM issues one instruction for a warp of 32
# threads and keeps many warps in flight to hide memory latency, where a CPU runs a few fast cores with short
# SIMD vectors; that pays off only when an op has thousands of independent elements.
# A GEMM's intensity grows with N, so on a GPU it becomes compute-bound; a softmax stays near 1 FLOP/byte, so the
# GPU gains only the ratio of memory bandwidths (GDDR6 on a T4, HBM on an H100). A small model is bound by
# neither, but by the time to *launch* dozens of small kernels, which no datasheet lists.
#
# **Vendor.** `common.measure.devices.this_machine()` finds this notebook's device and the catalog chip for it;
# this part's two GPUs are that chip (on a CPU runtime: `COMPARE_CHIP`, Colab's T4) and an H100.
# `common.chips.get_chip("t4")` is the catalog record (every number sourced). The GPU *simulator*
# (`common.sim.simulate_op`, `simulate_llm`) adds tiling efficiency, achievable bandwidth and launch overheads.
#
# **Spec.** `expected_time(flops, nbytes, chip, dtype="fp16")` → `{"compute_s", "memory_s", "time_s", "bound"}`:
# compute term with `get_chip(chip).peak(dtype)`, memory term with `get_chip(chip).main_memory.bandwidth`,
# time = the larger, bound = `"compute"` or `"memory"` (compute on a tie). Example: 1 TFLOP and 1 GB on a chip
# with 100 TFLOP/s and 1 TB/s → 10 ms compute, 1 ms memory, 10 ms, compute.

# %%
from common.measure.devices import this_machine

HERE = this_machine()  # the device this notebook runs on, and the catalog chip the simulator models for it
SIM_CHIP = HERE.chip_name or COMPARE_CHIP  # a GPU is simulated as itself; a CPU runtime is set against COMPARE_CHIP
GPUS = tuple(dict.fromkeys((SIM_CHIP, "h100-sxm")))  # your GPU (or COMPARE_CHIP), and a datacenter H100
print(f"this machine: {HERE.device_name} ({HERE.device_type}); simulated GPU: {SIM_CHIP} — {HERE.note}")
print(pd.DataFrame({c: {"fp16 peak (TFLOP/s)": get_chip(c).peak("fp16") / 1e12,
                        "main memory": get_chip(c).main_memory.name,
                        "bandwidth (TB/s)": get_chip(c).main_memory.bandwidth / 1e12} for c in GPUS}).to_string())


# %% nbgrader={"grade": false, "grade_id": "gpu_terms", "locked": false, "schema_version": 3, "solution": true, "task": false}
def expected_time(flops, nbytes, chip, dtype="fp16"):
    """Compute term, memory term, the larger of both, and which one it is, from the catalog."""
    ### BEGIN SOLUTION
    c = get_chip(chip)
    compute_s = float(flops / c.peak(dtype))
    memory_s = float(nbytes / c.main_memory.bandwidth)
    return {"compute_s": compute_s, "memory_s": memory_s, "time_s": max(compute_s, memory_s),
            "bound": "compute" if compute_s >= memory_s else "memory"}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "gpu_terms_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_scalar, check_type

h100 = get_chip("h100-sxm")
mine = expected_time(2 * 4096**3, 3 * 4096**2 * 2, "h100-sxm")
check_type("expected_time(...)", mine, dict)
check_scalar("H100 4096^3 GEMM: compute term", mine["compute_s"], 2 * 4096**3 / h100.peak("fp16"), rel=1e-6)
check_scalar("H100 4096^3 GEMM: memory term", mine["memory_s"], 3 * 4096**2 * 2 / h100.main_memory.bandwidth,
             rel=1e-6)
check_scalar("H100 4096^3 GEMM: time", mine["time_s"], 2 * 4096**3 / h100.peak("fp16"), rel=1e-6)
check_equal("H100 4096^3 GEMM: bound names the larger term",
            mine["bound"] == ("compute" if mine["compute_s"] >= mine["memory_s"] else "memory"), True,
            hint='"compute" when the compute term is at least the memory term, else "memory"')
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)
_n = _rng.randrange(1024, 8193)
_cases = [(5.0 * _n * _n, 2.0 * _n * _n * 2, "t4", "fp16"),  # a softmax: memory-bound
          (2.0 * _n**3, 3.0 * _n * _n * 2, "h100-sxm", "fp16"),  # a large GEMM: compute-bound
          (1e12 * _rng.uniform(0.5, 2), 1e9 * _rng.uniform(0.5, 2), "a100-80gb", "bf16"),
          (_rng.uniform(1e9, 1e13), _rng.uniform(1e8, 1e11), _rng.choice(("t4", "a100-40gb", "h100-sxm")), "int8")]
probe.send("expected", [expected_time(*_c) for _c in _cases])
probe.send("default_dtype", expected_time(2.0 * _n**3, 3.0 * _n * _n * 2, "t4"))
### JUDGEMENT
import random

from answers import expected_time as ref
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
n = rng.randrange(1024, 8193)
cases = [(5.0 * n * n, 2.0 * n * n * 2, "t4", "fp16"), (2.0 * n**3, 3.0 * n * n * 2, "h100-sxm", "fp16"),
         (1e12 * rng.uniform(0.5, 2), 1e9 * rng.uniform(0.5, 2), "a100-80gb", "bf16"),
         (rng.uniform(1e9, 1e13), rng.uniform(1e8, 1e11), rng.choice(("t4", "a100-40gb", "h100-sxm")), "int8")]
cases.append((2.0 * n**3, 3.0 * n * n * 2, "t4", "fp16"))
for case, got in zip(cases, [*data["expected"], data["default_dtype"]], strict=True):
    want = ref(*case)
    grader.assert_type(got, dict, name="expected_time returns a dict")
    for key in ("compute_s", "memory_s", "time_s"):
        grader.assert_scalar(got[key], want[key], rel=1e-6, name=f"{case[2]}, {case[3]}: {key}")
    grader.assert_equal(got["bound"], want["bound"], name=f"{case[2]}, {case[3]}: the bound names the larger term")
### END HIDDEN TESTS

# %%
# Part 3's three ops: MEASURED on this CPU (fp32) vs EXPECTED on two GPUs from the catalog (fp16) vs SIMULATED.
from common.sim import simulate_llm, simulate_op

n_big = GAP_GEMM_N
cpu_s = {op: r.median_s for op, r in CPU_RESULTS.items()}  # measured in Part 3
# work at fp16 (2 bytes per element): common's FLOP counts, compulsory bytes
fp16_work = {"GEMM": (2.0 * n_big**3, 3.0 * n_big * n_big * 2),
             "softmax": (5.0 * SOFTMAX_SHAPE[0] * SOFTMAX_SHAPE[1], 2.0 * SOFTMAX_SHAPE[0] * SOFTMAX_SHAPE[1] * 2),
             f"{MODEL} fwd": (DEC["flops"], WEIGHT_BYTES / 2 + TOKEN_BYTES + LOGIT_BYTES / 2)}
gap_rows = []
for op, (flops, nbytes) in fp16_work.items():
    row = {"op": op, "FLOPs": flops, "bytes (fp16)": nbytes, "CPU measured (s)": cpu_s[op]}
    for chip in GPUS:
        if op == "GEMM":
            sim = simulate_op("matmul", (n_big, n_big, n_big), "gpu", chip=chip, dtype="fp16")
        elif op == "softmax":
            sim = simulate_op("softmax", SOFTMAX_SHAPE, "gpu", chip=chip, dtype="fp16")
        else:
            sim = simulate_llm(MODEL, "gpu", phase="prefill", batch=BATCH, seq=SEQ, chip=chip, dtype="fp16")
        exp = attempt("expected_time", expected_time, flops, nbytes, chip)
        if exp is not None:
            row[f"{chip} expected (s)"] = exp["time_s"]
            row[f"{chip} bound"] = exp["bound"]
            row[f"CPU / {chip} expected"] = cpu_s[op] / exp["time_s"]
        row[f"{chip} simulated (s)"] = sim.time_s
        row[f"{chip} sim bottleneck"] = sim.bottleneck
    gap_rows.append(row)
GAP = pd.DataFrame(gap_rows).set_index("op")
if torch.cuda.is_available():  # a real GPU: measure the same ops there too (fp16)
    dev_name = torch.cuda.get_device_name()
    a16 = torch.randn(n_big, n_big, device="cuda", dtype=torch.float16)
    s16 = torch.randn(*SOFTMAX_SHAPE, device="cuda", dtype=torch.float16)
    g16 = build_model(MODEL, device="cuda", dtype=torch.float16).eval()
    g_args, g_kw = step_inputs(g16, "prefill", BATCH, SEQ)
    with torch.no_grad():
        GAP[f"{dev_name} measured (s)"] = [
            bench.measure(torch.mm, a16, a16, min_run_time=MIN_RUN_TIME).median_s,
            bench.measure(torch.softmax, s16, -1, min_run_time=MIN_RUN_TIME).median_s,
            bench.measure(lambda: g16(*g_args, **g_kw), device="cuda", min_run_time=MIN_RUN_TIME).median_s]
with pd.option_context("display.width", 200, "display.max_columns", 30):
    print(f"CPU: MEASURED on {MACHINE} (fp32). GPUs: EXPECTED from the catalog and SIMULATED (fp16). "
          f"{MODEL}: batch {BATCH}, seq {SEQ}.")
    print(GAP.T.to_string(float_format=lambda v: f"{v:.3g}"))

# %%
fig, ax = plt.subplots(figsize=(10, 4.6), layout="constrained")
series = [c for c in GAP.columns if c.endswith("(s)") and not c.startswith("bytes")]
x = np.arange(len(GAP))
width = 0.8 / len(series)
for i, col in enumerate(series):
    kind = "measured" if "measured" in col else "simulated" if "simulated" in col else "catalog"
    hatch = {"measured": "", "catalog": "//", "simulated": ".."}[kind]
    ax.bar(x + (i - (len(series) - 1) / 2) * width, GAP[col], width, label=col.replace(" (s)", ""), hatch=hatch)
ax.set_xticks(x, GAP.index)
ax.set_yscale("log")
ax.set_ylabel("time per call [s] (log scale)")
gpu_note = f" + MEASURED on {torch.cuda.get_device_name()} (fp16)" if torch.cuda.is_available() else ""
ax.set_title(f"CPU MEASURED ({INFO['cpu']}, fp32) vs GPU EXPECTED from the catalog and SIMULATED (fp16){gpu_note}\n"
             f"GEMM {n_big}^3, softmax {SOFTMAX_SHAPE}, {MODEL} forward at batch {BATCH}, seq {SEQ}", fontsize=10)
ax.legend(fontsize=8, ncol=2)
ax.grid(True, axis="y", which="major", color="#dddddd")
plt.show()

# %% [markdown]
# Read the table per op (full run: a 2048³ GEMM): which term bounds each op on each GPU, and how far the
# simulator is from the catalog estimate. Analysis question 2 asks why.

# %% [markdown]
# ## Part 5 — A real model, here and on five machines
#
# ### The real model on this machine
#
# **Principle.** A real chat model, **Qwen2.5-0.5B-Instruct** (24 layers, about 0.5 billion
# parameters), is served in two phases: a **forward pass** over the prompt (prefill, matmul-heavy) and
# `generate()`, one **decode step** per new token, each reading every weight again.
#
# **Vendor.** `common.models.load_llm(name, layers, dtype, device)` loads it with `transformers` (seeded random
# weights with the real shapes when the Hub is out of reach; `llm.label` says which). Peak memory:
# `torch.cuda.max_memory_allocated()` on a GPU, your Part 3 profiler on a CPU.

# %%
# Load the real model on this notebook's device: the GPU when there is one (fp16), else the CPU (fp32).
from common.measure.devices import sim_vs_measured
from common.sim.lab_figures import hf_generate_simulated
from common.models import load_llm

ON_GPU = HERE.device_type == "cuda"
LLM_DTYPE = torch.float16 if ON_GPU else torch.float32
LLM = load_llm(LLM_NAME, layers=LLM_LAYERS, offline=True if FAST else None, dtype=LLM_DTYPE, device=HERE.device)
print(f"{LLM.label} on {HERE.device_name} ({HERE.device}, {str(LLM_DTYPE).removeprefix('torch.')})")
if not ON_GPU:
    print(f"No GPU here: the real model runs on the CPU, and is set against a simulated {SIM_CHIP}.")
PROMPT_IDS = LLM.input_ids(torch.randint(LLM.config.vocab_size, (1, PROMPT_LEN),
                                         generator=torch.Generator().manual_seed(0)))  # (1, PROMPT_LEN) token ids
WEIGHT_BYTES_LLM = sum(p.numel() * p.element_size() for p in LLM.model.parameters())


def llm_forward():
    with torch.no_grad():
        return LLM.model(PROMPT_IDS, use_cache=False).logits


GENERATED = {}


def llm_generate():
    GENERATED["ids"] = LLM.generate(PROMPT_IDS, max_new_tokens=NEW_TOKENS)  # (1, PROMPT_LEN + new tokens)
    return GENERATED["ids"]


# One call first: it warms up, counts the new tokens (random weights may stop early at end-of-text) and gives the
# peak memory. On a GPU: the CUDA caching allocator's high-water mark (weights + activations + KV cache). On a CPU:
# the profiler sees what generate() allocates beyond the weights, which were resident before it.
if ON_GPU:
    torch.cuda.reset_peak_memory_stats()
    llm_generate()
    torch.cuda.synchronize()
    PEAK_BYTES = torch.cuda.max_memory_allocated()
else:
    prof = attempt("profile_run", profile_run, llm_generate)
    if prof is None:
        llm_generate()  # the warm-up call, without a profile
    summary = None if prof is None else attempt("profile_summary", profile_summary, prof)
    PEAK_BYTES = None if summary is None else WEIGHT_BYTES_LLM + summary["peak_bytes"]
N_NEW = int(GENERATED["ids"].shape[1] - PROMPT_LEN)
FWD = bench.measure(llm_forward, device=HERE.device, warmup=1, min_run_time=MIN_RUN_TIME, label="forward")
GEN = bench.measure(llm_generate, device=HERE.device, warmup=0, min_run_time=MIN_RUN_TIME, label="generate")
DECODE_STEP_S = max(GEN.median_s - FWD.median_s, 0.0) / max(N_NEW - 1, 1)  # the first token comes from prefill
MEASURED_LLM = pd.Series({
    f"forward latency, {PROMPT_LEN}-token prompt (s)": FWD.median_s,
    "prefill throughput (prompt tokens/s)": PROMPT_LEN / FWD.median_s,
    f"generate {N_NEW} tokens: latency (s)": GEN.median_s,
    "generate throughput (new tokens/s)": N_NEW / GEN.median_s,
    "one decode step (s)": DECODE_STEP_S,
    "weights (MiB)": WEIGHT_BYTES_LLM / 2**20,
    "peak memory during generate (MiB)": float("nan") if PEAK_BYTES is None else PEAK_BYTES / 2**20})
print(f"MEASURED on {HERE.device_name}: {LLM.label}, batch 1")
print(MEASURED_LLM.to_string(float_format=lambda v: f"{v:.4g}"))

# %%
# The same model (as loaded: same layers, dtype, batch and prompt) on the simulated GPU, under the stack you ran:
# plain Hugging Face generate() (eager PyTorch, one kernel per op, no CUDA graph: catalog stack "hf-generate").
SIM_DTYPE = "fp16" if ON_GPU else "fp32"
HF_SIM = hf_generate_simulated(LLM.config, SIM_CHIP, prompt=PROMPT_LEN, new_tokens=N_NEW, dtype=SIM_DTYPE)
SIM_VS_MEASURED = sim_vs_measured(
    {"forward (prefill)": FWD.median_s, f"generate {N_NEW} tokens": GEN.median_s},
    {"forward (prefill)": HF_SIM["ttft_s"], f"generate {N_NEW} tokens": HF_SIM["generate_s"]},
    chip=SIM_CHIP, measured_on=HERE.device_name)
print(f"{LLM.label}, batch 1, prompt {PROMPT_LEN}, {SIM_DTYPE}: MEASURED on {HERE.device_name} vs {HF_SIM['label']}")
print(SIM_VS_MEASURED.to_string(float_format=lambda v: f"{v:.3g}"))

# %% [markdown]
# A ratio far from 1 is no bug to hide: Analysis question 3 asks why. No GPU here? Going further has runs
# recorded on real GPUs.

# %% [markdown]
# ### Five simulated machines, one real model
#
# **Principle.** One graph, five execution models. `torch.compile(model, backend="dfa_<system>")` hands a
# model's graph to a simulated compiler for that machine: your CPU computes the output with the target's
# numerics (bf16 matmul inputs on a TPU, fp16 storage on Spyre …) and a cost model records what the chip would
# have done. The numerics check runs on the small decoder; the cost needs no weights:
# `simulate_llm(LLM_NAME, system, phase="decode", batch=1, seq=DECODE_SEQ)` runs the real model **at its real
# size** on fake tensors, for one **decode step** (one new token, `DECODE_SEQ` tokens in the KV cache).
#
# **Vendor.** Each backend's `Report` has `time_s`, `tokens_per_s`, `bottleneck` (compute, memory, scheduling or
# communication), `bytes` (per memory level of its chip), `chip` and `chips` (how many the model needed).
#
# **Spec.** `five_machine_table(reports, errors)` → a `pandas.DataFrame` with one row per system of `reports`
# (system → Report, in its order; the index is the system name) and columns `chip`, `chips`, `dtype`, `time_s`,
# `tokens_per_s`, `bottleneck`, `max_abs_error` (from `errors`, system → float; NaN where missing) and
# `bytes_<level>` per memory level of the report (NaN where a machine has no such level).

# %%
# 1. Numerics: compile the small decoder for each simulated machine and compare its output with eager PyTorch.
#    run_each is torch.compile(model, backend=f"dfa_{name}") for every machine, with one Dynamo trace
#    shared by all five (common/sim/each_backend.py): each backend gets the same FX graph and inputs.
from common.landscape import SYSTEM_OF_BACKEND, SYSTEMS
from common.sim import BACKEND_NAMES, last_report
from common.sim.each_backend import run_each

with torch.no_grad():
    eager = model(*margs, **mkw)
    OUTPUTS = run_each(model, margs, mkw)
ERRORS, COMPILED = {}, {}
for backend, out in OUTPUTS.items():
    system = SYSTEM_OF_BACKEND[backend]
    if isinstance(out, Exception):  # a backend this version of common does not ship yet
        print(f"{system}: not available here ({type(out).__name__}: {str(out).splitlines()[0][:90]})")
        continue
    ERRORS[system] = float((out - eager).abs().max())
    COMPILED[system] = last_report(backend)
print("max |compiled - eager| of the logits:", {k: f"{v:.2e}" for k, v in ERRORS.items()})

# 2. Cost: one SIMULATED decode step of the real model at its real size (batch 1, DECODE_SEQ cached tokens).
LLM_CFG = get_config(LLM_NAME)  # the whole model: 24 layers
LLM_SIM_LABEL = f"{LLM.display} ({LLM_CFG.n_layers} layers, real size; simulated: no weights needed)"
REPORTS = {}
for backend in BACKEND_NAMES:
    try:
        REPORTS[SYSTEM_OF_BACKEND[backend]] = simulate_llm(LLM_NAME, backend, phase="decode", batch=1, seq=DECODE_SEQ)
    except Exception as exc:
        print(f"{SYSTEM_OF_BACKEND[backend]}: not available here ({type(exc).__name__})")
print(f"simulated: {', '.join(REPORTS)}")


# %% nbgrader={"grade": false, "grade_id": "five_machines", "locked": false, "schema_version": 3, "solution": true, "task": false}
def five_machine_table(reports, errors):
    """One row per system: chip, chips, dtype, time_s, tokens_per_s, bottleneck, max_abs_error, bytes_<level>."""
    ### BEGIN SOLUTION
    rows = {}
    for system, r in reports.items():
        row = dict(chip=r.chip, chips=r.chips, dtype=r.dtype, time_s=r.time_s, tokens_per_s=r.tokens_per_s,
                   bottleneck=r.bottleneck, max_abs_error=errors.get(system, float("nan")))
        row.update({f"bytes_{level}": b for level, b in r.bytes.items()})
        rows[system] = row
    return pd.DataFrame.from_dict(rows, orient="index")
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "five_machines_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_scalar, check_type

TABLE = five_machine_table(REPORTS, ERRORS)
check_type("five_machine_table(...)", TABLE, pd.DataFrame)
check_equal("one row per system of reports, in order", [str(s) for s in TABLE.index] == list(REPORTS), True)
for system, r in REPORTS.items():
    check_scalar(f"{system} time_s", float(TABLE.loc[system, "time_s"]), r.time_s, rel=1e-9)
    check_scalar(f"{system} tokens_per_s", float(TABLE.loc[system, "tokens_per_s"]), r.tokens_per_s, rel=1e-9)
    check_equal(f"{system}: bottleneck is the report's", str(TABLE.loc[system, "bottleneck"]) == r.bottleneck, True)
    for level, b in r.bytes.items():
        check_scalar(f"{system} bytes_{level}", float(TABLE.loc[system, f"bytes_{level}"]), b, rel=1e-9)
with pd.option_context("display.width", 200, "display.max_columns", 30):
    print(f"SIMULATED decode step of {LLM_SIM_LABEL}, batch 1, {DECODE_SEQ} cached tokens "
          f"(max_abs_error: compiled vs eager logits of {MODEL})")
    print(TABLE.to_string(float_format=lambda v: f"{v:.3g}"))
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe
from common.landscape import SYSTEM_OF_BACKEND as _SYSTEM_OF
from common.sim import BACKEND_NAMES as _BACKENDS
from common.sim import simulate_llm as _simulate

probe = Probe()
_rng = _random.Random(probe.seed)
_backends = _rng.sample(_BACKENDS, _rng.randrange(2, len(_BACKENDS) + 1))  # some machines, in another order
_seq = _rng.randrange(8, 48)
_reports = {_SYSTEM_OF[_b]: _simulate("tiny-block", _b, phase="decode", batch=1, seq=_seq)
            for _b in _backends}
_errors = {_s: _rng.uniform(0, 0.1) for _s in list(_reports)[::2]}  # every other machine has no error measured


def _plain_table(t):  # the DataFrame as data: index, columns, and each column's values
    def plain(v):
        return v if v is None or isinstance(v, (bool, int, float, str)) else getattr(v, "item", lambda: str(v))()

    return {"index": [str(i) for i in t.index], "columns": [str(c) for c in t.columns],
            "values": {str(c): [plain(v) for v in t[c].tolist()] for c in t.columns}}


probe.send("table", _plain_table(five_machine_table(_reports, _errors)))
_first = dict(list(_reports.items())[:1])
probe.send("one", _plain_table(five_machine_table(_first, {})))
### JUDGEMENT
import math
import random

from answers import machine_row
from common.checks import grader
from common.landscape import SYSTEM_OF_BACKEND as SYSTEM_OF
from common.sim import BACKEND_NAMES, simulate_llm

data, seed = probe.received()
rng = random.Random(seed)
backends = rng.sample(BACKEND_NAMES, rng.randrange(2, len(BACKEND_NAMES) + 1))
seq = rng.randrange(8, 48)
reports = {SYSTEM_OF[b]: simulate_llm("tiny-block", b, phase="decode", batch=1, seq=seq) for b in backends}
errors = {s: rng.uniform(0, 0.1) for s in list(reports)[::2]}
for table, given, errs in ((data["table"], reports, errors), (data["one"], dict(list(reports.items())[:1]), {})):
    grader.assert_equal(table["index"], list(given), name="one row per report, in its order, indexed by system")
    levels = sorted({f"bytes_{lv}" for r in given.values() for lv in r.bytes})
    needed = ["chip", "chips", "dtype", "time_s", "tokens_per_s", "bottleneck", "max_abs_error", *levels]
    grader.assert_equal(sorted(set(needed) - set(table["columns"])), [], name="the table's columns")
    for i, (system, r) in enumerate(given.items()):
        want = machine_row(r, errs.get(system, math.nan))
        for col in needed:
            got, expected = table["values"][col][i], want.get(col, math.nan)
            if isinstance(expected, str):
                grader.assert_equal(str(got), expected, name=f"{system}: {col}")
            elif isinstance(expected, float) and math.isnan(expected):
                grader.assert_equal(isinstance(got, float) and math.isnan(got), True,
                                    name=f"{system}: {col} is NaN where the machine has none")
            else:
                grader.assert_type(got, int, float, name=f"{system}: {col} is a number")
                grader.assert_scalar(got, expected, rel=1e-9, name=f"{system}: {col}")
### END HIDDEN TESTS

# %% [markdown]
# ### Explore: batch and context on five machines
#
# **Principle.** A decode step reads every weight once whatever the batch, so a bigger batch does more FLOPs per
# weight byte until it turns **compute-bound**; but the KV cache grows with batch × context. **Vendor.**
# `common.explore.explore(model, phase=, batch=, seq=)` re-simulates the machines when a control moves; so does
# `.update(batch=, seq=, backends=)`, which returns `.table()`: a row per machine, with its `bottleneck`.
#
# **Spec.** `first_compute_bound_batch(explorer, machine, seq)` → the smallest batch of `BATCHES` (1, 2, 4, …, 512)
# at which `machine`'s decode step with `seq` cached tokens is compute-bound, else `None`.

# %%
# The explorer on Part 5's real model at its real size: move batch and seq, watch the five bottlenecks.
# Find the LPU's answer at DECODE_SEQ with the sliders before you write the function below.
from common.explore import explore
from common.explore.widget import BATCHES

EXPLORER = explore(LLM_NAME, phase="decode", batch=1, seq=DECODE_SEQ,
                   static_path=os.path.join(tempfile.mkdtemp() if FAST else "dfa_out", "explorer.png"))


# %% nbgrader={"grade": false, "grade_id": "explorer_batch", "locked": false, "schema_version": 3, "solution": true, "task": false}
def first_compute_bound_batch(explorer, machine, seq):
    """The smallest batch of BATCHES at which machine's decode step is compute-bound at seq; None if none is."""
    ### BEGIN SOLUTION
    explorer.update(backends=(machine,), seq=seq)
    return next((b for b in BATCHES if explorer.update(batch=b)["bottleneck"].iloc[0] == "compute"), None)
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "explorer_batch_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal

mine = first_compute_bound_batch(explore(LLM_NAME, interactive=False, show=False), "lpu", DECODE_SEQ)
want = next((b for b in BATCHES if simulate_llm(LLM_NAME, "lpu", phase="decode", batch=b, seq=DECODE_SEQ).bottleneck
             == "compute"), None)
check_equal(f"SIMULATED LPU, {DECODE_SEQ} cached tokens: the smallest compute-bound batch", mine, want,
            hint="set seq, then step the batch through BATCHES and read the machine's bottleneck")
### BEGIN HIDDEN TESTS
import random as _random

from common.explore import explore as _explore
from common.grading.verdicts.probe import Probe
from common.sim import BACKEND_NAMES as _BACKENDS

probe = Probe()
_rng = _random.Random(probe.seed)
_cases = [(_rng.choice(("gpu", "wse", "lpu")), _rng.choice((256, 512, 1024, 2048))),
          (_rng.choice(("tpu", "spyre")), _rng.choice((256, 1024, 4096))),
          (_rng.choice(_BACKENDS), _rng.choice((256, 512, 1024, 2048, 4096)))]


def _plain(v):  # a numpy integer as an int; anything else that is not plain data as its text
    return v if v is None or isinstance(v, (bool, int, float, str)) else getattr(v, "item", lambda: str(v))()


probe.send("answers", [_plain(first_compute_bound_batch(_explore("qwen2.5-0.5b-instruct", interactive=False,
                                                                 show=False), _m, _s)) for _m, _s in _cases])
### JUDGEMENT
import random

from answers import first_compute_bound_batch as reference
from common.checks import grader
from common.sim.args import BACKEND_NAMES

data, seed = probe.received()
rng = random.Random(seed)
cases = [(rng.choice(("gpu", "wse", "lpu")), rng.choice((256, 512, 1024, 2048))),
         (rng.choice(("tpu", "spyre")), rng.choice((256, 1024, 4096))),
         (rng.choice(BACKEND_NAMES), rng.choice((256, 512, 1024, 2048, 4096)))]
grader.assert_equal(len(data["answers"]), len(cases), name="one answer per machine and context asked")
for (machine, seq), got in zip(cases, data["answers"], strict=True):
    grader.assert_equal(got, reference(machine, seq), name=f"{machine}, {seq} cached tokens: the smallest "
                                                           "compute-bound batch (None if none)")
### END HIDDEN TESTS

# %% [markdown]
# ## Analysis
#
# Answer in the cells below (a few sentences each; these are graded by hand).

# %% [markdown]
# **Question 1 (naive timing).** In Part 1 the naive timer and your harness disagreed. Name the three things the
# harness does that `naive_time` does not, and say which one matters most on a CPU and which on a GPU.

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_naive", "locked": false, "points": 1, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# Warm-up (the first call pays lazy initialisation, allocator growth, oneDNN/cuBLAS kernel selection — it was the
# slowest row), device synchronisation before each clock read (CUDA launches are asynchronous: without a sync the
# loop times kernel *launches*, so a GPU looks impossibly fast), and many samples summarised robustly
# (blocked_autorange sizes blocks so timer overhead is negligible). On a CPU warm-up and noise matter most (no
# async execution); on a GPU the missing sync dominates. (Part 1's checks already test the median's robustness.)
# Full marks: all three named + CPU vs GPU.
# === END MARK SCHEME ===

# %% [markdown]
# **Question 2 (the gap is not one number).** Using your Part 4 table: for each of the three ops, which term
# dominates the expected GPU time and why? Why is the CPU→H100 gap so much larger for the GEMM than for the
# softmax, and why does the simulator disagree most with the catalog estimate for the small decoder?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_gap", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# GEMM: intensity ~N/3 FLOP/byte at fp16 (hundreds for N ≥ 512), above both GPUs' ridge points (T4 ≈ 200, H100 ≈ 300
# FLOP/B) for large N, so the compute term (tensor-core peak) dominates and the gap ≈ ratio of peak FLOP/s (huge:
# tensor cores vs a few CPU cores). Softmax: ~1.25 FLOP/byte, far below any ridge: memory-bound everywhere, so the
# gap ≈ ratio of memory bandwidths (CPU tens of GB/s vs 0.32 / 3.35 TB/s) — one to two orders of magnitude, and
# H100/T4 only ≈10x. Decoder: tiny work per op (KFLOPs–MFLOPs), both terms are sub-microsecond, but it is ~100
# kernels; the simulator adds a few µs of launch overhead per kernel (catalog estimate kernel_launch_s), so it is
# scheduling-bound and the GPU barely beats (or loses to) the CPU. Full marks: the per-op bound, the ratio
# argument, and launch overhead for the small model.
# === END MARK SCHEME ===

# %% [markdown]
# **Question 3 (simulated vs measured).** Part 5 set the real model, timed here, against the simulated GPU under
# the `hf-generate` stack (the software you ran; the table's label says which stack and why it is a bound). Read
# the ratio sim ÷ measured of both rows. Why do the simulator and your measurement differ, and why by a different
# factor for the forward pass and for `generate()`? Name at least two things the simulated chip does differently
# from what ran here, and one thing `generate()` does that the cost model does not count. (On a CPU runtime, say
# also what the ratio would become on the GPU itself; Going further has recorded GPU runs.)

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_sim_measured", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# The simulator models another machine, or the same GPU with idealised costs: catalog peak FLOP/s and achievable
# HBM bandwidth, tiling efficiency, a fixed launch overhead per kernel; it assumes every kernel runs back to back.
# On a CPU runtime the ratio is far below 1 for the forward pass (the prompt's GEMMs are compute-bound: tensor-core
# TFLOP/s vs a few CPU cores' GFLOP/s) and less extreme, or different, for generate (decode steps are memory- and
# launch-bound: a bandwidth ratio, not a FLOP ratio). On a real GPU the ratio is near 1 when the kernels are large
# and drifts for small ones: real launch latency and Python/transformers dispatch, clocks below the boost clock,
# cuBLAS choices, fp16 vs the simulated dtype. generate() also runs host work the cost model does not count:
# sampling/argmax, stopping criteria, KV-cache bookkeeping and re-allocation, tokenizer/attention-mask handling,
# one Python loop iteration per token. Full marks: both ratios read, prefill vs decode explained by compute vs
# memory/launch bound, and at least one un-modelled host cost of generate().
# === END MARK SCHEME ===

# %% [markdown]
# ## Landscape map
#
# The landscape map is Figure 1 of this specialization: a column per system, a row per attribute; every course
# adds rows to one file, `~/.local/share/dataflow-labs/landscape_map.json` (or `$DFA_LANDSCAPE`). Each cell says
# where its value came from: **[M]** measured,
# **[S]** simulated, **[C]** catalog, **[L]** your own description.
#
# **On Colab** files vanish with the session: set `KEEP_ON_DRIVE = True` below (the map then lives in your Google
# Drive), or run `download_map()` at the end and `upload_map()` in the next lab. Off Colab both do nothing.
#
# **Spec.** Fill `QUALITATIVE[system][attribute]` for the five attributes below and the four dataflow systems
# (the GPU's column is a worked example): a short phrase each, in your own words (three words or more, no two
# alike), that says how *that* machine does it — its own mechanism, not another machine's — and for the memory
# hierarchy, names the memory levels where it keeps data (those of your Part 5 table: `bytes_<level>`). Then write
# `add_course1_rows(lm, qualitative, reports)`, which adds, with `course=1` and `overwrite=True` (a re-run refreshes this lab's rows):
# - each qualitative attribute, `source="learner"`;
# - for each system in `reports` (Part 5's decode steps), `source="simulated"`: `"decode step latency (s)"` =
#   `time_s`, `"decode throughput (tokens/s)"` = `tokens_per_s`, `"dominant operator"` = `"<op> (<share>% of
#   compute time)"` from `common.landscape.dominant_operator(report)` (e.g. `"aten.mm (91% of compute time)"`,
#   a whole percent), and `"main-memory bytes per decode step"` = the report's bytes at the chip's main-memory
#   level (`get_chip(report.chip).main_memory.name`);
# - and `"peak memory: weights + KV (bytes)"`, `source="learner"`: what the decode step holds resident,
#   `LLM_CFG.n_params × b + LLM_CFG.kv_bytes_per_token(b) × (DECODE_SEQ + 1)`, `b` the bytes of the report's `dtype`
#   (`common.chips.DTYPE_BYTES`).

# %%
from common.landscape import LandscapeMap, dominant_operator, download_map, keep_on_drive, open_map, upload_map

KEEP_ON_DRIVE = False  # Colab only: True keeps your map on Google Drive for the next courses
if KEEP_ON_DRIVE and not FAST:
    keep_on_drive()
ATTRIBUTES = ("execution model", "memory hierarchy", "programming model", "compiler strategy", "key trade-off")
LM = open_map(1, LANDSCAPE_PATH, scratch=FAST)

# %% nbgrader={"grade": false, "grade_id": "qualitative", "locked": false, "schema_version": 3, "solution": true, "task": false}
QUALITATIVE = {system: {} for system in SYSTEMS}
# a worked example: the control-flow machine the four dataflow designs are compared with
QUALITATIVE["GPU"] = {
    "execution model": "control flow: a host launches SIMT kernels one by one on SMs",
    "memory hierarchy": "registers, SMEM/L1 per SM, L2, HBM/GDDR (hardware-managed caches)",
    "programming model": "CUDA kernels; PyTorch eager or torch.compile -> Triton",
    "compiler strategy": "per-kernel compilation, fusion of pointwise chains, runtime dispatch",
    "key trade-off": "flexibility and ecosystem, paid for with launch overheads and HBM-bound decode",
}
### BEGIN SOLUTION
QUALITATIVE["TPU"] = {
    "execution model": "XLA-compiled static graph on systolic MXUs, one program per step",
    "memory hierarchy": "VMEM (software-managed) + HBM; ICI links between chips",
    "programming model": "JAX / PyTorch-XLA: whole-graph tracing, static shapes",
    "compiler strategy": "whole-program fusion, (8,128) layout, padding to MXU tiles",
    "key trade-off": "dense matmul efficiency for static shapes, at the cost of padding and recompiles",
}
QUALITATIVE["WSE"] = {
    "execution model": "spatial dataflow: layers mapped onto ~900k cores of one wafer",
    "memory hierarchy": "distributed on-wafer SRAM next to every core; no HBM",
    "programming model": "Cerebras SDK / PyTorch front end, model compiled to a placement",
    "compiler strategy": "place and route the graph across the fabric; pipeline layers",
    "key trade-off": "enormous on-chip bandwidth, limited by SRAM capacity and wafer cost",
}
QUALITATIVE["LPU"] = {
    "execution model": "deterministic, statically scheduled streams through functional slices",
    "memory hierarchy": "on-chip SRAM only (230 MB per chip); no caches, no DRAM",
    "programming model": "GroqFlow / compiler from ONNX or PyTorch graphs",
    "compiler strategy": "cycle-exact static schedule of compute and chip-to-chip transfers",
    "key trade-off": "predictable low latency, needs hundreds of chips to hold a large model",
}
QUALITATIVE["Spyre"] = {
    "execution model": "dataflow cores run compiler-built bundles of fused ops",
    "memory hierarchy": "per-core LX scratchpad (software-managed) fed from LPDDR5",
    "programming model": "torch-spyre: torch.compile backend with CPU fallbacks",
    "compiler strategy": "fuse device-op runs, tile into 128-byte sticks, plan scratchpad residency",
    "key trade-off": "low power in the server, limited by LPDDR5 bandwidth and op coverage",
}
### END SOLUTION

# %% nbgrader={"grade": false, "grade_id": "landscape_rows", "locked": false, "schema_version": 3, "solution": true, "task": false}
from common.chips import DTYPE_BYTES


def add_course1_rows(lm, qualitative, reports):
    """Course 1's rows of the landscape map: five descriptions per system and the simulated numbers."""
    ### BEGIN SOLUTION
    for system, attrs in qualitative.items():
        for attribute, text in attrs.items():
            lm.add(system, attribute, text, course=1, source="learner", overwrite=True)
    for system, r in reports.items():
        op, share = dominant_operator(r)
        b = DTYPE_BYTES[r.dtype]
        simulated = {"decode step latency (s)": r.time_s, "decode throughput (tokens/s)": r.tokens_per_s,
                     "dominant operator": f"{op} ({share:.0%} of compute time)",
                     "main-memory bytes per decode step": r.bytes.get(get_chip(r.chip).main_memory.name, 0.0)}
        for attribute, value in simulated.items():
            lm.add(system, attribute, value, course=1, source="simulated", overwrite=True)
        resident = LLM_CFG.n_params * b + LLM_CFG.kv_bytes_per_token(b) * (DECODE_SEQ + 1)
        lm.add(system, "peak memory: weights + KV (bytes)", resident, course=1, source="learner", overwrite=True)
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "landscape_rows_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import re
import tempfile

from common.checks import check_equal, check_in_range, check_scalar, check_type

scratch = LandscapeMap(os.path.join(tempfile.mkdtemp(), "scratch.json"))
add_course1_rows(scratch, QUALITATIVE, REPORTS)
cells = {(r["system"], r["attribute"]): r for r in scratch.rows}
for system in SYSTEMS:
    for attribute in ATTRIBUTES:
        row = cells.get((system, attribute))
        check_equal(f"{system} / {attribute} is filled", row is not None, True,
                    hint="fill QUALITATIVE[system][attribute] for all five systems and attributes")
        check_equal(f"{system} / {attribute} source is 'learner'", row["source"] == "learner", True)
        check_in_range(f"{system} / {attribute} length", len(row["value"]), 8, 200,
                       hint="a short phrase of your own")
for system, r in REPORTS.items():  # the evidence of Part 5: where each machine keeps its data
    levels = [lv.name for lv in get_chip(r.chip).memory_levels]
    text = str(QUALITATIVE.get(system, {}).get("memory hierarchy", ""))
    check_equal(f"{system} / memory hierarchy names one of its memory levels ({', '.join(levels)})",
                any(re.search(r"\b" + re.escape(lv.rstrip("0123456789")), text, re.IGNORECASE) for lv in levels), True,
                hint="the levels of its chip, as your Part 5 table lists them (bytes_<level>)")
for system, r in REPORTS.items():
    check_scalar(f"{system} latency", cells[(system, "decode step latency (s)")]["value"], r.time_s, rel=1e-9)
    check_equal(f"{system} latency source is 'simulated'",
                cells[(system, "decode step latency (s)")]["source"] == "simulated", True)
    check_scalar(f"{system} throughput", cells[(system, "decode throughput (tokens/s)")]["value"], r.tokens_per_s,
                 rel=1e-9)
    op, share = dominant_operator(r)
    check_equal(f"{system} dominant operator is '<op> (<share>% of compute time)' from dominant_operator",
                cells[(system, "dominant operator")]["value"] == f"{op} ({share:.0%} of compute time)", True)
    check_scalar(f"{system} main-memory bytes", cells[(system, "main-memory bytes per decode step")]["value"],
                 r.bytes.get(get_chip(r.chip).main_memory.name, 0.0), rel=1e-9)
### BEGIN HIDDEN TESTS
import os as _os
import random as _random
import tempfile as _tempfile

from common.grading.verdicts.probe import Probe
from common.landscape import SYSTEM_OF_BACKEND as _SYSTEM_OF
from common.landscape import SYSTEMS as _SYSTEMS
from common.landscape import LandscapeMap as _LM
from common.sim import BACKEND_NAMES as _BACKENDS
from common.sim import simulate_llm as _simulate

probe = Probe()
_rng = _random.Random(probe.seed)
_attrs = ("execution model", "memory hierarchy", "programming model", "compiler strategy", "key trade-off")
_qual = {_s: {_a: f"{_a} of {_s}, variant {_rng.randrange(10**6)}" for _a in _attrs} for _s in _SYSTEMS}
_backends = _rng.sample(_BACKENDS, _rng.randrange(2, len(_BACKENDS)))  # some machines, in another order
_seq = _rng.randrange(8, 48)
_reports = {_SYSTEM_OF[_b]: _simulate("tiny-block", _b, phase="decode", batch=1, seq=_seq) for _b in _backends}
_lm = _LM(_os.path.join(_tempfile.mkdtemp(), "hidden.json"))
_lm.add(next(iter(_reports)), "decode step latency (s)", 123.0, course=1, source="simulated")  # an earlier run's
add_course1_rows(_lm, _qual, _reports)  # must refresh its own rows (overwrite=True)
probe.send("rows", [{_k: _r[_k] for _k in ("system", "attribute", "value", "course", "source")} for _r in _lm.rows])
probe.send("seq", int(DECODE_SEQ))
probe.send("qualitative", {str(_s): {str(_a): str(_t) for _a, _t in dict(QUALITATIVE[_s]).items()}
                           for _s in _SYSTEMS if _s in QUALITATIVE})
### JUDGEMENT
import random

from answers import (DATAFLOW_SYSTEMS, LANDSCAPE_VOCAB, MIN_VOCAB_CELLS, as_rows, memory_level_misses)
from common.checks import grader
from common.chips import DTYPE_BYTES, get_chip
from common.memory.kvcache import SYSTEM_CHIPS
from common.landscape import SYSTEM_OF_BACKEND, SYSTEMS, dominant_operator
from common.landscape.rows import vocabulary_misses
from common.models import get_config
from common.sim import BACKEND_NAMES, simulate_llm

data, seed = probe.received()
rng = random.Random(seed)
attrs = ("execution model", "memory hierarchy", "programming model", "compiler strategy", "key trade-off")
qual = {s: {a: f"{a} of {s}, variant {rng.randrange(10**6)}" for a in attrs} for s in SYSTEMS}
backends = rng.sample(BACKEND_NAMES, rng.randrange(2, len(BACKEND_NAMES)))
seq = rng.randrange(8, 48)
reports = {SYSTEM_OF_BACKEND[b]: simulate_llm("tiny-block", b, phase="decode", batch=1, seq=seq) for b in backends}
cells = {(r["system"], r["attribute"]): r for r in data["rows"]}
for s in SYSTEMS:
    for a in attrs:
        row = cells.get((s, a), {})
        grader.assert_equal(row.get("value"), qual[s][a], name="each description it is given, as given")
        grader.assert_equal([row.get("source"), row.get("course")], ["learner", 1], name="descriptions: learner, course 1")
cfg = get_config("qwen2.5-0.5b-instruct")  # Part 5's model, at its real size
simulated = ["decode step latency (s)", "decode throughput (tokens/s)", "dominant operator",
             "main-memory bytes per decode step"]  # the rows from the reports
for s in SYSTEMS:
    if s not in reports:
        grader.assert_equal([a for a in simulated if (s, a) in cells], [], name="simulated rows only for the reports given")
        continue
    r = reports[s]
    op, share = dominant_operator(r)
    b = DTYPE_BYTES[r.dtype]
    want = {"decode step latency (s)": r.time_s, "decode throughput (tokens/s)": r.tokens_per_s,
            "dominant operator": f"{op} ({share:.0%} of compute time)",
            "main-memory bytes per decode step": r.bytes.get(get_chip(r.chip).main_memory.name, 0.0),
            "peak memory: weights + KV (bytes)": cfg.n_params * b + cfg.kv_bytes_per_token(b) * (data["seq"] + 1)}
    for a, value in want.items():
        row = cells.get((s, a), {})
        source = "learner" if a.startswith("peak memory") else "simulated"
        grader.assert_equal([row.get("source"), row.get("course")], [source, 1], name=f"{a}: source and course")
        if isinstance(value, str):
            grader.assert_equal(row.get("value"), value, name=f"{a} of the report given")
        else:
            grader.assert_type(row.get("value"), int, float, name=f"{a} is a number")
            grader.assert_scalar(row["value"], value, rel=1e-9, name=f"{a} of the report given")
# your own descriptions of the five machines: complete, your own phrases, and naming each machine's mechanism
mine = data["qualitative"]
texts = [mine.get(s, {}).get(a, "") for s in SYSTEMS for a in attrs]
grader.assert_equal(len(set(texts)) == len(texts) and all(texts), True, name="25 different descriptions")
grader.assert_equal(all(len(t.split()) >= 3 for t in texts), True, name="each description is a phrase of 3+ words")
dataflow = {s: mine.get(s, {}) for s in DATAFLOW_SYSTEMS}
named = 4 * len(attrs) - len(vocabulary_misses(as_rows(dataflow), LANDSCAPE_VOCAB))
grader.assert_in_range(named, MIN_VOCAB_CELLS, 4 * len(attrs),
                       name="descriptions that name the machine's own mechanism (and no other machine's)")
levels = {s: [lv.name for lv in get_chip(SYSTEM_CHIPS[s]).memory_levels] for s in DATAFLOW_SYSTEMS}
grader.assert_equal(memory_level_misses(dataflow, levels), [],
                    name="each memory hierarchy names a memory level of that machine (your Part 5 table's bytes_<level>)")
### END HIDDEN TESTS

# %%
from common.landscape.courses import fill_course

attempt("add_course1_rows", add_course1_rows, LM, QUALITATIVE, REPORTS)
if fill_course(LM, 1):  # your function is not written yet: the simulator's rows stand in until it is
    print("the simulated rows come from common.landscape.courses until add_course1_rows adds yours")
if ON_GPU:  # a real GPU: add what you measured on it (Part 5), labelled measured
    LM.add("GPU", f"measured on {HERE.device_name}: {LLM.label} generate, batch 1 (tokens/s)",
           N_NEW / GEN.median_s, course=1, source="measured", overwrite=True)
print(f"saved {LM.save()}")
ax = LM.render(title=f"Accelerator landscape map after Course 1 ({len(LM)} cells; numbers: {LLM_SIM_LABEL} "
                     f"decode, batch 1, {DECODE_SEQ} cached tokens)")
plt.show()

# %% [markdown]
# ## Wrap-up
#
# - **Measure like an instrument**: warm up, synchronise, take many samples, report median and IQR, and state
#   the machine, batch, sequence length and dtype.
# - **Count the work first**: FLOPs and compulsory bytes give the intensity; with a machine's ridge point, it
#   says which roof an op will hit before you run it.
# - **The gap between machines is per op**: compute-bound ops scale with peak FLOP/s, memory-bound ops with
#   bandwidth, small graphs with launch and scheduling overheads that no datasheet prints.
# - **Five designs, five answers** to where the weights live and who decides what runs next: the GPU's host
#   program, XLA's static graph, the WSE's placement, the LPU's cycle-exact schedule, Spyre's bundles.
#
# Next: the **Dataflow Deep Dive**, [`deepdive1_spyre`](../deepdive1_spyre/deepdive1_spyre.ipynb), follows the
# decoder's tensors into Spyre's sticks and scratchpads; Course 2 makes it an explicit dataflow graph.

# %% [markdown]
# ## Going further (optional)
#
# Not graded (each has a check): GPU runs recorded elsewhere beside the simulator, count a whole decoder by hand,
# derive a GPU's peak from its parts, sweep GEMM sizes across your roofline, predict a 70B model's decode on the
# five machines, and write out the trade-offs your landscape rows name in a phrase.
#
# ### Recorded GPU runs beside the simulator
#
# `common.measure.reference` holds runs of Part 5 recorded on real machines by `benchmarks/reference/record.py`,
# each naming its machine, torch, date and load. For every recorded GPU: its measured times beside the
# simulator's for that GPU.

# %%
from common.measure import reference

REFS = reference.available()
print(REFS[["name", "device_name", "torch", "date_utc", "gpu_rows"]].to_string(index=False))
for _name in REFS.loc[REFS["gpu_rows"], "name"]:
    _ref = reference.load(_name)
    _rows = _ref.vs_simulated()  # simulated on the reference's own catalog chip
    _rows = _rows.loc[[w for w in _rows.index if w.startswith(LLM.display)]]
    print(f"\nMEASURED on {_ref.label} vs SIMULATED {_ref.provenance['chip']}:")
    print(_rows.to_string(float_format=lambda v: f"{v:.3g}") if len(_rows) else "  (no real-model rows in this file)")
if not REFS["gpu_rows"].any():
    print("\nNo GPU run has been recorded yet, so there is no GPU row to show (none is made up): only the CPU rows "
          "of Part 5 exist.")

# %% [markdown]
# ### Count a whole decoder: `decoder_cost`
#
# **Spec.** `decoder_cost(cfg, batch, seq, dtype_bytes=4)` for one prefill forward pass of a `DecoderLM` config
# returns `{"matmul_flops": float, "min_bytes": float, "intensity": float}`: FLOPs of every matrix multiply (per
# layer the q, k, v, o projections with `n_heads`/`n_kv_heads` × `head_dim` columns, the three SwiGLU matrices,
# and attention: scores Q·Kᵀ and their product with V, each `2 × batch × n_heads × seq × seq × head_dim` — the
# reference model computes all `seq × seq` scores and masks afterwards; then the LM head), and compulsory bytes =
# every parameter once (`cfg.n_params × dtype_bytes`) + the int64 token ids + the logits
# (`batch × seq × vocab_size`). Intensity = matmul_flops / min_bytes. The check compares it with Part 2's count.

# %% nbgrader={"grade": false, "grade_id": "decoder_cost", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decoder_cost(cfg, batch, seq, dtype_bytes=4):
    """Matmul FLOPs, compulsory bytes and intensity of one prefill forward pass of a DecoderLM config."""
    ### BEGIN SOLUTION
    t = batch * seq
    c, h, kv, hd = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    projections = 2 * t * (c * h * hd + 2 * c * kv * hd + h * hd * c + 3 * c * cfg.ffn_dim)
    attention = 2 * (2 * batch * h * seq * seq * hd)
    flops = float(cfg.n_layers * (projections + attention) + 2 * t * c * cfg.vocab_size)
    min_bytes = float(cfg.n_params * dtype_bytes + t * 8 + t * cfg.vocab_size * dtype_bytes)
    return {"matmul_flops": flops, "min_bytes": min_bytes, "intensity": flops / min_bytes}
    ### END SOLUTION


# %%
from common.checks import check_scalar, check_type

mine = decoder_cost(CFG, BATCH, SEQ)
check_type("decoder_cost(...)", mine, dict)
check_scalar("decoder matmul FLOPs", mine["matmul_flops"], MATMUL_FLOPS,
             hint="projections + Q.K^T + scores.V per layer, times n_layers, plus the LM head")
check_scalar("decoder compulsory bytes", mine["min_bytes"], DEC_MIN_BYTES,
             hint="parameters once + int64 token ids + logits")
check_scalar("decoder intensity", mine["intensity"], MATMUL_FLOPS / DEC_MIN_BYTES, rel=1e-6)
print(f"{MODEL}: {mine['matmul_flops'] / 1e6:.2f} MFLOP in matmuls, intensity {mine['intensity']:.1f} FLOP/byte; "
      f"llama-3.1-8b, 1 x 1024 tokens, bf16: {decoder_cost(get_config('llama-3.1-8b'), 1, 1024, 2)['intensity']:.0f}")

# %% [markdown]
# ### The tensor-core peak from its parts: `tensor_core_peak`
#
# A GPU's peak is not magic: it has SMs, each with a few tensor cores, each doing a fixed number of fused
# multiply-adds per clock: `peak = SMs × tensor cores per SM × FMA per clock × 2 × clock`.
# `common.landscape.tensor_core_terms(chip)` reads those terms out of a catalog record.
#
# **Spec.** `tensor_core_peak(terms)` → float: that product, from the dict `tensor_core_terms` returns (within 1%
# of the catalog's fp16 peak).

# %%
from common.landscape import tensor_core_terms

tc_terms = pd.DataFrame([tensor_core_terms(c) for c in GPUS]).set_index("chip")
print(tc_terms[["sms", "tensor_cores_per_sm", "fma_per_clock_per_tc", "clock_hz"]].T.to_string())


# %% nbgrader={"grade": false, "grade_id": "tensor_core_peak", "locked": false, "schema_version": 3, "solution": true, "task": false}
def tensor_core_peak(terms):
    """Tensor-core peak FLOP/s from SMs, tensor cores per SM, FMA per clock and clock."""
    ### BEGIN SOLUTION
    return float(terms["sms"] * terms["tensor_cores_per_sm"] * terms["fma_per_clock_per_tc"] * 2 * terms["clock_hz"])
    ### END SOLUTION


# %%
from common.checks import check_scalar

for chip in (*GPUS, "a100-40gb"):
    check_scalar(f"{chip}: tensor-core peak from its parts", tensor_core_peak(tensor_core_terms(chip)),
                 get_chip(chip).peak("fp16"), rel=0.01, hint="SMs x TC per SM x FMA/clock x 2 x clock")

# %% [markdown]
# ### A GEMM sweep across your roofline: `gemm_spec`
#
# An N × N GEMM's intensity grows with N, so a sweep walks from the bandwidth roof towards the compute roof.
#
# **Vendor.** `common.measure.bench.sweep(factory, params)` calls `factory(**p)` for each parameter set and measures the
# dict it returns, `{"fn": callable, "args": (...), "flops": ..., "bytes": ...}`: one DataFrame row per set with
# `median_s`, `flops_per_s`, `bytes_per_s` and `intensity`.
#
# **Spec.** `gemm_spec(n, dtype=torch.float32)` → `{"fn": torch.mm, "args": (A, B), "flops": ..., "bytes": ...}`
# for two random `n × n` tensors of `dtype`, with FLOPs and compulsory bytes from your `gemm_cost`.

# %% nbgrader={"grade": false, "grade_id": "gemm_spec", "locked": false, "schema_version": 3, "solution": true, "task": false}
def gemm_spec(n, dtype=torch.float32):
    """A bench.sweep factory: an n x n @ n x n GEMM with its FLOPs and compulsory bytes."""
    ### BEGIN SOLUTION
    a = torch.randn(n, n, dtype=dtype)
    b = torch.randn(n, n, dtype=dtype)
    cost = gemm_cost(n, n, n, torch.empty((), dtype=dtype).element_size())
    return {"fn": torch.mm, "args": (a, b), "flops": cost["flops"], "bytes": cost["bytes"]}
    ### END SOLUTION


# %%
from common.checks import check_equal, check_scalar, check_type

spec = gemm_spec(64)
check_type("gemm_spec(64)", spec, dict)
check_scalar("flops of a 64^3 GEMM", spec["flops"], 2 * 64**3)
check_scalar("bytes of a 64^3 fp32 GEMM", spec["bytes"], 3 * 64 * 64 * 4)
check_type("args", spec["args"], tuple, hint="args is a tuple (A, B)")
check_type("A", spec["args"][0], torch.Tensor)
check_equal("shapes of A and B", [list(spec["args"][0].shape), list(spec["args"][1].shape)], [[64, 64], [64, 64]])

# %%
SWEEP = bench.sweep(gemm_spec, [{"n": n} for n in GEMM_SIZES], min_run_time=MIN_RUN_TIME, progress=False,
                    label="GEMM")
print(SWEEP[["n", "median_s", "iqr_s", "flops_per_s", "bytes_per_s", "intensity"]].to_string(
    index=False, float_format=lambda v: f"{v:.3g}"))
sweep_pts = pd.DataFrame({"label": [f"GEMM N={n}" for n in SWEEP["n"]], "flops": SWEEP["flops"],
                          "intensity": SWEEP["intensity"], "flops_per_s": SWEEP["flops_per_s"], "source": "measured"})
ax = roofline.plot_roofline(ROOF, sweep_pts, point_label_col="label",
                            title=f"MEASURED GEMM sweep on the roofline of {INFO['cpu']}, fp32, "
                                  f"{INFO['num_threads']} threads")
plt.show()

# %% [markdown]
# ### Predict, then check: Llama 3.1 70B
#
# Before the simulator answers: rank the five machines by latency per token, fastest first, for **batch-1 decode
# of Llama 3.1 70B** (1024 tokens in context), thinking of where the weights live and how fast they can be
# streamed (about 140 GB of 16-bit weights are read for every token). `common.explore.predict` keeps your ranking
# beside your landscape map, with its time and a hash; the reveal sets it side by side with the simulated order
# (hit or miss per machine, Kendall's tau) and adds both to the map. A ranking changed after the reveal is kept
# and marked as such, never judged in place of the first.

# %%
from common.errors import DFAError
from common.explore import predict, widgets_can_render

P70B = predict("course1.lab1.llama70b-decode", "Llama 3.1 70B decode, batch 1, 1024 context: fastest first",
               kind="ranking", choices=BACKEND_NAMES, lm=LM, course=1)
if widgets_can_render():
    display(P70B.form())  # pick and commit here, or call P70B.commit([...]) in the next cell

# %% nbgrader={"grade": false, "grade_id": "predict_70b", "locked": false, "schema_version": 3, "solution": true, "task": false}
# Your ranking, fastest first (three or more machines), committed before the next cell runs the simulator.
### BEGIN SOLUTION
P70B.commit(["wse", "lpu", "tpu", "gpu", "spyre"])
### END SOLUTION

# %%
# The reveal: one SIMULATED decode step of Llama 3.1 70B (batch 1, 1024 tokens of context) on each machine.
big = {}
for backend in BACKEND_NAMES:
    try:
        big[SYSTEM_OF_BACKEND[backend]] = simulate_llm("llama-3.1-70b", backend, phase="decode", batch=1, seq=1024)
    except Exception as exc:
        print(f"{SYSTEM_OF_BACKEND[backend]}: not available here ({type(exc).__name__})")
BIG = pd.DataFrame({s: {"chip": r.chip, "chips": r.chips, "dtype": r.dtype, "ms per token": r.time_s * 1e3,
                        "tokens/s": r.tokens_per_s, "bottleneck": r.bottleneck} for s, r in big.items()}).T
print("SIMULATED llama-3.1-70b decode, batch 1, seq 1024 (fastest first):")
print(BIG.sort_values("ms per token").to_string(float_format=lambda v: f"{v:.3g}"))
try:  # batch 1: more tokens/s is less latency per token
    P70B.reveal({s: r.tokens_per_s for s, r in big.items()})
    print(f"saved {LM.save()}")
except DFAError as exc:  # no ranking committed yet
    print(exc)

# %% [markdown]
# Where were you wrong, and why? *Your answer here (not graded).*

# %% [markdown]
# ### The trade-offs, at length
#
# Your landscape rows name each design's key trade-off in a phrase. For each of the four dataflow designs (TPU,
# WSE, LPU, Spyre), say in one or two sentences what it gives up relative to a GPU and what it gets in exchange,
# citing something you saw in this lab.

# %% [markdown]
# *Your answer here (not graded).*
