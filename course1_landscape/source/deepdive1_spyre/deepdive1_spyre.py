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
# # Course 1 · Dataflow Deep Dive — The decoder on a simulated IBM Spyre
#
# In the original specialization this module runs on real IBM Spyre cards. Here the same steps run on the
# **simulated Spyre** of `common.sim` (a model of torch-spyre's compiler passes with a cost model from public
# specifications; every number below that is not from the catalog is **simulated**). You compile the Lab 1
# decoder with `torch.compile(model, backend="dfa_spyre")` and read what a dataflow compiler made of it: which
# ops were fused into one device program (a *bundle*), where data crosses between LPDDR5, the per-core LX
# scratchpads and the host, how each tensor is cut into 128-byte **sticks** (and how much of each stick is
# padding), how full each core's scratchpad gets, and the LPDDR5↔LX traffic counters — then you put the GPU
# backend's picture of the same model next to it.
#
# **Learning objectives**
#
# - read a dataflow compiler's output: fused bundles, CPU fallbacks and the data-movement edges between them
# - compute how many 128-byte sticks a tensor occupies and how much padding that costs, for any shape and dtype
# - read scratchpad use per core and the LPDDR5<->LX traffic counters, and check them against the program
# - build a roofline for a software-managed memory hierarchy and compare Spyre's picture with the GPU's
#
# **Expected time:** about 50 minutes  
# **Runtime:** a free Colab CPU runtime or any laptop (the Spyre is simulated)

# %% [markdown] include="grading"
# *(shared cell `grading`: `dfa release` writes it here)*

# %% include="setup"
# %run -m common.grading.authoring.labsource setup

# %%
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from common.palette import EMPHASIS, SEQUENCE
from common.measure import bench
from common import roofline
from common.chips import DTYPE_BYTES, get_chip

print(json.dumps(bench.machine_info(), indent=1))
SPYRE = get_chip("spyre")
print(f"catalog: {SPYRE.name}, {SPYRE.compute_units} {SPYRE.compute_unit_name}; "
      + "; ".join(f"{lv.name} {lv.total_capacity / 1e6:g} MB" for lv in SPYRE.memory_levels)
      + f"; stick = {SPYRE.fact('stick_bytes'):g} bytes")

# %% tags=["parameters"]
import os

# CI and the autograder run FAST (nbgrader sets NBGRADER_EXECUTION; papermill passes FAST=True).
# DFA_FAST=1 picks the same FAST setting but keeps the explorer's widgets live (NBGRADER_EXECUTION makes it print).
FAST = bool(os.environ.get("NBGRADER_EXECUTION") or os.environ.get("DFA_FAST"))
MODEL = "tiny-block"  # the decoder of Lab 1
BATCH, SEQ = 4, 64  # one prefill forward pass
LANDSCAPE_PATH = None  # None: the map all six courses share ($DFA_LANDSCAPE, else ~/.local/share/dataflow-labs)

# %%
import tempfile

if FAST:
    BATCH, SEQ = min(BATCH, 2), min(SEQ, 32)
    LANDSCAPE_PATH = LANDSCAPE_PATH or os.path.join(tempfile.mkdtemp(prefix="dfa_"), "landscape_map.json")
print(f"FAST={FAST}: {MODEL}, prefill batch {BATCH}, seq {SEQ}")

# %% [markdown]
# ## Part 1 — The compiler's dataflow graph: bundles, fallbacks, edges
#
# **Principle.** A dataflow compiler turns the graph into a few large device programs instead of many small
# kernels: every run of ops the device supports becomes one **bundle** that the host launches once, and inside it
# intermediates can stay on chip. What breaks a bundle is an op the device cannot run: it *falls back* to the
# host CPU, which costs a synchronisation and a PCIe round trip. The data-movement edges of the program are then
# the tensors that enter a bundle from LPDDR5 or from the host, and those that leave it.
#
# **Vendor.** torch-spyre fuses device ops into SuperDSC bundles and lays tensors out in sticks; the simulated
# backend keeps every stage: `program.stages["fuse"]` (the op names of each bundle) and `program.kernels`
# (`Kernel`: `name`, `kind` — "fallback" for a host op —, `ops`, `inputs` = external producer → bytes,
# `outputs`, `bytes` per memory level, and `tiling` with the per-op plans under `tiling["sdsc"]` and the bundle's
# `lpddr_read`/`lpddr_write` totals; a fallback has `d2h_bytes`/`h2d_bytes` instead). A `spyre.restickify` op is a
# copy the compiler inserted because a tensor was read through a transposed view, with its sticks on the wrong
# dimension.
#
# **Spec.** `bundle_table(program)` → a `pandas.DataFrame` indexed by kernel name, in program order, with columns
# `kind` (str), `ops` (int: number of ops), `restickify` (int: how many of them are `spyre.restickify`),
# `fallback` (bool), `inputs` (int: number of external input edges), `lpddr_read` and `lpddr_write` (float,
# `kernel.tiling`, 0.0 for a fallback) and `pcie_bytes` (float: `kernel.bytes` at "PCIe", 0.0 if none).

