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
# # Course 6 · Lab: Performance modelling with rooflines
#
# A roofline tells you which wall an operation hits. This lab builds one from scratch, puts a real LLM on the rooflines of five architectures, adds a ceiling per memory level and a ceiling for scheduling, and uses them to predict optimisations before measuring them. *Measured* numbers come from this machine; *simulated* ones from `common.sim`; hardware numbers from the catalog.
#
# **Learning objectives**
#
# - build a roofline from its definition and measure your own machine's ceilings
# - place an LLM's prefill and decode ops on the rooflines of simulated GPU, TPU, LPU and Spyre (intensity from counted FLOPs and bytes)
# - measure a real model's ops on this machine's fp32 and 16-bit roofs, beside the same model on five simulated machines
# - draw a hierarchical roofline for software-managed memory and find an op bound by its scratchpad
# - attribute a simulated timeline to compute, memory, communication and scheduling; draw the scheduling ceiling
# - predict the effect of batching, fusion, CUDA graphs, chip count and tile size, then check it
#
# **Expected time:** about 120 minutes  
# **Runtime:** Colab CPU runtime (2 vCPUs) or any laptop; a GPU, if present, is measured in Part 1

# %% [markdown] include="grading"
# *(shared cell `grading`: `dfa release` writes it here)*

# %% include="setup"
# %run -m common.grading.authoring.labsource setup

# %% tags=["parameters"]
import os

# Learner defaults. CI and the autograder run the FAST setting (nbgrader sets NBGRADER_EXECUTION; papermill
# passes FAST=True), which shortens sequences and sweeps but keeps every step of the lab.
# DFA_FAST=1 picks the same FAST setting but keeps the explorer's widgets live (NBGRADER_EXECUTION makes it print).
FAST = bool(os.environ.get("NBGRADER_EXECUTION") or os.environ.get("DFA_FAST"))
MODEL = "llama-3.1-8b"        # the reference decoder at 8B scale, captured on fake tensors (no weights)
BIG_MODEL = "llama-3.1-70b"   # the 70B configuration, analysed the same way
LLM_NAME = "qwen2.5-0.5b-instruct"  # the real model measured on this machine in Part 2 (common.models.load_llm)
COMPARE_CHIP = "t4"           # on a CPU runtime, the simulated GPU the measurement is set against (Colab's GPU)

# %%
# Settings derived from FAST (kept out of the parameters cell, so papermill's FAST=True reaches them).
SEQ = 256 if FAST else 1024                     # tokens in the KV cache (decode) / prompt length (prefill)
PREFILL_SEQ = 512 if FAST else 2048             # prompt of the fusion experiment in Part 5
BATCHES = (1, 8, 64) if FAST else (1, 2, 4, 8, 16, 32, 64, 128, 256)
PEAK_SETTINGS = (dict(gemm_n=256, copy_bytes=16 << 20, min_run_time=0.05, warmup=1) if FAST
                 else dict(min_run_time=0.5))   # bench.measure_peaks defaults: N=1024 GEMM, 256 MiB copy
LLM_LAYERS = 2 if FAST else None                # the real model: a 2-layer cut when FAST, else all 24 layers
LLM_SEQ = 16 if FAST else 128                   # its prompt (prefill) / cached tokens (decode) in Part 2
PROFILE_REPEATS, STEP_RUN_TIME = (1, 0.05) if FAST else (3, 0.5)  # ops timed: median of repeats

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from common.palette import SEQUENCE, tint
from common.measure import bench
from common.chips import get_chip
from common.errors import DFAError
from common.roofline import (Ceiling, add_overhead_ceiling, eng, plot_roofline, roofline_for_chip,
                             roofline_from_measured)
from common.sim import simulate_llm, simulate_op

# The five systems of the course and the catalog chip that stands for each.
SYSTEM_CHIPS = {"GPU": "h100-sxm", "TPU": "tpu-v5e", "WSE": "wse-3", "LPU": "groq-lpu", "Spyre": "spyre"}
DTYPES = ("bf16", "fp16")  # each chip's native 16-bit type: bf16 where it has it, else fp16
pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 12)
info = bench.machine_info()
print(f"this machine: {info['cpu']} ({info['cores']} cores, {info['num_threads']} torch threads), "
      f"GPU: {info['cuda'] or 'none'}; FAST={FAST}, SEQ={SEQ}")


# %% [markdown]
# ## Part 1 — Build the roofline yourself
#
# **The principle.** An operation that does $F$ floating-point operations and moves $B$ bytes between the
# processor and a memory level has *arithmetic intensity* $I = F/B$ (FLOP/byte). On a machine whose compute peak
# is $P$ (FLOP/s) and whose memory delivers $\beta$ bytes/s, it takes at least $\max(F/P,\;B/\beta)$ seconds,
# so the best performance it can attain is
#
# $$\text{attainable}(I) = \min(P,\; I\cdot\beta).$$
#
# On log–log axes that is a slanted line (slope 1: the **bandwidth ceiling**) meeting a flat line (the **compute
# ceiling**) at the **ridge point** $I^* = P/\beta$: ops left of it are memory-bound, ops right of it
# compute-bound (Williams, Waterman & Patterson, CACM 2009).
#
# **The vendors.** Every system in this course has a different $P$ and $\beta$, so a different ridge: an
# H100's HBM3 ridge is ~300 FLOP/B, a Spyre card's LPDDR5 ridge ~500, a Groq LPU's SRAM ridge ~2. All numbers
# come from the project's hardware catalog (`common.chips`; estimates are labelled).
#
# **Spec.** Write `attainable(intensity, peak_flops, bandwidth)` — a Python `float` — and
# `ridge_point(peak_flops, bandwidth)` — the intensity (a `float`, FLOP/byte) where the two ceilings meet.
# Worked example: $P = 100$ TFLOP/s, $\beta = 2$ TB/s → ridge 50 FLOP/B; at $I = 10$ the roof is 20 TFLOP/s, at
# $I = 1000$ it is 100 TFLOP/s. Both must also hold for the idealised machines of a thought experiment:
# `bandwidth=float("inf")` (memory never limits: every op is compute-bound, the ridge is at 0) and
# `peak_flops=float("inf")` (compute never limits: the ridge is at infinity).

# %% nbgrader={"grade": false, "grade_id": "roof_functions", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attainable(intensity, peak_flops, bandwidth):
    """Roofline bound in FLOP/s of an op with `intensity` FLOP/byte on a machine with `peak_flops` and
    `bandwidth` (bytes/s): the lower of the compute ceiling and the bandwidth ceiling. Returns a float."""
    ### BEGIN SOLUTION
    return float(min(peak_flops, intensity * bandwidth))
    ### END SOLUTION


def ridge_point(peak_flops, bandwidth):
    """Intensity (FLOP/byte, a float) where intensity * bandwidth reaches peak_flops."""
    ### BEGIN SOLUTION
    return float(peak_flops / bandwidth)
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "roof_functions_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import math

from common.checks import check_scalar, check_type

from common.checks import check_equal

# Checked on the H100's datasheet roofline (bf16, HBM3): invariants of the definition, not values to copy.
h100 = roofline_for_chip("h100-sxm", "bf16")
P, B = h100.peak_flops, h100.bandwidth()
r = ridge_point(P, B)
check_type("ridge_point(...)", r, float)
check_scalar("intensity at the ridge x bandwidth / peak", r * B / P, 1.0, rel=1e-9,
             hint="the ridge is where intensity * bandwidth reaches the peak")
for i in (0.5, 10.0, 2000.0):
    a = attainable(i, P, B)
    check_type(f"attainable at I={i:g}", a, float)
    check_equal(f"attainable at I={i:g} is on one of the two ceilings",
                math.isclose(a, P, rel_tol=1e-9) or math.isclose(a, i * B, rel_tol=1e-9), True,
                hint="min(peak, intensity * bandwidth)")
    check_equal(f"attainable at I={i:g} is below both ceilings", a <= P * (1 + 1e-9) and a <= i * B * (1 + 1e-9),
                True, hint="min(peak, intensity * bandwidth)")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()  # the learner's kernel runs this half: fresh machines in, plain numbers out
_rng = _random.Random(probe.seed)  # this learner's machines and intensities
_machines = [(10 ** _rng.uniform(12, 16), 10 ** _rng.uniform(10, 14)) for _ in range(4)] + [(10.0, 2.0)]
_intensities = [0.01, 1.0, 3.0, 37.0, 5000.0, 10 ** _rng.uniform(-1, 4)]
probe.send("attainable", [[attainable(_i, _p, _b) for _i in _intensities] for _p, _b in _machines])
probe.send("ridge", [ridge_point(_p, _b) for _p, _b in _machines])
_inf = float("inf")  # idealised machines (the spec's thought experiment), which no catalog roofline can describe
probe.send("ideal", [attainable(5.0, 10.0, _inf), attainable(5.0, _inf, 2.0), ridge_point(10.0, _inf),
                     ridge_point(_inf, 4.0)])
probe.send("ints", [attainable(3, 10, 2), attainable(30, 10, 2), ridge_point(10, 4)])  # int arguments
### JUDGEMENT
import math
import random

from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
machines = [(10 ** rng.uniform(12, 16), 10 ** rng.uniform(10, 14)) for _ in range(4)] + [(10.0, 2.0)]
intensities = [0.01, 1.0, 3.0, 37.0, 5000.0, 10 ** rng.uniform(-1, 4)]
got = data["attainable"]
grader.assert_equal([len(row) for row in got], [len(intensities)] * len(machines), name="one roof per intensity")
for (p, b), row in zip(machines, got, strict=True):
    for i, a in zip(intensities, row, strict=True):
        grader.assert_type(a, float, name="attainable returns a float")
        grader.assert_scalar(a, min(p, i * b), rel=1e-9, name=f"attainable at I={i:.3g} on a machine of your own")
grader.assert_equal(len(data["ridge"]), len(machines), name="one ridge per machine")
for (p, b), r in zip(machines, data["ridge"], strict=True):
    grader.assert_type(r, float, name="ridge_point returns a float")
    grader.assert_scalar(r, p / b, rel=1e-9, name="ridge point of a machine of your own")
ideal = data["ideal"]
grader.assert_scalar(ideal[0], 10.0, rel=1e-12, name="unlimited bandwidth: the peak")
grader.assert_scalar(ideal[1], 10.0, rel=1e-12, name="unlimited compute: the bandwidth ceiling")
grader.assert_scalar(ideal[2], 0.0, abs_tol=1e-300, name="unlimited bandwidth: ridge at 0")
grader.assert_equal(type(ideal[3]) is float and math.isinf(ideal[3]) and ideal[3] > 0, True,
                    name="unlimited compute: ridge at infinity")
for v, want in zip(data["ints"], (6.0, 10.0, 2.5), strict=True):
    grader.assert_type(v, float, name="a float also for int arguments")
    grader.assert_scalar(v, want, rel=1e-12, name="bandwidth side, compute side and ridge of int arguments")
### END HIDDEN TESTS

# %% [markdown]
# ### Your machine's roofline (measured)
#
# Now measure this machine: the compute roof is the FLOP/s of a large GEMM, the bandwidth roof the bytes/s of a
# large copy (`common.measure.bench.measure_peaks`: median of repeated runs, warm-up first), one GEMM per dtype
# (`common.measure.roofs`): a GPU's fp16/bf16 run on its tensor cores (a T4: 65 vs 8 TFLOP/s fp32 on the datasheet).
# On Colab's 2 vCPUs expect tens of GFLOP/s and ~10 GB/s, a ridge of a few FLOP/B; a GPU is measured on the GPU.

# %%
from common.measure.devices import this_machine
from common.measure.roofs import measured_rooflines, other_dtypes

