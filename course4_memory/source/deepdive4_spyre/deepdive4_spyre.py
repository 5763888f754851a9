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
# # Course 4 · Dataflow Deep Dive — LPDDR5↔scratchpad traffic of a Spyre decode step
#
#
# The hardware module of the specialization reads an IBM Spyre card's LPDDR5↔scratchpad counters. Here the
# simulated Spyre backend (`common.sim`, a model of torch-spyre's compiler passes) produces the same counters,
# and `common.memory.traffic` takes them apart **op by op** for one decode step. On a machine whose scratchpad is
# managed by software, every byte that crosses between LPDDR5 and a core's LX scratchpad is a DMA the compiler
# wrote: you can predict each one with a formula — and that is what you will do. Every figure is labelled
# SIMULATED; every hardware number (stick size, LX capacity, reservations, bandwidth) comes from the project's
# catalog (`common.chips`), with estimates labelled as such.
#
# **Learning objectives**
#
# - read the LPDDR5↔LX traffic counters of one Spyre decode step op by op, and add them up to the step's counters
# - compute the stick padding a misaligned dimension (a head_dim that is not a multiple of 64 fp16) adds to traffic
# - predict the LPDDR5 bytes of a tiled matmul from its tile schedule, and the largest tile that fits a 2 MB LX
# - predict what a working set larger than the LX budget costs (spills, re-tiling) and check it in the simulator
# - add Course 4's Spyre rows (and a GPU/TPU/Spyre alignment comparison) to the landscape map
#
# **Expected time:** about 67 minutes  
# **Runtime:** a free Colab CPU runtime or any laptop (the Spyre card is simulated)

# %% [markdown] include="grading"
# *(shared cell `grading`: `dfa release` writes it here)*

# %% include="setup"
# %run -m common.grading.authoring.labsource setup

# %% tags=["parameters"]
import os

# Learner defaults. CI and the autograder run FAST (nbgrader sets NBGRADER_EXECUTION; papermill passes FAST=True).
# DFA_FAST=1 picks the same FAST setting but keeps the explorer's widgets live (NBGRADER_EXECUTION makes it print).
FAST = bool(os.environ.get("NBGRADER_EXECUTION") or os.environ.get("DFA_FAST"))
MODEL = "tiny-block"        # the small reference decoder (d_model 64, 4 heads of head_dim 16, 2 KV heads, 2 layers)
SEQ = 64                    # tokens already in the KV cache: the decode step reads SEQ + 1 positions
BIG_MODEL = "qwen2.5-0.5b"  # the smallest real decoder config in common.models (24 layers), fake tensors only
BIG_BATCH, BIG_SEQ = 64, 512
LANDSCAPE_PATH = None       # None: the map all six courses share ($DFA_LANDSCAPE, else ~/.local/share/dataflow-labs)

# %%
# Settings derived from FAST (kept out of the parameters cell, so papermill's FAST=True reaches them).
import tempfile
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from common.palette import EMPHASIS, SEQUENCE
from common.measure import bench
from common.chips import get_chip
from common.models import get_config
from common.roofline import eng
from common.sim import simulate_llm
from common.sim.run import op_workload
from common.memory.traffic import (default_lx_budget, spyre_step, step_totals, sweep, traffic_table,
                                working_set_check, workload_step)
from common.sim.workload import graph_workload

warnings.filterwarnings("ignore", category=UserWarning)
if FAST:
    BIG_BATCH, BIG_SEQ = min(BIG_BATCH, 64), min(BIG_SEQ, 256)
    LANDSCAPE_PATH = LANDSCAPE_PATH or os.path.join(tempfile.mkdtemp(prefix="dfa_"), "landscape_map.json")
HEAD_DIMS = (56, 64, 72) if FAST else tuple(range(16, 200, 8))
COARSE = (1, 2, 4, 8) if FAST else (1, 2, 4, 8, 16, 32)
COARSE_BATCHES = (1, BIG_BATCH) if FAST else (1, 16, 64, 256)
BUDGETS = (32768, 131072, 524288, default_lx_budget()) if FAST else tuple(
    int(b) for b in np.geomspace(32768, default_lx_budget(), 9))
CHAIN_ROWS = (64, 1024, 4096) if FAST else (64, 128, 256, 512, 1024, 2048, 4096, 8192)
pd.set_option("display.width", 180)
pd.set_option("display.max_columns", 16)

SPYRE = get_chip("spyre")
STICK = int(SPYRE.fact("stick_bytes"))      # 128 bytes: the LX access granule (catalog)
LX = SPYRE.level("LX")                       # one scratchpad per core (catalog)
info = bench.machine_info()
print(f"this machine: {info['cpu']} ({info['cores']} cores), torch {torch.__version__}, GPU: {info['cuda'] or 'none'}; "
      "everything below is SIMULATED, no Spyre card used")
print(f"catalog: {SPYRE.name}: {SPYRE.compute_units} {SPYRE.compute_unit_name} x {LX.capacity / 1e6:g} MB LX, "
      f"LPDDR5 {SPYRE.main_memory.total_capacity / 1e9:g} GB at {eng(SPYRE.main_memory.bandwidth, 'B/s')}, "
      f"stick {STICK} B = {STICK // 2} fp16; FAST={FAST}")

# %% [markdown]
# ## Part 1 — The counters of one decode step, op by op
#
#
# **The principle.** A cache decides at run time what stays on chip; a **scratchpad** holds exactly what the
# program put there. With a scratchpad the compiler plans every transfer: which tensor is DMA'd from main memory
# into on-chip SRAM, which intermediate stays there for the next op, which one is written back. The
# hardware counters of such a machine are therefore a *sum of planned transfers* — you can take them apart op by
# op and predict each piece.
#
# **The vendor.** An IBM Spyre card has 32 cores, each with a 2 MB **LX** scratchpad and no hardware cache, and
# 128 GB of LPDDR5 (catalog). torch-spyre fuses each run of device ops into one SuperDSC bundle and plans LX
# residency inside it. `spyre_step(MODEL, seq=SEQ)` simulates one decode step; `traffic_table(step)` has one row
# per op of each compiled segment (prologue, one decoder **layer**, epilogue) with `repeat` = how many times that
# segment runs (`n_layers` for the layer), and these columns among others:
#
# | column | meaning |
# |---|---|
# | `lpddr_read`, `lpddr_write` | bytes LPDDR5→LX and LX→LPDDR5 for one run of the op (whole sticks) |
# | `lpddr_padding` | the part of that traffic that is stick padding |
# | `lx_bytes` | bytes the op reads and writes in LX |
# | `a_bytes`, `b_bytes`, `mc`, `nc`, `tm`, `tn`, `m_tiles`, `n_tiles` | a matmul's operands and tile schedule |
# | `spill_write`, `spill_read`, `reread_bytes` | LPDDR5 bytes caused by the LX budget (Part 4) |
#
# **Spec.** Write `step_lpddr_by_kind(table)`: a `pandas.Series` indexed by `kind` (every kind in the table), whose
# value is the LPDDR5 bytes (read + write) of all ops of that kind **over the whole step** — each row counts
# `repeat` times. Summed over kinds it equals the step's counters `lpddr_to_lx_bytes + lx_to_lpddr_bytes`.
# Worked example: a layer row with `repeat=2`, `lpddr_read=8192`, `lpddr_write=0` adds 16384 bytes to its kind.

# %%
STEP = spyre_step(MODEL, seq=SEQ)
TABLE = traffic_table(STEP)
REPORT = STEP.report
print(f"SIMULATED decode step of {MODEL} ({SEQ} cached tokens, fp16) on 1 Spyre card: {eng(REPORT.time_s, 's')}")
print("segments x repeats:", dict(zip(STEP.segments, STEP.repeats)))
print("hardware counters:", {k: v for k, v in REPORT.counters.items()})
cols = ["segment", "repeat", "index", "op", "weights", "kind", "cores", "lpddr_read", "lpddr_write", "lpddr_padding",
        "lx_bytes", "output_to"]