# %%
# run_each(m, args, kwargs) is torch.compile(m, backend=f"dfa_{name}") for each machine named, with one Dynamo
# trace shared by both (common/sim/each_backend.py): each backend gets the same FX graph and inputs.
from common.models import build_model, step_inputs
from common.sim import last_report
from common.sim.each_backend import run_each

model = build_model(MODEL).eval()
margs, mkw = step_inputs(model, "prefill", BATCH, SEQ)
compiled = {}
with torch.no_grad():
    eager = model(*margs, **mkw)
    for backend, out in run_each(model, margs, mkw, backends=("spyre", "gpu")).items():
        if isinstance(out, Exception):
            raise out
        compiled[backend] = last_report(backend)
        print(f"dfa_{backend}: max |compiled - eager| = {float((out - eager).abs().max()):.2e}")
REPORT, GPU_REPORT = compiled["spyre"], compiled["gpu"]
PROGRAM = REPORT.programs[0]
print(PROGRAM.summary())
print(GPU_REPORT.programs[0].summary())
for i, ops in enumerate(PROGRAM.stages["fuse"]):
    print(f"bundle {i}: {len(ops)} ops: {' '.join(o.replace('aten.', '') for o in ops[:14])}"
          + (" ..." if len(ops) > 14 else ""))


# %% nbgrader={"grade": false, "grade_id": "bundle_table", "locked": false, "schema_version": 3, "solution": true, "task": false}
def bundle_table(program):
    """One row per kernel (bundle or host fallback) of a simulated Spyre program."""
    ### BEGIN SOLUTION
    rows = {}
    for k in program.kernels:
        names = [o.op for o in k.ops]
        rows[k.name] = {"kind": k.kind, "ops": len(names), "restickify": names.count("spyre.restickify"),
                        "fallback": k.kind == "fallback", "inputs": len(k.inputs),
                        "lpddr_read": float(k.tiling.get("lpddr_read", 0.0)),
                        "lpddr_write": float(k.tiling.get("lpddr_write", 0.0)),
                        "pcie_bytes": float(k.bytes.get("PCIe", 0.0))}
    return pd.DataFrame.from_dict(rows, orient="index")
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "bundle_table_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import math

from common.checks import check_equal, check_type

BUNDLES = bundle_table(PROGRAM)
check_type("bundle_table(...)", BUNDLES, pd.DataFrame)
check_equal("one row per kernel, in program order, indexed by kernel name",
            [str(i) for i in BUNDLES.index] == [k.name for k in PROGRAM.kernels], True)
for k in PROGRAM.kernels:
    row = BUNDLES.loc[k.name]
    check_equal(f"{k.name}: kind is the kernel's", str(row["kind"]) == k.kind, True)
    check_equal(f"{k.name}: ops counts the kernel's ops", int(row["ops"]) == len(k.ops), True)
    check_equal(f"{k.name}: restickify counts its spyre.restickify ops",
                int(row["restickify"]) == sum(o.op == "spyre.restickify" for o in k.ops), True)
    check_equal(f"{k.name}: fallback is True exactly for a host fallback", bool(row["fallback"]) == (k.kind == "fallback"),
                True)
    check_equal(f"{k.name}: lpddr_read is the bundle's total (0.0 for a fallback)",
                math.isclose(float(row["lpddr_read"]), float(k.tiling.get("lpddr_read", 0.0)), rel_tol=1e-9), True)
    check_equal(f"{k.name}: pcie_bytes are its bytes at PCIe (0.0 if none)",
                math.isclose(float(row["pcie_bytes"]), float(k.bytes.get("PCIe", 0.0)), rel_tol=1e-9), True)
