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
# # Course 6 · Dataflow Deep Dive: a roofline for Spyre's LPDDR5/LX
#
# The hardware module of the specialization reads an IBM Spyre card's counters. Here the simulated Spyre backend (`common.sim`, a model of torch-spyre's compiler) provides the same counters; every figure is labelled SIMULATED, and the numbers Spyre does not publish are catalog estimates.
#
# **Learning objectives**
#
# - build a two-level roofline (LPDDR5 and LX scratchpad) from Spyre's hardware counters
# - place every op of a prefill step on it, with the scheduling ceiling of bundle launches
# - see how tile size moves the LPDDR5 intensity
# - compare Spyre's LPDDR5/LX roofline with the TPU's HBM/VMEM roofline
#
# **Expected time:** about 52 minutes  
# **Runtime:** Colab CPU runtime or any laptop (everything is simulated: no Spyre card needed)

# %% [markdown] include="grading"
# *(shared cell `grading`: `dfa release` writes it here)*

# %% include="setup"
# %run -m common.grading.authoring.labsource setup

# %% tags=["parameters"]
import os

# Learner defaults; CI and the autograder run FAST (nbgrader sets NBGRADER_EXECUTION; papermill passes FAST=True).
# DFA_FAST=1 picks the same FAST setting but keeps the explorer's widgets live (NBGRADER_EXECUTION makes it print).
FAST = bool(os.environ.get("NBGRADER_EXECUTION") or os.environ.get("DFA_FAST"))
MODEL = "llama-3.1-8b"   # the reference decoder at 8B scale, on fake tensors

# %%
SEQ = 256 if FAST else 1024
TILES = (1, 2, 4) if FAST else (1, 2, 4, 8, 16)

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from common.palette import SEQUENCE
from common.chips import get_chip
from common.errors import DFAError
from common.roofline import Ceiling, add_overhead_ceiling, eng, plot_roofline, points_from_node_table, \
    roofline_for_chip
from common.sim import simulate_llm

SPYRE, TPU = get_chip("spyre"), get_chip("tpu-v5e")
# Levels whose bandwidth the vendor does not publish: the catalog's labelled estimate for each.
ESTIMATED_LEVELS = {"LX": "lx_bandwidth", "VMEM": "vmem_bandwidth"}
prefill = simulate_llm(MODEL, "spyre", phase="prefill", batch=1, seq=SEQ)
decode = simulate_llm(MODEL, "spyre", phase="decode", batch=1, seq=SEQ)
print(f"SIMULATED {MODEL} on {prefill.chips}x {prefill.chip} ({prefill.dtype}): prefill {eng(prefill.time_s, 's')}, "
      f"decode {eng(decode.time_s, 's')} per token")
print("hardware counters of the decode step:", {k: v for k, v in decode.counters.items()})


# %% [markdown]
# ## Part 1 — From counters to a roofline
#
# **The principle.** On a machine whose scratchpad is managed by the compiler, the bytes that cross each level are
# not a guess: the program says exactly what is DMA'd from LPDDR5 into each core's LX scratchpad, what is written
# back, and what each core reads and writes in LX. Spyre's profiler exposes them as counters; the simulator
# (`common.sim`, backend `spyre`) reports the same counters in `report.counters` (totals over the step). With
# them, a roofline is built from **counted** traffic at both levels.
#
# **The vendor.** An IBM Spyre card: 32 cores, 2 MB of LX scratchpad per core, 128 GB of LPDDR5 at 204.8 GB/s
# (catalog); the fp16 peak and the LX bandwidth are not published, so the catalog carries labelled estimates.
#
# **Spec.** Write `counter_point(report)`: a dict with `flops` (`report.flops`), `lpddr_bytes` (LPDDR5→LX plus
# LX→LPDDR5 counters), `lx_bytes` (the `lx_bytes` counter), `I_LPDDR5` and `I_LX` (flops / those bytes) and
# `flops_per_s` (`report.flops / report.time_s`). Worked example: 2e12 FLOPs, 1e10 + 0 LPDDR5 bytes, 4e10 LX bytes
# → I_LPDDR5 = 200, I_LX = 50 FLOP/B.

# %% nbgrader={"grade": false, "grade_id": "counter_point", "locked": false, "schema_version": 3, "solution": true, "task": false}
def counter_point(report):
    """The whole step as one roofline point per level, from the hardware counters."""
    ### BEGIN SOLUTION
    c = report.counters
    lpddr = c["lpddr_to_lx_bytes"] + c["lx_to_lpddr_bytes"]
    return {"flops": report.flops, "lpddr_bytes": lpddr, "lx_bytes": c["lx_bytes"],
            "I_LPDDR5": report.flops / lpddr, "I_LX": report.flops / c["lx_bytes"],
            "flops_per_s": report.flops / report.time_s}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "counter_point_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_scalar, check_type