layer = TABLE[TABLE["segment"] == "layer"]
print(f"\none decoder layer: {len(layer)} SuperDSC ops, {int((layer['lpddr_read'] + layer['lpddr_write'] > 0).sum())} "
      "of them touch LPDDR5 (the others work on tensors resident in LX):")
print(layer[layer["lpddr_read"] + layer["lpddr_write"] > 0][cols].to_string(index=False))


# %% nbgrader={"grade": false, "grade_id": "step_lpddr_by_kind", "locked": false, "schema_version": 3, "solution": true, "task": false}
def step_lpddr_by_kind(table):
    """LPDDR5 bytes (read + write) per op kind over the whole step: each row weighted by its `repeat`."""
    ### BEGIN SOLUTION
    per_row = (table["lpddr_read"] + table["lpddr_write"]) * table["repeat"]
    return per_row.groupby(table["kind"]).sum()
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "step_lpddr_by_kind_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_scalar, check_type

by_kind = step_lpddr_by_kind(TABLE)
check_type("step_lpddr_by_kind", by_kind, pd.Series)
c = REPORT.counters
check_scalar("sum over kinds = the step's LPDDR5 counters", float(by_kind.sum()),
             c["lpddr_to_lx_bytes"] + c["lx_to_lpddr_bytes"], rel=1e-9,
             hint="weight every row by table['repeat']: the layer runs n_layers times")
kinds = sorted(TABLE["kind"].unique())
check_equal("indexed by every kind of the table, nothing else", sorted(str(k) for k in by_kind.index) == kinds, True,
            hint="group by table['kind']")
check_equal("no kind has negative bytes", bool((by_kind.to_numpy(float) >= 0).all()), True)
### BEGIN HIDDEN TESTS
import pandas as _pd

from common.grading.verdicts.probe import Probe
from common.memory.traffic import spyre_step as _step, traffic_table as _tt

probe = Probe()  # fresh steps (the learner's variant from the seed), never the notebook's TABLE
_steps = {"big": ("qwen2.5-0.5b", 64, 256, 65536), "tiny": ("tiny-block", 1 + probe.seed % 4, 16 + probe.seed % 97, 32768)}
for _name, (_model, _batch, _seq, _budget) in _steps.items():
    _b = step_lpddr_by_kind(_tt(_step(_model, batch=_batch, seq=_seq, lx_budget_bytes=_budget)))
    probe.send(_name, {"series": isinstance(_b, _pd.Series), "kinds": [str(k) for k in _b.index],
                       "bytes": [float(v) for v in _b.to_numpy(float)]})
### JUDGEMENT
import torch

from common.checks import grader
from common.memory.traffic import spyre_step, traffic_table

data, seed = probe.received()
steps = {"big": ("qwen2.5-0.5b", 64, 256, 65536), "tiny": ("tiny-block", 1 + seed % 4, 16 + seed % 97, 32768)}
for name, (model, batch, seq, budget) in steps.items():
    step = spyre_step(model, batch=batch, seq=seq, lx_budget_bytes=budget)
    table, got = traffic_table(step), data[name]
    grader.assert_equal(got["series"], True, name=f"{name} step: a pandas Series")
    kinds = sorted(str(k) for k in table["kind"].unique())
    grader.assert_equal(sorted(got["kinds"]), kinds, name=f"{name} step: indexed by every kind, once each")
    ref = ((table["lpddr_read"] + table["lpddr_write"]) * table["repeat"]).groupby(table["kind"]).sum()
    mine = dict(zip(got["kinds"], got["bytes"], strict=True))
    grader.assert_tensor(torch.tensor([mine[k] for k in kinds], dtype=torch.float64),
                         torch.tensor([float(ref[k]) for k in kinds], dtype=torch.float64), rtol=1e-9,
                         dtype=torch.float64, name=f"{name} step: LPDDR5 bytes per kind, x repeat")
    c = step.report.counters
    grader.assert_scalar(sum(got["bytes"]), c["lpddr_to_lx_bytes"] + c["lx_to_lpddr_bytes"], rel=1e-9,
                         name=f"{name} step: sum over kinds = the counters")
### END HIDDEN TESTS

# %%
try:
    by_kind = step_lpddr_by_kind(TABLE)
except NotImplementedError:
    print("step_lpddr_by_kind is not written yet: the right panel stays empty")
    by_kind = pd.Series(dtype=float)
ops = layer[layer["lpddr_read"] + layer["lpddr_write"] > 0]
labels = [f"{i} {o.replace('aten.', '').replace('spyre.', '')}" + (f" ({w})" if w else "")
          for i, o, w in zip(ops["index"], ops["op"], ops["weights"])]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5.2), layout="constrained", width_ratios=(2, 1))
y = np.arange(len(ops))
ax1.barh(y - 0.2, ops["lpddr_read"], 0.4, color=SEQUENCE[0], label="LPDDR5→LX (read)")
ax1.barh(y + 0.2, ops["lpddr_write"].where(ops["lpddr_write"] > 0), 0.4, color=SEQUENCE[1], label="LX→LPDDR5 (write)")
ax1.barh(y, ops["lpddr_padding"].where(ops["lpddr_padding"] > 0), 0.8, fill=False, hatch="///", edgecolor="k",
         lw=0.6, label="of which stick padding (read + write)")
ax1.set_yticks(y, labels, fontsize=8)
ax1.invert_yaxis()
ax1.set_xscale("log")
ax1.set_xlabel("bytes per run of the op (log scale)")
ax1.set_title(f"SIMULATED Spyre: LPDDR5↔LX traffic of the ops of one {MODEL} layer (decode, {SEQ} cached, fp16)",
              fontsize=10)
ax1.legend(fontsize=8, loc="upper right")
ax1.grid(True, axis="x", which="both", color="#e5e5e5", lw=0.5)
ax2.bar(by_kind.index, by_kind.values, color=SEQUENCE[2])
for x, v in enumerate(by_kind.values):
    if v == 0:
        ax2.annotate("0", (x, 0), xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=8)
ax2.set_yscale("log")
ax2.set_ylabel("LPDDR5 bytes over the whole step (log scale)")
ax2.set_title("SIMULATED: whole decode step, by op kind", fontsize=10)
ax2.tick_params(axis="x", rotation=30, labelsize=8)
plt.show()
tot = step_totals(TABLE)
print(f"step: {eng(tot['lpddr_bytes'], 'B')} over LPDDR5, {tot['lpddr_padding_bytes'] / tot['lpddr_bytes']:.0%} of it "
      f"stick padding; {eng(tot['lx_bytes'], 'B')} inside LX")


# %% [markdown]
# ## Part 2 — Sticks: what a misaligned dimension costs in traffic
#
#
# **The principle.** Memory that is accessed in fixed-size granules charges whole granules: a cache moves whole
# lines (64 B on most CPUs), a GPU's DRAM whole 32-byte sectors, a TPU's HBM arrays whole (8, 128) tiles. If a
# tensor's innermost dimension is not a multiple of the granule, every row carries padding — stored, moved and
# (on a systolic array) multiplied.
#
# **The vendor.** Spyre stores every tensor in **sticks** of 128 bytes along its innermost dimension
# (`stick_bytes` in the catalog): 64 fp16 values per stick. A row of `n` values takes `ceil(n / 64)` sticks.
# `tiny-block` has `head_dim = 16`: every per-head tensor — the KV cache included — fills only a quarter of
# each stick. The last `bmm` of the attention (probabilities @ V) reads the V cache, shape
# `(kv_heads, SEQ + 1, head_dim)`, straight from LPDDR5; its `lpddr_padding` is the padding of that cache.
#
# **Spec.** Write `padding_bytes(shape, elem_bytes, stick_bytes)`: the padding bytes (a Python `int`) of a
# row-major tensor stored in sticks along its last dimension:
# $\text{rows} \times (\lceil n / e \rceil \, e - n) \times \text{elem\_bytes}$ with $e$ = `stick_bytes // elem_bytes`
# elements per stick, $n$ = the last dimension and rows = the product of the others (1 for a 1-D tensor).
# Worked example: `(3, 100)` in fp16 → 3 × (128 − 100) × 2 = 168 bytes.