print(BUNDLES.to_string())
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe
from common.sim import simulate_llm as _simulate

probe = Probe()
_rng = _random.Random(probe.seed)
_cases = [("test", "prefill", _rng.randrange(1, 5), _rng.randrange(8, 33), _rng.choice((None, 40960, 65536))),
          ("tiny-block", _rng.choice(("prefill", "decode")), _rng.randrange(1, 4), _rng.randrange(8, 48),
           _rng.choice((None, 49152, 262144)))]
_programs = [_p for _m, _ph, _b, _s, _lx in _cases  # programs you have not seen, some with a small LX budget
             for _p in _simulate(_m, "spyre", phase=_ph, batch=_b, seq=_s, lx_budget_bytes=_lx).programs]


def _plain_table(t):  # the DataFrame as data: index, columns, and each column's values
    def plain(v):
        return v if v is None or isinstance(v, (bool, int, float, str)) else getattr(v, "item", lambda: str(v))()

    return {"index": [str(i) for i in t.index], "columns": [str(c) for c in t.columns],
            "values": {str(c): [plain(v) for v in t[c].tolist()] for c in t.columns}}


probe.send("tables", [_plain_table(bundle_table(_p)) for _p in _programs])
### JUDGEMENT
import random

from answers import bundle_table as ref_table
from common.checks import grader
from common.sim import simulate_llm

data, seed = probe.received()
rng = random.Random(seed)  # the probe's draws, then its programs, rebuilt here
cases = [("test", "prefill", rng.randrange(1, 5), rng.randrange(8, 33), rng.choice((None, 40960, 65536))),
         ("tiny-block", rng.choice(("prefill", "decode")), rng.randrange(1, 4), rng.randrange(8, 48),
          rng.choice((None, 49152, 262144)))]
reports = [simulate_llm(m, "spyre", phase=ph, batch=b, seq=s, lx_budget_bytes=lx) for m, ph, b, s, lx in cases]
programs = [p for r in reports for p in r.programs]
grader.assert_equal(len(data["tables"]), len(programs), name="one table per program")
for prog, mine in zip(programs, data["tables"]):
    want = ref_table(prog)
    grader.assert_equal(mine["index"], [str(i) for i in want.index], name="one row per kernel, in program order")
    grader.assert_equal(sorted(set(want.columns) - set(mine["columns"])), [], name="the table's columns")
    for col in want.columns:
        expected, got = want[col].tolist(), mine["values"][col]
        if col in ("lpddr_read", "lpddr_write", "pcie_bytes"):
            for g, w in zip(got, expected, strict=True):
                grader.assert_type(g, int, float, name=f"{col} is a number")
                grader.assert_scalar(g, w, rel=1e-9, abs_tol=1e-9, name=f"column {col} of a program you have not seen")
        else:
            kind = type(expected[0])  # str, int or bool
            grader.assert_equal([kind(g) if isinstance(g, (bool, int, float, str)) else None for g in got], expected,
                                name=f"column {col} of a program you have not seen")
### END HIDDEN TESTS

# %%
# The data-movement edges: what enters each kernel from outside it, and from where.
edges = []
for k in PROGRAM.kernels:
    for producer, nbytes in k.inputs.items():
        origin = "host (PCIe)" if k.kind == "fallback" else "LPDDR5"
        edges.append({"into": k.name, "kind": k.kind, "from": producer, "bytes": nbytes, "over": origin})
EDGES = pd.DataFrame(edges)
print(f"SIMULATED Spyre program of {MODEL} (prefill batch {BATCH}, seq {SEQ}): {len(EDGES)} input edges")
print(EDGES.groupby(["into", "kind", "over"])["bytes"].agg(["count", "sum"]).to_string())
for k in PROGRAM.kernels:
    if k.kind == "fallback":
        print(f"fallback {k.name}: {k.tiling['fallback']} runs on the host (nearest native: "
              f"{k.tiling['nearest_native']}), {k.tiling['d2h_bytes']:.0f} B down and {k.tiling['h2d_bytes']:.0f} B "
              "back over PCIe")
print(f"the GPU backend runs the same graph as {len(GPU_REPORT.programs[0].kernels)} kernels, each a launch")