cp = counter_point(decode)
check_type("counter_point", cp, dict)
c = decode.counters
check_scalar("decode I_LPDDR5", cp.get("I_LPDDR5"), decode.flops / (c["lpddr_to_lx_bytes"] + c["lx_to_lpddr_bytes"]),
             rel=1e-9, hint="FLOPs / (LPDDR5->LX + LX->LPDDR5 bytes)")
check_scalar("decode I_LX", cp.get("I_LX"), decode.flops / c["lx_bytes"], rel=1e-9)
### BEGIN HIDDEN TESTS
import dataclasses as _dc
import random as _random

from common.grading.verdicts.probe import Probe
from common.sim import simulate_llm as _sim

probe = Probe()
_rng = _random.Random(probe.seed)  # this learner's steps and profiler counters
_steps = [("prefill", _rng.choice((1, 2)), _rng.choice((16, 32))), ("decode", 1, _rng.choice((8, 16, 24)))]
_factors = {_n: round(_rng.uniform(1.05, 1.6), 3) for _n in ("lpddr_to_lx_bytes", "lx_to_lpddr_bytes", "lx_bytes")}
for _k, (_phase, _batch, _seq) in enumerate(_steps):
    probe.send(f"step {_k}", counter_point(_sim("test", "spyre", phase=_phase, batch=_batch, seq=_seq)))
    # the counters as a card's profiler reported them (more traffic than the simulated events' bytes)
    _r = _sim("test", "spyre", phase=_phase, batch=_batch, seq=_seq)
    _prof = _dc.replace(_r, counters={**_r.counters, **{_n: _r.counters[_n] * _f for _n, _f in _factors.items()}})
    probe.send(f"profiled {_k}", counter_point(_prof))
### JUDGEMENT
import dataclasses
import random

from answers import counter_point as ref_point
from common.checks import grader
from common.sim import simulate_llm

data, seed = probe.received()
rng = random.Random(seed)
steps = [("prefill", rng.choice((1, 2)), rng.choice((16, 32))), ("decode", 1, rng.choice((8, 16, 24)))]
factors = {n: round(rng.uniform(1.05, 1.6), 3) for n in ("lpddr_to_lx_bytes", "lx_to_lpddr_bytes", "lx_bytes")}
for k, (phase, batch, seq) in enumerate(steps):
    r = simulate_llm("test", "spyre", phase=phase, batch=batch, seq=seq)
    profiled = dataclasses.replace(r, counters={**r.counters, **{n: r.counters[n] * f for n, f in factors.items()}})
    for which, report in ((f"step {k}", r), (f"profiled {k}", profiled)):
        got, want = data[which], ref_point(report)
        grader.assert_type(got, dict, name="counter_point returns a dict")
        for key, value in want.items():
            grader.assert_scalar(got.get(key), value, rel=1e-9,
                                 name=f"{phase} {key}" + (" from the profiler's counters" if "prof" in which else ""))
### END HIDDEN TESTS

# %%
def spyre_roofline():
    lx = SPYRE.estimates["lx_bandwidth"]
    return roofline_for_chip(SPYRE, "fp16").with_ceiling(
        Ceiling(f"LX {eng(lx.value, 'B/s')} (catalog ESTIMATE)", "bandwidth", lx.value, level="LX", note=lx.derivation))


try:
    rows = [{"label": f"{r.phase} step", **counter_point(r)} for r in (prefill, decode)]
except NotImplementedError:
    rows = None
    print("counter_point is not written yet: the step points are drawn once it is")
if rows is not None:
    steps = pd.DataFrame(rows)
    steps["duration_s"] = [prefill.time_s, decode.time_s]
    plot_roofline(spyre_roofline(), points_from_node_table(steps, spyre_roofline(), kind="simulated",
                                                            level_bytes={"LPDDR5": "lpddr_bytes", "LX": "lx_bytes"}),
                  label_points=True,
                  title=f"SIMULATED Spyre (fp16, 1 card): {MODEL} steps (batch 1, {SEQ} tokens) from the LPDDR5/LX "
                        "counters\nroofs: LPDDR5 datasheet; peak and LX catalog ESTIMATES")
    plt.show()
    print(steps.drop(columns=["label"]).round(3).to_string(index=False))