HERE = this_machine()  # the GPU when there is one, else the CPU; and the catalog chip that stands for it
ON_GPU = HERE.device_type == "cuda"
MODEL_DTYPE = torch.float16 if ON_GPU else torch.float32  # the dtype the real model runs in (Part 2)
MODEL_TAG = "fp16" if ON_GPU else "fp32"
MEASURED_ROOFS, SKIPPED = measured_rooflines(HERE.device, torch.float32, other_dtypes(HERE, "fp32"), **PEAK_SETTINGS)
measured = MEASURED_ROOFS[0]  # fp32: the GEMM and the copy
print(f"MEASURED on {HERE.device_name} ({HERE.device})" + ("" if ON_GPU else ": no GPU here, so these are the "
      "CPU's roofs (a GPU would add its tensor-core roof)"))
for rl in MEASURED_ROOFS:
    print(f"  {rl.dtype}: GEMM {eng(rl.peak_flops, 'FLOP/s')}, copy {eng(rl.bandwidth(), 'B/s')}, "
          f"ridge {rl.ridge_point():.3g} FLOP/B")
print("\n".join(f"  not measured: {why}" for why in SKIPPED))
try:
    my_ridge = ridge_point(measured.peak_flops, measured.bandwidth())
except NotImplementedError:
    my_ridge = measured.ridge_point()
    print("ridge_point is not written yet: using common.roofline's value")
print(f"your fp32 ridge point: {my_ridge:.3g} FLOP/B")
ax = plot_roofline(MEASURED_ROOFS, title=f"MEASURED rooflines of this machine: {HERE.device_name}, "
                   f"{' and '.join(r.dtype for r in MEASURED_ROOFS)}\n(one GEMM per dtype, one copy for all)")
plt.show()


# %% [markdown]
# ### The five systems on one chart (catalog)
#
# **Spec.** Write `system_ridges(system_chips)`: for each system name → catalog chip name in `system_chips`,
# return `{system: ridge point in FLOP/B}` of its **main memory** (HBM, LPDDR5, or on-chip SRAM for the SRAM-only
# WSE and LPU) at its native 16-bit dtype (`bf16` if the chip supports it, else `fp16`). Use the catalog
# (`get_chip(name)`: `.supports(dtype)`, `.compute_peak(dtype)` → `(FLOP/s, is_estimate)`,
# `.main_memory.bandwidth`) and **call your `ridge_point`** for every system: what you build, you then use (the
# checks replace `ridge_point` by a probe for a moment, to see that its answer is the one you return). Worked
# example: `{"GPU": "h100-sxm"}` → `{"GPU": 295.3...}` (989.4 TFLOP/s ÷ 3.35 TB/s).

# %% nbgrader={"grade": false, "grade_id": "system_ridges", "locked": false, "schema_version": 3, "solution": true, "task": false}
def system_ridges(system_chips):
    """{system: main-memory ridge point (FLOP/byte) at the chip's native 16-bit dtype} from the catalog."""
    ### BEGIN SOLUTION
    out = {}
    for system, name in system_chips.items():
        chip = get_chip(name)
        dtype = "bf16" if chip.supports("bf16") else "fp16"
        peak, _estimate = chip.compute_peak(dtype)
        out[system] = ridge_point(peak, chip.main_memory.bandwidth)
    return out
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "system_ridges_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
import math

from common.checks import check_equal, check_scalar, check_type


def through_your_ridge_point(fn, system_chips):
    """fn(system_chips) while `ridge_point` is a probe that returns peak / bandwidth + 0.5: with your
    ridge_point in use, every ridge comes back marked with the + 0.5."""
    names, calls = fn.__globals__, []
    own = names.get("ridge_point")

    def probe(peak_flops, bandwidth):
        calls.append((peak_flops, bandwidth))
        return 0.5 + peak_flops / bandwidth

    names["ridge_point"] = probe
    try:
        return fn(system_chips), calls
    finally:
        names["ridge_point"] = own


ridges = system_ridges(SYSTEM_CHIPS)
check_type("system_ridges", ridges, dict)
check_equal("systems", sorted(ridges), sorted(SYSTEM_CHIPS))
for system, chip in SYSTEM_CHIPS.items():
    check_scalar(f"{system} ({chip}) ridge", ridges.get(system), roofline_for_chip(chip, DTYPES).ridge_point(),
                 rel=1e-6, hint="peak of the native 16-bit dtype / main-memory bandwidth")
marked, calls = through_your_ridge_point(system_ridges, SYSTEM_CHIPS)
check_equal("system_ridges calls your ridge_point once per system", len(calls), len(SYSTEM_CHIPS))
for system, chip in SYSTEM_CHIPS.items():
    check_equal(f"{system}: the value is your ridge_point's answer",
                math.isclose(float(marked.get(system, math.nan)), float(ridges[system]) + 0.5, rel_tol=1e-9), True,
                hint="return what ridge_point(peak, bandwidth) returns; do not divide again yourself")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)  # this learner's systems: four catalog chips under names of their own
_pool = ["a100-40gb", "a100-80gb", "groq-lpu", "h100-sxm", "h200", "l4", "spyre", "t4", "tpu-v4", "tpu-v5e",
         "tpu-v5p", "tpu-v6e", "wse-2", "wse-3"]
_asked = {f"system {_k}": _c for _k, _c in enumerate(_rng.sample(_pool, 4))}
_asked.update({"GPU": "h100-sxm", "TPU": "tpu-v5e", "WSE": "wse-3", "LPU": "groq-lpu", "Spyre": "spyre"})
_offset = _rng.choice((0.125, 0.25, 0.375, 0.625))
probe.send("ridges", system_ridges(dict(_asked)))
_names, _calls = system_ridges.__globals__, []  # for one call, ridge_point marks its answers with + _offset
_own = _names.get("ridge_point")


def _marking_ridge_point(peak_flops, bandwidth):
    _calls.append([float(peak_flops), float(bandwidth)])
    return float(peak_flops / bandwidth) + _offset


_names["ridge_point"] = _marking_ridge_point
try:
    _marked = system_ridges(dict(_asked))
finally:
    _names["ridge_point"] = _own
probe.send("marked", _marked)
probe.send("calls", list(_calls))
### JUDGEMENT
import random

import torch

from answers import system_ridges as ref_ridges
from common.checks import grader
from common.chips import get_chip

data, seed = probe.received()
rng = random.Random(seed)
pool = ["a100-40gb", "a100-80gb", "groq-lpu", "h100-sxm", "h200", "l4", "spyre", "t4", "tpu-v4", "tpu-v5e",
        "tpu-v5p", "tpu-v6e", "wse-2", "wse-3"]
asked = {f"system {k}": c for k, c in enumerate(rng.sample(pool, 4))}
asked.update({"GPU": "h100-sxm", "TPU": "tpu-v5e", "WSE": "wse-3", "LPU": "groq-lpu", "Spyre": "spyre"})
offset = rng.choice((0.125, 0.25, 0.375, 0.625))
want = ref_ridges(asked)
for which in ("ridges", "marked"):
    grader.assert_type(data[which], dict, name="system_ridges returns a dict")
    grader.assert_equal(sorted(data[which]), sorted(asked), name="one ridge per system asked")
for system, chip in asked.items():
    grader.assert_scalar(data["ridges"][system], want[system], rel=1e-6, name=f"ridge of {chip}")
    grader.assert_scalar(data["marked"][system], want[system] + offset, rel=1e-9,
                         name="the ridge is what your ridge_point returned")
grader.assert_equal(len(data["calls"]), len(asked), name="ridge_point called once per system")
chips = [get_chip(c) for c in asked.values()]
given = sorted((float(p), float(b)) for p, b in data["calls"])
grader.assert_tensor(torch.tensor(given, dtype=torch.float64),
                     torch.tensor(sorted((c.compute_peak("bf16" if c.supports("bf16") else "fp16")[0],
                                          c.main_memory.bandwidth) for c in chips), dtype=torch.float64),
                     rtol=1e-9, atol=0.0, dtype=torch.float64,
                     name="ridge_point is given each chip's 16-bit peak and main-memory bandwidth")
### END HIDDEN TESTS

# %%
catalog = [roofline_for_chip(chip, DTYPES) for chip in SYSTEM_CHIPS.values()]
print(pd.DataFrame([{"system": s, "chip": rl.name, "dtype": rl.dtype, "peak": eng(rl.peak_flops, "FLOP/s"),
                     "peak is estimate": rl.peak_is_estimate, "main memory": rl.main_level,
                     "bandwidth": eng(rl.bandwidth(), "B/s"), "ridge FLOP/B": round(rl.ridge_point(), 3)}
                    for s, rl in zip(SYSTEM_CHIPS, catalog, strict=True)]).to_string(index=False))
fig, ax = plt.subplots(figsize=(10, 6.2), layout="constrained")
plot_roofline([*catalog, measured], ax=ax, label_points=False,
              title="Rooflines of the five systems (catalog datasheets; WSE and Spyre peaks are catalog "
                    "estimates)\nand of this machine (MEASURED, fp32)")
plt.show()


# %% [markdown]
# ## Part 2 — An LLM on the roofline
#
# **The principle.** A transformer step is a sequence of ops with very different intensities. In **prefill**
# every weight matrix multiplies all $T$ prompt tokens at once — a GEMM with $\approx T$ FLOP per weight byte
# pair, far right of the ridge. In **decode** each step produces one token per sequence: every weight is read
# from memory to do 2 FLOPs per sequence in the batch — a matrix–*vector* product with intensity ≈ batch
# (FLOP/B with 2-byte weights), far left of the ridge, and attention reads the whole KV cache for 2 FLOPs per
# element, whatever the batch.
#
# **The vendors.** We run one prefill and one decode step of the reference decoder (Llama-3.1-8B shape) through the *simulated* backends (`common.sim.simulate_llm`, fake tensors: nothing is
# computed, only counted). Each timeline event is one kernel (GPU), fusion (TPU) or SuperDSC op (Spyre) with its
# **counted** FLOPs and bytes per memory level and its simulated duration.
#
# **Spec.** Write `op_points(report, level=None)`: a `pandas.DataFrame` with one row per **compute** event of
# `report.events` that has FLOPs > 0 and bytes > 0 at memory level `level` (`None`: the chip's main memory,
# `get_chip(report.chip).main_memory.name`; Part 3 asks for other levels, such as a GPU's `"SMEM"`), in event
# order, and columns `name`, `flops`, `bytes` (the event's bytes at that level), `intensity` = flops / bytes and
# `flops_per_s` = flops / duration (attained, *simulated*). The intensity
# must come from the counted FLOPs and bytes — never from a time. An `Event` has `.name`, `.kind`, `.flops`,
# `.bytes` (a dict level → bytes) and `.duration` (s). Worked example: an event with 2e9 FLOPs, 1e9 HBM bytes,
# 1 ms → intensity 2.0 FLOP/B, 2e12 FLOP/s.

# %% nbgrader={"grade": false, "grade_id": "op_points", "locked": false, "schema_version": 3, "solution": true, "task": false}
def op_points(report, level=None):
    """One row per compute event (FLOPs > 0, bytes > 0 at `level`, default main memory): name, flops, bytes,
    intensity, flops_per_s."""
    ### BEGIN SOLUTION
    level = level or get_chip(report.chip).main_memory.name
    rows = []
    for e in report.events:
        nbytes = e.bytes.get(level, 0.0)
        if e.kind == "compute" and e.flops > 0 and nbytes > 0 and e.duration > 0:
            rows.append({"name": e.name, "flops": e.flops, "bytes": nbytes, "intensity": e.flops / nbytes,
                         "flops_per_s": e.flops / e.duration})
    return pd.DataFrame(rows, columns=["name", "flops", "bytes", "intensity", "flops_per_s"])
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "op_points_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_tensor, check_type