# %% [markdown]
# ## Part 2 — Sticks and padding
#
# **Principle.** A dataflow core does not read bytes, it reads **sticks**: fixed 128-byte units laid along the
# innermost dimension of a tensor (64 fp16 or bf16 values, 32 fp32 values). A row whose length is not a
# multiple of the stick is padded to the next whole stick, so a tensor of shape `(..., n)` occupies
# `rows × ceil(n / per_stick)` sticks, with `rows` the product of all other dimensions. The padding is real: it
# is stored, moved and computed on. This is why a hidden size of 150 costs as much as 192 on Spyre — and why
# model shapes for such machines are multiples of 64.
#
# **Vendor.** The stick size is in the catalog (`get_chip("spyre").fact("stick_bytes")`, from torch-spyre's
# `BYTES_IN_STICK`); `common.sim.machines.spyre.stick_layout(shape, dtype)` is the simulator's own layout function, and
# each op's plan in `kernel.tiling["sdsc"]` lists its `tensors` with their `sticks` and `padding_bytes`.
#
# **Spec.** `sticks(shape, dtype="fp16", stick_bytes=None)` → `{"sticks": int, "device_bytes": int,
# "padding_bytes": int}`, with the element size from `DTYPE_BYTES` and the stick size `stick_bytes` (`None`: the
# catalog's, 128 bytes on Spyre today; a design study asks what a 64- or 256-byte stick would cost, so your
# function takes any whole number of bytes that holds at least one element). device_bytes = sticks × stick bytes;
# padding_bytes = device_bytes − the tensor's own bytes. Example: `(1024, 150)` fp16 → 3 sticks per row,
# 3072 sticks, 393,216 device bytes, 86,016 of them padding (22%).

# %% nbgrader={"grade": false, "grade_id": "sticks", "locked": false, "schema_version": 3, "solution": true, "task": false}
import math