# %% [markdown]
# ## Part 2 — Every op, and the scheduling ceiling
#
# **Per op, and the scheduling ceiling.** Each SuperDSC op's event carries its own LPDDR5 read/write
# (`event.detail["lpddr_read"]`, `["lpddr_write"]`) and LX bytes (`event.bytes["LX"]`) — the per-op counters.
#
# **Spec.** Write `op_counters(report)`: a `DataFrame` with one row per compute event on the `"cores"` engine with
# FLOPs > 0, columns `name`, `flops`, `lpddr_bytes` (read + write), `lx_bytes`, `duration_s`. Your rows' LPDDR5
# bytes summed over **all** compute events on `"cores"` must equal the counters, so a good check is that the
# totals match.

# %% nbgrader={"grade": false, "grade_id": "op_counters", "locked": false, "schema_version": 3, "solution": true, "task": false}
def op_counters(report):
    """One row per compute op on the cores with FLOPs: name, flops, lpddr_bytes, lx_bytes, duration_s."""
    ### BEGIN SOLUTION
    rows = [{"name": e.name, "flops": e.flops, "lpddr_bytes": e.detail["lpddr_read"] + e.detail["lpddr_write"],
             "lx_bytes": e.bytes.get("LX", 0.0), "duration_s": e.duration}
            for e in report.events if e.kind == "compute" and e.engine == "cores" and e.flops > 0]
    return pd.DataFrame(rows, columns=["name", "flops", "lpddr_bytes", "lx_bytes", "duration_s"])
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "op_counters_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_scalar, check_type

oc = op_counters(prefill)
check_type("op_counters", oc, pd.DataFrame)
ev = [e for e in prefill.events if e.kind == "compute" and e.engine == "cores" and e.flops > 0]
check_equal("one row per compute op on the cores with FLOPs", len(oc) == len(ev), True)
check_scalar("LPDDR5 bytes of the ops", float(oc["lpddr_bytes"].sum()),
             sum(e.detail["lpddr_read"] + e.detail["lpddr_write"] for e in ev), rel=1e-9)
### BEGIN HIDDEN TESTS
import dataclasses as _dc
import random as _random

import pandas as _pd
import torch as _torch

from common.grading.verdicts.probe import Probe
from common.sim import simulate_llm as _sim

probe = Probe()
_rng = _random.Random(probe.seed)  # this learner's steps and per-op profiler counters
_steps = [("decode", 1, _rng.choice((8, 16, 24))), ("prefill", _rng.choice((1, 2)), _rng.choice((16, 32)))]
_factor = _rng.choice((1.25, 1.5, 2.0))


def _columns(frame):
    return {"frame": isinstance(frame, _pd.DataFrame), "name": [str(n) for n in frame["name"]],
            **{c: _torch.tensor(frame[c].to_numpy(float), dtype=_torch.float64)
               for c in ("flops", "lpddr_bytes", "lx_bytes", "duration_s")}}


for _k, (_phase, _batch, _seq) in enumerate(_steps):
    probe.send(f"step {_k}", _columns(op_counters(_sim("test", "spyre", phase=_phase, batch=_batch, seq=_seq))))
    # the per-op counters as a card's profiler reported them (they need not equal the simulated events' bytes)
    _r = _sim("test", "spyre", phase=_phase, batch=_batch, seq=_seq)
    _prof = _dc.replace(_r, events=[_dc.replace(e, detail={**e.detail, "lpddr_read": e.detail["lpddr_read"] * _factor})
                                    if "lpddr_read" in e.detail else e for e in _r.events])
    probe.send(f"profiled {_k}", _columns(op_counters(_prof)))
### JUDGEMENT
import dataclasses
import random

import torch

from answers import op_counters as ref_counters
from common.checks import grader
from common.sim import simulate_llm

data, seed = probe.received()
rng = random.Random(seed)
steps = [("decode", 1, rng.choice((8, 16, 24))), ("prefill", rng.choice((1, 2)), rng.choice((16, 32)))]
factor = rng.choice((1.25, 1.5, 2.0))
for k, (phase, batch, seq) in enumerate(steps):
    r = simulate_llm("test", "spyre", phase=phase, batch=batch, seq=seq)
    profiled = dataclasses.replace(r, events=[
        dataclasses.replace(e, detail={**e.detail, "lpddr_read": e.detail["lpddr_read"] * factor})
        if "lpddr_read" in e.detail else e for e in r.events])
    for which, report in ((f"step {k}", r), (f"profiled {k}", profiled)):
        got, want = data[which], ref_counters(report)
        what = f"{phase}" + (" with the profiler's per-op counters" if "prof" in which else "")
        grader.assert_equal(got["frame"], True, name="op_counters returns a DataFrame")
        grader.assert_equal(got["name"], [str(n) for n in want["name"]],
                            name=f"{what}: one row per compute op on the cores with FLOPs, in order")
        for col in ("flops", "lpddr_bytes", "lx_bytes", "duration_s"):
            grader.assert_tensor(got[col], torch.tensor(want[col].to_numpy(float), dtype=torch.float64), rtol=1e-9,
                                 atol=0.0, dtype=torch.float64, name=f"{what}: {col}")