decode_gpu = simulate_llm(MODEL, "gpu", phase="decode", batch=1, seq=SEQ)
pts = op_points(decode_gpu)
check_type("op_points", pts, pd.DataFrame)
ref = decode_gpu.roofline_points()
ref = ref[ref["flops"] > 0]
for col in ("intensity", "flops_per_s"):
    check_tensor(f"decode ops: sorted {col}", torch.tensor(np.sort(pts[col].to_numpy(float))),
                 torch.tensor(np.sort(ref[col].to_numpy(float))), rtol=1e-6, atol=0.0, dtype=torch.float64,
                 hint="compute events with FLOPs > 0 and main-memory bytes > 0; intensity = flops / bytes")
### BEGIN HIDDEN TESTS
import random as _random

import pandas as _pd
import torch as _torch

from common.grading.verdicts.probe import Probe
from common.sim import simulate_llm as _sim

probe = Probe()
_rng = _random.Random(probe.seed)  # this learner's steps: fresh reports, built here
_cases = [("tpu", "prefill", "VMEM"), ("spyre", "decode", None), ("gpu", "prefill", "SMEM"), ("gpu", "decode", None),
          ("tpu", "decode", "HBM")]
_shape = (_rng.choice((1, 2, 3)), _rng.choice((8, 16, 24)))
for _k, (_backend, _phase, _level) in enumerate(_cases):
    _r = _sim("test", _backend, phase=_phase, batch=_shape[0], seq=_shape[1])
    _p = op_points(_r, _level) if _level else op_points(_r)
    probe.send(f"case {_k}", {"frame": isinstance(_p, _pd.DataFrame), "columns": [str(c) for c in _p.columns],
                              "name": [str(n) for n in _p["name"]],
                              **{_c: _torch.tensor(_p[_c].to_numpy(float), dtype=_torch.float64)
                                 for _c in ("flops", "bytes", "intensity", "flops_per_s")}})
### JUDGEMENT
import random

import torch

from answers import op_points as ref_points
from common.checks import grader
from common import sim

data, seed = probe.received()
rng = random.Random(seed)
cases = [("tpu", "prefill", "VMEM"), ("spyre", "decode", None), ("gpu", "prefill", "SMEM"), ("gpu", "decode", None),
         ("tpu", "decode", "HBM")]
shape = (rng.choice((1, 2, 3)), rng.choice((8, 16, 24)))
for k, (backend, phase, level) in enumerate(cases):
    got = data[f"case {k}"]
    ref = ref_points(sim.simulate_llm("test", backend, phase=phase, batch=shape[0], seq=shape[1]), level)
    what = f"{backend} {phase} at {level or 'main memory'}"
    grader.assert_equal(got["frame"], True, name="op_points returns a DataFrame")
    grader.assert_equal(len(got["name"]), len(ref), name=f"{what}: one row per compute event with FLOPs and bytes")
    grader.assert_equal(got["name"], [str(n) for n in ref["name"]], name=f"{what}: rows in event order")
    for col in ("flops", "bytes", "intensity", "flops_per_s"):
        grader.assert_tensor(got[col], torch.tensor(ref[col].to_numpy(float), dtype=torch.float64), rtol=1e-6,
                             atol=0.0, dtype=torch.float64, name=f"{what}: {col}")
### END HIDDEN TESTS

# %% [markdown]
# ### The real model: measured here, and on the five simulated machines
#
# A real chat model, **Qwen2.5-0.5B-Instruct** (`common.models.load_llm`; seeded random weights of the real shapes
# when the Hub is out of reach: `LLM.label` says which), runs here (GPU fp16, else CPU fp32).
# `common.measure.op_profile.profile` times every aten op of one prefill step (`LLM_SEQ` prompt tokens) and one
# decode step (`LLM_SEQ` cached), synchronised per op, and counts its FLOPs and bytes
# (`common.graph.costs`): one point per op group (matmul, attention, norm, pointwise). Panel 1 is MEASURED under
# this machine's roofs; the other five SIMULATED (`simulate_llm(LLM.config, ...)`).

# %%
from common.measure import op_profile
from common.models import load_llm


def points_of(report, label):
    try:
        p = op_points(report)
    except NotImplementedError:
        p = report.roofline_points()
        p = p[p["flops"] > 0]
    p = p.copy()
    p.attrs["label"] = label
    return p


LLM = load_llm(LLM_NAME, layers=LLM_LAYERS, offline=True if FAST else None, dtype=MODEL_DTYPE, device=HERE.device)
print(f"{LLM.label} on {HERE.device_name} ({HERE.device}, {MODEL_TAG})"
      + ("" if ON_GPU else "; no GPU here: the real model is measured on the CPU"))
PROFILES, STEP_S = {}, {}
for ph in op_profile.PHASES:
    step = op_profile.llm_step(LLM, ph, LLM_SEQ)
    PROFILES[ph] = op_profile.profile(step, device=HERE.device, model=LLM.model, repeats=PROFILE_REPEATS)
    STEP_S[ph] = bench.measure(step, device=HERE.device, warmup=0, min_run_time=STEP_RUN_TIME).median_s  # warm
MEASURED_GROUPS = {ph: op_profile.groups(p) for ph, p in PROFILES.items()}
for ph, g in MEASURED_GROUPS.items():
    print(f"\nMEASURED {ph} on {HERE.device_name}: {LLM.label}, batch 1, {LLM_SEQ} tokens, {MODEL_TAG}; "
          f"{len(PROFILES[ph])} ops, step {eng(STEP_S[ph], 's')} (timed whole)")
    print(g.to_string(float_format=lambda v: f"{v:.3g}"))

# %%
model_roof = next((r for r in MEASURED_ROOFS if r.dtype == MODEL_TAG), MEASURED_ROOFS[0])
roofs = [model_roof, *(r for r in MEASURED_ROOFS if r is not model_roof)]  # the model's dtype first: its roof
fig, axes = plt.subplots(3, 2, figsize=(15, 15.5), layout="constrained")
plot_roofline(roofs, [op_profile.points(MEASURED_GROUPS[ph], f"{ph} (MEASURED)") for ph in op_profile.PHASES],
              ax=axes.flat[0], label_points=True, legend_loc="upper left",
              title=f"MEASURED on {HERE.device_name}: {LLM.label}\nbatch 1, {LLM_SEQ} tokens, {MODEL_TAG}; "
                    "roofs: this machine's GEMMs and copy")
steps = {}
for ax, system in zip(axes.flat[1:], ("GPU", "TPU", "Spyre", "LPU", "WSE"), strict=True):
    try:
        steps[system] = {ph: simulate_llm(LLM.config, system.lower(), phase=ph, batch=1, seq=LLM_SEQ)
                         for ph in op_profile.PHASES}
    except (DFAError, ImportError) as exc:
        ax.set_axis_off()
        ax.text(0.5, 0.5, f"{system}: backend not available here\n({exc})", ha="center", wrap=True)
        continue
    pre = steps[system]["prefill"]
    rl = roofline_for_chip(pre.chip, pre.dtype)
    plot_roofline(rl, [op_profile.points(op_profile.sim_groups(r), f"{ph} (SIMULATED)")
                       for ph, r in steps[system].items()], ax=ax, label_points=True,
                  title=f"SIMULATED {system}: {LLM.label}\nbatch 1, {LLM_SEQ} tokens, {pre.dtype}, per chip "
                        f"({pre.chips}x {pre.chip}); roof: catalog" + (" ESTIMATE" if rl.peak_is_estimate else ""))
plt.show()
rows = [{"system": "this machine (MEASURED)", "phase": ph, "chips": 1, "time": eng(STEP_S[ph], "s"),
         "tokens/s": round((LLM_SEQ if ph == "prefill" else 1) / STEP_S[ph], 1)} for ph in op_profile.PHASES]
rows += [{"system": f"{s} (SIMULATED)", "phase": ph, "chips": r.chips, "time": eng(r.time_s, "s"),
          "tokens/s": round(r.tokens_per_s, 1), "bottleneck": r.bottleneck}
         for s, d in steps.items() for ph, r in d.items()]
print(f"{LLM.label}, batch 1, {LLM_SEQ} tokens:")
print(pd.DataFrame(rows).to_string(index=False))

# %% [markdown]
# **Simulated ÷ measured**, on the simulated chip that stands for this machine (`HERE.chip`: your GPU's catalog
# record, or the nearest part with a note). A CPU runtime has none: it is set against a simulated `COMPARE_CHIP`
# (Colab's GPU) in fp32, a ratio between two machines. Analysis Q4 asks why the ratios differ.

# %%
from common.measure.devices import sim_vs_measured

SIM_CHIP = HERE.chip_name or COMPARE_CHIP
sim_here = {ph: simulate_llm(LLM.config, "gpu", phase=ph, batch=1, seq=LLM_SEQ, chip=SIM_CHIP, dtype=MODEL_TAG)
            for ph in op_profile.PHASES}
measured_s, simulated_s = {}, {}
for ph, r in sim_here.items():
    measured_s[f"{ph}: whole step"], simulated_s[f"{ph}: whole step"] = STEP_S[ph], r.time_s
    sim_g, meas_g = op_profile.sim_groups(r), MEASURED_GROUPS[ph]
    for grp in ("matmul", "attention", "norm", "pointwise"):
        if grp in sim_g.index and grp in meas_g.index:
            measured_s[f"{ph}: {grp}"], simulated_s[f"{ph}: {grp}"] = meas_g.loc[grp, "time_s"], sim_g.loc[grp, "time_s"]
SIM_VS_MEASURED = sim_vs_measured(measured_s, simulated_s, chip=SIM_CHIP, measured_on=HERE.device_name)
print(f"{LLM.label}, batch 1, {LLM_SEQ} tokens, {MODEL_TAG}: MEASURED on {HERE.device_name} vs SIMULATED "
      f"{SIM_CHIP} (groups: summed op times; simulated groups: kernel times without launches)")
print(HERE.note if ON_GPU else f"No GPU here: the CPU's times are set against a simulated {SIM_CHIP}, another "
      "machine; on a GPU runtime the simulated chip is that GPU.")
print(SIM_VS_MEASURED.to_string(float_format=lambda v: f"{v:.3g}"))

# %% [markdown]
# ### Batching moves decode toward the ridge
#
# **Spec.** Write `decode_sweep(model, backend, batches, seq, **options)`: for every batch size, simulate one
# decode step (`simulate_llm(model, backend, phase="decode", batch=b, seq=seq, **options)`) and return a
# `DataFrame` with one row per batch and columns `batch`, `intensity` (the whole step's counted FLOPs / counted
# main-memory bytes: `report.flops / report.bytes[level]`), `flops_per_s` (attained FLOP/s **per chip**:
# `report.achieved_flops / report.chips`), `tokens_per_s` and `bound` (`report.bottleneck`).

# %% nbgrader={"grade": false, "grade_id": "decode_sweep", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decode_sweep(model, backend, batches, seq, **options):
    """One simulated decode step per batch size: batch, intensity, flops_per_s (per chip), tokens_per_s, bound."""
    ### BEGIN SOLUTION
    rows = []
    for b in batches:
        r = simulate_llm(model, backend, phase="decode", batch=b, seq=seq, **options)
        level = get_chip(r.chip).main_memory.name
        rows.append({"batch": b, "intensity": r.flops / r.bytes[level], "flops_per_s": r.achieved_flops / r.chips,
                     "tokens_per_s": r.tokens_per_s, "bound": r.bottleneck})
    return pd.DataFrame(rows)
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "decode_sweep_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_tensor, check_type