def sticks(shape, dtype="fp16", stick_bytes=None):
    """How many sticks (`stick_bytes`, default the catalog's 128) a row-major tensor occupies on Spyre, and the
    padding bytes that costs."""
    ### BEGIN SOLUTION
    stick = int(stick_bytes or SPYRE.fact("stick_bytes"))
    elem = DTYPE_BYTES[dtype]
    shape = tuple(shape) or (1,)
    per_row = math.ceil(shape[-1] / (stick // elem))
    n = math.prod(shape[:-1]) * per_row
    return {"sticks": n, "device_bytes": n * stick, "padding_bytes": n * stick - math.prod(shape) * elem}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "sticks_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
import math

from common.checks import check_equal, check_type
from common.sim.machines.spyre import stick_layout

# Structural checks, and agreement with the simulator's own layout (which knows only the catalog's stick).
ex = sticks((1024, 150), "fp16")
check_type("sticks(...)", ex, dict)
check_equal("keys", sorted(ex), ["device_bytes", "padding_bytes", "sticks"])
check_equal("the worked example (1024, 150) fp16", (ex["sticks"], ex["padding_bytes"]), (3072, 86016))
for shape, dtype in [((32, 64), "fp16"), ((4, 100), "fp32"), ((2, 8, 33), "bf16")]:
    mine, ref = sticks(shape, dtype), stick_layout(shape, dtype)
    check_equal(f"{shape} {dtype}: device bytes = sticks x 128",
                mine["device_bytes"] == mine["sticks"] * int(SPYRE.fact("stick_bytes")), True)
    check_equal(f"{shape} {dtype}: padding = device bytes - own bytes",
                mine["padding_bytes"] == mine["device_bytes"] - math.prod(shape) * DTYPE_BYTES[dtype], True)
    check_equal(f"{shape} {dtype}: same stick count as the simulator's layout", mine["sticks"] == ref["sticks"],
                True, hint="rows x ceil(last dim / elements per stick)")
wide = sticks((4, 100), "fp16", stick_bytes=256)
check_equal("a 256-byte stick holds 128 fp16 values: (4, 100) needs one stick per row", wide["sticks"], 4)
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)
_cases = [((1024, 150), "fp16", 64), ((7,), "fp32", 256), ((2, 3, 64), "fp16", 64), ((5, 65), "int8", 64),
          ((3, 1, 129), "fp32", 96), ((5, 65), "fp16", None), ((3, 1, 129), "fp32", None), ((16, 200), "bf16", 256),
          ((64, 64), "bf16", None)]
for _ in range(8):  # shapes and stick widths you have not seen
    _shape = tuple(_rng.randrange(1, 300) for _ in range(_rng.randrange(1, 4)))
    _cases.append((_shape, _rng.choice(("fp16", "bf16", "fp32", "int8")), _rng.choice((None, 32, 64, 96, 256, 512))))
_out = []
for _shape, _dtype, _stick in _cases:
    _m = sticks(_shape, _dtype, stick_bytes=_stick)
    _out.append({_k: _m[_k] for _k in ("sticks", "device_bytes", "padding_bytes")})
probe.send("sticks", _out)
### JUDGEMENT
import random

from answers import sticks as ref_sticks
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
cases = [((1024, 150), "fp16", 64), ((7,), "fp32", 256), ((2, 3, 64), "fp16", 64), ((5, 65), "int8", 64),
         ((3, 1, 129), "fp32", 96), ((5, 65), "fp16", None), ((3, 1, 129), "fp32", None), ((16, 200), "bf16", 256),
         ((64, 64), "bf16", None)]
for _ in range(8):
    shape = tuple(rng.randrange(1, 300) for _ in range(rng.randrange(1, 4)))
    cases.append((shape, rng.choice(("fp16", "bf16", "fp32", "int8")), rng.choice((None, 32, 64, 96, 256, 512))))
grader.assert_equal(len(data["sticks"]), len(cases), name="one answer per shape")
for (shape, dtype, stick), mine in zip(cases, data["sticks"]):
    want = ref_sticks(shape, dtype, stick)
    for key in ("sticks", "device_bytes", "padding_bytes"):
        grader.assert_type(mine[key], int, name=f"{key} is an int")
        grader.assert_equal(mine[key], want[key], name=f"{key} of {shape} {dtype} with a {stick or 'catalog'}-byte stick")
grader.assert_equal(data["sticks"][8]["padding_bytes"], 0, name="a multiple of 64 needs no padding")
### END HIDDEN TESTS

# %%
# The model's own tensors: which ones carry padding in the compiled program?
seen = {}
for k in PROGRAM.kernels:
    for plan in k.tiling.get("sdsc", []):
        for name, t in plan["tensors"].items():
            seen[name] = {"op": plan["op"], "device_shape": t["device_shape"], "sticks": t["sticks"],
                          "padding_bytes": t["padding_bytes"]}
TENSORS = pd.DataFrame.from_dict(seen, orient="index")
TENSORS["padding share"] = TENSORS["padding_bytes"] / (TENSORS["sticks"] * SPYRE.fact("stick_bytes"))
print(f"SIMULATED layout: {len(TENSORS)} tensors, {int(TENSORS['sticks'].sum())} sticks, "
      f"{int(TENSORS['padding_bytes'].sum())} padding bytes")
print(TENSORS.sort_values("padding_bytes", ascending=False).head(8).to_string())

# Padding share against the innermost dimension (catalog stick size; analytic, not a measurement)
n = np.arange(1, 301)
fig, ax = plt.subplots(figsize=(9, 3.6), layout="constrained")
for dtype in ("fp16", "fp32"):
    per = int(SPYRE.fact("stick_bytes")) // DTYPE_BYTES[dtype]
    ax.plot(n, 1 - n / (np.ceil(n / per) * per), label=f"{dtype} ({per} per stick)")
cfg = model.config
for dim, name in [(cfg.d_model, "d_model"), (cfg.head_dim, "head_dim"), (cfg.ffn_dim, "ffn_dim"), (150, "Q1's n")]:
    ax.axvline(dim, color="#999999", lw=0.8, ls=":")
    ax.text(dim, 0.95, f" {name}={dim}", fontsize=8, rotation=90, va="top")
ax.set_xlabel("innermost dimension n [elements]")
ax.set_ylabel("padding share of the stick bytes")
ax.set_ylim(0, 1)
ax.set_title("Spyre stick layout from the catalog (128-byte sticks): padding share vs innermost size", fontsize=10)
ax.legend(fontsize=8, loc="center right")
plt.show()


# %% [markdown]
# ## Part 3 — Scratchpads, traffic counters, and the GPU's picture
#
# **Principle.** In a software-managed hierarchy nothing is cached by accident: the compiler decides which tensor
# sits in which core's scratchpad and when it moves. Each op of a bundle is split across cores; its working set
# and the intermediates that later ops read stay in the core's **LX** if they fit the budget left (after a
# reserved share), otherwise they **spill** to LPDDR5 and are read back. The hardware counters then count the
# bytes that crossed LPDDR5 → LX and LX → LPDDR5. A GPU's picture of the same model is different: every kernel
# reads its inputs from and writes its output to HBM, with caches in between that no compiler plans.
#
# **Vendor.** Per op, `kernel.tiling["sdsc"][i]` has `lpddr_read`, `lpddr_write`, `spill_bytes`,
# `lx_bytes_per_core` (what that core holds while the op runs) and `inputs_from` / `output_to` ("LX" or
# "LPDDR5"); per bundle `tiling["lx_budget_bytes"]` is the per-core LX budget. `report.counters` has the totals:
# `lpddr_to_lx_bytes`, `lx_to_lpddr_bytes`, `lx_spill_bytes`, `restickify_count`, `fallback_count`,
# `host_roundtrip_bytes`, `bundle_launches`.
#
# **Spec.** `spyre_traffic(program)` → `{"lpddr_read": float, "lpddr_write": float, "spill": float,
# "lx_peak_per_core": float, "lx_budget_per_core": float}`: the sums of `lpddr_read`, `lpddr_write` and
# `spill_bytes` over every op plan of every bundle (fallbacks have no plans), the largest `lx_bytes_per_core` of
# any op plan, and the smallest `lx_budget_bytes` of any bundle. With one card, the three sums equal the report's
# counters.

# %% nbgrader={"grade": false, "grade_id": "spyre_traffic", "locked": false, "schema_version": 3, "solution": true, "task": false}
def spyre_traffic(program):
    """LPDDR5<->LX traffic, spills and scratchpad use per core, summed from the compiler's op plans."""
    ### BEGIN SOLUTION
    plans = [plan for k in program.kernels if k.kind != "fallback" for plan in k.tiling["sdsc"]]
    budgets = [k.tiling["lx_budget_bytes"] for k in program.kernels if k.kind != "fallback"]
    return {"lpddr_read": float(sum(p["lpddr_read"] for p in plans)),
            "lpddr_write": float(sum(p["lpddr_write"] for p in plans)),
            "spill": float(sum(p["spill_bytes"] for p in plans)),
            "lx_peak_per_core": float(max(p["lx_bytes_per_core"] for p in plans)),
            "lx_budget_per_core": float(min(budgets))}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "spyre_traffic_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_in_range, check_scalar, check_type

TRAFFIC = spyre_traffic(PROGRAM)
check_type("spyre_traffic(...)", TRAFFIC, dict)
check_scalar("LPDDR5 -> LX bytes", TRAFFIC["lpddr_read"], float(REPORT.counters["lpddr_to_lx_bytes"]), rel=1e-9)
check_scalar("LX -> LPDDR5 bytes", TRAFFIC["lpddr_write"], float(REPORT.counters["lx_to_lpddr_bytes"]), rel=1e-9)
check_scalar("spilled bytes", TRAFFIC["spill"], float(REPORT.counters["lx_spill_bytes"]), rel=1e-9, abs_tol=1e-9)
check_in_range("LX peak per core / budget", TRAFFIC["lx_peak_per_core"] / TRAFFIC["lx_budget_per_core"], 0.0, 1.0,
               hint="the planner never exceeds the budget")
print(f"SIMULATED: {TRAFFIC['lpddr_read'] / 1e3:.1f} kB LPDDR5->LX, {TRAFFIC['lpddr_write'] / 1e3:.1f} kB back, "
      f"{TRAFFIC['spill'] / 1e3:.1f} kB spilled; LX peak {TRAFFIC['lx_peak_per_core'] / 1e3:.1f} kB of "
      f"{TRAFFIC['lx_budget_per_core'] / 1e6:.2f} MB per core")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe
from common.sim import simulate_llm as _simulate

probe = Probe()
_rng = _random.Random(probe.seed)
_cases = [("test", "prefill", _rng.randrange(1, 5), _rng.randrange(8, 33), _rng.choice((None, 40960, 65536))),
          ("tiny-block", _rng.choice(("prefill", "decode")), _rng.randrange(1, 4), _rng.randrange(8, 48),
           _rng.choice((None, 49152, 262144)))]
_programs = [_p for _m, _ph, _b, _s, _lx in _cases  # programs you have not seen, some with a small LX budget
             for _p in _simulate(_m, "spyre", phase=_ph, batch=_b, seq=_s, lx_budget_bytes=_lx).programs]
_keys = ("lpddr_read", "lpddr_write", "spill", "lx_peak_per_core", "lx_budget_per_core")
_device = [_p for _p in _programs if any(_k.kind != "fallback" for _k in _p.kernels)]
probe.send("traffic", [{_k: _t[_k] for _k in _keys} for _t in (spyre_traffic(_p) for _p in _device)])
### JUDGEMENT
import random

from answers import spyre_traffic as ref_traffic
from common.checks import grader
from common.sim import simulate_llm

data, seed = probe.received()
rng = random.Random(seed)  # the probe's draws, then its programs, rebuilt here
cases = [("test", "prefill", rng.randrange(1, 5), rng.randrange(8, 33), rng.choice((None, 40960, 65536))),
         ("tiny-block", rng.choice(("prefill", "decode")), rng.randrange(1, 4), rng.randrange(8, 48),
          rng.choice((None, 49152, 262144)))]
reports = [simulate_llm(m, "spyre", phase=ph, batch=b, seq=s, lx_budget_bytes=lx) for m, ph, b, s, lx in cases]
programs = [p for r in reports for p in r.programs]
device = [p for p in programs if any(k.kind != "fallback" for k in p.kernels)]
grader.assert_equal(len(data["traffic"]), len(device), name="one answer per program")
for prog, mine in zip(device, data["traffic"]):
    for key, value in ref_traffic(prog).items():
        grader.assert_type(mine[key], float, name=f"{key} is a float")
        grader.assert_scalar(mine[key], value, rel=1e-9, abs_tol=1e-9, name=f"{key} of a program you have not seen")
### END HIDDEN TESTS

# %%
# Spyre's picture vs the GPU backend's picture of the same compiled graph (both SIMULATED).
from common.roofline import Ceiling

rows = []
for name, r in (("Spyre", REPORT), ("GPU", GPU_REPORT)):
    prog = r.programs[0]
    rows.append({"system": name, "chip": r.chip, "kernels/bundles": len(prog.kernels),
                 "launches": sum(e.kind == "launch" for e in r.events), "time_s": r.time_s,
                 "bottleneck": r.bottleneck, **{f"bytes_{k}": v for k, v in r.bytes.items()}})
PICTURE = pd.DataFrame(rows).set_index("system")
print(f"SIMULATED {MODEL} prefill, batch {BATCH}, seq {SEQ}:")
print(PICTURE.T.to_string())

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), layout="constrained")
levels = [c for c in PICTURE.columns if c.startswith("bytes_")]
colors = {"Spyre": EMPHASIS, "GPU": SEQUENCE[0]}
x = np.arange(len(levels))
for j, system in enumerate(PICTURE.index):
    ax1.bar(x + (j - 0.5) * 0.4, PICTURE.loc[system, levels].astype(float).fillna(0), 0.4, label=system,
            color=colors[system])