# %% nbgrader={"grade": false, "grade_id": "padding_bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
def padding_bytes(shape, elem_bytes, stick_bytes):
    """Stick padding (bytes, int) of a row-major tensor whose last dim is stored in sticks of `stick_bytes`."""
    ### BEGIN SOLUTION
    *outer, n = (int(s) for s in shape)
    per_stick = stick_bytes // elem_bytes
    rows = 1
    for s in outer:
        rows *= s
    return rows * (-(-n // per_stick) * per_stick - n) * elem_bytes
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "padding_bytes_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

check_type("padding_bytes(...)", padding_bytes((3, 100), 2, STICK), int)
check_equal("padding of (3, 100) fp16 = the worked example", padding_bytes((3, 100), 2, STICK) == 168, True)
check_equal("an aligned last dim has no padding", padding_bytes((5, 128), 2, STICK) == 0 and
            padding_bytes((7, 32), 4, STICK) == 0, True, hint="n a multiple of stick_bytes // elem_bytes")
check_equal("the stick size is a parameter", padding_bytes((1, 100), 2, 64) == 2 * (128 - 100), True,
            hint="64-byte sticks hold 32 fp16: 100 values take 4 sticks")
pv = TABLE[(TABLE["segment"] == "layer") & (TABLE["op"] == "aten.bmm")].iloc[-1]  # probabilities @ V
_c = get_config(MODEL)
check_equal("padding of the V cache = the simulator's lpddr_padding of P@V",
            abs(padding_bytes((_c.n_kv_heads, SEQ + 1, _c.head_dim), 2, STICK) - float(pv["lpddr_padding"])) < 1e-6,
            True, hint="rows = kv_heads x (SEQ + 1); n = head_dim; e = 128 // 2")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)
_cases = [((3, 100), 2, 128), ((5, 128), 2, 128), ((7, 32), 4, 128), ((1, 100), 2, 64), ((65,), 2, 128),
          ((7, 5, 130), 1, 128), ((9, 33), 4, 128), ((4, 64), 2, 128), ((2, 3, 1), 2, 128), ((11, 200), 2, 128),
          ((3, 100), 2, 64), ((6, 70), 1, 256), ((2, 2, 9), 4, 32), ((5, 40), 2, 256)]
_cases += [(tuple(_rng.randint(1, 40) for _ in range(_rng.randint(1, 3))), _rng.choice((1, 2, 4)),
            _rng.choice((32, 64, 96, 256))) for _ in range(4)]
_head_dims = (16, 72, 2 * _rng.randint(5, 90))
probe.send("cases", [padding_bytes(_shape, _e, _stick) for _shape, _e, _stick in _cases])
probe.send("v_cache", [padding_bytes((2, 65, _h), 2, 128) for _h in _head_dims])  # tiny-block: 2 KV heads, 64 + 1
### JUDGEMENT
import random

from answers import padding_bytes as reference
from common.checks import grader
from common.models import get_config
from common.memory.traffic import spyre_step, traffic_table

data, seed = probe.received()
rng = random.Random(seed)
cases = [((3, 100), 2, 128), ((5, 128), 2, 128), ((7, 32), 4, 128), ((1, 100), 2, 64), ((65,), 2, 128),
         ((7, 5, 130), 1, 128), ((9, 33), 4, 128), ((4, 64), 2, 128), ((2, 3, 1), 2, 128), ((11, 200), 2, 128),
         ((3, 100), 2, 64), ((6, 70), 1, 256), ((2, 2, 9), 4, 32), ((5, 40), 2, 256)]
cases += [(tuple(rng.randint(1, 40) for _ in range(rng.randint(1, 3))), rng.choice((1, 2, 4)),
           rng.choice((32, 64, 96, 256))) for _ in range(4)]
head_dims = (16, 72, 2 * rng.randint(5, 90))
grader.assert_equal([type(v).__name__ for v in data["cases"]], ["int"] * len(cases), name="Python ints")
grader.assert_equal(data["cases"][0], 168, name="the worked example")
for (shape, elem, stick), got in zip(cases, data["cases"], strict=True):
    grader.assert_equal(got, reference(shape, elem, stick), name=f"padding of {shape}, {elem}-B elements, {stick}-B sticks")
assert get_config("tiny-block").n_kv_heads == 2, "the probe's V-cache shape assumes 2 KV heads"
for h, got in zip(head_dims, data["v_cache"], strict=True):
    table = traffic_table(spyre_step("tiny-block", seq=64, head_dim=h))
    pv = table[(table["segment"] == "layer") & (table["op"] == "aten.bmm")].iloc[-1]  # probabilities @ V
    grader.assert_scalar(got, float(pv["lpddr_padding"]), rel=1e-9, name=f"V cache padding, head_dim {h}")
    grader.assert_equal(got, reference((2, 65, h), 2, 128), name=f"V cache padding formula, head_dim {h}")
### END HIDDEN TESTS

# %%
hd = sweep(MODEL, "head_dim", HEAD_DIMS, seq=SEQ)
try:
    v_pad = [padding_bytes((get_config(MODEL).n_kv_heads, SEQ + 1, h), 2, STICK) for h in HEAD_DIMS]
except NotImplementedError:
    print("padding_bytes is not written yet: the V-cache line is left out")
    v_pad = [np.nan] * len(HEAD_DIMS)
useful = hd["lpddr_bytes"] - hd["lpddr_padding_bytes"]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 4.8), layout="constrained")
w = 0.8 * min(np.diff(HEAD_DIMS)) if len(HEAD_DIMS) > 1 else 6
ax1.bar(hd["head_dim"], useful / 1e3, w, color=SEQUENCE[0], label="useful bytes")
ax1.bar(hd["head_dim"], hd["lpddr_padding_bytes"] / 1e3, w, bottom=useful / 1e3, color=EMPHASIS,
        label="stick padding")
ax1.set(xlabel="head_dim (elements)", ylabel="LPDDR5 bytes per decode token [kB]",
        title=f"SIMULATED Spyre: {MODEL} decode step ({SEQ} cached, fp16) vs head_dim")
ax1.legend(fontsize=8)
ax2.plot(hd["head_dim"], 100 * hd["lpddr_padding_bytes"] / hd["lpddr_bytes"], "o-", color=EMPHASIS,
         label="padding share of the step's LPDDR5 traffic")
ax2.plot(hd["head_dim"], 100 * np.array(v_pad) / (hd["lpddr_bytes"] / get_config(MODEL).n_layers), "s--",
         color=SEQUENCE[5], label="your V-cache padding, per layer, vs traffic per layer")
ax2.set(xlabel="head_dim (elements)", ylabel="padding [% of LPDDR5 bytes]",
        title=f"SIMULATED: padding share; stick = {STICK} B = {STICK // 2} fp16 (catalog)")