sweep = decode_sweep(MODEL, "gpu", BATCHES, SEQ, graphs=True)
check_type("decode_sweep", sweep, pd.DataFrame)
ref = [simulate_llm(MODEL, "gpu", phase="decode", batch=b, seq=SEQ, graphs=True) for b in BATCHES]
check_tensor("intensity per batch", torch.tensor(sweep["intensity"].to_numpy(float)),
             torch.tensor([r.flops / r.bytes["HBM"] for r in ref], dtype=torch.float64), rtol=1e-6,
             dtype=torch.float64, hint="report.flops / report.bytes[main memory level]")
check_tensor("tokens/s per batch", torch.tensor(sweep["tokens_per_s"].to_numpy(float)),
             torch.tensor([r.tokens_per_s for r in ref], dtype=torch.float64), rtol=1e-6, dtype=torch.float64)
check_equal("intensity grows with batch", bool(np.all(np.diff(sweep["intensity"].to_numpy(float)) > 0)), True)
### BEGIN HIDDEN TESTS
import random as _random

import pandas as _pd
import torch as _torch

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)  # this learner's sweeps: batch sizes and lengths the notebook never ran
_asked = [("tpu", (1, _rng.choice((3, 4, 6))), _rng.choice((16, 24)), {"chips": 2}),
          ("gpu", (_rng.choice((1, 2)), 8), _rng.choice((16, 24)), {"graphs": True}),
          ("spyre", (1, 2), 16, {})]
for _k, (_backend, _batches, _seq, _opts) in enumerate(_asked):
    _s = decode_sweep("test", _backend, _batches, _seq, **_opts)
    probe.send(f"sweep {_k}", {"frame": isinstance(_s, _pd.DataFrame), "bound": [str(b) for b in _s["bound"]],
                               **{_c: _torch.tensor(_s[_c].to_numpy(float), dtype=_torch.float64)
                                  for _c in ("batch", "intensity", "flops_per_s", "tokens_per_s")}})
### JUDGEMENT
import random

import torch

from answers import decode_sweep as ref_sweep
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
asked = [("tpu", (1, rng.choice((3, 4, 6))), rng.choice((16, 24)), {"chips": 2}),
         ("gpu", (rng.choice((1, 2)), 8), rng.choice((16, 24)), {"graphs": True}),
         ("spyre", (1, 2), 16, {})]
for k, (backend, batches, seq, opts) in enumerate(asked):
    got, ref = data[f"sweep {k}"], ref_sweep("test", backend, batches, seq, **opts)
    what = f"{backend} decode sweep {batches}, seq {seq}, {opts or 'no options'}"
    grader.assert_equal(got["frame"], True, name="decode_sweep returns a DataFrame")
    grader.assert_equal(got["bound"], list(ref["bound"]), name=f"{what}: bound per batch")
    for col in ("batch", "intensity", "flops_per_s", "tokens_per_s"):
        grader.assert_tensor(got[col], torch.tensor(ref[col].to_numpy(float), dtype=torch.float64), rtol=1e-6,
                             atol=0.0, dtype=torch.float64, name=f"{what}: {col}")
### END HIDDEN TESTS

# %%
try:
    sweep = decode_sweep(MODEL, "gpu", BATCHES, SEQ, graphs=True)
except NotImplementedError:
    sweep = None
    print("decode_sweep is not written yet: no sweep to plot")
if sweep is not None:
    h100 = roofline_for_chip("h100-sxm", "bf16")
    pts = sweep.assign(label=[f"batch {b}" for b in sweep["batch"]])
    pts.attrs["label"] = f"whole decode step, KV {SEQ}"
    ax = plot_roofline(h100, pts, kind="simulated", label_points=True,
                       title=f"SIMULATED decode of {MODEL} on an H100 (CUDA graphs), bf16: batch sweep "
                             f"{min(BATCHES)}-{max(BATCHES)}")
    plt.show()
    print(sweep.to_string(index=False))


# %% [markdown]
# ### A roofline explorer
#
# Batch, seq and dtype move a decode step (per chip) under each roofline and a dashed **scheduling** ceiling
# $F/t_s$. Each is $F$ over a floor ($B/\beta$, $F/P$, $t_s$); the lowest binds (`bottleneck` reads the timeline).

# %%
from common.explore.roofline_view import BATCH_CHOICES, roofline_explorer

view = roofline_explorer(MODEL, batch=8, seq=SEQ)

# %% [markdown]
# **Spec.** `first_batch_off_memory(model, machine, seq, dtype, batches)`: from
# `view.sweep("batch", batches, **choices)`, the first batch with a ceiling below `memory_roof`, else `None`.

# %% nbgrader={"grade": false, "grade_id": "off_memory", "locked": false, "schema_version": 3, "solution": true, "task": false}
def first_batch_off_memory(model, machine, seq, dtype, batches):
    """The smallest batch of ``batches`` at which ``machine``'s decode step is not under its memory ceiling."""
    ### BEGIN SOLUTION
    pts = view.sweep("batch", sorted(batches), model=model, backends=(machine,), seq=seq, dtype=dtype)
    return next((int(p.batch) for p in pts.itertuples() if min(p.compute_roof, p.scheduling_roof) < p.memory_roof), None)
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "off_memory_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
answer = first_batch_off_memory(MODEL, "gpu", SEQ, "fp32", BATCH_CHOICES)
check_equal(f"{MODEL}, GPU, fp32, seq {SEQ}: {answer} is a slider batch or None", answer in (*BATCH_CHOICES, None), True)
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)  # this learner's questions: models, lengths, dtypes and batches of its own
_batches = tuple(sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, _rng.choice((24, 48, 96))}))
_asked = [("llama-3.1-8b", "gpu", _rng.choice((256, 2048)), "fp32"),
          ("llama-2-7b", "gpu", _rng.choice((128, 256, 1024)), "fp32"),
          ("qwen2.5-0.5b", "lpu", _rng.choice((128, 1024, 4096)), _rng.choice((None, "int8")))]
for _k, _q in enumerate(_asked):
    _got = first_batch_off_memory(*_q, _batches)
    probe.send(f"question {_k}", None if _got is None else int(_got))
### JUDGEMENT
import random

from answers import first_batch_off_memory as ref_first
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
batches = tuple(sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, rng.choice((24, 48, 96))}))
asked = [("llama-3.1-8b", "gpu", rng.choice((256, 2048)), "fp32"),
         ("llama-2-7b", "gpu", rng.choice((128, 256, 1024)), "fp32"),
         ("qwen2.5-0.5b", "lpu", rng.choice((128, 1024, 4096)), rng.choice((None, "int8")))]
for k, q in enumerate(asked):
    grader.assert_equal(data[f"question {k}"], ref_first(*q, batches),
                        name=f"{q[0]} on {q[1]}, seq {q[2]}, dtype {q[3] or 'native'}: first batch off memory")
### END HIDDEN TESTS


# %% [markdown]
# ## Part 3 — Hierarchical roofline for software-managed memory
#
# **The principle.** A machine with a software-managed hierarchy (GPU shared memory, TPU VMEM, Spyre LX, the
# WSE's and LPU's SRAM) has one bandwidth ceiling **per level**. An op moves different bytes at each level — a
# fused kernel keeps its intermediates in the scratchpad, so its HBM bytes are few but its scratchpad bytes
# many — so it has one intensity per level, $I_\ell = F / B_\ell$, and its roof is the lowest of them:
#
# $$\text{attainable} = \min\big(P,\; \min_\ell I_\ell\,\beta_\ell\big).$$
#
# An op can be compute-bound with respect to HBM and still be bound by its scratchpad (Yang et al.,
# *hierarchical roofline*, 2020).
#
# **The vendors.** The H100's shared-memory bandwidth is derived from published figures (catalog); the TPU's VMEM
# bandwidth is not published, so the catalog carries a labelled **estimate** (with its derivation) and we draw
# that ceiling as an estimate. The simulator reports each event's bytes per level (`event.bytes`).
#
# **Spec.** (a) `level_intensities(report, levels)`: a `DataFrame`, one row per compute event with FLOPs > 0,
# columns `name`, `flops`, `duration_s` and, for every level in `levels`, `I_<level>` = flops / bytes at that
# level (`inf` where the event moves no bytes there). (b) `binding_level(intensities, peak_flops, bandwidths)`:
# given `{level: intensity}` and `{level: bytes/s}`, return the name of the level whose ceiling is lowest, or
# `"compute"` when every level's ceiling is at or above the peak. Example: `binding_level({"HBM": 1000, "SMEM":
# 20}, 1e15, {"HBM": 3e12, "SMEM": 3e13})` → `"SMEM"` (HBM roof 3e15 ≥ peak, SMEM roof 6e14 < peak).

# %% nbgrader={"grade": false, "grade_id": "level_functions", "locked": false, "schema_version": 3, "solution": true, "task": false}
def level_intensities(report, levels):
    """One row per compute event (FLOPs > 0): name, flops, duration_s and I_<level> = flops / bytes at that level."""
    ### BEGIN SOLUTION
    rows = []
    for e in report.events:
        if e.kind != "compute" or e.flops <= 0:
            continue
        row = {"name": e.name, "flops": e.flops, "duration_s": e.duration}
        for lv in levels:
            b = e.bytes.get(lv, 0.0)
            row[f"I_{lv}"] = e.flops / b if b > 0 else float("inf")
        rows.append(row)
    return pd.DataFrame(rows, columns=["name", "flops", "duration_s", *[f"I_{lv}" for lv in levels]])
    ### END SOLUTION


def binding_level(intensities, peak_flops, bandwidths):
    """The level whose ceiling I_l * beta_l is lowest, or "compute" if none is below peak_flops."""
    ### BEGIN SOLUTION
    roofs = {lv: i * bandwidths[lv] for lv, i in intensities.items()}
    lowest = min(roofs, key=roofs.get)
    return "compute" if roofs[lowest] >= peak_flops else lowest
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "level_functions_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_tensor, check_type

check_equal("binding level (worked example)",
            binding_level({"HBM": 1000, "SMEM": 20}, 1e15, {"HBM": 3e12, "SMEM": 3e13}), "SMEM")
check_equal("binding level, compute-bound", binding_level({"HBM": 1000}, 1e15, {"HBM": 3e12}), "compute")
attn = simulate_op("sdpa", (1, 8, 4096, 64), "gpu", chip="h100-sxm")  # flash attention, head_dim 64
li = level_intensities(attn, ["HBM", "SMEM"])
check_type("level_intensities", li, pd.DataFrame)
ev = [e for e in attn.events if e.kind == "compute"][0]
check_tensor("attention I_HBM, I_SMEM", torch.tensor([float(li["I_HBM"].iloc[0]), float(li["I_SMEM"].iloc[0])],
                                                       dtype=torch.float64),
             torch.tensor([ev.flops / ev.bytes["HBM"], ev.flops / ev.bytes["SMEM"]], dtype=torch.float64),
             rtol=1e-9, dtype=torch.float64, hint="flops / bytes moved at that level")
### BEGIN HIDDEN TESTS
import random as _random

import torch as _torch

from common.grading.verdicts.probe import Probe
from common.sim import simulate_llm as _sim
from common.sim import simulate_op as _op

probe = Probe()
_rng = _random.Random(probe.seed)  # this learner's machines: levels, intensities, bandwidths and peaks of its own
_cases = []
for _ in range(8):
    _levels = _rng.sample(["L1", "SMEM", "L2", "HBM", "VMEM", "DRAM"], _rng.choice((1, 2, 3)))
    _ints = {_lv: 10 ** _rng.uniform(-1, 3) for _lv in _levels}
    _bws = {_lv: 10 ** _rng.uniform(10, 14) for _lv in _levels}
    _peak = min(_ints[_lv] * _bws[_lv] for _lv in _levels) * _rng.choice((0.3, 0.9, 1.1, 4.0))
    _cases.append((_ints, _peak, _bws))