ax1.set_xticks(x, [c.removeprefix("bytes_") for c in levels])
ax1.set_yscale("log")
ax1.set_ylabel("bytes moved [B] (log scale)")
ax1.set_title("bytes per memory level", fontsize=10)
ax1.legend(fontsize=8)
# The roofline of a software-managed hierarchy: LPDDR5 (catalog) and LX (catalog estimate) ceilings
rl = roofline.roofline_for_chip("spyre", "fp16").with_ceiling(
    Ceiling("LX (estimate)", "bandwidth", SPYRE.estimate("lx_bandwidth"), level="LX",
            note=SPYRE.estimates["lx_bandwidth"].derivation))
roofline.plot_roofline(rl, REPORT.roofline_points(), kind="simulated", ax=ax2, label_points=4,
                       title="Spyre roofline (catalog; fp16 peak and LX are estimates) with SIMULATED ops")
fig.suptitle(f"SIMULATED (common.sim): {MODEL} prefill, batch {BATCH}, seq {SEQ} — Spyre vs GPU backend",
             fontsize=11)
plt.show()

# %% [markdown]
# ## Analysis
#
# Answer in the cells below (graded by hand).

# %% [markdown]
# **Question 1 (sticks).** A layer of a model you are porting has activations of shape `(batch × seq, 150)` in
# fp16 and a weight of shape `(150, 4096)`. How many sticks does one row of the activation occupy, what share of
# the bytes is padding, and what happens to the weight's layout when a matmul reads it transposed? What would you
# change in the model, and why does a GPU not force that change?