### END HIDDEN TESTS

# %%
try:
    ops = op_counters(prefill)
    ops = ops[ops["name"].str.startswith("L0.")].copy()  # one decoder layer (the others repeat it)
    ops.attrs["label"] = "prefill ops, layer 0"
except NotImplementedError:  # not written yet: no op points to draw
    ops = None
    print("op_counters is not written yet: the op points are drawn once it is")
if ops is not None:
    att = prefill.attribution
    n_ops = sum(1 for e in prefill.events if e.engine == prefill.critical_engine and e.kind == "compute")
    t0 = att["scheduling"] / n_ops
    f_ref = float(ops["flops"].median())
    rl = add_overhead_ceiling(spyre_roofline(), t0, flops=f_ref,
                              name=f"scheduling {eng(t0, 's')}/op (SIMULATED: bundle launches), "
                                   f"{eng(f_ref, 'FLOP')} ops")
    pts = points_from_node_table(ops, rl, kind="simulated", level_bytes={"LPDDR5": "lpddr_bytes", "LX": "lx_bytes"})
    fig, ax = plt.subplots(figsize=(10, 6.4), layout="constrained")
    plot_roofline(rl, pts, ax=ax, label_points=5,
                  title=f"SIMULATED Spyre hierarchical roofline from per-op counters: {MODEL} prefill, {SEQ} tokens, "
                        "fp16\nLPDDR5 datasheet; LX bandwidth and fp16 peak are catalog ESTIMATES")
    plt.show()
    print("bound of each op (lowest roof):", pts[pts["level"] == "LPDDR5"]["bound"].value_counts().to_dict())
print("bundle launch estimate:", SPYRE.estimates["kernel_launch_s"].derivation)


# %% [markdown]
# ## Part 3 — Tile size and the LPDDR5 ceiling
#
# **Tile size moves the LPDDR5 point.** torch-spyre tiles a matmul's rows into `coarse_tiles` tiles per core;
# each extra row tile re-reads the weight operand from LPDDR5. Fewer, larger tiles → fewer LPDDR5 bytes → a
# higher LPDDR5 intensity, as long as the tile fits the LX budget.
#
# **Spec.** Write `tile_sweep(reports)`: `reports` maps each `coarse_tiles` value to the report of one Spyre
# prefill compiled with it (the next cell builds them with `simulate_llm(..., coarse_tiles=t)`). Return a
# `DataFrame` with one row per tiling, in the order of `reports`, and columns `coarse_tiles`, `lpddr_bytes` (the
# counters, read + write), `I_LPDDR5` (`report.flops / lpddr_bytes`) and `time_s` (`report.time_s`). Read the
# counters, as in Part 1: on a card they are what the profiler reports.

# %%
# One Spyre prefill per tiling: the reports tile_sweep reads.
tiled = {t: simulate_llm(MODEL, "spyre", phase="prefill", batch=1, seq=SEQ, coarse_tiles=t) for t in TILES}


# %% nbgrader={"grade": false, "grade_id": "tile_sweep", "locked": false, "schema_version": 3, "solution": true, "task": false}
def tile_sweep(reports):
    """One row per {coarse_tiles: Spyre prefill report}: coarse_tiles, lpddr_bytes, I_LPDDR5, time_s."""
    ### BEGIN SOLUTION
    rows = []
    for t, r in reports.items():
        lp = r.counters["lpddr_to_lx_bytes"] + r.counters["lx_to_lpddr_bytes"]
        rows.append({"coarse_tiles": t, "lpddr_bytes": lp, "I_LPDDR5": r.flops / lp, "time_s": r.time_s})
    return pd.DataFrame(rows, columns=["coarse_tiles", "lpddr_bytes", "I_LPDDR5", "time_s"])
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "tile_sweep_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_tensor, check_type

ts = tile_sweep(tiled)
check_type("tile_sweep", ts, pd.DataFrame)
check_tensor("I_LPDDR5 per tiling", torch.tensor(ts["I_LPDDR5"].to_numpy(float)),
             torch.tensor([r.flops / (r.counters["lpddr_to_lx_bytes"] + r.counters["lx_to_lpddr_bytes"])
                           for r in tiled.values()], dtype=torch.float64), rtol=1e-9, dtype=torch.float64)