_cases += [({"HBM": 1000.0, "SMEM": 20.0}, 1e15, {"HBM": 3e12, "SMEM": 3e13}),  # the spec's worked example
           ({"A": 10.0, "B": 1.0}, 100.0, {"A": 5.0, "B": 30.0}),
           ({"A": 10.0, "B": 1.0}, 100.0, {"A": 50.0, "B": 300.0}),
           ({"A": 2.0, "B": 1.0}, 100.0, {"A": 5.0, "B": 30.0}), ({"A": 4.0}, 100.0, {"A": 25.0})]
probe.send("binding", [binding_level(dict(_i), _p, dict(_b)) for _i, _p, _b in _cases])
_reports = [(_sim("test", "tpu", phase="prefill", batch=_rng.choice((1, 2)), seq=_rng.choice((16, 32))),
             ["HBM", "VMEM"]),
            (_op("sdpa", (1, _rng.choice((4, 8)), _rng.choice((512, 1024)), 64), "gpu", chip="h100-sxm"),
             ["SMEM", "HBM"])]
for _k, (_r, _levels) in enumerate(_reports):
    _li = level_intensities(_r, list(_levels))
    probe.send(f"levels {_k}", {"name": [str(n) for n in _li["name"]],
                                **{_c: _torch.tensor(_li[_c].to_numpy(float), dtype=_torch.float64)
                                   for _c in ("flops", "duration_s", *[f"I_{lv}" for lv in _levels])}})
### JUDGEMENT
import random

import torch

from answers import binding_level as ref_binding, level_intensities as ref_levels
from common.checks import grader
from common.sim import simulate_llm, simulate_op

data, seed = probe.received()
rng = random.Random(seed)
cases = []
for _ in range(8):
    levels = rng.sample(["L1", "SMEM", "L2", "HBM", "VMEM", "DRAM"], rng.choice((1, 2, 3)))
    ints = {lv: 10 ** rng.uniform(-1, 3) for lv in levels}
    bws = {lv: 10 ** rng.uniform(10, 14) for lv in levels}
    peak = min(ints[lv] * bws[lv] for lv in levels) * rng.choice((0.3, 0.9, 1.1, 4.0))
    cases.append((ints, peak, bws))
grader.assert_equal(data["binding"][:8], [ref_binding(i, p, b) for i, p, b in cases],
                    name="binding level on machines of your own")
grader.assert_equal(data["binding"][8:], ["SMEM", "B", "compute", "A", "compute"],
                    name="lowest roof, or compute when none is below the peak")
reports = [(simulate_llm("test", "tpu", phase="prefill", batch=rng.choice((1, 2)), seq=rng.choice((16, 32))),
            ["HBM", "VMEM"]),
           (simulate_op("sdpa", (1, rng.choice((4, 8)), rng.choice((512, 1024)), 64), "gpu", chip="h100-sxm"),
            ["SMEM", "HBM"])]
for k, (r, levels) in enumerate(reports):
    got, ref = data[f"levels {k}"], ref_levels(r, levels)
    grader.assert_equal(got["name"], [str(n) for n in ref["name"]], name="one row per compute event with FLOPs")
    for col in ("flops", "duration_s", *[f"I_{lv}" for lv in levels]):  # inf (no bytes there) compared as -1
        grader.assert_tensor(torch.nan_to_num(got[col], posinf=-1.0),
                             torch.tensor(ref[col].to_numpy(float), dtype=torch.float64).nan_to_num(posinf=-1.0),
                             rtol=1e-9, atol=0.0, dtype=torch.float64, name=f"{r.backend} {col}")
### END HIDDEN TESTS

# %% [markdown]
# ### Compute-bound for HBM, bound by the scratchpad
#
# Use your two functions on the attention op above (one flash-attention kernel: Q, K, V and the output go through
# HBM; the $S\times S$ scores stay in shared memory). **Spec.** `verdicts(report, peak_flops, bandwidths)` takes
# the report's first compute event with FLOPs > 0 and returns the pair `(hbm_only, hierarchical)`: what a classic
# roofline of the slowest level in `bandwidths` alone (HBM here) says binds it, and what the roofline with every
# level of `bandwidths` says (each a level name or `"compute"`, from your `binding_level`). The cell after it
# applies it to the attention op; the hidden tests to other shapes, where the answers differ.

# %%
attn = simulate_op("sdpa", (1, 8, 4096, 64), "gpu", chip="h100-sxm")  # flash attention, head_dim 64 (as in the check above)
h100_chip = get_chip("h100-sxm")
peak_h100 = roofline_for_chip(h100_chip, "bf16").peak_flops
bandwidths = {lv.name: lv.bandwidth for lv in h100_chip.memory_levels if lv.bandwidth}


# %% nbgrader={"grade": false, "grade_id": "verdicts", "locked": false, "schema_version": 3, "solution": true, "task": false}
def verdicts(report, peak_flops, bandwidths):
    """(binding level on the slowest level's roofline alone, binding level on the hierarchical roofline) of the
    report's first compute event with FLOPs."""
    ### BEGIN SOLUTION
    slowest = min(bandwidths, key=bandwidths.get)
    row = level_intensities(report, list(bandwidths)).iloc[0]
    hbm_only = binding_level({slowest: row[f"I_{slowest}"]}, peak_flops, bandwidths)
    hierarchical = binding_level({lv: row[f"I_{lv}"] for lv in bandwidths}, peak_flops, bandwidths)
    return hbm_only, hierarchical
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "verdicts_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

pair = verdicts(attn, peak_h100, bandwidths)
check_type("verdicts(...)", pair, tuple)
check_equal("verdicts returns two answers", len(pair), 2)
for which, v in zip(("HBM-only", "hierarchical"), pair, strict=True):
    check_equal(f"{which} verdict is a level of the roofline or 'compute'", v in {"compute", *bandwidths}, True)
check_equal("the HBM-only verdict names no level the classic roofline lacks", pair[0] in {"compute", "HBM"}, True)
### BEGIN HIDDEN TESTS
import random as _random

from common.chips import get_chip as _gc
from common.roofline import roofline_for_chip as _rfc
from common.sim import simulate_op as _op

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)  # this learner's shapes, with the H100's catalog levels built here
_peak = _rfc("h100-sxm", "bf16").peak_flops
_bws = {lv.name: lv.bandwidth for lv in _gc("h100-sxm").memory_levels if lv.bandwidth}
_asked = [("sdpa", (1, 8, 4096, 64)), ("sdpa", (1, 8, 4096, 128)), ("sdpa", (1, 8, 512, 64)),
          ("sdpa", (1, 32, 128, 128)), ("softmax", (2048, 2048)),
          ("sdpa", (1, _rng.choice((2, 4, 16)), _rng.choice((256, 1024, 2048)), _rng.choice((64, 128)))),
          ("softmax", (_rng.choice((512, 4096)), _rng.choice((1024, 8192))))]
_pairs = [verdicts(_op(_kind, _shape, "gpu", chip="h100-sxm"), _peak, dict(_bws)) for _kind, _shape in _asked]
probe.send("tuples", [isinstance(_v, tuple) for _v in _pairs])
probe.send("verdicts", [list(_v) for _v in _pairs])
### JUDGEMENT
import random

from answers import verdicts as ref_verdicts
from common.checks import grader
from common.chips import get_chip
from common.sim import simulate_op

data, seed = probe.received()
rng = random.Random(seed)
gpu = get_chip("h100-sxm")
peak = gpu.compute_peak("bf16")[0]
bandwidths = {lv.name: lv.bandwidth for lv in gpu.memory_levels if lv.bandwidth}
asked = [("sdpa", (1, 8, 4096, 64)), ("sdpa", (1, 8, 4096, 128)), ("sdpa", (1, 8, 512, 64)),
         ("sdpa", (1, 32, 128, 128)), ("softmax", (2048, 2048)),
         ("sdpa", (1, rng.choice((2, 4, 16)), rng.choice((256, 1024, 2048)), rng.choice((64, 128)))),
         ("softmax", (rng.choice((512, 4096)), rng.choice((1024, 8192))))]
grader.assert_equal(data["tuples"], [True] * len(asked), name="verdicts returns a tuple")
for (kind, shape), got in zip(asked, data["verdicts"], strict=True):
    want = ref_verdicts(simulate_op(kind, shape, "gpu", chip="h100-sxm"), peak, bandwidths)
    grader.assert_equal(got, list(want), name=f"verdicts of {kind} {shape}")
### END HIDDEN TESTS

# %%
try:
    VERDICT_HBM_ONLY, VERDICT_HIERARCHICAL = verdicts(attn, peak_h100, bandwidths)
    print(f"attention (1, 8, 4096, 64): HBM-only roofline: {VERDICT_HBM_ONLY}; hierarchical: {VERDICT_HIERARCHICAL}")
except NotImplementedError:
    print("verdicts (or level_intensities / binding_level) is not written yet")


def hier_points(report, levels, label):
    df = report.frame()
    df = df[(df["kind"] == "compute") & (df["flops"] > 0)].copy()
    for lv in levels:
        df[f"bytes_{lv}"] = df.get(f"bytes_{lv}", 0.0)
    df.attrs["label"] = label
    return df


# GPU: shared memory (catalog) over HBM, the attention op.
gpu_rl = roofline_for_chip("h100-sxm", "bf16", levels=["SMEM", "HBM"])
# TPU v5e: VMEM bandwidth is not published -> the catalog's labelled estimate becomes an extra ceiling.
v5e = get_chip("tpu-v5e")
vmem = v5e.estimates["vmem_bandwidth"]
tpu_rl = roofline_for_chip(v5e, "bf16").with_ceiling(
    Ceiling(f"VMEM {eng(vmem.value, 'B/s')} (catalog ESTIMATE)", "bandwidth", vmem.value, level="VMEM",
            note=vmem.derivation))
tpu_prefill = simulate_llm(MODEL, "tpu", phase="prefill", batch=1, seq=SEQ)
fig, axes = plt.subplots(1, 2, figsize=(16, 6.2), layout="constrained")
from common.roofline import points_from_node_table
p = points_from_node_table(hier_points(attn, ["HBM", "SMEM"], "attention (1,8,4096,64)"), gpu_rl,
                           kind="simulated", level_bytes={"HBM": "bytes_HBM", "SMEM": "bytes_SMEM"})
plot_roofline(gpu_rl, p, ax=axes[0], title="SIMULATED flash attention on an H100 (bf16): one op, one point per "
                                            "level\nroofs: catalog (SMEM from published per-SM figures)")
p = points_from_node_table(hier_points(tpu_prefill, ["HBM", "VMEM"], f"{MODEL} prefill"), tpu_rl,
                           kind="simulated", level_bytes={"HBM": "bytes_HBM", "VMEM": "bytes_VMEM"})
plot_roofline(tpu_rl, p, ax=axes[1], label_points=4,
              title=f"SIMULATED {MODEL} prefill T={SEQ} on TPU v5e ({tpu_prefill.chips} chips), per chip, "
                    "bf16\nroofs: HBM datasheet, VMEM catalog ESTIMATE")
plt.show()
print("binding level of each TPU prefill fusion (first layer), from the hierarchical roofline:")
print(p[p["level"] == "HBM"][["label", "intensity", "bound"]].head(14).to_string(index=False))
print("\nThe estimate behind the VMEM ceiling:", vmem.derivation)