# %% [markdown] nbgrader={"grade": true, "grade_id": "dd_q_sticks", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# 150 fp16 values need ceil(150/64) = 3 sticks per row = 192 slots, so 42/192 ≈ 22% of the bytes are padding
# (stored, moved and multiplied). The weight (150, 4096) is laid out along 4096 (64 sticks per row, no padding); if
# it is read transposed (innermost dim 150), the compiler must restickify it (a copy into the other layout), with
# the same 22% padding on the new innermost dimension — unless weights are laid out ahead of time as in the
# simulator. Change: a hidden size that is a multiple of 64 (e.g. 128 or 192). A GPU reads bytes through caches
# with 32-byte sectors, so an odd size costs at most a partial sector per row and tensor cores pad internally; no
# layout unit forces whole 128-byte sticks. Full marks: 3 sticks and ~22%, restickify explained, multiple of 64.
# === END MARK SCHEME ===

# %% [markdown]
# **Question 2 (two pictures of one model).** Using your Part 3 table and figure: how many device programs does
# each backend run, where do the intermediates of the decoder live on each, and which one moves more bytes through
# its main memory? What dominates Spyre's time for this small model, and what would change for a 7B model?

# %% [markdown] nbgrader={"grade": true, "grade_id": "dd_q_pictures", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# Spyre: a handful of bundles (device ops fused; broken only by the host fallback), intermediates kept in the
# cores' LX scratchpads, LPDDR5 traffic ≈ weights + inputs + outputs (+ restickify copies); the GPU: tens of
# kernels, every intermediate written to and read from HBM, so more main-memory bytes. For the tiny model Spyre's
# time is dominated by fixed overheads — bundle launches (~20 µs each, an estimate) and the fallback's host round
# trip — i.e. scheduling, not compute or LPDDR5. For a 7B model the weights (~14 GB fp16) must stream from LPDDR5
# at ~0.2 TB/s per card for every decode step: memory-bound, and LX capacity forces spills/tiling. Full marks:
# counts, where intermediates live, bytes comparison, scheduling-bound now vs memory-bound at scale.
# === END MARK SCHEME ===