for ax in (ax1, ax2):
    for m in range(STICK // 2, max(HEAD_DIMS) + 1, STICK // 2):
        ax.axvline(m, color="#999999", ls=":", lw=1)
ax2.legend(fontsize=8)
plt.show()
print(hd[["head_dim", "lpddr_bytes", "lpddr_padding_bytes", "time_s", "floor_s"]].to_string(index=False))

# %% [markdown]
# ### A sticks explorer
#
# `sticks_explorer(m, k, n)` simulates one fp16 matmul $(m, K) \cdot (K, n)$ on the Spyre backend and redraws in
# place: each operand's row as sticks (held values solid, padding hatched), the tile the planner picks and whether
# it fits a core's LX, and **LPDDR5 bytes per useful byte** = LPDDR5 bytes / (A + B + C, each counted once).
# Move K off a multiple of 64 and watch the saw-tooth; `sticks.sweep("k", lengths, m=..., n=...)` gives the rows.

# %%
from common.explore.sticks_view import sticks_explorer

sticks = sticks_explorer(128, 100, 1024)

# %% [markdown]
# **Spec.** `most_traffic_per_byte(m, n, lengths)`: of the K in `lengths`, the one whose matmul
# $(m, K) \cdot (K, n)$ moves the most LPDDR5 bytes per useful byte, and that ratio, as a tuple `(K, ratio)`
# (`int`, `float`). Use the explorer's sweep; a formula of your own misses the re-reads that tiling adds.

# %% nbgrader={"grade": false, "grade_id": "most_traffic_per_byte", "locked": false, "schema_version": 3, "solution": true, "task": false}
def most_traffic_per_byte(m, n, lengths):
    """(K, ratio): the K of `lengths` with the most SIMULATED LPDDR5 bytes per useful byte for (m, K) @ (K, n)."""
    ### BEGIN SOLUTION
    rows = sticks.sweep("k", list(lengths), m=m, n=n)
    worst = rows.loc[rows["bytes_per_useful_byte"].idxmax()]
    return int(worst["k"]), float(worst["bytes_per_useful_byte"])
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "most_traffic_per_byte_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

answer = most_traffic_per_byte(64, 512, (64, 65, 128))
check_type("most_traffic_per_byte(...)", answer, tuple)
check_equal("K is one of the lengths asked about", answer[0] in (64, 65, 128), True)
check_equal("an aligned K (64 or 128) carries no padding: it is not the worst", answer[0] == 65, True,
            hint="65 values take two sticks: 63 padding slots per row of A")
check_equal("a ratio of at least 1 (every useful byte moves at least once)", float(answer[1]) >= 1.0, True)
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)  # this learner's matmuls and lengths: shapes the notebook never showed
_asked = [(_rng.choice((64, 256, 512)), _rng.choice((256, 512, 2048)), sorted(_rng.sample(range(17, 300), 5)))
          for _ in range(2)] + [(4096, 4096, sorted(_rng.sample(range(40, 400), 4)))]
for _i, (_m, _n, _ks) in enumerate(_asked):
    _k, _ratio = most_traffic_per_byte(_m, _n, tuple(_ks))
    probe.send(f"question {_i}", [int(_k), float(_ratio)])
### JUDGEMENT
import random

from answers import traffic_per_useful_byte as ratio_of
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
asked = [(rng.choice((64, 256, 512)), rng.choice((256, 512, 2048)), sorted(rng.sample(range(17, 300), 5)))
         for _ in range(2)] + [(4096, 4096, sorted(rng.sample(range(40, 400), 4)))]
for i, (m, n, ks) in enumerate(asked):
    got_k, got_ratio = data[f"question {i}"]
    ratios = {k: ratio_of(m, k, n) for k in ks}
    worst = max(ratios.values())
    grader.assert_equal(got_k in [k for k, r in ratios.items() if r >= worst * (1 - 1e-9)], True,
                        name=f"({m}, K) @ (K, {n}), K in {ks}: the K with the most LPDDR5 bytes per useful byte")
    grader.assert_scalar(got_ratio, worst, rel=1e-6, name=f"({m}, K) @ (K, {n}): its bytes per useful byte")
### END HIDDEN TESTS

# %% [markdown]
# ## Part 3 — Tile schedules and the largest tile that fits LX
#
#
# **The principle.** A matmul $C = A B$ larger than the scratchpad is computed in output tiles of
# $t_m \times t_n$, with $K$ streamed through. Each output tile needs its rows of $A$ and its columns of $B$, so
# with $\lceil m / t_m \rceil$ row tiles and $\lceil n / t_n \rceil$ column tiles **A is read once per column
# tile and B once per row tile**:
# $$\text{bytes} = A \cdot \lceil n_c / t_n \rceil + B \cdot \lceil m_c / t_m \rceil .$$
# Bigger tiles mean fewer re-reads — up to what fits on chip: $(t_m t_k + t_k t_n + t_m t_n) \cdot \text{elem}
# \le$ the scratchpad budget.
#
# **The vendor.** The simulated torch-spyre planner splits a matmul over cores (rows `mc` and padded columns
# `nc` per core), streams K one stick at a time ($t_k$ = 64 fp16) and picks, among tiles that fit the LX budget
# left by resident tensors, the one with the least LPDDR5 traffic. The budget per core is what torch-spyre leaves
# the planner: $(\text{LX capacity} - \text{reserved}) \times (1 - \text{backend share})$, rounded down to whole
# sticks (catalog: `LX` capacity, facts `lx_reserved_bytes`, `lx_backend_reserved_fraction`). Two compiler knobs
# change tiles: `lx_budget_bytes` (a smaller budget) and `coarse_tiles` (at least that many row tiles).
#
# **Spec.**
# * `tile_traffic(a_bytes, b_bytes, mc, nc, tm, tn)`: the formula above (a Python `float`). Worked example:
#   A = 1 MB, B = 4 MB, `mc=128, nc=1024, tm=29, tn=512` → 1e6 × 2 + 4e6 × 5 = 22 MB.
# * `lx_tile_budget(capacity, reserved, backend_fraction, stick_bytes)`: the budget in bytes (a Python `int`, a
#   multiple of `stick_bytes`) of a scratchpad of `capacity` bytes with `reserved` bytes kept back and a
#   `backend_fraction` of the rest taken by the backend. For Spyre the arguments come from the catalog:
#   `LX.capacity`, `SPYRE.fact("lx_reserved_bytes")`, `SPYRE.fact("lx_backend_reserved_fraction")`, `STICK`.
# * `largest_tile_rows(lx_bytes, tn, tk, elem_bytes)`: the largest $t_m$ (an `int`, 0 if none) with
#   $(t_m t_k + t_k t_n + t_m t_n) \cdot \text{elem} \le$ `lx_bytes`.

# %% nbgrader={"grade": false, "grade_id": "tile_traffic", "locked": false, "schema_version": 3, "solution": true, "task": false}
import math


def tile_traffic(a_bytes, b_bytes, mc, nc, tm, tn):
    """LPDDR5 bytes of a tiled matmul: A read once per column tile, B once per row tile."""
    ### BEGIN SOLUTION
    return float(a_bytes * math.ceil(nc / tn) + b_bytes * math.ceil(mc / tm))
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "tile_traffic_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_scalar

check_scalar("worked example", tile_traffic(1e6, 4e6, 128, 1024, 29, 512), 22e6, rel=1e-12)
mm = traffic_table(workload_step(op_workload("matmul", (2048, 1000, 3000), "fp16"), lx_budget_bytes=200_000)).iloc[0]
print(f"SIMULATED matmul 2048x1000x3000 with a 200 kB LX budget: per core mc={mm['mc']:.0f}, nc={mm['nc']:.0f}, "
      f"tile {mm['tm']:.0f}x{mm['tn']:.0f} -> {mm['m_tiles']:.0f} x {mm['n_tiles']:.0f} tiles")