# %% [markdown]
# ## Part 4 — The third ceiling: scheduling
#
# **The principle.** The roofline says how fast an op *could* run. A real step also pays time that is neither
# compute nor data movement: the host launching kernels, synchronisation, filling and draining a systolic
# pipeline, traversing a dataflow graph. With a fixed overhead $t_0$ per op, an op of $F$ FLOPs takes
# $t_0 + \max(F/P, B/\beta)$, so it can never beat $F/t_0$ — a third, **scheduling ceiling** that depends on the
# op's size, not its intensity (time-based roofline: Wang, Yang et al., arXiv 2009.04598).
#
# **The vendors.** A GPU launches each kernel from the host (a few µs, a catalog *estimate*); CUDA graphs replace
# those launches by one. A TPU runs one compiled XLA program: no per-op launch, but a fill/drain bubble per
# matmul fusion. Spyre launches one SuperDSC bundle at a time from the host.
#
# **Spec.** (a) `attribute(report, engine=None, window=None)`: split a stretch of the step into `{"compute",
# "memory", "scheduling", "communication"}` seconds, read on one engine's timeline (`engine`; `None`: the critical
# engine `report.critical_engine`). `window` is a pair `(t0, t1)` of seconds (`None`: the whole step, `(0,
# report.time_s)`, whose split on the critical engine is also `report.attribution`): walk the engine's events in
# start order, keeping only the part of each inside the window; the part not already covered by earlier ones goes
# to its `event.bound`; idle gaps between them, from `t0` to the first one and after the last one until `t1`, are
# *scheduling*. Worked example: one event of 1 s at 2 s, bound by memory, window `(1.5, 2.5)` → 0.5 s memory,
# 0.5 s scheduling. (b) `optimum(report)`: a dict with
# `attained_s` (= `report.time_s`), `sum_floors_s` — the sum of `event.floor` (each event's
# $\max(F/P, B/\beta)$) over the critical engine's events whose bound is not `"scheduling"` — and
# `efficiency` = `sum_floors_s / attained_s`.

# %% nbgrader={"grade": false, "grade_id": "attribution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attribute(report, engine=None, window=None):
    """Seconds of `window` (default: the whole step) by what bound them, read on `engine` (default: the critical
    engine); idle gaps are scheduling."""
    ### BEGIN SOLUTION
    engine = engine or report.critical_engine
    t0, t1 = window if window is not None else (0.0, report.time_s)
    out = {"compute": 0.0, "memory": 0.0, "scheduling": 0.0, "communication": 0.0}
    busy_until = t0
    for e in sorted((e for e in report.events if e.engine == engine), key=lambda e: e.start):
        start, end = max(e.start, t0), min(e.end, t1)  # the part of the event inside the window
        if end <= start:
            continue
        if start > busy_until:
            out["scheduling"] += start - busy_until
        out[e.bound] += max(0.0, end - max(start, busy_until))
        busy_until = max(busy_until, end)
    out["scheduling"] += max(0.0, t1 - busy_until)
    return out
    ### END SOLUTION


def optimum(report):
    """attained_s, sum_floors_s (floors of the critical engine's non-scheduling events) and their ratio."""
    ### BEGIN SOLUTION
    floors = sum(e.floor for e in report.events if e.engine == report.critical_engine and e.bound != "scheduling")
    return {"attained_s": report.time_s, "sum_floors_s": floors, "efficiency": floors / report.time_s}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "attribution_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_scalar, check_type

decode_gpu = simulate_llm(MODEL, "gpu", phase="decode", batch=1, seq=SEQ)  # host launches, no CUDA graphs
mine = attribute(decode_gpu)
check_type("attribute", mine, dict)
for bound, seconds in decode_gpu.attribution.items():
    check_scalar(f"{bound} seconds", mine.get(bound), seconds, rel=1e-6, abs_tol=1e-12)
opt = optimum(decode_gpu)
floors = sum(e.floor for e in decode_gpu.events if e.engine == "stream" and e.bound != "scheduling")
check_scalar("sum of floors", opt.get("sum_floors_s"), floors, rel=1e-6)
from common.sim.program import Event
from common.sim.report import Report

example = Report("example", "h100-sxm", 1, "bf16", [Event("x", "compute", "E", 2.0, 1.0, bound="memory", floor=1.0)],
                 [], "E")  # the spec's worked example: one event of 1 s at 2 s
split = attribute(example, window=(1.5, 2.5))
check_scalar("worked example, window (1.5, 2.5): memory seconds", split.get("memory"), 0.5, rel=1e-9,
             hint="only the part of an event inside the window counts")
check_scalar("worked example, window (1.5, 2.5): scheduling seconds", split.get("scheduling"), 0.5, rel=1e-9,
             hint="the idle time from t0 to the first event is scheduling")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe
from common.sim import simulate_llm as _sim
from common.sim.program import Event as _Ev
from common.sim.report import Report as _Rep

probe = Probe()
_rng = _random.Random(probe.seed)
_scale = _rng.choice((0.5, 2.0, 3.0, 1e-3))  # this learner's toy timeline: stretched, its events shuffled
_evs = [_Ev("a", "compute", "E", 0.0, 1.0, bound="memory", floor=0.8),
        _Ev("l", "launch", "host", 0.0, 3.0, bound="scheduling"),
        _Ev("b", "compute", "E", 1.5, 1.5, bound="compute", floor=1.5),
        _Ev("c", "comm", "E", 3.0, 0.5, bound="communication", floor=0.5),
        _Ev("f", "sync", "E", 3.5, 0.25, bound="scheduling"),
        _Ev("o", "compute", "E", 2.5, 0.25, bound="memory", floor=0.25),  # inside b: adds nothing
        _Ev("z", "dma", "dma", 3.0, 1.0, bound="memory")]
_evs = [_e.copy(start=_e.start * _scale, duration=_e.duration * _scale, floor=_e.floor * _scale) for _e in _evs]
_rng.shuffle(_evs)
_toy = _Rep("toy", "h100-sxm", 1, "bf16", _evs, [], "E")
probe.send("toy", {_eng: attribute(_toy, _eng) for _eng in ("E", "dma", "host")})
probe.send("toy default", attribute(_toy))
probe.send("toy optimum", optimum(_toy))
_windows = [("E", 0.5, 3.25), ("E", 1.0, 2.0), ("dma", 2.0, 3.5), ("host", 2.5, 4.0)]
probe.send("toy windows", [attribute(_toy, _eng, (_t0 * _scale, _t1 * _scale)) for _eng, _t0, _t1 in _windows])
_steps = [("tpu", {"chips": 2}), ("spyre", {}), ("gpu", {}), ("gpu", {"graphs": True})]
_shape = (_rng.choice((1, 2)), _rng.choice((16, 24)))
_part = sorted(_rng.uniform(0.0, 1.0) for _ in range(2))  # a stretch of each step, as fractions of its time
for _k, (_b, _kw) in enumerate(_steps):
    _r = _sim("test", _b, phase="decode", batch=_shape[0], seq=_shape[1], **_kw)
    _w = (_part[0] * _r.time_s, _part[1] * _r.time_s)
    probe.send(f"step {_k}", {"critical": attribute(_r), "host": attribute(_r, "host"), "optimum": optimum(_r),
                              "window": attribute(_r, None, _w), "host window": attribute(_r, "host", _w)})
### JUDGEMENT
import random

from answers import attribute as ref_attribute, optimum as ref_optimum
from common.checks import grader
from common import sim

data, seed = probe.received()
rng = random.Random(seed)
scale = rng.choice((0.5, 2.0, 3.0, 1e-3))
rng.shuffle(list(range(7)))  # the probe's shuffle of its seven events
toy = {"E": {"compute": 1.5, "memory": 1.0, "scheduling": 1.0, "communication": 0.5},
       "dma": {"compute": 0.0, "memory": 1.0, "scheduling": 3.0, "communication": 0.0},
       "host": {"compute": 0.0, "memory": 0.0, "scheduling": 4.0, "communication": 0.0}}
for engine, want in toy.items():
    for which in ((engine,) if engine != "E" else ("E", "toy default")):
        got = data["toy"][engine] if which == engine else data[which]
        grader.assert_equal(sorted(got), sorted(want), name="the four bounds, and nothing else")
        for bound, seconds in want.items():
            grader.assert_scalar(got[bound], seconds * scale, rel=1e-9, abs_tol=1e-15,
                                 name=f"toy timeline, engine {engine}: {bound}")
for key, want in {"sum_floors_s": 3.05, "attained_s": 4.0, "efficiency": 0.7625}.items():
    grader.assert_scalar(data["toy optimum"][key], want * (scale if key != "efficiency" else 1.0), rel=1e-9,
                         name=f"toy {key}")
windows = {("E", 0.5, 3.25): {"compute": 1.5, "memory": 0.5, "scheduling": 0.5, "communication": 0.25},
           ("E", 1.0, 2.0): {"compute": 0.5, "memory": 0.0, "scheduling": 0.5, "communication": 0.0},
           ("dma", 2.0, 3.5): {"compute": 0.0, "memory": 0.5, "scheduling": 1.0, "communication": 0.0},
           ("host", 2.5, 4.0): {"compute": 0.0, "memory": 0.0, "scheduling": 1.5, "communication": 0.0}}
grader.assert_equal(len(data["toy windows"]), len(windows), name="one split per window")
for ((engine, t0, t1), want), got in zip(windows.items(), data["toy windows"], strict=True):
    for bound, seconds in want.items():
        grader.assert_scalar(got.get(bound), seconds * scale, rel=1e-9, abs_tol=1e-15,
                             name=f"toy timeline, engine {engine}, window ({t0}, {t1}) x {scale}: {bound}")
steps = [("tpu", {"chips": 2}), ("spyre", {}), ("gpu", {}), ("gpu", {"graphs": True})]
shape = (rng.choice((1, 2)), rng.choice((16, 24)))
part = sorted(rng.uniform(0.0, 1.0) for _ in range(2))
for k, (backend, kw) in enumerate(steps):
    r = sim.simulate_llm("test", backend, phase="decode", batch=shape[0], seq=shape[1], **kw)
    got, window = data[f"step {k}"], (part[0] * r.time_s, part[1] * r.time_s)
    for which, want in (("critical", r.attribution), ("host", ref_attribute(r, "host")), ("optimum", ref_optimum(r)),
                        ("window", ref_attribute(r, None, window)), ("host window", ref_attribute(r, "host", window))):
        for key, value in want.items():
            grader.assert_scalar(got[which][key], value, rel=1e-6, abs_tol=1e-12, name=f"{backend} {which}: {key}")
### END HIDDEN TESTS

# %% [markdown]
# ### Drawing the scheduling ceiling
#
# The effective overhead per kernel is the scheduling time divided by the number of kernels on the critical
# engine. Drawn for an op of the median decode-kernel size, the ceiling $F/t_0$ lies far *below* the bandwidth
# roof: small decode kernels are bound by the launch stream, not by HBM. With CUDA graphs it drops to the
# device-side gap between kernels.

# %%
def safe_attribution(report):
    try:
        return attribute(report)
    except NotImplementedError:
        return report.attribution


graphs_gpu = simulate_llm(MODEL, "gpu", phase="decode", batch=1, seq=SEQ, graphs=True)
fig, axes = plt.subplots(1, 2, figsize=(16, 6.2), layout="constrained")
table = []
for ax, (label, r) in zip(axes, (("host launches", decode_gpu), ("CUDA graphs", graphs_gpu)), strict=True):
    att = safe_attribution(r)
    kernels = [e for e in r.events if e.engine == r.critical_engine and e.kind == "compute"]
    t0 = att["scheduling"] / len(kernels)
    pts = points_of(r, "decode kernels alone")
    f_med = float(np.median(pts["flops"]))
    rl = add_overhead_ceiling(roofline_for_chip(r.chip, r.dtype), t0, flops=f_med,
                              name=f"scheduling: {eng(t0, 's')}/kernel (SIMULATED), {eng(f_med, 'FLOP')} kernels")
    dur = pts["flops"] / pts["flops_per_s"]
    with_t0 = pts.assign(flops_per_s=pts["flops"] / (dur + t0))  # each kernel pays its share of scheduling
    with_t0.attrs["label"] = "decode kernels incl. t0"
    plot_roofline(rl, [pts, with_t0], ax=ax, kind="simulated", label_points=2, legend_loc="upper left",
                  title=f"SIMULATED {MODEL} decode, batch 1, KV {SEQ}, on an H100 ({label})\n"
                        "with the scheduling ceiling F/t0 (dash-dot)")
    floors = sum(e.floor for e in kernels)
    table.append({"schedule": label, "attained": eng(r.time_s, "s"), **{k: eng(v, "s") for k, v in att.items()},
                  "sum of floors": eng(floors, "s"), "efficiency": f"{floors / r.time_s:.0%}"})