check_equal("more row tiles, lower LPDDR5 intensity", bool(np.all(np.diff(ts["I_LPDDR5"].to_numpy(float)) < 0)), True)
### BEGIN HIDDEN TESTS
import dataclasses as _dc
import random as _random

import pandas as _pd
import torch as _torch

from common.grading.verdicts.probe import Probe
from common.sim import simulate_llm as _sim

probe = Probe()
_rng = _random.Random(probe.seed)  # this learner's tilings, lengths and profiler counters
_asked = [("test", (1, _rng.choice((2, 3, 5))), _rng.choice((16, 32)), False),
          ("test", (_rng.choice((2, 4)), 1), 24, True), ("llama-3.1-8b", (4, 1, 2), _rng.choice((128, 256)), False),
          ("llama-3.1-8b", (1, 2), 128, True)]
_factors = [round(_rng.uniform(1.05, 1.6), 3) for _ in range(2)]  # LPDDR5 read and write as a profiler counted them
for _k, (_model, _tiles, _seq, _profiled) in enumerate(_asked):
    _reports = {_t: _sim(_model, "spyre", phase="prefill", batch=1, seq=_seq, coarse_tiles=_t) for _t in _tiles}
    if _profiled:
        _reports = {_t: _dc.replace(_r, counters={**_r.counters,
                                                 "lpddr_to_lx_bytes": _r.counters["lpddr_to_lx_bytes"] * _factors[0],
                                                 "lx_to_lpddr_bytes": _r.counters["lx_to_lpddr_bytes"] * _factors[1]})
                    for _t, _r in _reports.items()}
    _table = tile_sweep(_reports)
    probe.send(f"sweep {_k}", {"frame": isinstance(_table, _pd.DataFrame),
                               **{c: _torch.tensor(_table[c].to_numpy(float), dtype=_torch.float64)
                                  for c in ("coarse_tiles", "lpddr_bytes", "I_LPDDR5", "time_s")}})
### JUDGEMENT
import dataclasses
import random

import torch

from answers import tile_sweep as ref_sweep
from common import sim
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
asked = [("test", (1, rng.choice((2, 3, 5))), rng.choice((16, 32)), False),
         ("test", (rng.choice((2, 4)), 1), 24, True), ("llama-3.1-8b", (4, 1, 2), rng.choice((128, 256)), False),
         ("llama-3.1-8b", (1, 2), 128, True)]
factors = [round(rng.uniform(1.05, 1.6), 3) for _ in range(2)]
for k, (model, tiles, seq, profiled) in enumerate(asked):
    reports = {t: sim.simulate_llm(model, "spyre", phase="prefill", batch=1, seq=seq, coarse_tiles=t) for t in tiles}
    if profiled:
        scaled = {"lpddr_to_lx_bytes": factors[0], "lx_to_lpddr_bytes": factors[1]}
        reports = {t: dataclasses.replace(r, counters={**r.counters, **{n: r.counters[n] * f
                                                                        for n, f in scaled.items()}})
                   for t, r in reports.items()}
    got, want = data[f"sweep {k}"], ref_sweep(reports)
    what = f"{model}, tilings {tiles}, {seq} tokens" + (", the profiler's counters" if profiled else "")
    grader.assert_equal(got["frame"], True, name="tile_sweep returns a DataFrame")
    for col in ("coarse_tiles", "lpddr_bytes", "I_LPDDR5", "time_s"):
        grader.assert_tensor(got[col], torch.tensor(want[col].to_numpy(float), dtype=torch.float64), rtol=1e-9,
                             atol=0.0, dtype=torch.float64, name=f"{what}: {col}")
### END HIDDEN TESTS

# %%
try:
    ts = tile_sweep(tiled)
except NotImplementedError:
    ts = None
    print("tile_sweep is not written yet")
if ts is not None:
    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    ax.loglog(ts["I_LPDDR5"], ts["time_s"] * 1e3, "s-", color=SEQUENCE[4])
    for _, row in ts.iterrows():
        ax.annotate(f"coarse_tiles={int(row['coarse_tiles'])}", (row["I_LPDDR5"], row["time_s"] * 1e3),
                    xytext=(5, 4), textcoords="offset points", fontsize=8)
    ax.axvline(roofline_for_chip(SPYRE, "fp16").ridge_point(), color=SEQUENCE[0], ls="--", lw=1)
    ax.text(roofline_for_chip(SPYRE, "fp16").ridge_point(), ax.get_ylim()[1], " LPDDR5 ridge", va="top", fontsize=8,
            color=SEQUENCE[0])
    ax.set(xlabel="step intensity vs LPDDR5 [FLOP/byte] (counters)", ylabel="step time [ms]",
           title=f"SIMULATED Spyre prefill of {MODEL} ({SEQ} tokens, fp16): tile size vs LPDDR5 intensity")
    from matplotlib.ticker import FuncFormatter
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if str(round(v, 6))[0] in "25" else ""))
    ax.grid(True, which="both", color="#dddddd", lw=0.5)
    plt.show()
    print(ts.to_string(index=False))