check_scalar("your schedule's bytes vs the simulator's LPDDR5 reads",
             tile_traffic(float(mm["a_bytes"]), float(mm["b_bytes"]), int(mm["mc"]), int(mm["nc"]), int(mm["tm"]),
                          int(mm["tn"])), float(mm["lpddr_read"]), rel=1e-9,
             hint="A (a_bytes) is re-read for each column tile, B (b_bytes) for each row tile")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe
from common.sim.run import op_workload as _ow
from common.memory.traffic import traffic_table as _tt, workload_step as _ws

probe = Probe()
_sent = []
for _shape, _opts in [((2048, 1000, 3000), {"lx_budget_bytes": 200_000}), ((4096, 4096, 4096), {"lx_budget_bytes": 300_000}),
                      ((4096, 2048, 1024), {"coarse_tiles": 8}), ((8192, 1024, 8192), {}),
                      ((1000, 640, 2000), {"lx_budget_bytes": 50_000})]:
    _r = _tt(_ws(_ow("matmul", _shape, "fp16"), **_opts)).iloc[0]
    _sent.append(tile_traffic(float(_r["a_bytes"]), float(_r["b_bytes"]), int(_r["mc"]), int(_r["nc"]), int(_r["tm"]),
                              int(_r["tn"])))
probe.send("simulated", _sent)
_rng = _random.Random(probe.seed)
_args = [(1e6, 4e6, 128, 1024, 29, 512), (3.0, 5.0, 10, 10, 3, 4)]
_args += [(_rng.uniform(1e3, 1e8), _rng.uniform(1e3, 1e8), *(_rng.randint(1, 5000) for _ in range(4))) for _ in range(5)]
probe.send("formula", [tile_traffic(*_a) for _a in _args])
### JUDGEMENT
import random

from answers import tile_traffic as reference
from common.checks import grader
from common.sim.run import op_workload
from common.memory.traffic import traffic_table, workload_step

data, seed = probe.received()
matmuls = [((2048, 1000, 3000), {"lx_budget_bytes": 200_000}), ((4096, 4096, 4096), {"lx_budget_bytes": 300_000}),
           ((4096, 2048, 1024), {"coarse_tiles": 8}), ((8192, 1024, 8192), {}),
           ((1000, 640, 2000), {"lx_budget_bytes": 50_000})]
for (shape, opts), got in zip(matmuls, data["simulated"], strict=True):
    r = traffic_table(workload_step(op_workload("matmul", shape, "fp16"), **opts)).iloc[0]
    grader.assert_scalar(got, float(r["lpddr_read"]), rel=1e-9, name=f"matmul {shape} {opts}: the simulator's reads")
rng = random.Random(seed)
args = [(1e6, 4e6, 128, 1024, 29, 512), (3.0, 5.0, 10, 10, 3, 4)]
args += [(rng.uniform(1e3, 1e8), rng.uniform(1e3, 1e8), *(rng.randint(1, 5000) for _ in range(4))) for _ in range(5)]
grader.assert_scalar(data["formula"][0], 22e6, rel=1e-12, name="the worked example")
grader.assert_scalar(data["formula"][1], 3.0 * 3 + 5.0 * 4, rel=1e-12, name="ceil division")
for a, got in zip(args, data["formula"], strict=True):
    grader.assert_scalar(got, reference(*a), rel=1e-12, name="unseen schedules")
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "largest_tile", "locked": false, "schema_version": 3, "solution": true, "task": false}
def lx_tile_budget(capacity, reserved, backend_fraction, stick_bytes):
    """Scratchpad bytes per core the planner may use: (capacity - reserved) x (1 - backend share), whole sticks."""
    ### BEGIN SOLUTION
    usable = (capacity - reserved) * (1 - backend_fraction)
    return int(usable) // int(stick_bytes) * int(stick_bytes)
    ### END SOLUTION