# %% [markdown]
# ## Landscape map
#
# Add what this Deep Dive found in the simulator to Spyre's column of the map you started in Lab 1 (the same
# file; `overwrite=True` refreshes these rows when you re-run). Values from the compiled program are
# **simulated**; the stick size is **catalog**.

# %%
from common.landscape import open_map

LM = open_map(1, LANDSCAPE_PATH, scratch=FAST)
LM.add("Spyre", "stick size (bytes)", int(SPYRE.fact("stick_bytes")), course=1, source="catalog", overwrite=True)
bundles = [k for k in PROGRAM.kernels if k.kind != "fallback"]
LM.add("Spyre", f"device programs for {MODEL} prefill", len(bundles), course=1, source="simulated", overwrite=True)
LM.add("GPU", f"device programs for {MODEL} prefill", len(GPU_REPORT.programs[0].kernels), course=1,
       source="simulated", overwrite=True)
for attribute, key in [("CPU fallbacks (host round trips)", "fallback_count"),
                       ("restickify copies", "restickify_count")]:
    LM.add("Spyre", attribute, int(REPORT.counters[key]), course=1, source="simulated", overwrite=True)
peak = max(p["lx_bytes_per_core"] for k in bundles for p in k.tiling["sdsc"])
LM.add("Spyre", "scratchpad peak per core (bytes)", float(peak), course=1, source="simulated", overwrite=True)
print(f"saved {LM.save()}")
ax = LM.render(title=f"Accelerator landscape map after the Course 1 Deep Dive ({len(LM)} cells)")
plt.show()

# %% [markdown]
# ## Wrap-up
#
# - A dataflow compiler's unit of work is a **bundle** of fused device ops; what breaks it is an op the device
#   cannot run, and each break is a host round trip.
# - On Spyre a tensor is a set of 128-byte **sticks** along its innermost dimension: `rows × ceil(n / per_stick)`.
#   Sizes that are not multiples of 64 (fp16) pay padding in storage, traffic and compute; transposed reads pay a
#   restickify copy.
# - In a **software-managed** hierarchy the compiler plans residency: the LX budget, spills and the LPDDR5↔LX
#   counters are its decisions, readable before anything runs — unlike a GPU's caches.
#
# Back to [Lab 1](../lab1_landscape/lab1_landscape.ipynb); Course 2 builds the dataflow graph of the decoder by
# hand and schedules it.