# %% [markdown]
# ## Part 4 — Spyre's LX vs the TPU's VMEM
#
# **Spyre vs the TPU.** Both are software-managed: the TPU's XLA stages fusions' operands from HBM into VMEM, as
# Spyre's compiler stages sticks from LPDDR5 into LX. Their ridge points per level tell you how much reuse each
# level demands.
#
# **Spec.** Write `level_ridges(chip_name, dtype)`: `{level: ridge point}` for every memory level of the chip whose
# bandwidth is published (`chip.memory_levels`, `.bandwidth`) or, if not, has a catalog estimate named in
# `ESTIMATED_LEVELS` (`chip.estimate(name)`); levels with neither are left out. Use the chip's
# `compute_peak(dtype)[0]`. Worked example: Spyre fp16 → `{"LX": 24.0, "LPDDR5": 480.0}` (the LX
# figure from the catalog's estimate).

# %% nbgrader={"grade": false, "grade_id": "level_ridges", "locked": false, "schema_version": 3, "solution": true, "task": false}
def level_ridges(chip_name, dtype):
    """{level: peak / bandwidth} for levels with a published bandwidth or a catalog estimate."""
    ### BEGIN SOLUTION
    chip = get_chip(chip_name)
    peak, _ = chip.compute_peak(dtype)
    out = {}
    for lv in chip.memory_levels:
        bw = lv.bandwidth
        if not bw and lv.name in ESTIMATED_LEVELS and ESTIMATED_LEVELS[lv.name] in chip.estimates:
            bw = chip.estimate(ESTIMATED_LEVELS[lv.name])
        if bw:
            out[lv.name] = peak / bw
    return out
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "level_ridges_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_scalar, check_type

lr = level_ridges("spyre", "fp16")
check_type("level_ridges", lr, dict)
peak = SPYRE.compute_peak("fp16")[0]
check_scalar("Spyre LPDDR5 ridge", lr.get("LPDDR5"), peak / SPYRE.main_memory.bandwidth, rel=1e-9)
check_scalar("Spyre LX ridge (estimate)", lr.get("LX"), peak / SPYRE.estimate("lx_bandwidth"), rel=1e-9)
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)  # this learner's extra chips, beside the two of the spec
_asked = [("spyre", "fp16"), ("tpu-v5e", "bf16"), ("tpu-v4", "bf16"), ("tpu-v6e", "bf16"),
          (_rng.choice(("h100-sxm", "a100-80gb", "l4", "t4")), "fp16"), (_rng.choice(("wse-3", "groq-lpu")), "fp16")]
probe.send("ridges", [level_ridges(_c, _d) for _c, _d in _asked])
### JUDGEMENT
import random

from answers import level_ridges as ref_ridges
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
asked = [("spyre", "fp16"), ("tpu-v5e", "bf16"), ("tpu-v4", "bf16"), ("tpu-v6e", "bf16"),
         (rng.choice(("h100-sxm", "a100-80gb", "l4", "t4")), "fp16"), (rng.choice(("wse-3", "groq-lpu")), "fp16")]
grader.assert_equal(len(data["ridges"]), len(asked), name="one answer per chip")
for (chip, dtype), got in zip(asked, data["ridges"], strict=True):
    want = ref_ridges(chip, dtype)
    grader.assert_type(got, dict, name="level_ridges returns a dict")
    grader.assert_equal(sorted(got), sorted(want),
                        name=f"{chip}: levels with a published bandwidth or a catalog estimate, no others")
    for level, ridge in want.items():
        grader.assert_scalar(got[level], ridge, rel=1e-9, name=f"{chip} {dtype} {level} ridge")
### END HIDDEN TESTS

# %%
vmem = TPU.estimates["vmem_bandwidth"]
tpu_rl = roofline_for_chip(TPU, "bf16").with_ceiling(
    Ceiling(f"VMEM {eng(vmem.value, 'B/s')} (catalog ESTIMATE)", "bandwidth", vmem.value, level="VMEM",
            note=vmem.derivation))