def largest_tile_rows(lx_bytes, tn, tk, elem_bytes):
    """Largest tm with (tm*tk + tk*tn + tm*tn) * elem_bytes <= lx_bytes (0 if not even one row fits)."""
    ### BEGIN SOLUTION
    return max(0, int((lx_bytes // elem_bytes - tk * tn) // (tk + tn)))
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "largest_tile_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

LX_ARGS = (LX.capacity, SPYRE.fact("lx_reserved_bytes"), SPYRE.fact("lx_backend_reserved_fraction"), STICK)
budget = lx_tile_budget(*LX_ARGS)
check_type("lx_tile_budget(...)", budget, int)
check_equal("LX budget per core from the catalog = the budget the simulator plans with", budget == default_lx_budget(),
            True)
big = traffic_table(workload_step(op_workload("matmul", (4096, 4096, 4096), "fp16"))).iloc[0]
print(f"SIMULATED matmul 4096^3: per core {big['mc']:.0f} rows; the planner chose a "
      f"{big['tm']:.0f}x{big['tn']:.0f} tile ({big['ws_bytes_per_core'] / 1e6:.3f} MB of a "
      f"{budget / 1e6:.3f} MB budget)")
check_equal("largest tile rows for the simulator's tn", largest_tile_rows(budget, int(big["tn"]), STICK // 2, 2),
            int(big["tm"]), hint="tm (tk + tn) + tk tn <= budget / elem_bytes; solve for tm and round down")
### BEGIN HIDDEN TESTS
import random as _random

from common.chips import get_chip as _gc
from common.grading.verdicts.probe import Probe
from common.sim.run import op_workload as _ow
from common.memory.traffic import default_lx_budget as _dlb, traffic_table as _tt, workload_step as _ws

probe = Probe()
_spyre = _gc("spyre")
probe.send("catalog_budget", lx_tile_budget(_spyre.level("LX").capacity, _spyre.fact("lx_reserved_bytes"),
                                            _spyre.fact("lx_backend_reserved_fraction"), int(_spyre.fact("stick_bytes"))))
_sent = []
for _shape, _b in [((4096, 4096, 4096), None), ((4096, 4096, 4096), 300_000), ((8192, 1024, 8192), None),
                   ((4096, 2048, 1024), 100_000)]:
    _r = _tt(_ws(_ow("matmul", _shape, "fp16"), **({"lx_budget_bytes": _b} if _b else {}))).iloc[0]
    _sent.append(largest_tile_rows(_b or _dlb(), int(_r["tn"]), 64, 2))
probe.send("simulated", _sent)
_rng = _random.Random(probe.seed)
_args = [(1000, 64, 64, 2), (10_000, 32, 16, 4)]
_args += [(_rng.randint(1_000, 3_000_000), _rng.choice((16, 32, 64, 128, 512)), _rng.choice((8, 16, 32, 64)),
           _rng.choice((1, 2, 4))) for _ in range(6)]
probe.send("rows", [largest_tile_rows(*_a) for _a in _args])
_pads = [(1 << 20, 4096, 0.1, 64), (3_000_000, 100_000, 0.25, 256),
         (_rng.randint(1 << 19, 1 << 23), _rng.randint(0, 1 << 16), _rng.choice((0.0, 0.05, 0.3)), _rng.choice((32, 128, 512)))]
probe.send("budgets", [lx_tile_budget(*_p) for _p in _pads])
### JUDGEMENT
import random

from answers import largest_tile_rows as reference
from common.checks import grader
from common.sim.run import op_workload
from common.memory.traffic import default_lx_budget, traffic_table, workload_step

data, seed = probe.received()
grader.assert_equal(type(data["catalog_budget"]).__name__, "int", name="the budget is a Python int")
grader.assert_equal(data["catalog_budget"], default_lx_budget(), name="Spyre's budget from the catalog")
for (shape, b), got in zip([((4096, 4096, 4096), None), ((4096, 4096, 4096), 300_000), ((8192, 1024, 8192), None),
                            ((4096, 2048, 1024), 100_000)], data["simulated"], strict=True):
    r = traffic_table(workload_step(op_workload("matmul", shape, "fp16"), **({"lx_budget_bytes": b} if b else {}))).iloc[0]
    grader.assert_equal(got, int(r["tm"]), name=f"{shape} budget {b}: the planner's tile rows")
rng = random.Random(seed)
args = [(1000, 64, 64, 2), (10_000, 32, 16, 4)]
args += [(rng.randint(1_000, 3_000_000), rng.choice((16, 32, 64, 128, 512)), rng.choice((8, 16, 32, 64)),
          rng.choice((1, 2, 4))) for _ in range(6)]
grader.assert_equal(data["rows"][:2], [0, (2500 - 512) // 48], name="nothing fits; fp32")
for a, got in zip(args, data["rows"], strict=True):
    grader.assert_equal(got, reference(*a), name="unseen budgets and tiles")
pads = [(1 << 20, 4096, 0.1, 64), (3_000_000, 100_000, 0.25, 256),
        (rng.randint(1 << 19, 1 << 23), rng.randint(0, 1 << 16), rng.choice((0.0, 0.05, 0.3)), rng.choice((32, 128, 512)))]
for (cap, res, frac, stick), got in zip(pads, data["budgets"], strict=True):
    grader.assert_equal(got, int((cap - res) * (1 - frac)) // stick * stick, name="budget of another scratchpad")
### END HIDDEN TESTS

# %%
ct = pd.concat([sweep(BIG_MODEL, "coarse_tiles", COARSE, batch=b, seq=BIG_SEQ).assign(batch=b) for b in COARSE_BATCHES])
bud = sweep(BIG_MODEL, "lx_budget_bytes", BUDGETS, batch=BIG_BATCH, seq=BIG_SEQ)
try:
    budget = lx_tile_budget(LX.capacity, SPYRE.fact("lx_reserved_bytes"), SPYRE.fact("lx_backend_reserved_fraction"),
                            STICK)
    rows_at = {tn: largest_tile_rows(budget, tn, STICK // 2, 2) for tn in (64, 512, 4096)}
except NotImplementedError:
    print("lx_tile_budget / largest_tile_rows not written yet: the line shows the budget the simulator plans with")
    budget, rows_at = default_lx_budget(), {}
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5), layout="constrained")
for b, g in ct.groupby("batch"):
    ax1.plot(g["coarse_tiles"], g["bytes_per_token"], "o-", label=f"batch {b}")
ax1.set_xscale("log", base=2)
ax1.set_yscale("log")
ax1.set_xticks(COARSE, [str(c) for c in COARSE])
ax1.set(xlabel="coarse_tiles (minimum row tiles per matmul; log2)", ylabel="LPDDR5 bytes per generated token (log)",
        title=f"SIMULATED Spyre: {BIG_MODEL} decode ({BIG_SEQ} cached) — finer row tiling re-reads weights")
ax1.legend(fontsize=8)
first = bud["lpddr_bytes"] - bud["reread_bytes"] - bud["spill_bytes"]
ax2.stackplot(bud["lx_budget_bytes"] / 1e3, first / 1e9, bud["reread_bytes"] / 1e9, bud["spill_bytes"] / 1e9,
              labels=["first reads + results", "re-reads (tiling)", "spills (write + read back)"],
              colors=[SEQUENCE[0], SEQUENCE[1], EMPHASIS])
ax2.set_xscale("log")
ax2.axvline(budget / 1e3, color="k", ls="--", lw=1)
ax2.annotate("default budget (catalog) ", (budget / 1e3, 0.04), xycoords=("data", "axes fraction"), ha="right",
             fontsize=8, color="w")
ax2.set(xlabel="LX budget per core [kB] (log)", ylabel="LPDDR5 GB per decode step",
        title=f"SIMULATED: batch {BIG_BATCH} decode vs LX budget (LX = {LX.capacity / 1e6:g} MB per core)")
ax2.legend(fontsize=8, loc="upper center")
plt.show()
print(ct.pivot(index="coarse_tiles", columns="batch", values="bytes_per_token").map(lambda v: eng(v, "B")).to_string())
if rows_at:
    print(f"largest tile rows in the {budget / 1e6:.3f} MB budget:", rows_at)


# %% [markdown]
# ## Part 4 — When the working set exceeds a core's LX
#
#
# **The principle.** A hardware cache that is too small degrades gracefully — it misses more. A scratchpad that
# is too small forces the **compiler** to change the program: cut the work into smaller tiles (more re-reads) or
# **spill** an intermediate (write it to main memory and read it back). Either way the extra traffic is known at
# compile time.
#
# **The vendor.** Inside a SuperDSC bundle the simulated planner keeps an intermediate in LX when its per-core
# slice fits the budget left by resident tensors; otherwise it spills it to LPDDR5 (one write, one read per
# consumer). A decomposed op (softmax = max, sub, exp, sum, div) whose slice does not fit streams its parts through
# LPDDR5; a matmul is re-tiled. `working_set_check(step)` lists, per op, what happened and the extra bytes.
#
# **Spec.** An elementwise chain `exp(x * 2 + 1)` on an fp16 tensor of `nbytes` (sticks aligned) runs as one
# bundle on `cores` cores: the input is read once, the output written once, and it has `n_intermediates`
# intermediates of `nbytes` each. Write `chain_lpddr_bytes(nbytes, n_intermediates, cores, lx_budget)`: the
# LPDDR5 bytes of the bundle (a Python `float`) — `2 * nbytes` if an intermediate's per-core slice
# `nbytes / cores` fits in `lx_budget`, plus `2 * nbytes` per intermediate (written out, read back) if it does
# not. Worked example: 128 MB, 2 intermediates, 32 cores, 1.5 MB budget → 4 MB per core does not fit → 768 MB.

# %%
class Chain(torch.nn.Module):
    # exp(x * 2 + 1): two full-size intermediates (mul, add) between the input and the output
    def forward(self, x):
        return torch.exp(x * 2 + 1)


def chain_step(rows, cols, module=Chain(), **options):
    with FakeTensorMode():
        x = torch.empty(rows, cols, dtype=torch.float16)
    return workload_step(graph_workload(module, (x,), dtype="fp16"), **options)


# %% nbgrader={"grade": false, "grade_id": "chain_lpddr_bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
def chain_lpddr_bytes(nbytes, n_intermediates, cores, lx_budget):
    """LPDDR5 bytes of an elementwise chain bundle: input + output, + a write and a read per spilled intermediate."""
    ### BEGIN SOLUTION
    spilled = nbytes / cores > lx_budget
    return float(2 * nbytes + (2 * n_intermediates * nbytes if spilled else 0))
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "chain_lpddr_bytes_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_scalar

check_scalar("worked example", chain_lpddr_bytes(128e6, 2, 32, 1.5e6), 768e6, rel=1e-12)
for rows, opts in [(1024, {}), (1024, {"lx_budget_bytes": 500_000})]:
    st = chain_step(rows, 16384, **opts)
    t = traffic_table(st)
    sim = step_totals(t)["lpddr_bytes"]
    mine = chain_lpddr_bytes(rows * 16384 * 2, 2, int(t["cores"].iloc[0]), st.lx_budget_bytes)
    print(f"SIMULATED {rows}x16384 fp16 chain, budget {st.lx_budget_bytes / 1e6:.2f} MB: {eng(sim, 'B')} moved; "
          f"spilled {eng(step_totals(t)['lx_spill_bytes'], 'B')}")
    check_scalar(f"LPDDR5 bytes, budget {st.lx_budget_bytes:.0f}", mine, sim, rel=1e-9,
                 hint="per-core slice = nbytes / cores; compare it with lx_budget")
### BEGIN HIDDEN TESTS
import random as _random

from torch._subclasses.fake_tensor import FakeTensorMode as _FakeMode

from common.grading.verdicts.probe import Probe
from common.memory.traffic import traffic_table as _tt, workload_step as _ws
from common.sim.workload import graph_workload as _gw


class _Chain2(torch.nn.Module):
    def forward(self, x):
        return torch.exp(x * 2 + 1)


class _Chain3(torch.nn.Module):
    def forward(self, x):
        return torch.exp((x * 2 + 1) * 3)


probe = Probe()
_sent = []
for _rows, _cols, _m, _k, _opts in [(1024, 16384, _Chain2(), 2, {}), (1024, 16384, _Chain2(), 2, {"lx_budget_bytes": 500_000}),
                                    (4096, 16384, _Chain2(), 2, {}), (1000, 640, _Chain2(), 2, {"lx_budget_bytes": 32768}),
                                    (96, 4096, _Chain3(), 3, {"lx_budget_bytes": 32768}), (64, 1024, _Chain3(), 3, {})]:
    with _FakeMode():
        _x = torch.empty(_rows, _cols, dtype=torch.float16)
    _st = _ws(_gw(_m, (_x,), dtype="fp16"), **_opts)
    _sent.append(chain_lpddr_bytes(_rows * _cols * 2, _k, int(_tt(_st)["cores"].iloc[0]), _st.lx_budget_bytes))
probe.send("simulated", _sent)
_rng = _random.Random(probe.seed)
_args = [(128e6, 2, 32, 1.5e6), (7e6, 3, 7, 1e6), (7e6, 3, 7, 1e6 - 1), (5e5, 4, 13, 2e4), (1e9, 1, 32, 1.6e6)]
_args += [(_rng.uniform(1e5, 1e9), _rng.randint(1, 6), _rng.randint(1, 48), _rng.uniform(1e4, 2e6)) for _ in range(4)]
probe.send("formula", [chain_lpddr_bytes(*_a) for _a in _args])
### JUDGEMENT
import random

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from answers import chain_lpddr_bytes as reference
from common.checks import grader
from common.memory.traffic import step_totals, traffic_table, workload_step
from common.sim.workload import graph_workload


class Chain2(torch.nn.Module):
    def forward(self, x):
        return torch.exp(x * 2 + 1)


class Chain3(torch.nn.Module):
    def forward(self, x):
        return torch.exp((x * 2 + 1) * 3)


data, seed = probe.received()
chains = [(1024, 16384, Chain2(), {}), (1024, 16384, Chain2(), {"lx_budget_bytes": 500_000}), (4096, 16384, Chain2(), {}),
          (1000, 640, Chain2(), {"lx_budget_bytes": 32768}), (96, 4096, Chain3(), {"lx_budget_bytes": 32768}),
          (64, 1024, Chain3(), {})]
for (rows, cols, module, opts), got in zip(chains, data["simulated"], strict=True):
    with FakeTensorMode():
        x = torch.empty(rows, cols, dtype=torch.float16)
    sim = step_totals(traffic_table(workload_step(graph_workload(module, (x,), dtype="fp16"), **opts)))["lpddr_bytes"]
    grader.assert_scalar(got, sim, rel=1e-9, name=f"chain {rows}x{cols} {opts}: the simulator's LPDDR5 bytes")
rng = random.Random(seed)
args = [(128e6, 2, 32, 1.5e6), (7e6, 3, 7, 1e6), (7e6, 3, 7, 1e6 - 1), (5e5, 4, 13, 2e4), (1e9, 1, 32, 1.6e6)]
args += [(rng.uniform(1e5, 1e9), rng.randint(1, 6), rng.randint(1, 48), rng.uniform(1e4, 2e6)) for _ in range(4)]
grader.assert_scalar(data["formula"][0], 768e6, rel=1e-12, name="the worked example")
for a, got in zip(args, data["formula"], strict=True):
    grader.assert_scalar(got, reference(*a), rel=1e-12, name="unseen chains: core counts and budgets no bundle uses")
### END HIDDEN TESTS

# %%
sizes, sim, pred, cores_of = [], [], [], []
for rows in CHAIN_ROWS:
    st = chain_step(rows, 16384)
    t = traffic_table(st)
    n = rows * 16384 * 2
    sizes.append(n)
    sim.append(step_totals(t)["lpddr_bytes"])
    cores_of.append(int(t["cores"].iloc[0]))
    try:
        pred.append(chain_lpddr_bytes(n, 2, cores_of[-1], st.lx_budget_bytes))
    except NotImplementedError:
        pred.append(np.nan)
sizes, sim, pred = map(np.array, (sizes, sim, pred))
fig, ax = plt.subplots(figsize=(8.5, 5), layout="constrained")
ax.semilogx(sizes / 1e6, sim / sizes, "o", color=SEQUENCE[0], ms=9, label="SIMULATED (counters)")
if np.isfinite(pred).any():
    ax.semilogx(sizes / 1e6, pred / sizes, "x", color=EMPHASIS, ms=12, mew=2, label="your chain_lpddr_bytes")
edge = max(cores_of) * default_lx_budget() / 1e6
ax.axvline(edge, color="k", ls=":", lw=1)
ax.text(edge, 7.5, f" {max(cores_of)} cores x {default_lx_budget() / 1e6:.2f} MB\n LX budget", fontsize=8, va="top")
ax.set(xlabel="tensor size [MB] (log)", ylabel="LPDDR5 bytes moved / tensor size", ylim=(0, 8),
       title="SIMULATED Spyre: exp(x*2+1) on one bundle — spills start where a core's slice outgrows LX")
ax.legend(fontsize=8)
ax.grid(True, which="both", color="#e5e5e5", lw=0.5)
plt.show()

BIG = spyre_step(BIG_MODEL, batch=BIG_BATCH, seq=BIG_SEQ)
TIGHT = spyre_step(BIG_MODEL, batch=BIG_BATCH, seq=BIG_SEQ, lx_budget_bytes=32768)
for label, st in (("default budget", BIG), ("32 kB budget", TIGHT)):
    ws = working_set_check(st)
    tot = step_totals(traffic_table(st))
    print(f"\nSIMULATED {BIG_MODEL} decode, batch {BIG_BATCH}, {BIG_SEQ} cached, {label} "
          f"({st.lx_budget_bytes / 1e6:.3f} MB/core): {eng(tot['lpddr_bytes'], 'B')} over LPDDR5, "
          f"{eng(st.report.time_s, 's')}")
    cols = ["segment", "repeat", "index", "op", "ws_bytes_per_core", "action", "extra_lpddr_bytes"]
    print(ws[cols].to_string(index=False) if len(ws) else
          "  every working set fits: no re-tiling that costs LPDDR5, no spills")

# %% [markdown]
# ## Analysis
#
# Answer in a few sentences each, with numbers from your runs.

# %% [markdown]
# **Q1 (comparative prediction).** Change `tiny-block`'s `head_dim` from 64 to 72. The cell after next simulates
# the decode step on a **GPU** (HBM read through caches in 32-byte sectors; the simulator charges unpadded bytes), a
# **TPU v5e** (arrays stored in (8, 128) tiles: the last dimension padded to 128 lanes) and **Spyre** (128-byte
# sticks = 64 fp16). Before it runs, commit one number: Spyre's ratio (LPDDR5 bytes per decode token at 72) / (at
# 64). The simulated ratios lie close together (between about 1 and 1.3), so a hit here means within a factor 1.1,
# not the usual 2.

# %%
from common.errors import DFAError
from common.explore import predict, widgets_can_render
from common.landscape import open_map

LM = open_map(4, LANDSCAPE_PATH, scratch=FAST)  # your landscape map: the prediction is kept beside it
P_ALIGN = predict("course4.deepdive4.spyre-head-dim-72-over-64", f"{MODEL} decode: Spyre bytes, head_dim 72 / 64",
                  kind="value", system="spyre", lm=LM, course=4, tolerance=1.1)
if widgets_can_render():
    display(P_ALIGN.form())  # type and commit here, or call P_ALIGN.commit(...) in the next cell

# %% nbgrader={"grade": false, "grade_id": "predict_align", "locked": false, "schema_version": 3, "solution": true, "task": false}
# Your ratio (one number: Spyre's bytes per token at head_dim 72 / at 64), committed before the next cell runs.
### BEGIN SOLUTION
P_ALIGN.commit(1.2)
### END SOLUTION

# %%
import dataclasses

from common.models import get_config

rows = []
for h in (64, 72):
    cfg = dataclasses.replace(get_config(MODEL), head_dim=h, name=f"{MODEL}(head_dim={h})")
    for backend, level in (("gpu", "HBM"), ("tpu", "HBM"), ("spyre", "LPDDR5")):
        r = simulate_llm(cfg, backend, phase="decode", batch=1, seq=SEQ)
        rows.append({"system": backend, "head_dim": h, "main_memory_bytes_per_token": r.bytes[level] / r.tokens})
ALIGN = pd.DataFrame(rows).pivot(index="system", columns="head_dim", values="main_memory_bytes_per_token")
ALIGN["ratio 72/64"] = ALIGN[72] / ALIGN[64]
print(f"SIMULATED {MODEL} decode ({SEQ} cached): main-memory bytes per token")
print(ALIGN.round(3).to_string())
try:  # the reveal: Spyre's simulated ratio beside yours
    P_ALIGN.reveal(ALIGN.loc["spyre", "ratio 72/64"])
    print(f"saved {LM.save()}")
except DFAError as exc:  # no number committed yet
    print(exc)

# %% [markdown]
# **Q1 (why).** Give the three ratios the cell showed. Which system pays for the misalignment, and why does the TPU
# not pay *more* at 72 than at 64? Explain any difference from your prediction.

# %% [markdown] nbgrader={"grade": true, "grade_id": "dd4_q_alignment", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
#
# Useful bytes grow by well under 72/64 = 1.125 (weights of d_model-sized projections grow; the norms, embedding and
# LM head do not), so GPU ≈ 1.07. TPU: both 64 and 72 pad to 128 lanes, so per-head tensors cost the same at 64
# and 72 — the ratio is ≈ the GPU's (~1.07); it already paid 2x at 64. Spyre: 64 fills one stick exactly, 72 needs
# two (56 of 128 slots padding): KV-cache reads, the K^T restickify and per-head activations almost double →
# ≈ 1.25 in the simulator. Full marks: Spyre highest with the stick reason; GPU ≈ TPU ratio with the lane
# reason; the numbers from the check cell compared with the prediction.
# === END MARK SCHEME ===

# %% [markdown]
# **Q2 (working set beyond LX).** From Part 4's tables for the batch-64 decode step: which ops change when the LX
# budget drops to 32 kB, what does the compiler do with each (re-tile, spill, stream), and how much extra LPDDR5
# traffic does it cost per step? Why does the decode step at batch 1 not care about tile size (Part 3 left panel),
# and what would you change in the model or the schedule to keep the attention working set inside LX at long
# contexts?

# %% [markdown] nbgrader={"grade": true, "grade_id": "dd4_q_working_set", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
#
# With 32 kB per core the K^T restickify copy and the Q·K^T scores no longer fit beside the resident tensors, so
# they spill (written, then read back by their consumer); the softmax streams its sub/exp parts through LPDDR5;
# P@V is re-tiled into several row tiles and re-reads V; the projections are re-tiled into many column tiles
# (free while their input row stays in LX, but the up projection splits M too and reads its weight twice, and
# gate/up outputs spill). Summed over the 24 layers this is ~0.8–1 GB extra, about +65–70 % of the step's
# LPDDR5 bytes (1.2 → 2.0 GB in the FAST run), and the step slows in proportion because it is memory-bound.
# At batch 1 every core holds one output row (mc = 1): B is read once whatever the
# tile, so coarse_tiles changes nothing; at batch 64 or 256 more row tiles re-read the weights once each. To keep
# attention inside LX: tile the KV sequence (flash-attention-style online softmax, so only a block of scores is
# resident), split heads/sequence over more cores, keep head_dim a multiple of 64, or lower the batch per card.
# Full marks: actions named per op with the extra bytes, the mc = 1 argument, one concrete remedy.
# === END MARK SCHEME ===

# %% [markdown]
# ## Landscape map
#
#
# Add Course 4's Deep Dive rows: Spyre's alignment granule and LX budget (catalog, computed by you), what the
# simulated compiler does past the LX budget, and the GPU/TPU/Spyre head_dim comparison you just checked
# (simulated). `overwrite=True` refreshes the rows when you re-run.

# %%
try:
    budget = lx_tile_budget(LX.capacity, SPYRE.fact("lx_reserved_bytes"), SPYRE.fact("lx_backend_reserved_fraction"),
                            STICK)
except NotImplementedError:
    budget = default_lx_budget()
# LM: the map the Analysis opened (open_map(4, LANDSCAPE_PATH, scratch=FAST)), with your Q1 prediction in it
LM.add("Spyre", "scratchpad alignment granule", f"{STICK}-byte stick ({STICK // 2} fp16)", course=4, source="catalog",
       overwrite=True)
LM.add("Spyre", "LX budget per core for tiles (bytes)", int(budget), course=4, source="learner", overwrite=True)
LM.add("Spyre", "past the LX budget (simulated compiler)", "re-tile matmuls; spill / stream intermediates via LPDDR5",
       course=4, source="simulated", overwrite=True)
tot = step_totals(TABLE)
LM.add("Spyre", f"stick padding in {MODEL} decode LPDDR5 bytes, head_dim {get_config(MODEL).head_dim} (%)",
       round(100 * tot["lpddr_padding_bytes"] / tot["lpddr_bytes"], 1), course=4, source="simulated", overwrite=True)
for backend, system in (("gpu", "GPU"), ("tpu", "TPU"), ("spyre", "Spyre")):
    LM.add(system, "decode bytes ratio head_dim 72 / 64", round(float(ALIGN.loc[backend, "ratio 72/64"]), 3),
           course=4, source="simulated", overwrite=True)
print(f"saved {LM.save()}")
LM.render(title=f"Accelerator landscape map with the Course 4 Deep Dive rows ({len(LM)} cells; [S] = SIMULATED)")
plt.show()

# %% [markdown]
# ## Wrap-up
#
#
# - On a scratchpad machine the LPDDR5↔LX counters are a **sum of planned DMAs**: op by op, each is predictable
#   from shapes, the stick layout and the tile schedule.
# - **Alignment is traffic**: a dimension that is not a multiple of 64 fp16 carries stick padding in every read
#   and write (head_dim 72 costs Spyre ~25 % more decode bytes than 64 for this decoder; a GPU ~7 %).
# - **Tiles trade re-reads for LX**: A is re-read per column tile, B per row tile; the largest tile is fixed by
#   the LX budget the catalog implies (~1.55 MB of 2 MB). At batch-1 decode nothing is re-read.
# - **Past the budget the compiler, not the hardware, pays**: re-tiling, spills and streamed softmax parts are
#   extra LPDDR5 bytes you can read in the plan before anything runs.
#
# Back to the core lab ([`lab4_memory`](../lab4_memory/lab4_memory.ipynb)) for caches vs scratchpads and KV-cache
# management on all five systems.