plt.show()
print("SIMULATED time attribution:")
print(pd.DataFrame(table).to_string(index=False))
print("catalog launch estimate:", eng(get_chip("h100-sxm").estimate("kernel_launch_s"), "s"),
      "-", get_chip("h100-sxm").estimates["kernel_launch_s"].derivation)
fig, axes = plt.subplots(2, 1, figsize=(12, 4.2), layout="constrained")
decode_gpu.gantt(ax=axes[0], max_events=120, title="SIMULATED first kernels of the decode step: host launches")
graphs_gpu.gantt(ax=axes[1], max_events=120, title="SIMULATED the same with CUDA graphs")
plt.show()

# %% [markdown]
# ## Part 5 — Optimise: predict, then simulate
#
# **The principle.** Optimise like a performance engineer: pick the op or step, read which ceiling binds it,
# **predict** what one change will buy from the model (counted FLOPs and bytes, the roofs, the overhead), then
# measure — here, in the simulator — and compare. A prediction that misses tells you the model is missing
# something.
#
# **The vendors.** One change per target:
#
# | target | machine | baseline → change |
# |---|---|---|
# | batching | GPU decode (CUDA graphs) | batch 1 → 16 (tokens/s) |
# | fusion | GPU prefill, `PREFILL_SEQ` tokens | attention unfused → `fuse_attention=True` (one flash kernel) |
# | scheduling | GPU decode | host launches → `graphs=True` |
# | chip count | TPU v5e decode | 2 → 4 chips (tensor parallel) |
# | tile size | Spyre prefill | `coarse_tiles=4` (4 row tiles per core) → 1 (one large tile) |
#
# **Spec.** Write `predict(name, base, changed)`: the **predicted** speedup (new tokens/s ÷ old tokens/s, a float)
# of target `name` from the two compiled reports, using only counted work — `report.tokens`,
# `report.flops`, `report.bytes`, `report.counters`, event floors, the catalog — and the *baseline's*
# attribution; never the changed report's `time_s`. Hint: for a data-movement or parallelism change, compare
# the sum of event floors (the roofline time, per token); for the scheduling change, remove the baseline's
# scheduling time and add back one device-side gap per kernel (`get_chip(...).estimate("kernel_gap_s")`). The
# grade: same direction as the simulation and within a factor 1.5 of it.

# %%
TARGETS = {
    "batching": (dict(model=MODEL, backend="gpu", phase="decode", batch=1, seq=SEQ, graphs=True), dict(batch=16)),
    "fusion": (dict(model=MODEL, backend="gpu", phase="prefill", batch=1, seq=PREFILL_SEQ, fuse_attention=False),
               dict(fuse_attention=True)),
    "scheduling": (dict(model=MODEL, backend="gpu", phase="decode", batch=1, seq=SEQ), dict(graphs=True)),
    "chip count": (dict(model=MODEL, backend="tpu", phase="decode", batch=1, seq=SEQ, chips=2), dict(chips=4)),
    "tile size": (dict(model=MODEL, backend="spyre", phase="prefill", batch=1, seq=SEQ, coarse_tiles=4),
                  dict(coarse_tiles=1)),
}
compiled = {name: (simulate_llm(**base), simulate_llm(**{**base, **change}))
            for name, (base, change) in TARGETS.items()}


def floors_on_critical_engine(report):
    return sum(e.floor for e in report.events if e.engine == report.critical_engine and e.bound != "scheduling")


# %% nbgrader={"grade": false, "grade_id": "predict", "locked": false, "schema_version": 3, "solution": true, "task": false}
def predict(name, base, changed):
    """Predicted tokens/s ratio (changed / base) from counted work and the baseline's attribution."""
    ### BEGIN SOLUTION
    if name == "scheduling":
        kernels = [e for e in base.events if e.engine == base.critical_engine and e.kind == "compute"]
        gap = get_chip(base.chip).estimate("kernel_gap_s")
        new_time = base.time_s - attribute(base)["scheduling"] + gap * len(kernels)
        return base.time_s / new_time
    per_token_base = floors_on_critical_engine(base) / base.tokens
    per_token_new = floors_on_critical_engine(changed) / changed.tokens
    return per_token_base / per_token_new
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "predict_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_in_range

achieved, predicted = {}, {}
for name, (base, changed) in compiled.items():
    achieved[name] = changed.tokens_per_s / base.tokens_per_s
    predicted[name] = predict(name, base, changed)
    check_in_range(f"{name}: predicted speedup is a number", predicted[name], 1e-3, 1e3)
print(pd.DataFrame({"predicted": predicted, "simulated": achieved}).round(3).to_string())
for name in compiled:
    check_equal(f"{name}: predicted direction", predicted[name] > 1, achieved[name] > 1,
                hint="does the change make the step faster or slower per token?")
### BEGIN HIDDEN TESTS
import dataclasses as _dc
import random as _random

from common.grading.verdicts.probe import Probe
from common.sim import simulate_llm as _sim

probe = Probe()
_rng = _random.Random(probe.seed)
_seq = _rng.choice((128, 256, 384))  # this learner's starting points: the five changes at a length of its own
_m = "llama-3.1-8b"
_sets = [{
    "batching": (dict(model=_m, backend="gpu", phase="decode", batch=1, seq=_seq, graphs=True), dict(batch=16)),
    "fusion": (dict(model=_m, backend="gpu", phase="prefill", batch=1, seq=2 * _seq, fuse_attention=False),
               dict(fuse_attention=True)),
    "scheduling": (dict(model=_m, backend="gpu", phase="decode", batch=1, seq=_seq), dict(graphs=True)),
    "chip count": (dict(model=_m, backend="tpu", phase="decode", batch=1, seq=_seq, chips=2), dict(chips=4)),
    "tile size": (dict(model=_m, backend="spyre", phase="prefill", batch=1, seq=_seq, coarse_tiles=4),
                  dict(coarse_tiles=1)),
}, {  # the same five changes from other starting points
    "batching": (dict(model=_m, backend="gpu", phase="decode", batch=2, seq=128, graphs=True), dict(batch=8)),
    "fusion": (dict(model=_m, backend="gpu", phase="prefill", batch=1, seq=256, fuse_attention=False),
               dict(fuse_attention=True)),
    "scheduling": (dict(model=_m, backend="gpu", phase="decode", batch=2, seq=128), dict(graphs=True)),
    "chip count": (dict(model=_m, backend="tpu", phase="decode", batch=1, seq=128, chips=4), dict(chips=8)),
    "tile size": (dict(model=_m, backend="spyre", phase="prefill", batch=1, seq=128, coarse_tiles=2),
                  dict(coarse_tiles=1)),
}]


def _slowed(report, factor=5.0):  # the same counted work, every duration and start stretched: only time changes
    return _dc.replace(report, events=[_dc.replace(e, start=e.start * factor, duration=e.duration * factor)
                                       for e in report.events])


for _k, _targets in enumerate(_sets):
    for _name, (_b, _c) in _targets.items():
        _base, _changed = _sim(**_b), _sim(**{**_b, **_c})
        probe.send(f"{_k} {_name}", [predict(_name, _base, _changed), predict(_name, _sim(**_b), _slowed(_changed))])
### JUDGEMENT
import random

from common.checks import grader
from common import sim

data, seed = probe.received()
rng = random.Random(seed)
seq = rng.choice((128, 256, 384))
m = "llama-3.1-8b"
sets = [{
    "batching": (dict(model=m, backend="gpu", phase="decode", batch=1, seq=seq, graphs=True), dict(batch=16)),
    "fusion": (dict(model=m, backend="gpu", phase="prefill", batch=1, seq=2 * seq, fuse_attention=False),
               dict(fuse_attention=True)),
    "scheduling": (dict(model=m, backend="gpu", phase="decode", batch=1, seq=seq), dict(graphs=True)),
    "chip count": (dict(model=m, backend="tpu", phase="decode", batch=1, seq=seq, chips=2), dict(chips=4)),
    "tile size": (dict(model=m, backend="spyre", phase="prefill", batch=1, seq=seq, coarse_tiles=4),
                  dict(coarse_tiles=1)),
}, {
    "batching": (dict(model=m, backend="gpu", phase="decode", batch=2, seq=128, graphs=True), dict(batch=8)),
    "fusion": (dict(model=m, backend="gpu", phase="prefill", batch=1, seq=256, fuse_attention=False),
               dict(fuse_attention=True)),
    "scheduling": (dict(model=m, backend="gpu", phase="decode", batch=2, seq=128), dict(graphs=True)),
    "chip count": (dict(model=m, backend="tpu", phase="decode", batch=1, seq=128, chips=4), dict(chips=8)),
    "tile size": (dict(model=m, backend="spyre", phase="prefill", batch=1, seq=128, coarse_tiles=2),
                  dict(coarse_tiles=1)),
}]
for k, targets in enumerate(sets):
    for name, (b, c) in targets.items():
        base, changed = sim.simulate_llm(**b), sim.simulate_llm(**{**b, **c})
        achieved = changed.tokens_per_s / base.tokens_per_s
        predicted, from_slowed = data[f"{k} {name}"]
        what = f"{name} ({b['backend']} {b['phase']}, batch {b['batch']}, seq {b['seq']})"
        grader.assert_in_range(predicted, 1e-3, 1e3, name=f"{what}: predicted speedup is a number")
        grader.assert_equal(predicted > 1, achieved > 1, name=f"{what}: direction of the effect")
        grader.assert_in_range(predicted / achieved, 1 / 1.5, 1.5, name=f"{what}: size of the effect")
        grader.assert_scalar(from_slowed, predicted, rel=1e-6, name=f"{what}: prediction from counted work only")
### END HIDDEN TESTS

# %%
names = list(compiled)
try:
    pred = [predict(n, *compiled[n]) for n in names]
except NotImplementedError:
    pred = [np.nan] * len(names)
sim = [compiled[n][1].tokens_per_s / compiled[n][0].tokens_per_s for n in names]
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(16, 5.8), layout="constrained", width_ratios=[1, 1.3])
x = np.arange(len(names))
ax.bar(x - 0.2, pred, 0.4, label="predicted (roofline model)", color=tint(SEQUENCE[0], 0.4), edgecolor=SEQUENCE[0])
ax.bar(x + 0.2, sim, 0.4, label="SIMULATED", color=SEQUENCE[4])
ax.axhline(1, color="#444444", lw=0.8)
ax.set_yscale("log")
ax.set_xticks(x, [f"{n}\n{compiled[n][0].backend.upper()}" for n in names])
ax.set_ylabel("speedup, tokens/s new ÷ old (log scale)")
ax.set_title("One change per target: predicted vs SIMULATED speedup")
ax.legend()
# The batching change moves the decode GEMVs along the HBM slope toward the ridge.
b1, b16 = compiled["batching"]
sets = []
for r, label in ((b1, "batch 1"), (b16, "batch 16")):
    p = points_of(r, f"decode, {label}")
    p = p[p["name"].str.startswith("L0.")]  # one decoder layer
    sets.append(p[p["flops"] >= p["flops"].quantile(0.5)])