tpu_prefill = simulate_llm(MODEL, "tpu", phase="prefill", batch=1, seq=SEQ)
tdf = tpu_prefill.frame()
tdf = tdf[(tdf["kind"] == "compute") & (tdf["flops"] > 0) & tdf["name"].str.startswith("L0.")].copy()
tdf["bytes_VMEM"] = tdf.get("bytes_VMEM", 0.0)
tdf.attrs["label"] = "prefill fusions, layer 0"
fig, axes = plt.subplots(1, 2, figsize=(16, 6.2), layout="constrained", sharey=True)
spyre_pts = None if ops is None else points_from_node_table(
    ops, spyre_roofline(), kind="simulated", level_bytes={"LPDDR5": "lpddr_bytes", "LX": "lx_bytes"})
plot_roofline(spyre_roofline(), spyre_pts, ax=axes[0], label_points=3,
              title=f"SIMULATED Spyre, fp16, 1 card: {MODEL} prefill ({SEQ} tokens)\nLX and peak: catalog ESTIMATES")
plot_roofline(tpu_rl, points_from_node_table(tdf, tpu_rl, kind="simulated",
                                             level_bytes={"HBM": "bytes_HBM", "VMEM": "bytes_VMEM"}),
              ax=axes[1], label_points=3, title=f"SIMULATED TPU v5e, bf16, per chip ({tpu_prefill.chips} chips): same "
                                                 "prefill\nVMEM: catalog ESTIMATE")
plt.show()
try:
    print({c: {k: round(v, 2) for k, v in level_ridges(c, d).items()} for c, d in (("spyre", "fp16"),
                                                                                   ("tpu-v5e", "bf16"))})
except NotImplementedError:
    print("level_ridges is not written yet")

# %% [markdown]
# ## Analysis
#
# Answer in a few sentences each, with numbers from your runs.

# %% [markdown]
# **Q1 (comparative prediction).** Spyre's LPDDR5 ridge (~480 FLOP/B) is twice the TPU v5e's HBM ridge (~240)
# and 1.6x the H100's (~300). Before the simulator answers: for the 8B decode step at batch 1, how many times more
# tokens/s does the H100 give than Spyre? Commit one number; the reveal runs `simulate_llm` on the GPU, the TPU and
# Spyre, sets the simulated ratio beside yours (a hit within a factor 2), adds both to your landscape map, and
# marks a number changed after it.

# %%
from common import explore
from common.landscape import open_map

lm = open_map(6, scratch=FAST)  # your landscape map: the prediction is kept beside it
P_RATIO = explore.predict("course6.deepdive6.h100-over-spyre", f"{MODEL} decode, batch 1: H100 / Spyre tokens/s",
                          kind="value", system="spyre", lm=lm, course=6)
if explore.widgets_can_render():
    display(P_RATIO.form())  # type and commit here, or call P_RATIO.commit(...) in the next cell

# %% nbgrader={"grade": false, "grade_id": "predict_ratio", "locked": false, "schema_version": 3, "solution": true, "task": false}
# Your ratio (one number: H100 tokens/s / Spyre tokens/s), committed before the next cell runs the simulator.
### BEGIN SOLUTION
P_RATIO.commit(16.0)
### END SOLUTION

# %%
compared = {s: simulate_llm(MODEL, s, phase="decode", batch=1, seq=SEQ) for s in ("gpu", "tpu", "spyre")}
print(f"SIMULATED decode of {MODEL}, batch 1, KV {SEQ}:")
print(pd.DataFrame({s: {"chips": f"{r.chips}x {r.chip}", "tokens/s": r.tokens_per_s, "bottleneck": r.bottleneck}
                    for s, r in compared.items()}).T.to_string(float_format=lambda v: f"{v:.3g}"))
try:
    P_RATIO.reveal(compared["gpu"].tokens_per_s / compared["spyre"].tokens_per_s)
    lm.save()
except DFAError as exc:  # no number committed yet
    print(exc)

# %% [markdown]
# **Q1 (why).** Which level binds each of the three, and where does the TPU fall? Then predict the batch size at
# which each one's *weight* matmuls would reach their main-memory ridge.

# %% [markdown] nbgrader={"grade": true, "grade_id": "dd_q_compare", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# Decode at batch 1 has intensity ~1 FLOP/B on all three, so all are bound by main memory and tokens/s scales with
# main-memory bandwidth per model copy: H100 (3.35 TB/s) > TPU v5e x2 (2 x 819 GB/s) > Spyre (204.8 GB/s), roughly
# 16x between H100 and Spyre. Weight matmuls have intensity ~batch (2-byte weights), so they reach the ridge at a
# batch of ~ridge: ~300 on the H100, ~240 on the v5e, ~480 on Spyre — Spyre needs the largest batch (or int8
# weights, halving the bytes) to leave the memory-bound region.
# === END MARK SCHEME ===

# %% [markdown]
# **Q2.** From your per-op roofline: which level binds most Spyre prefill ops, LPDDR5 or LX? Why can an op whose
# LPDDR5 intensity is high still be slow, and what did the tile-size sweep change at which level?

# %% [markdown] nbgrader={"grade": true, "grade_id": "dd_q_levels", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# Pointwise and reduction ops (norms, RoPE, softmax parts) are bound by LPDDR5 when their inputs come from LPDDR5,
# and by LX when they work on resident tensors (LX intensity < 1 FLOP/B against an LX ridge of ~24). Matmuls have
# high LPDDR5 intensity, but every K-stick re-reads tiles from LX, so their LX point is far lower; a tiny tile or
# a spill moves them down. More coarse row tiles re-read the weights from LPDDR5 once per tile: LPDDR5 bytes grow,
# the LPDDR5 intensity falls below the ridge and the step slows almost in proportion.
# === END MARK SCHEME ===

# %% [markdown]
# **Q3.** Compare the scheduling ceilings: Spyre launches one SuperDSC bundle at a time from the host, the TPU runs
# one compiled program with a fill/drain bubble per matmul fusion. Which of the two is more exposed to scheduling
# overhead in decode, and what would you change in the compiler to lower it?

# %% [markdown] nbgrader={"grade": true, "grade_id": "dd_q_scheduling", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# Spyre: every bundle pays a host launch (a catalog estimate of tens of µs) and every graph break a host round trip;
# in decode, where ops are tiny, these are a visible share of the step. The TPU pays only sub-µs fill/drain
# bubbles per matmul fusion and no per-op launch. Lower it on Spyre by making bundles larger (fewer graph breaks,
# more ops per SuperDSC), capturing the whole step once (graph replay), and removing CPU fallbacks.
# === END MARK SCHEME ===

# %% [markdown]
# ## Landscape map
#
# Add the Deep Dive's rows for Spyre (and the TPU for comparison): the scratchpad ridge point (catalog estimate)
# and the LPDDR5 / HBM bytes a decode token moves according to the counters (simulated).

# %%
import tempfile

try:
    ridges = {"Spyre": level_ridges("spyre", "fp16")["LX"], "TPU": level_ridges("tpu-v5e", "bf16")["VMEM"]}
except NotImplementedError:
    ridges = {"Spyre": SPYRE.compute_peak("fp16")[0] / SPYRE.estimate("lx_bandwidth"),
              "TPU": TPU.compute_peak("bf16")[0] / TPU.estimate("vmem_bandwidth")}
# lm: the map the Analysis opened (open_map(6, scratch=FAST)), with your Q1 prediction in it
for system, ridge in ridges.items():
    lm.add(system, "scratchpad ridge (FLOP/B, est. bandwidth)", float(ridge), course=6, source="learner",
           overwrite=True)
c = decode.counters
lm.add("Spyre", "main-memory bytes per decode token", (c["lpddr_to_lx_bytes"] + c["lx_to_lpddr_bytes"]) / decode.tokens,
       course=6, source="simulated", overwrite=True)
tpu_decode = simulate_llm(MODEL, "tpu", phase="decode", batch=1, seq=SEQ)
lm.add("TPU", "main-memory bytes per decode token", tpu_decode.bytes["HBM"] / tpu_decode.tokens, course=6,
       source="simulated", overwrite=True)
lm.save()
fig, ax = plt.subplots(figsize=(15, 1.2 + 0.55 * len(lm.frame())), layout="constrained")
lm.render(ax=ax, title="Accelerator landscape with the Course 6 Deep Dive rows (learner and SIMULATED labelled)")
plt.show()

# %% [markdown]
# ## Wrap-up
#
# - A compiler-managed hierarchy makes the roofline **exact**: the LPDDR5↔LX counters are the bytes, not an
#   estimate from cache models.
# - Spyre needs ~730 FLOP per LPDDR5 byte to be compute-bound — prefill can get there, decode cannot without
#   batching or narrower weights.
# - Inside the card, the LX ceiling (an estimate) binds ops that re-read tiles; tile size trades LX reuse against
#   LPDDR5 re-reads.
# - Bundle launches and graph breaks are Spyre's scheduling ceiling; the TPU's single compiled program pays
#   almost none.
#
# Back to the core lab (`lab6_roofline`) for the landscape map of all five systems.