plot_roofline(roofline_for_chip(b1.chip, b1.dtype), sets, ax=ax2, kind="simulated", label_points=3,
              title=f"SIMULATED: batching moves the decode matmuls toward the ridge\n({MODEL}, H100, KV {SEQ}, "
                    "first layer, larger half of its kernels)")
plt.show()

# %% [markdown]
# ## Analysis
#
# A few sentences each; cite numbers from your own runs.

# %% [markdown]
# **Q1 (Part 2).** Which ops of the decode step are memory-bound on the GPU, and why? Why does batching move
# decode toward the ridge — and why does the whole step's intensity grow more slowly than the batch size at
# long context?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_decode_bound", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# Every decode op is memory-bound at batch 1: each projection/MLP matmul is a matrix-vector product that reads
# every weight (2 B) for 2 FLOPs, intensity ~1 FLOP/B against a ridge of ~300; norms, RoPE and residual adds are
# pointwise (<1 FLOP/B); attention reads the whole KV cache for ~2 FLOPs per element. Batching reuses each weight
# byte for every sequence in the batch, so the weight matmuls' intensity grows ~linearly with batch. The KV cache
# is per sequence, so attention's bytes grow with batch too and its intensity stays ~1: at long context KV bytes
# become a large share, and the step's intensity saturates below the ridge.
# === END MARK SCHEME ===

# %% [markdown]
# **Q2 (comparative prediction).** Before the simulator answers, rank the GPU (H100), the TPU (v5e), the LPU and
# Spyre by tokens/s for one decode step of the 8B model at batch 1, fastest first, from Part 1's ridge points and
# memory levels. The reveal sets it beside the simulated order and adds both to your map.

# %%
from common import explore  # (not `predict`: that name is your Part 5 function)
from common.landscape import open_map

lm = open_map(6, scratch=FAST)  # your landscape map: the prediction is kept beside it
P_DECODE = explore.predict("course6.lab6.decode-8b-rank", f"{MODEL} decode, batch 1: fastest first",
                           kind="ranking", choices=("gpu", "tpu", "lpu", "spyre"), lm=lm, course=6)
if explore.widgets_can_render():
    display(P_DECODE.form())  # pick and commit here, or call P_DECODE.commit([...]) in the next cell

# %% nbgrader={"grade": false, "grade_id": "predict_decode", "locked": false, "schema_version": 3, "solution": true, "task": false}
# Your ranking, fastest first (three or more machines), committed before the next cell runs the simulator.
### BEGIN SOLUTION
P_DECODE.commit(["lpu", "gpu", "tpu", "spyre"])
### END SOLUTION

# %%
rows = []
for system in ("GPU", "TPU", "LPU", "Spyre"):
    try:
        r = simulate_llm(MODEL, system.lower(), phase="decode", batch=1, seq=SEQ)
    except (DFAError, ImportError) as exc:
        print(f"{system}: not available ({exc})")
        continue
    att = r.attribution
    rows.append({"system": system, "chips": f"{r.chips}x {r.chip}", "tokens/s": round(r.tokens_per_s, 1),
                 "bottleneck": r.bottleneck, **{k: f"{v / r.time_s:.0%}" for k, v in att.items()}})
print(f"SIMULATED decode of {MODEL}, batch 1, KV {SEQ}:")
print(pd.DataFrame(rows).sort_values("tokens/s", ascending=False).to_string(index=False))
try:
    P_DECODE.reveal({row["system"]: row["tokens/s"] for row in rows})
    lm.save()
except DFAError as exc:  # no ranking committed yet
    print(exc)

# %% [markdown]
# **Q2 (why).** What bounds each of the four (memory level, communication or scheduling)? Where did your ranking
# miss, and what explains the surprise?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_compare", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# All four are memory-bound in principle (decode intensity ~1 FLOP/B, left of every ridge). Ranking by main-memory
# bandwidth per step: LPU first (model spread over many chips' SRAM, 80 TB/s each; but chip-to-chip links and the
# pipeline appear in the attribution), then H100 (3.35 TB/s HBM), TPU v5e (2 chips x 819 GB/s), Spyre last
# (204.8 GB/s LPDDR5). The simulator agrees with the order; on the LPU part of the time is communication, on the
# GPU without CUDA graphs a visible share is scheduling (host launches).
# === END MARK SCHEME ===

# %% [markdown]
# **Q3 (Parts 3–5).** Your hierarchical roofline showed an op that is compute-bound for HBM but bound by the
# scratchpad. What would you change to move it to its roof on that machine? And in Part 5, which prediction was
# furthest from the simulation, and which effect did your model leave out?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_optimise", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# The attention kernel with head_dim 64 does 4*64 FLOPs per score element but moves the score tile through shared
# memory several times (scores, scale/mask, softmax); raising the work per scratchpad byte — a larger head
# dimension per tile, keeping the scores in registers (FlashAttention-2/3 style), fewer passes over the tile —
# moves its SMEM point right. In Part 5 the scheduling prediction is furthest: removing all scheduling time
# ignores that CUDA graphs still leave a device-side gap per kernel and that some kernels were still launch-bound;
# fusion: the floor sum ignores wave quantisation and the TPU/Spyre predictions ignore padding and link time.
# === END MARK SCHEME ===

# %% [markdown]
# **Q4 (Part 2, simulated vs measured).** In the simulated ÷ measured table of the real model, why does the
# factor differ between the prefill and decode matmul groups, and between the whole step and its groups' sum?
# Name two things the simulated chip does differently from what ran here, and one real cost it does not count.
# (On a CPU, say what the ratio compares; on a GPU, which roof the points sit under.)

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_sim_measured", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# The simulated chip runs at catalog peaks and achievable bandwidth with modelled tiling efficiency and a fixed
# launch cost per kernel, and fuses ops into kernels (a norm is one kernel, not six ops); the measurement ran
# eager PyTorch op by op on this device, in its dtype, with real caches, clocks and library kernels. On a CPU
# runtime the ratio compares two machines (CPU vs a simulated T4, both fp32): prefill matmuls are compute-bound,
# so their ratio is roughly CPU GFLOP/s ÷ GPU TFLOP/s; decode matmuls are GEMVs bound by memory (the LM head's
# weight read), so their ratio is a bandwidth ratio (tens of GB/s vs ~300 GB/s) — a different factor. The whole
# step adds what no group holds: Python/transformers dispatch between ops, views, the KV-cache bookkeeping, and on
# the simulator the launch gaps (decode of a small model is launch-bound there). On a GPU the points sit under the
# fp16 tensor-core roof (the model runs in fp16; fp32 CUDA cores are the lower ceiling); the ratio nears 1 for
# large kernels and drifts for small ones (launch latency, per-op sync, clocks, cuBLAS choices). Full marks: both
# phases' ratios read and explained (compute vs memory/launch bound), and one un-modelled host cost named.
# === END MARK SCHEME ===

# %% [markdown]
# ## Landscape map
#
# Add this course's rows to the landscape map — each system's peak FLOP/s and main-memory bandwidth (catalog),
# ridge point (your `system_ridges`) and what bounds a decode step (simulator) — and render it: the capstone figure.
#
# The map is one file for all six courses (`~/.local/share/dataflow-labs/landscape_map.json`, or `$DFA_LANDSCAPE`);
# catalog and simulator rows it lacks are rebuilt, yours stay. The last cell exports it as `landscape_map.png` and
# `.csv` (on Colab, `download_map(png, csv)` downloads them).

# %%
import tempfile

from common.landscape import SYSTEMS, download_map, keep_on_drive, open_map, upload_map

KEEP_ON_DRIVE = False  # Colab only: True reads (and keeps) the map you kept on Google Drive in earlier courses
if KEEP_ON_DRIVE and not FAST:
    keep_on_drive()
try:
    ridges = system_ridges(SYSTEM_CHIPS)
except NotImplementedError:
    ridges = {}
    print("system_ridges is not written yet: the map gets no ridge-point row until it is")
# lm: the map the Analysis opened (open_map(6, scratch=FAST)), with your Q2 prediction in it: the one all courses
# share, or under CI and the autograder (FAST) a scratch copy, so grading never touches a learner's map.
for system in SYSTEMS:
    rl = roofline_for_chip(SYSTEM_CHIPS[system], DTYPES)
    lm.add(system, "peak FLOP/s", rl.peak_flops, course=6, source="catalog", overwrite=True)
    lm.add(system, "peak bandwidth (B/s)", rl.bandwidth(), course=6, source="catalog", overwrite=True)
    if system in ridges:
        lm.add(system, "ridge point (FLOP/B)", float(ridges[system]), course=6, source="learner", overwrite=True)
    try:
        r = simulate_llm(MODEL, system.lower(), phase="decode", batch=1, seq=SEQ)
        lm.add(system, "decode bound", f"{r.bottleneck} ({r.chips}x {r.chip})", course=6, source="simulated",
               overwrite=True)
    except (DFAError, ImportError) as exc:
        print(f"{system}: no simulated decode in this version ({exc})")
lm.save()
print(lm.frame().to_string())
fig, ax = plt.subplots(figsize=(15, 1.2 + 0.55 * len(lm.frame())), layout="constrained")
lm.render(ax=ax, title="Accelerator landscape after Course 6 (catalog, learner and SIMULATED rows labelled)")
plt.show()

# %%
# The whole map, for your notes or a report: a PNG of the figure and a CSV with one line per cell.
png, csv = lm.export(tempfile.mkdtemp() if FAST else ".",
                     title=f"Accelerator landscape map, Courses 1-6 ({len(lm)} cells; [S] = SIMULATED)")
print(f"exported {png} and {csv}")
if not FAST:
    download_map(png, csv)  # on Colab: saves the map, the PNG and the CSV to your computer; elsewhere a no-op

# %% [markdown]
# ## Wrap-up
#
# - **Intensity is counted, not timed**: counted FLOPs and bytes place an op; time gives its height.
# - **Decode sits left of every ridge** at batch 1; batching moves it right, but the KV cache does not batch.
# - **One ceiling per software-managed level**: compute-bound for HBM, yet bound by the scratchpad.
# - **Scheduling is the third ceiling**: launches and bubbles cap small ops at $F/t_0$, whatever their intensity.
# - **Predict, then measure**: a missed prediction points at what the model leaves out.
#
# Next: **Deep Dive 6** (`deepdive6_spyre`) builds Spyre's LPDDR5 / LX roofline from its counters.


# %% [markdown]
# ## Going further (optional)
#
# ### The 70B configuration
#
# Part 2's analysis for the 70B model: it does not fit one GPU, so the simulator splits it over the fewest chips
# whose memory holds weights + KV cache (tensor parallel, with all-reduces). Ops are per chip, so they sit under
# the per-chip roofline.

# %%
big = {ph: simulate_llm(BIG_MODEL, "gpu", phase=ph, batch=1, seq=SEQ) for ph in ("prefill", "decode")}
rl = roofline_for_chip(big["decode"].chip, big["decode"].dtype)
plot_roofline(rl, [points_of(big["prefill"], f"prefill T={SEQ}"), points_of(big["decode"], f"decode (KV {SEQ})")],
              kind="simulated", label_points=5,
              title=f"SIMULATED {BIG_MODEL} on {big['decode'].chips}x {big['decode'].chip} (tensor parallel), "
                    f"batch 1, {big['decode'].dtype}: ops per chip")
plt.show()
for ph, r in big.items():
    print(f"{ph}: {eng(r.time_s, 's')}, {r.tokens_per_s:.1f} tokens/s, bottleneck {r.bottleneck} (SIMULATED)")
