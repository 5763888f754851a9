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
# # Course 4 · Lab: Where the bytes live — caches, scratchpads, SRAM and the KV cache
#
# The five systems of this specialization make opposite choices about who decides where bytes live. A **GPU**
# puts hardware caches (L1, L2) in front of HBM and also gives the programmer a scratchpad (shared memory). A
# **TPU** stages every fusion's operands from HBM into its software-managed VMEM. **IBM Spyre** has no cache at
# all: the compiler DMAs tiles, laid out in 128-byte sticks, between LPDDR5 and each core's 2 MB LX scratchpad.
# The **Cerebras WSE** and the **Groq LPU** have no off-chip memory for the model: weights and KV cache must fit
# in on-chip SRAM, spread over enough PEs or chips.
#
# This lab computes what those choices cost, **measured** on your CPU, from the **catalog** and **simulated**
# (`common.sim`).
#
# **Learning objectives**
#
# - run a tiled matmul through an LRU cache model, write the double-buffered DMA schedule of a scratchpad of the same capacity, and compare off-chip bytes
# - profile prefill and decode with torch.profiler and identify weights, activations and the growing KV cache
# - tell which tensor ops move bytes (and how many) from those that only write metadata; measure a copy's bandwidth
# - write the KV-cache size formula (MHA, GQA, MQA) and find, from the catalog, the largest batch x context each system holds beside the weights, and how many Groq LPUs a model needs; then find with the explorer where each machine's context runs out and what paging buys
# - predict, then simulate, decode time as the KV cache outgrows the fastest level of each hierarchy
# - (optional, *Going further*) implement a paged KV-cache block allocator, as vLLM does, and measure its internal fragmentation against contiguous pre-allocation
#
# **Expected time:** about 120 minutes (plus about 43 optional)  
# **Runtime:** Colab CPU runtime (2 vCPUs) or any laptop; with a GPU (Colab's T4), the profiled generation and the
# copy run on it

# %% [markdown] include="grading"
# *(shared cell `grading`: `dfa release` writes it here)*

# %% include="setup"
# %run -m common.grading.authoring.labsource setup

# %% tags=["parameters"]
import os

# Learner defaults. CI and the autograder run the FAST setting (nbgrader sets NBGRADER_EXECUTION; papermill
# passes FAST=True): smaller matrices, fewer decode steps, shorter sweeps, a 2-layer cut of the real LLM.
# DFA_FAST=1 picks the same FAST setting but keeps the explorer's widgets live (NBGRADER_EXECUTION makes it print).
FAST = bool(os.environ.get("NBGRADER_EXECUTION") or os.environ.get("DFA_FAST"))
MODEL = "llama-3.1-8b"               # KV arithmetic and simulated decode (captured on fake tensors: no weights)
LLM_NAME = "qwen2.5-0.5b-instruct"  # the real LLM you run, with generate(), and profile on this machine

# %%
# Settings derived from FAST (kept out of the parameters cell, so papermill's FAST=True reaches them).
import bisect
import math
import tempfile
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from common.palette import EMPHASIS, SEQUENCE, tint
from common.measure import bench
from common.memory.cache import CacheConfig, LRUCache, MatmulTiling, compulsory_bytes, footprint_bytes, matmul_stream
from common.chips import DTYPE_BYTES, canonical_dtype, get_chip
from common.errors import DFAError
from common.explore import explore
from common.memory.kvcache import COLORS, SYSTEM_CHIPS, kv_limits, onchip_bytes, plot_kv_limits, replay, request_trace
from common.memory.memtimeline import live_at, plot_memory_timeline, profile_generate, timeline
from common.models import get_config
from common.models import load_llm
from common.sim import simulate_llm

warnings.filterwarnings("ignore", category=FutureWarning)  # deprecation notices of torch internals
# Part 1: C = A @ B with N x N fp32 matrices on a made-up core whose on-chip memory is either a cache or a
# scratchpad of SCRATCHPAD_BYTES (an L1-sized toy, not a catalog chip: the comparison is the point).
N = 128 if FAST else 256
SCRATCHPAD_BYTES = 32 * 1024
LINE_BYTES, WAYS = 64, 8
TILES = (16, 32, 64) if FAST else (16, 24, 32, 48, 64)
# Part 2: the profiled generation, on the GPU if there is one (fp16 there, fp32 on a CPU).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
GEN_BATCH, GEN_PROMPT, GEN_STEPS = (4, 16, 8) if FAST else (8, 32, 24)
LLM = load_llm(LLM_NAME, layers=2 if FAST else None, offline=True if FAST else None,
               dtype=torch.float16 if DEVICE == "cuda" else torch.float32, device=DEVICE)
# Parts 3-4: KV arithmetic and the simulated sweep; Going further: the allocator's request trace.
CONTEXT = 8192
CONTEXTS = [2 ** k for k in range(9, 18)]  # 512 ... 131072 tokens
BLOCK_SIZE, MAX_LEN = 16, 2048
TRACE = request_trace(32 if FAST else 200, seed=0, max_len=MAX_LEN)
SWEEP_BATCH = 4
SWEEP_SEQS = (1024, 16384, 65536) if FAST else (1024, 4096, 16384, 32768, 65536, 131000)
cfg8b = get_config(MODEL)
LIMITS = kv_limits(MODEL, CONTEXT)  # the catalog's table of Part 3 (native dtypes, fewest chips): your rows match it
pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 16)
INFO = bench.machine_info()
print(f"this machine: {INFO['cpu']} ({INFO['cores']} cores, {INFO['num_threads']} torch threads), "
      f"GPU: {INFO['cuda'] or 'none'}; FAST={FAST}, N={N}, decode steps={GEN_STEPS}")
print(f"the measured parts run on {DEVICE}" + ("" if DEVICE == "cuda" else " (no GPU here: the same cells run on the "
      "CPU)") + f"; the LLM: {LLM.label}")


# %% [markdown]
# ## Part 1 — Cache vs scratchpad on one kernel
#
# **The principle.** A *cache* decides in hardware what stays on chip: an address $a$ belongs to line
# $\lfloor a/L \rfloor$ ($L$ = line bytes), which may only live in one *set* (line mod #sets) of $W$ *ways*; a full
# set evicts its **least recently used** line. Writes are **write-back** (a dirty line reaches off-chip memory only
# when evicted or flushed) and **write-allocate** (a write miss first fetches the whole line). Nobody plans
# anything, and nobody controls *conflict misses* (tiles mapping to the same sets) or *capacity misses* (LRU
# evicting a tile still needed).
#
# A *scratchpad* is plain addressable SRAM: the compiler writes every transfer. For the tiled matmul
# $C = AB$ ($M\times K$ times $K\times N$, output tiles $t_m \times t_n$, reduction tiles $t_k$, $e$ bytes per
# element), an *output-stationary* schedule walks output tiles $(i_0, j_0)$; for each $k_0$ it DMAs one A and one
# B tile in, and it stores the C tile once after the last $k_0$. **Double buffering** loads step $s+1$'s tiles
# while step $s$ computes, so every tile needs two buffers:
#
# $$\text{footprint} = 2\,(t_m t_k + t_k t_n + t_m t_n)\,e \;\le\; \text{capacity},$$
# $$\text{bytes}_A = MKe\,\lceil N/t_n\rceil,\quad \text{bytes}_B = KNe\,\lceil M/t_m\rceil,\quad \text{bytes}_C = MNe.$$
#
# **The vendors.** GPUs have both (L1/L2 caches and shared memory); the TPU's VMEM, Spyre's LX, a WSE PE's 48 KB
# and the LPU's SRAM are software-managed: there the formula *is* the traffic. `common.memory.cache` has the cache model
# (`LRUCache`, `CacheConfig`), the kernel's address stream (`matmul_stream(MatmulTiling(...))`) and
# `footprint_bytes`; the schedule is yours.
#
# **Spec.**
# - `dma_plan(t, capacity_bytes)` for a `MatmulTiling` `t` (fields `M, N, K, tm, tn, tk, elem_bytes`): a
#   `DataFrame`, one row per DMA, columns `step` (tile step $s$, counting every $(i_0, j_0, k_0)$ in loop order
#   $i_0, j_0, k_0$), `op` (`"load"`/`"store"`), `matrix` (`"A"`, `"B"`, `"C"`), `bytes` and `buffer`: step $s$ loads
#   its A tile then its B tile into buffer $s \bmod 2$; after the last $k_0$ of an output tile the C tile is stored
#   (same `step`) from buffer (output tiles stored so far) mod 2. Edge tiles are smaller (`min(tm, M - i0)`, ...).
#   Raise a `ValueError` when the double-buffered footprint exceeds `capacity_bytes`.
# - `largest_tile(capacity_bytes, elem_bytes, multiple=1)`: the largest square tile edge $T$ (a multiple of
#   `multiple`, a Python `int`) with footprint$(T,T,T) \le$ capacity.
#
# Worked example: $M=N=K=64$, 32×32×32 fp32 tiles: 8 tile steps, 16 loads of 4 KiB, 4 stores of 4 KiB; A and B
# each 32 KiB, C 16 KiB; footprint 24 KiB. `largest_tile(32768, 4, multiple=16)` → 32.

# %% nbgrader={"grade": false, "grade_id": "dma_plan", "locked": false, "schema_version": 3, "solution": true, "task": false}
def dma_plan(t, capacity_bytes):
    """Explicit double-buffered DMA schedule of the tiled matmul t: step, op, matrix, bytes, buffer."""
    ### BEGIN SOLUTION
    e = t.elem_bytes
    need = 2 * (t.tm * t.tk + t.tk * t.tn + t.tm * t.tn) * e
    if need > capacity_bytes:
        raise ValueError(f"tiles {t.tm}x{t.tn}x{t.tk} need {need} B; the scratchpad holds {capacity_bytes} B")
    rows, step, stored = [], 0, 0
    for i0 in range(0, t.M, t.tm):
        for j0 in range(0, t.N, t.tn):
            m, n = min(t.tm, t.M - i0), min(t.tn, t.N - j0)
            for k0 in range(0, t.K, t.tk):
                k = min(t.tk, t.K - k0)
                rows.append({"step": step, "op": "load", "matrix": "A", "bytes": m * k * e, "buffer": step % 2})
                rows.append({"step": step, "op": "load", "matrix": "B", "bytes": k * n * e, "buffer": step % 2})
                step += 1
            rows.append({"step": step - 1, "op": "store", "matrix": "C", "bytes": m * n * e, "buffer": stored % 2})
            stored += 1
    return pd.DataFrame(rows, columns=["step", "op", "matrix", "bytes", "buffer"])
    ### END SOLUTION


def largest_tile(capacity_bytes, elem_bytes, multiple=1):
    """Largest square tile edge T (a multiple of `multiple`) whose double-buffered A, B, C tiles fit."""
    ### BEGIN SOLUTION
    return int(math.isqrt(capacity_bytes // (6 * elem_bytes)) // multiple * multiple)
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "dma_plan_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

t = MatmulTiling(64, 64, 64, 32, 32, 32, 4)  # the worked example
plan = dma_plan(t, SCRATCHPAD_BYTES)
check_type("dma_plan(...)", plan, pd.DataFrame)
check_equal("columns", [str(c) for c in plan.columns], ["step", "op", "matrix", "bytes", "buffer"])
loads, stores = plan[plan["op"] == "load"], plan[plan["op"] == "store"]
steps = sorted({int(x) for x in loads["step"]})
check_equal("steps are numbered 0, 1, ... with no gap", steps == list(range(len(steps))), True)
check_equal("each step loads A then B", [str(m) for m in loads["matrix"]] == ["A", "B"] * len(steps), True,
            hint="two loads per tile step, A first")
check_equal("every load goes to buffer step % 2", all(int(b) == int(s) % 2 for s, b in zip(loads["step"],
            loads["buffer"], strict=True)), True, hint="double buffering alternates the two buffers")
check_equal("C is stored only, A and B are loaded only", set(stores["matrix"]) <= {"C"} and
            set(loads["matrix"]) <= {"A", "B"}, True)
check_equal("stores alternate buffers", [int(b) for b in stores["buffer"]] == [i % 2 for i in range(len(stores))],
            True, hint="buffer = (output tiles stored so far) % 2")
for m, tiles_over in (("A", -(-t.N // t.tn)), ("B", -(-t.M // t.tm))):
    check_equal(f"bytes of {m} = its size x the output tiles that re-read it",
                int(plan.loc[plan["matrix"] == m, "bytes"].sum()) == (t.M * t.K if m == "A" else t.K * t.N)
                * t.elem_bytes * tiles_over, True, hint="A is re-read once per column of output tiles, B once per row")
check_equal("C is stored once", int(stores["bytes"].sum()) == t.M * t.N * t.elem_bytes, True)
try:
    dma_plan(MatmulTiling(64, 64, 64, 64, 64, 64, 4), SCRATCHPAD_BYTES)
    refused = False
except ValueError:
    refused = True
check_equal("tiles that do not fit are refused with a ValueError", refused, True)
T = largest_tile(32768, 4, multiple=16)
check_type("largest_tile(...)", T, int)
check_equal("your tile is a multiple of 16 and fits 32 KiB", T % 16 == 0 and footprint_bytes(T, T, T, 4) <= 32768, True)
check_equal("the next multiple of 16 does not fit", footprint_bytes(T + 16, T + 16, T + 16, 4) > 32768, True,
            hint="2 * 3 * T * T * elem_bytes <= capacity: solve for T, round down to the multiple")
### BEGIN HIDDEN TESTS
import random as _random

from common.memory.cache import MatmulTiling as _MT
from common.grading.verdicts.probe import Probe


def _plan_data(p):  # a plan as plain data; the judgement compares it with the answer key's
    return {"columns": [str(c) for c in p.columns], "op": [str(x) for x in p["op"]],
            "matrix": [str(x) for x in p["matrix"]], "step": [int(x) for x in p["step"]],
            "buffer": [int(x) for x in p["buffer"]], "bytes": [int(x) for x in p["bytes"]]}


def _refused(t, capacity):
    try:
        dma_plan(t, capacity)
    except ValueError:
        return True
    return False


probe = Probe()
_rng = _random.Random(probe.seed)
_cases = [(64, 64, 64, 32, 32, 32, 4, 32768), (50, 70, 30, 16, 8, 12, 2, 1 << 20), (96, 32, 160, 32, 32, 64, 4, 1 << 20),
          (7, 9, 11, 4, 4, 4, 1, 1 << 20), (40, 40, 40, 20, 20, 20, 2, 4800)]
_cases += [(*(_rng.randint(5, 90) for _ in range(3)), *(_rng.randint(2, 24) for _ in range(3)), _rng.choice((1, 2, 4)),
            1 << 20) for _ in range(2)]
probe.send("plans", [_plan_data(dma_plan(_MT(*_c[:7]), _c[7])) for _c in _cases])
probe.send("refused", [_refused(_MT(40, 40, 40, 20, 20, 20, 2), 4799), _refused(_MT(64, 64, 64, 64, 64, 64, 4), 32768),
                       _refused(_MT(9, 9, 9, 3, 5, 7, 4), 2 * (21 + 35 + 15) * 4 - 1)])
_tiles = [(32768, 4, 16), (65536, 2, 1), (2 * 1024 * 1024, 2, 64), (24576, 4, 8), (100_000, 1, 1),
          (_rng.randint(10_000, 5_000_000), _rng.choice((1, 2, 4)), _rng.choice((1, 8, 16)))]
probe.send("tiles", [largest_tile(_cap, _e, multiple=_mul) for _cap, _e, _mul in _tiles])
### JUDGEMENT
import random

from answers import dma_schedule, largest_square_tile
from common.memory.cache import MatmulTiling
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
cases = [(64, 64, 64, 32, 32, 32, 4, 32768), (50, 70, 30, 16, 8, 12, 2, 1 << 20), (96, 32, 160, 32, 32, 64, 4, 1 << 20),
         (7, 9, 11, 4, 4, 4, 1, 1 << 20), (40, 40, 40, 20, 20, 20, 2, 4800)]
cases += [(*(rng.randint(5, 90) for _ in range(3)), *(rng.randint(2, 24) for _ in range(3)), rng.choice((1, 2, 4)),
           1 << 20) for _ in range(2)]
for case, got in zip(cases, data["plans"], strict=True):
    ref = dma_schedule(MatmulTiling(*case[:7]))
    grader.assert_equal(got["columns"], ["step", "op", "matrix", "bytes", "buffer"], name=f"{case[:7]}: columns")
    for col in ("op", "matrix", "step", "buffer", "bytes"):
        grader.assert_equal(got[col], [str(x) if col in ("op", "matrix") else int(x) for x in ref[col]],
                            name=f"{case[:7]}: {col} of every DMA, in order")
grader.assert_equal(len(data["plans"][4]["op"]), 8 * 2 + 4, name="a footprint equal to the capacity fits")
grader.assert_equal(data["refused"], [True, True, True], name="tiles that do not fit are refused with a ValueError")
tiles = [(32768, 4, 16), (65536, 2, 1), (2 * 1024 * 1024, 2, 64), (24576, 4, 8), (100_000, 1, 1),
         (rng.randint(10_000, 5_000_000), rng.choice((1, 2, 4)), rng.choice((1, 8, 16)))]
grader.assert_equal([type(x).__name__ for x in data["tiles"]], ["int"] * len(tiles), name="largest_tile: Python ints")
grader.assert_equal(data["tiles"][0], 32, name="the worked example's tile")
for (cap, e, mul), got in zip(tiles, data["tiles"], strict=True):
    grader.assert_equal(got, largest_square_tile(cap, e, multiple=mul), name=f"largest tile, {cap} B, {e}-B elements")
### END HIDDEN TESTS

# %% [markdown]
# ### The same kernel through a cache
#
# **Spec.** `cache_traffic(t, config)`: run the address stream of `t` (`matmul_stream(t)` → addresses and a
# write flag per access) through a cold `LRUCache(config)`, flush it at the end (C must reach memory), and
# return a dict of Python numbers: `bytes_in` (fetched), `bytes_out` (written back), `offchip_bytes` (their sum)
# and `hit_rate`. Look at `common/memory/cache.py` first: it is short.

# %% nbgrader={"grade": false, "grade_id": "cache_traffic", "locked": false, "schema_version": 3, "solution": true, "task": false}
def cache_traffic(t, config):
    """Off-chip bytes of tiling t through a cold LRU cache (write-back, write-allocate), flushed at the end."""
    ### BEGIN SOLUTION
    addrs, writes = matmul_stream(t)
    cache = LRUCache(config)
    cache.run(addrs, writes)
    s = cache.flush()
    return {"bytes_in": int(s.bytes_in), "bytes_out": int(s.bytes_out), "offchip_bytes": int(s.offchip_bytes),
            "hit_rate": float(s.hit_rate)}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "cache_traffic_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_in_range, check_type

t = MatmulTiling(64, 64, 64, 16, 16, 16, 4)
cfg = CacheConfig(SCRATCHPAD_BYTES // 4, LINE_BYTES, 2)
mine = cache_traffic(t, cfg)
check_type("cache_traffic(...)", mine, dict)
check_equal("keys", sorted(mine), ["bytes_in", "bytes_out", "hit_rate", "offchip_bytes"])
for key in ("bytes_in", "bytes_out", "offchip_bytes"):
    check_type(key, mine[key], int, hint="a Python int: int(...) of the stats")
check_type("hit_rate", mine["hit_rate"], float)
check_equal("offchip_bytes = bytes_in + bytes_out", mine["offchip_bytes"] == mine["bytes_in"] + mine["bytes_out"], True)
check_equal("whole lines move", mine["bytes_in"] % LINE_BYTES == 0 and mine["bytes_out"] % LINE_BYTES == 0, True)
check_equal("every C line reached memory (flushed)", mine["bytes_out"] >= t.M * t.N * t.elem_bytes, True,
            hint="call flush() at the end: a dirty line still in the cache has not been written back")
check_equal("at least the compulsory bytes came in", mine["bytes_in"] >= compulsory_bytes(t), True,
            hint="a cold cache fetches A, B and (write-allocate) C at least once")
check_in_range("hit rate", mine["hit_rate"], 0.5, 1.0, hint="hits / accesses, over every element access")
### BEGIN HIDDEN TESTS
import random as _random

from common.memory.cache import CacheConfig as _CC, MatmulTiling as _MT
from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)
_ways = _rng.choice((1, 2, 4, 8))
_cases = [((64, 64, 64, 16, 16, 16, 4), (8192, 64, 2)), ((48, 40, 56, 8, 16, 8, 4), (4096, 32, 1)),
          ((32, 32, 32, 8, 8, 8, 2), (2048, 64, 32)),
          ((_rng.randint(20, 60), _rng.randint(20, 60), _rng.randint(20, 60), 8, 8, 8, 4),
           (_ways * 32 * _rng.choice((8, 16, 32)), 32, _ways))]
_sent = []
for _t, _c in _cases:
    _m = cache_traffic(_MT(*_t), _CC(*_c))
    _sent.append({"keys": sorted(str(k) for k in _m), **{str(k): _m[k] for k in _m if not isinstance(_m[k], dict)}})
probe.send("cases", _sent)
### JUDGEMENT
import random

from answers import simulate_cache
from common.memory.cache import CacheConfig, MatmulTiling, matmul_stream
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
ways = rng.choice((1, 2, 4, 8))
cases = [((64, 64, 64, 16, 16, 16, 4), (8192, 64, 2)), ((48, 40, 56, 8, 16, 8, 4), (4096, 32, 1)),
         ((32, 32, 32, 8, 8, 8, 2), (2048, 64, 32)),
         ((rng.randint(20, 60), rng.randint(20, 60), rng.randint(20, 60), 8, 8, 8, 4),
          (ways * 32 * rng.choice((8, 16, 32)), 32, ways))]
for (t, c), got in zip(cases, data["cases"], strict=True):
    ref = simulate_cache(*matmul_stream(MatmulTiling(*t)), CacheConfig(*c))
    grader.assert_equal(got["keys"], ["bytes_in", "bytes_out", "hit_rate", "offchip_bytes"], name="keys")
    for key in ("bytes_in", "bytes_out", "offchip_bytes"):
        grader.assert_equal(type(got[key]).__name__, "int", name=f"{key}: a Python int")
        grader.assert_equal(got[key], int(getattr(ref, key)), name=f"{key} of {t} through {c}")
    grader.assert_equal(type(got["hit_rate"]).__name__, "float", name="hit_rate: a Python float")
    grader.assert_scalar(got["hit_rate"], float(ref.hit_rate), rel=1e-9, name=f"hit rate of {t} through {c}")
### END HIDDEN TESTS

# %% [markdown]
# ### Same capacity, two memories
#
# The next cell gives a cache and the scratchpad the same capacity and sweeps the tile size, with your two
# functions.

# %%
# Off-chip bytes vs tile size: your scratchpad schedule, and three caches of the same capacity through your
# cache_traffic (a function not written yet leaves its lines out).
def _written(fn, *args):
    try:
        return fn(*args)
    except NotImplementedError:
        return None


caches = {"direct-mapped": 1, f"{WAYS}-way": WAYS, "fully associative": SCRATCHPAD_BYTES // LINE_BYTES}
tiny = MatmulTiling(8, 8, 8, 4, 4, 4, 4)
HAVE_PLAN = _written(dma_plan, tiny, 1 << 40) is not None
HAVE_CACHE = _written(cache_traffic, tiny, CacheConfig(SCRATCHPAD_BYTES, LINE_BYTES, WAYS)) is not None
for name, ok in (("dma_plan", HAVE_PLAN), ("cache_traffic", HAVE_CACHE)):
    if not ok:
        print(f"{name} is not written yet: its lines are left out of the figure")
rows = []
for tile in TILES:
    t = MatmulTiling(N, N, N, tile, tile, tile, 4)
    row = {"tile": tile, "footprint KiB": footprint_bytes(tile, tile, tile, 4) / 1024,
           "fits": footprint_bytes(tile, tile, tile, 4) <= SCRATCHPAD_BYTES,
           "scratchpad": int(dma_plan(t, 1 << 40)["bytes"].sum()) if HAVE_PLAN else np.nan}
    for name, ways in caches.items():
        s = cache_traffic(t, CacheConfig(SCRATCHPAD_BYTES, LINE_BYTES, ways)) if HAVE_CACHE else {}
        row[name], row[f"hit rate {name}"] = s.get("offchip_bytes", np.nan), s.get("hit_rate", np.nan)
    rows.append(row)
cmp = pd.DataFrame(rows)
fig, ax = plt.subplots(figsize=(10, 5.2), layout="constrained")
if HAVE_PLAN:
    ax.plot(cmp["tile"], cmp["scratchpad"] / 1e6, "s-", color=SEQUENCE[4], lw=2,
            label="scratchpad: your explicit DMA schedule")
for (name, _), style in zip(caches.items(), ("o:", "o-", "^--"), strict=True):
    if HAVE_CACHE:
        ax.plot(cmp["tile"], cmp[name] / 1e6, style, label=f"LRU cache, {name} (write-back, write-allocate)")
comp = compulsory_bytes(MatmulTiling(N, N, N, 8, 8, 8, 4)) / 1e6
ax.axhline(comp, color="#444444", lw=0.8, ls="--")
ax.text(cmp["tile"].iloc[0], comp, " compulsory: A, B read once, C written once", va="bottom", fontsize=8)
too_big = cmp.loc[~cmp["fits"], "tile"]
if len(too_big):
    ax.axvspan(too_big.min() * 0.93, cmp["tile"].max() * 1.07, color="#bbbbbb", alpha=0.35, lw=0)
    ax.text(too_big.min(), ax.get_ylim()[1], " tiles do not fit the scratchpad\n (double-buffered)", va="top",
            fontsize=8)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xticks(list(cmp["tile"]), [str(t) for t in cmp["tile"]])
ax.set(xlabel="square tile edge T (elements)", ylabel="bytes moved off-chip [MB] (log scale)",
       title=f"SIMULATED {N}x{N}x{N} fp32 matmul on a toy core with {SCRATCHPAD_BYTES // 1024} KiB on chip, "
             f"{LINE_BYTES}-B lines")
ax.legend(fontsize=8, loc="upper right")
ax.grid(True, which="both", color="#dddddd", lw=0.5)
plt.show()
print(cmp.to_string(index=False, float_format=lambda v: f"{v:.3g}"))

# %% [markdown]
# Read the table, not only the lines: every hit rate is above 90 %, yet the bytes differ by 1.5–2x. Analysis Q1
# asks you why, and which memory won at the tile that fits.

# %% [markdown]
# ## Part 2 — The memory timeline of LLM inference (measured)
#
# **The principle.** During inference three kinds of bytes share memory. **Weights** are allocated once and read
# by every step. **Activations** live for one step: allocated by an op, freed once the last op that reads them has
# run. The **KV cache** is state carried *between* steps: every decode step appends one position per layer, so it
# grows linearly in tokens, for every sequence of the batch.
#
# **The vendor.** `torch.profiler.profile(profile_memory=True)` records every allocation and free with its size
# and time; `record_function("decode_3")` marks regions.
# `common.memory.memtimeline.profile_generate(LLM, ...)` runs the real model's `generate()` with a `DynamicCache` (each
# layer's K and V grow by `torch.cat`) on random prompt ids, each forward pass in a region (`prefill`,
# `decode_0`, ...), and returns the allocations (`allocs`: `bytes`, `t_alloc_ms`, `t_free_ms` — NaN if still live
# at the end —, the `region` it was made in, the `op`), the `regions` (`name`, `start_ms`, `end_ms`) and
# `weight_bytes`. On a GPU it profiles the GPU's allocations.

# %%
PROF = profile_generate(LLM, batch=GEN_BATCH, prompt=GEN_PROMPT, steps=GEN_STEPS)
print(PROF.title)
print(f"{len(PROF.allocs)} allocations in {len(PROF.regions)} regions; weights {PROF.weight_bytes / 1e6:.1f} MB "
      f"(allocated before the profile); the DynamicCache holds {PROF.meta['cache_bytes'] / 1e6:.3f} MB at the end")
print(f"GPU: torch.cuda.max_memory_allocated {PROF.meta['cuda_max_allocated'] / 1e6:.1f} MB in generate(), "
      f"{PROF.meta['cuda_before'] / 1e6:.1f} MB before; CUDA snapshot blocks: {PROF.meta['cuda_snapshot_blocks']}"
      if "cuda_max_allocated" in PROF.meta else "on the CPU: no torch.cuda.max_memory_allocated, the profiler's "
      "allocation events are the record")
print(PROF.regions.head(4).to_string(index=False))
print(PROF.allocs.sort_values("bytes", ascending=False).head(8).to_string())


# %% [markdown]
# **Spec.** `categorise(allocs, regions)`: a pandas `Series` with the same index as `allocs`, one label per
# allocation:
# - `"other"` if it was made outside every region (`region == ""`);
# - `"KV cache"` if it **outlives the region that made it**: never freed (`t_free_ms` is NaN) or freed after
#   that region's `end_ms` — it is state handed to the next step;
# - `"activations"` otherwise (made and freed inside one step).
#
# Then `kv_at_ends(frame, regions)`: from a timeline (`timeline(PROF, labels)`: a row per event time in ms, live
# bytes per category in columns), the live `"KV cache"` bytes at every region's end, a list of Python `int`s
# (`live_at(frame, t)` reads one row).

# %% nbgrader={"grade": false, "grade_id": "categorise", "locked": false, "schema_version": 3, "solution": true, "task": false}
def categorise(allocs, regions):
    """"KV cache" / "activations" / "other" per allocation (a Series with the index of allocs)."""
    ### BEGIN SOLUTION
    end = allocs["region"].map(dict(zip(regions["name"], regions["end_ms"])))
    survives = allocs["t_free_ms"].isna() | (allocs["t_free_ms"] > end)
    labels = np.where(survives, "KV cache", "activations")
    return pd.Series(np.where(allocs["region"] == "", "other", labels), index=allocs.index)
    ### END SOLUTION


def kv_at_ends(frame, regions):
    """Live KV-cache bytes at the end of every region, as a list of ints."""
    ### BEGIN SOLUTION
    return [int(live_at(frame, end)["KV cache"]) for end in regions["end_ms"]]
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "categorise_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

labels = categorise(PROF.allocs, PROF.regions)
check_type("categorise(...)", labels, pd.Series)
check_equal("same index as allocs", [int(i) for i in labels.index] == [int(i) for i in PROF.allocs.index], True)
mine = [str(x) for x in labels.tolist()]
check_equal("only the three labels", set(mine) <= {"KV cache", "activations", "other"}, True)
outside = (PROF.allocs["region"] == "").tolist()
check_equal('"other" exactly for the allocations made outside every region',
            [m == "other" for m in mine] == outside, True)
frame = timeline(PROF, mine)
ends = PROF.regions["end_ms"].tolist()
check_equal("no activation is live at the end of its step",
            all(float(live_at(frame, e).get("activations", 0.0)) == 0.0 for e in ends), True,
            hint="an allocation freed after its region's end_ms (or never: NaN) is state carried to the next step")
kv = [float(live_at(frame, e).get("KV cache", 0.0)) for e in ends]
check_equal("the KV cache grows by the same number of bytes every decode step", len(set(np.diff(kv))) == 1 and
            kv[-1] > kv[0], True, hint="compare t_free_ms with the end_ms of the allocation's own region")
mine_ends = kv_at_ends(frame, PROF.regions)
check_type("kv_at_ends(...)", mine_ends, list)
check_equal("one int per region", len(mine_ends) == len(ends) and all(type(x) is int for x in mine_ends), True)
check_equal("kv_at_ends reads the same frame you plot", [float(x) for x in mine_ends] == kv, True,
            hint="live_at(frame, end) for every end_ms")
### BEGIN HIDDEN TESTS
import numpy as _np
import pandas as _pd

from common.grading.verdicts.probe import Probe
from common.memory.memtimeline import DecodeRun as _Run, profile_decode as _profile


def _table(frame):  # a DataFrame as plain data (its index and every column)
    return {"index": [int(i) for i in frame.index], **{str(c): [None if isinstance(v, float) and v != v else v
                                                              for v in frame[c].tolist()] for c in frame.columns}}


def _synthetic(seed, n=60, steps=5):  # made-up allocations: the judgement rebuilds the same ones from the seed
    rng = _np.random.default_rng(seed)
    regions = _pd.DataFrame({"name": ["prefill"] + [f"decode_{s}" for s in range(steps - 1)],
                             "start_ms": 10.0 * _np.arange(steps) + 0.5, "end_ms": 10.0 * _np.arange(steps) + 9.5})
    which = rng.integers(-1, steps, n)
    start = _np.where(which < 0, rng.uniform(0, 10 * steps, n), 10.0 * which + rng.uniform(0.6, 9.0, n))
    life = rng.choice([0.2, 3.0, 25.0, _np.nan], n, p=[0.4, 0.2, 0.2, 0.2])
    return _pd.DataFrame({"bytes": rng.integers(1, 1 << 20, n), "t_alloc_ms": start, "t_free_ms": start + life,
                          "region": [regions["name"].iloc[w] if w >= 0 else "" for w in which], "op": ["x"] * n},
                         index=rng.permutation(n) + 100), regions


def _labels(allocs, regions):
    out = categorise(allocs, regions)
    return {"series": isinstance(out, _pd.Series), "index": [int(i) for i in out.index],
            "labels": [str(x) for x in out.tolist()]}


probe = Probe()
_a = _pd.DataFrame({"bytes": [10, 20, 30, 40, 50], "t_alloc_ms": [0.5, 1.5, 2.0, 3.5, 3.6],
                    "t_free_ms": [2.5, 1.9, _np.nan, 3.7, 9.0], "region": ["", "s0", "s0", "s1", "s1"],
                    "op": ["x"] * 5}, index=[7, 3, 5, 1, 0])
_r = _pd.DataFrame({"name": ["s0", "s1"], "start_ms": [1.0, 3.0], "end_ms": [2.9, 4.0]})
probe.send("literal", _labels(_a, _r))
probe.send("synthetic", [_labels(*_synthetic(_s)) for _s in (probe.seed, probe.seed + 1, 12345)])
# A fresh measured run (this learner's batch and prompt): its table is sent before categorise sees it.
_prof = _profile(_Run("tiny-block", batch=2 + probe.seed % 5, prompt=3 + probe.seed % 11, steps=3), torch_export=False)
probe.send("profile", {"allocs": _table(_prof.allocs), "regions": _table(_prof.regions)})
_mine = categorise(_prof.allocs.copy(), _prof.regions.copy())
probe.send("profile_labels", [str(x) for x in _mine.loc[_prof.allocs.index].tolist()])
probe.send("profile_ends", kv_at_ends(timeline(_prof, [str(x) for x in _mine.loc[_prof.allocs.index]]),
                                      _prof.regions.copy()))  # as returned: the judgement checks its type
_f = _pd.DataFrame({"weights": [1.0, 1.0, 1.0, 1.0], "KV cache": [0.0, 5.0, 7.0, 9.0]},
                   index=_pd.Index([0.0, 1.0, 2.0, 3.0], name="ms"))
probe.send("ends", kv_at_ends(_f, _pd.DataFrame({"name": ["a", "b"], "start_ms": [0.0, 1.5], "end_ms": [1.4, 2.5]})))
### JUDGEMENT
import numpy as np
import pandas as pd

from answers import categorise as reference, kv_bytes, synthetic_allocs
from common.checks import grader
from common.models import get_config

data, seed = probe.received()


def frame(sent):
    cols = {k: [np.nan if v is None else v for v in vs] for k, vs in sent.items() if k != "index"}
    return pd.DataFrame(cols, index=sent["index"])


def check(got, allocs, regions, what):
    grader.assert_equal(got["series"], True, name=f"{what}: a pandas Series")
    grader.assert_equal(sorted(got["index"]), sorted(int(i) for i in allocs.index), name=f"{what}: the index of allocs")
    mine = dict(zip(got["index"], got["labels"], strict=True))
    grader.assert_equal([mine[int(i)] for i in allocs.index], [str(x) for x in reference(allocs, regions).tolist()],
                        name=f"{what}: labels")


a = pd.DataFrame({"bytes": [10, 20, 30, 40, 50], "t_alloc_ms": [0.5, 1.5, 2.0, 3.5, 3.6],
                  "t_free_ms": [2.5, 1.9, np.nan, 3.7, 9.0], "region": ["", "s0", "s0", "s1", "s1"],
                  "op": ["x"] * 5}, index=[7, 3, 5, 1, 0])
r = pd.DataFrame({"name": ["s0", "s1"], "start_ms": [1.0, 3.0], "end_ms": [2.9, 4.0]})
check(data["literal"], a, r, "a five-allocation table")
grader.assert_equal(dict(zip(data["literal"]["index"], data["literal"]["labels"], strict=True)),
                    {7: "other", 3: "activations", 5: "KV cache", 1: "activations", 0: "KV cache"}, name="literal labels")
for s, got in zip((seed, seed + 1, 12345), data["synthetic"], strict=True):
    check(got, *synthetic_allocs(s), f"made-up allocations {s}")
# The measured run: the labels of its allocations, and the KV cache they show = the formula at every step's end
allocs, regions = frame(data["profile"]["allocs"]), frame(data["profile"]["regions"])
batch, prompt = 2 + seed % 5, 3 + seed % 11
grader.assert_equal(list(regions["name"]), ["prefill", "decode_0", "decode_1", "decode_2"], name="the profiled regions")
ref = [str(x) for x in reference(allocs, regions).tolist()]
grader.assert_equal(data["profile_labels"], ref, name="labels of a measured decode run")
kv = allocs[np.array(ref) == "KV cache"]
live = [int(kv.loc[(kv["t_alloc_ms"] <= end) & ~(kv["t_free_ms"] <= end), "bytes"].sum()) for end in regions["end_ms"]]
want = [kv_bytes(get_config("tiny-block"), prompt + s, batch, "fp32") for s in range(len(regions))]
grader.assert_equal(live, want, name="the measured run's KV cache (the answer key's labels) = the formula")
grader.assert_equal(type(data["profile_ends"]).__name__, "list", name="kv_at_ends returns a list")
grader.assert_equal([type(x).__name__ for x in data["profile_ends"]], ["int"] * len(want), name="of Python ints")
grader.assert_equal(data["profile_ends"], want, name="kv_at_ends on the measured run's timeline")
grader.assert_equal(data["ends"], [5, 7], name="live KV at region ends")
### END HIDDEN TESTS

# %%
try:
    LABELS = [str(x) for x in categorise(PROF.allocs, PROF.regions).tolist()]
except NotImplementedError:
    print("categorise is not written yet: every allocation is drawn as 'other'")
    LABELS = ["other"] * len(PROF.allocs)
FRAME = timeline(PROF, LABELS)
fig, ax = plt.subplots(figsize=(13, 4.8), layout="constrained")
plot_memory_timeline(PROF, FRAME.drop(columns="weights"), ax=ax,
                     title=PROF.title + f"\nyour categories (from the allocation events); not drawn: the weights, "
                     f"{PROF.weight_bytes / 1e6:.0f} MB, constant")
plt.show()
try:
    ENDS = kv_at_ends(FRAME, PROF.regions) if "KV cache" in FRAME.columns else None
except NotImplementedError:
    ENDS = None
if ENDS is None:
    print("categorise / kv_at_ends are not written yet: no KV-cache growth to report")
else:
    growth = np.diff(ENDS)
    print(f"'KV cache' after prefill: {ENDS[0] / 1e3:.1f} kB; after each decode step it grows by "
          f"{sorted(set(growth.tolist()))} bytes ({GEN_BATCH} sequences)")


# %% [markdown]
# Prefill spikes are **activations**, freed when the step ends. Between two forward passes `generate()` picks the
# next token from the logits: made outside every region, so "other". The weights (not drawn) would dwarf the rest.
#
# **Spec.** `kv_fit(tokens, live_bytes)`: the least-squares straight line through the points
# (`tokens[i]`, `live_bytes[i]`): a tuple `(slope, intercept)` of Python `float`s, slope in bytes per token. At the
# end of the prefill the cache holds `GEN_PROMPT` tokens per sequence, and one more after every decode step.

# %% nbgrader={"grade": false, "grade_id": "kv_fit", "locked": false, "schema_version": 3, "solution": true, "task": false}
def kv_fit(tokens, live_bytes):
    """Least-squares line live_bytes = slope * tokens + intercept: (slope, intercept) as Python floats."""
    ### BEGIN SOLUTION
    x, y = np.asarray(tokens, dtype=float), np.asarray(live_bytes, dtype=float)
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    return slope, float(y.mean() - slope * x.mean())
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "kv_fit_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

fit = kv_fit([1, 2, 3, 4], [10.0, 12.0, 14.0, 16.0])
check_type("kv_fit(...)", fit, tuple)
check_equal("two Python floats", len(fit) == 2 and all(type(v) is float for v in fit), True)
check_equal("a line through exact points", abs(fit[0] - 2.0) < 1e-9 and abs(fit[1] - 8.0) < 1e-9, True)
noisy = kv_fit([0, 1, 2, 3], [0.0, 1.0, 1.0, 3.0])
check_equal("least squares, not the two end points", abs(noisy[0] - 0.9) < 1e-9 and abs(noisy[1] + 0.1) < 1e-9,
            True, hint="slope = sum((x - mean x)(y - mean y)) / sum((x - mean x)^2)")
if ENDS is None:
    print("categorise / kv_at_ends are not written yet: the measured slope is not checked")
else:
    SLOPE, INTERCEPT = kv_fit([GEN_PROMPT + i for i in range(len(ENDS))], ENDS)
    c, elem = LLM.config, next(LLM.model.parameters()).element_size()
    FORMULA = 2 * c.n_layers * c.n_kv_heads * c.head_dim * elem  # K and V, every layer, one token of one sequence
    print(f"MEASURED slope {SLOPE:,.1f} B/token for {GEN_BATCH} sequences = {SLOPE / GEN_BATCH:,.1f} B/token per "
          f"sequence; the config's 2 x {c.n_layers} layers x {c.n_kv_heads} KV heads x {c.head_dim} x {elem} B = "
          f"{FORMULA:,} B; intercept {INTERCEPT / 1e3:,.1f} kB")
    check_equal("the measured slope per sequence = 2 x layers x kv_heads x head_dim x bytes of the config",
                abs(SLOPE / GEN_BATCH - FORMULA) < 1e-6 * FORMULA, True)
### BEGIN HIDDEN TESTS
import numpy as _np

from common.grading.verdicts.probe import Probe
from common.memory.memtimeline import profile_generate as _profile_generate, timeline as _timeline


def _table(frame):  # a DataFrame as plain data (its index and every column)
    return {"index": [int(i) for i in frame.index], **{str(c): [None if isinstance(v, float) and v != v else v
                                                              for v in frame[c].tolist()] for c in frame.columns}}


def _fit(x, y):  # the learner's fit as plain data: the type names say whether they are Python floats
    out = kv_fit(list(x), list(y))
    return {"type": type(out).__name__, "types": [type(v).__name__ for v in out], "values": [float(v) for v in out]}


probe = Probe()
_rng = _np.random.default_rng(probe.seed)
_lines = [([1, 2, 3, 4], [10.0, 12.0, 14.0, 16.0]), ([0, 1, 2, 3], [0.0, 1.0, 1.0, 3.0]),
          ([5, 9, 10, 30, 31], [7.0, 1.0, 4.0, 90.0, 100.0])]
for _k in range(3):
    _x = _np.sort(_rng.choice(1000, size=6 + 5 * _k, replace=False))
    _y = _rng.uniform(-5e4, 5e4) * _x + _rng.uniform(-1e6, 1e6) + _rng.normal(0.0, 1e3, _x.size)
    _lines.append(([int(v) for v in _x], [float(v) for v in _y]))
probe.send("fits", [_fit(_x, _y) for _x, _y in _lines])
# A fresh generate() of the lab's LLM (this learner's batch and prompt), through the learner's own pipeline
_b, _t = 2 + 2 * (probe.seed % 2), 3 + probe.seed % 9  # even batch: CUDA blocks are 512 B multiples
try:
    _prof = _profile_generate(LLM, batch=_b, prompt=_t, steps=4, seed=probe.seed % 1000)
    _sent = {"allocs": _table(_prof.allocs), "regions": _table(_prof.regions), "layers": len(LLM.model.model.layers),
             "dtype": str(next(LLM.model.parameters()).dtype)}
    _labels = [str(x) for x in categorise(_prof.allocs.copy(), _prof.regions.copy()).loc[_prof.allocs.index]]
    _ends = kv_at_ends(_timeline(_prof, _labels), _prof.regions.copy())
    _sent["fit"] = _fit([_t + _i for _i in range(len(_ends))], _ends)
except Exception as _exc:  # noqa: BLE001 - a learner's function that raises: the judgement reports the check
    _sent = {"error": type(_exc).__name__}
probe.send("generate", _sent)
### JUDGEMENT
import numpy as np
import pandas as pd

from answers import categorise, kv_line
from common.checks import grader
from common.models import get_config

data, seed = probe.received()
rng = np.random.default_rng(seed)
lines = [([1, 2, 3, 4], [10.0, 12.0, 14.0, 16.0]), ([0, 1, 2, 3], [0.0, 1.0, 1.0, 3.0]),
         ([5, 9, 10, 30, 31], [7.0, 1.0, 4.0, 90.0, 100.0])]
for k in range(3):
    x = np.sort(rng.choice(1000, size=6 + 5 * k, replace=False))
    y = rng.uniform(-5e4, 5e4) * x + rng.uniform(-1e6, 1e6) + rng.normal(0.0, 1e3, x.size)
    lines.append(([int(v) for v in x], [float(v) for v in y]))
for i, ((x, y), got) in enumerate(zip(lines, data["fits"], strict=True)):
    grader.assert_equal([got["type"], got["types"]], ["tuple", ["float", "float"]], name="kv_fit returns a tuple of two "
                        "Python floats")
    slope, intercept = kv_line(x, y)
    grader.assert_scalar(got["values"][0], slope, rel=1e-7, abs_tol=1e-6, name=f"least-squares slope, line {i}")
    grader.assert_scalar(got["values"][1], intercept, rel=1e-7, abs_tol=1e-3, name=f"least-squares intercept, line {i}")
# The measured run: the answer key's labels give a KV cache growing by the config's formula per token, and so does
# the learner's fit of their own pipeline on it
gen = data["generate"]
grader.assert_equal(sorted(gen), ["allocs", "dtype", "fit", "layers", "regions"], name="the fit of a measured "
                    "generate() run")
batch, prompt = 2 + 2 * (seed % 2), 3 + seed % 9


def frame(sent):
    return pd.DataFrame({k: [np.nan if v is None else v for v in vs] for k, vs in sent.items() if k != "index"},
                        index=sent["index"])


allocs, regions = frame(gen["allocs"]), frame(gen["regions"])
grader.assert_equal(list(regions["name"]), ["prefill", "decode_0", "decode_1", "decode_2"], name="the generate() regions")
grader.assert_equal(gen["layers"] in (2, 24) and gen["dtype"] in ("torch.float32", "torch.float16"), True,
                    name="the lab's LLM (a 2-layer cut or all 24 layers, fp32 or fp16)")
cfg = get_config("qwen2.5-0.5b-instruct")
per_token = 2 * gen["layers"] * cfg.n_kv_heads * cfg.head_dim * (4 if gen["dtype"] == "torch.float32" else 2)
kv = allocs[np.array([str(x) for x in categorise(allocs, regions)]) == "KV cache"]
live = [int(kv.loc[(kv["t_alloc_ms"] <= end) & ~(kv["t_free_ms"] <= end), "bytes"].sum()) for end in regions["end_ms"]]
ref_slope, _ = kv_line([prompt + i for i in range(len(live))], live)
grader.assert_scalar(ref_slope, batch * per_token, rel=1e-9, name="the measured KV slope = the config's formula")
grader.assert_equal(gen["fit"]["types"], ["float", "float"], name="kv_fit on the measured run")
grader.assert_scalar(gen["fit"]["values"][0], batch * per_token, rel=1e-6, name="your KV slope of a measured "
                     "generate() run = 2 x layers x kv_heads x head_dim x bytes x batch")
### END HIDDEN TESTS


# %%
try:
    FIT = kv_fit([GEN_PROMPT + i for i in range(len(ENDS))], ENDS) if ENDS is not None else None
except NotImplementedError:
    FIT = None
if FIT is not None:
    toks, c, elem = np.arange(len(ENDS)) + GEN_PROMPT, LLM.config, next(LLM.model.parameters()).element_size()
    formula = 2 * c.n_layers * c.n_kv_heads * c.head_dim * elem * GEN_BATCH  # bytes per token, whole batch
    fig, ax = plt.subplots(figsize=(8, 4.2), layout="constrained")
    ax.plot(toks, np.asarray(ENDS) / 1e3, "o", color=EMPHASIS, label="MEASURED: live 'KV cache' at each step's end")
    ax.plot(toks, (FIT[0] * toks + FIT[1]) / 1e3, "-", lw=1, label=f"your fit: {FIT[0]:,.0f} B/token")
    ax.plot(toks, (formula * (toks - toks[0]) + ENDS[0]) / 1e3, "--", lw=1, label=f"config: 2 x {c.n_layers} x "
            f"{c.n_kv_heads} x {c.head_dim} x {elem} B x batch {GEN_BATCH} = {formula:,} B/token")
    ax.set(xlabel="tokens in the cache per sequence", ylabel="live bytes [kB]", title=f"{LLM.label}\ngenerate() "
           f"with a DynamicCache, MEASURED on {PROF.meta['device']}, {PROF.meta['dtype']}")
    ax.legend(fontsize=8)
    plt.show()


# %% [markdown]
# ### Which memory ops move bytes
#
# That `torch.cat` is a real copy; many ops that *look* like data movement are not. A PyTorch tensor is a view
# (shape, strides, offset) of a storage: `view`, `reshape` of a contiguous tensor, `t()` and slicing only write
# new metadata, while an op that needs a new layout (or a second buffer) runs a copy kernel. **Bytes moved** = bytes
# the op's kernel reads + bytes it writes (0 for a metadata-only op): a copy of $N$ elements of $b$ bytes moves
# $2Nb$. An op moved nothing exactly when its result shares `x`'s storage
# (`y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()`): check yourself.
#
# **Spec.** `memory_ops(shape, dtype)`: for a contiguous tensor `x` of `shape` $(R, C)$ ($R, C \ge 2$) and a
# `torch.dtype` (`dtype.itemsize` bytes per element), a `dict` mapping each name of `MEMORY_OPS` (next cell) to the
# bytes that op moves, a Python `int`.

# %%
MEMORY_OPS = {  # name -> the op, applied to a contiguous x of shape (R, C)
    "view": lambda x: x.view(x.shape[1], x.shape[0]),
    "reshape": lambda x: x.reshape(-1),
    "slice": lambda x: x[1:],
    "transpose": lambda x: x.t(),
    "contiguous": lambda x: x.contiguous(),
    "transpose_contiguous": lambda x: x.t().contiguous(),
    "transpose_reshape": lambda x: x.t().reshape(-1),
    "clone": lambda x: x.clone(),
    "cat": lambda x: torch.cat([x, x]),
}
print("ops to classify:", ", ".join(MEMORY_OPS))


# %% nbgrader={"grade": false, "grade_id": "memory_ops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def memory_ops(shape, dtype):
    """Bytes (read + written) each op of MEMORY_OPS moves on a contiguous (R, C) tensor of dtype."""
    ### BEGIN SOLUTION
    r, c = shape
    copy = 2 * r * c * dtype.itemsize
    return {"view": 0, "reshape": 0, "slice": 0, "transpose": 0, "contiguous": 0, "transpose_contiguous": copy,
            "transpose_reshape": copy, "clone": copy, "cat": 2 * copy}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "memory_ops_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

ops = memory_ops((64, 48), torch.float32)
check_type("memory_ops(...)", ops, dict)
check_equal("one entry per op of MEMORY_OPS", sorted(ops) == sorted(MEMORY_OPS), True)
check_equal("every entry a Python int >= 0", all(type(v) is int and v >= 0 for v in ops.values()), True)
check_equal("some ops move nothing, some move bytes", 0 in ops.values() and max(ops.values()) > 0, True,
            hint="compare y.untyped_storage().data_ptr() with x's")
check_equal("bytes grow with the element count", memory_ops((128, 48), torch.float32) == {k: 2 * v for k, v in
                                                                                        ops.items()}, True)
check_equal("bytes grow with the element size", memory_ops((64, 48), torch.float16) == {k: v // 2 for k, v in
                                                                                       ops.items()}, True,
            hint="dtype.itemsize bytes per element")
### BEGIN HIDDEN TESTS
import torch as _torch

from common.grading.verdicts.probe import Probe

probe = Probe()
_cases = [((64, 48), "float32"), ((128, 48), "float32"), ((64, 48), "float16"), ((3, 5), "int8"), ((17, 2), "float64"),
          ((40, 33), "bfloat16"), ((2 + probe.seed % 50, 2 + probe.seed // 50 % 70), "int16")]
probe.send("cases", [{str(k): v for k, v in memory_ops(_shape, getattr(_torch, _d)).items()} for _shape, _d in _cases])
### JUDGEMENT
import torch

from answers import memory_ops_measured
from common.checks import grader

OPS = {  # the lab's MEMORY_OPS, written out here: the notebook's dict is the learner's to change
    "view": lambda x: x.view(x.shape[1], x.shape[0]),
    "reshape": lambda x: x.reshape(-1),
    "slice": lambda x: x[1:],
    "transpose": lambda x: x.t(),
    "contiguous": lambda x: x.contiguous(),
    "transpose_contiguous": lambda x: x.t().contiguous(),
    "transpose_reshape": lambda x: x.t().reshape(-1),
    "clone": lambda x: x.clone(),
    "cat": lambda x: torch.cat([x, x]),
}
data, seed = probe.received()
cases = [((64, 48), "float32"), ((128, 48), "float32"), ((64, 48), "float16"), ((3, 5), "int8"), ((17, 2), "float64"),
         ((40, 33), "bfloat16"), ((2 + seed % 50, 2 + seed // 50 % 70), "int16")]
for (shape, dtype), got in zip(cases, data["cases"], strict=True):
    grader.assert_equal(sorted(got), sorted(OPS), name="one entry per op of MEMORY_OPS")
    grader.assert_equal([type(v).__name__ for v in got.values()], ["int"] * len(got), name="Python ints")
    grader.assert_equal(got, memory_ops_measured(OPS, shape, getattr(torch, dtype)), name=f"memory ops {shape} {dtype}")
### END HIDDEN TESTS

# %% [markdown]
# ### A copy's bandwidth (measured)
#
# Since a copy moves $2Nb$ bytes, timing one gives the memory bandwidth a streaming kernel achieves.
#
# **Spec.** `copy_bandwidth(n_elements, bytes_per_el, seconds)`: the bytes per second a copy of `n_elements`
# elements of `bytes_per_el` bytes achieves in `seconds`, $2Nb/t$, a Python `float`.

# %% nbgrader={"grade": false, "grade_id": "copy_bandwidth", "locked": false, "schema_version": 3, "solution": true, "task": false}
def copy_bandwidth(n_elements, bytes_per_el, seconds):
    """Achieved bytes/s of a copy (read + write) of n_elements x bytes_per_el bytes in seconds."""
    ### BEGIN SOLUTION
    return float(2 * n_elements * bytes_per_el / seconds)
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "copy_bandwidth_tests", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

bw = copy_bandwidth(1000, 4, 1e-6)
check_type("copy_bandwidth(...)", bw, float)
check_equal("positive", bw > 0, True)
check_equal("proportional to the elements", math.isclose(copy_bandwidth(3000, 4, 1e-6), 3 * bw), True)
check_equal("proportional to the element size", math.isclose(copy_bandwidth(1000, 8, 1e-6), 2 * bw), True)
check_equal("twice the time, half the bandwidth", math.isclose(copy_bandwidth(1000, 4, 2e-6), bw / 2), True)
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)
_cases = [(1000, 4, 1e-6), (3000, 4, 1e-6), (1000, 8, 1e-6), (1000, 4, 2e-6), (7, 2, 0.5), (123_456, 1, 3e-5),
          (_rng.randint(10, 10**9), _rng.choice((1, 2, 4, 8)), _rng.uniform(1e-6, 1.0))]
probe.send("cases", [copy_bandwidth(*_c) for _c in _cases])
### JUDGEMENT
import random

from answers import copy_bandwidth as reference
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
cases = [(1000, 4, 1e-6), (3000, 4, 1e-6), (1000, 8, 1e-6), (1000, 4, 2e-6), (7, 2, 0.5), (123_456, 1, 3e-5),
         (rng.randint(10, 10**9), rng.choice((1, 2, 4, 8)), rng.uniform(1e-6, 1.0))]
grader.assert_equal([type(v).__name__ for v in data["cases"]], ["float"] * len(cases), name="Python floats")
for (n, b, t), got in zip(cases, data["cases"], strict=True):
    grader.assert_scalar(got, reference(n, b, t), rel=1e-9, name=f"copy bandwidth, {n} x {b} B in {t} s")
### END HIDDEN TESTS

# %% [markdown]
# Now time a real copy, `x.clone()`, on this machine (**measured**, `common.measure.bench.measure`, synced on a GPU) and
# turn the time into bandwidth with your function: on the GPU if there is one (its HBM or GDDR), else on the CPU.
# The tensor is larger than the caches, so the number is main-memory bandwidth, not cache bandwidth.

# %%
COPY_N = 2**22 if FAST else 2**24  # fp32 elements: 16 MB (FAST) or 64 MB, larger than the last-level cache
xc = torch.randn(COPY_N, device=DEVICE)
copy_run = bench.measure(xc.clone, label="x.clone()", device=DEVICE, min_run_time=0.2 if FAST else 0.5)
WHERE = bench.device_name(DEVICE) if DEVICE == "cuda" else "this CPU (no GPU here)"
try:
    copy_bw = copy_bandwidth(xc.numel(), xc.element_size(), copy_run.median_s)
    print(f"x.clone() of {xc.nbytes / 1e6:.0f} MB on {WHERE}: {copy_run.median_s * 1e3:.2f} ms (MEASURED, median of "
          f"{copy_run.n_runs} runs) -> {copy_bw / 1e9:.1f} GB/s by your copy_bandwidth")
except NotImplementedError:
    print(f"x.clone() took {copy_run.median_s * 1e3:.2f} ms (MEASURED); copy_bandwidth is not written yet")
try:
    moved = memory_ops(tuple(xc.view(1024, -1).shape), xc.dtype)
    print("bytes your memory_ops says each op would move on this tensor (as 1024 rows):",
          {k: f"{v / 1e6:.0f} MB" for k, v in moved.items()})
except NotImplementedError:
    print("memory_ops is not written yet: no table of the ops")
del xc

# %% [markdown]
# ## Part 3 — KV-cache arithmetic and each system's limit
#
# **The principle.** Each layer keeps a key and a value vector of `head_dim` numbers per KV head for every token of
# every sequence:
#
# $$\text{KV bytes} = n_\text{layers}\times 2 \times n_\text{kv heads}\times d_\text{head}\times \text{seq}\times
# \text{batch}\times \text{bytes per element}.$$
#
# Grouped-query attention (Llama 3: 8 KV heads for 32 query heads) cuts it 4x against multi-head attention. The
# element size is the dtype **in use**: fp32 (4 B) for the reference model on this CPU, bf16/fp16 (2 B) on an
# accelerator, 1 B for an int8/fp8 cache.
#
# **The vendors.** The KV cache sits beside the weights in the memory the model runs from: HBM on an H100 (80 GB)
# or a TPU v5e (16 GB per chip), on-wafer SRAM on a WSE-3 (~44 GB per wafer), the SRAM of every Groq LPU in the
# pipeline (~230 MB per chip), LPDDR5 on a Spyre card (128 GB). All capacities come from the catalog.
#
# **Spec.**
# - `kv_bytes(cfg, seq, batch, dtype, attention="gqa")`: the formula for a `ModelConfig` (`n_layers`, `n_heads`,
#   `n_kv_heads`, `head_dim`), a Python `int`; `dtype` is a `torch.dtype` or a name (`"bf16"`): use
#   `DTYPE_BYTES[canonical_dtype(str(dtype))]`. `attention` sets the K/V heads per layer: `"gqa"` the model's
#   `n_kv_heads` (grouped-query), `"mha"` one per query head, `n_heads` (multi-head), `"mqa"` one shared by all
#   query heads (multi-query).
# - `max_tokens_beside_weights(chip_name, cfg, chips, dtype)`: the largest batch × context (tokens, an `int`)
#   whose KV cache fits in `chips` chips' main memory (`get_chip(name).main_memory.total_capacity` each) beside
#   the weights (`cfg.n_params` × bytes), all in `dtype`; 0 if the weights alone do not fit.
# - `lpu_chips(cfg, batch, context, kv_dtype="fp16")`: the fewest Groq LPUs (`"groq-lpu"`, SRAM
#   `main_memory.total_capacity` each) that hold the **fp16 weights** and the KV cache of `batch` sequences of
#   `context` tokens in `kv_dtype` (serving stacks often keep an 8-bit cache, `"fp8"`, beside 16-bit weights).
#
# Worked example: Llama-3.1-8B in bf16 adds 32 × 2 × 8 × 128 × 2 = 131,072 bytes (128 KiB) per token; 8192 tokens
# take 1 GiB.

# %% nbgrader={"grade": false, "grade_id": "kv_formula", "locked": false, "schema_version": 3, "solution": true, "task": false}
def kv_bytes(cfg, seq, batch, dtype, attention="gqa"):
    """KV-cache bytes of cfg for batch sequences of seq tokens in dtype (torch.dtype or a name); attention is
    "gqa" (cfg.n_kv_heads K/V heads), "mha" (cfg.n_heads) or "mqa" (one)."""
    ### BEGIN SOLUTION
    e = DTYPE_BYTES[canonical_dtype(str(dtype))]
    heads = {"gqa": cfg.n_kv_heads, "mha": cfg.n_heads, "mqa": 1}[attention]
    return int(cfg.n_layers * 2 * heads * cfg.head_dim * seq * batch * e)
    ### END SOLUTION


def max_tokens_beside_weights(chip_name, cfg, chips, dtype):
    """Largest batch x context whose KV cache fits beside the weights in `chips` chips' main memory."""
    ### BEGIN SOLUTION
    chip = get_chip(chip_name)
    free = chips * chip.main_memory.total_capacity - cfg.n_params * DTYPE_BYTES[canonical_dtype(dtype)]
    return max(0, int(free // kv_bytes(cfg, 1, 1, dtype)))
    ### END SOLUTION


def lpu_chips(cfg, batch, context, kv_dtype="fp16"):
    """Fewest Groq LPUs whose SRAM holds fp16 weights + the KV cache of batch x context tokens in kv_dtype."""
    ### BEGIN SOLUTION
    need = cfg.n_params * DTYPE_BYTES["fp16"] + kv_bytes(cfg, context, batch, kv_dtype)
    return int(math.ceil(need / get_chip("groq-lpu").main_memory.total_capacity))
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "kv_formula_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

one = kv_bytes(cfg8b, 1, 1, "bf16")
check_type("kv_bytes(...)", one, int)
check_equal("Llama-3.1-8B, one bf16 token = the worked example", one == 131072, True,
            hint="n_layers x 2 x n_kv_heads x head_dim x seq x batch x bytes")
check_equal("linear in seq and batch", kv_bytes(cfg8b, 6, 5, "bf16") == 30 * one, True)
check_equal("a torch.dtype works like its name", kv_bytes(cfg8b, 3, 2, torch.float32) == kv_bytes(cfg8b, 3, 2, "fp32")
            == 2 * kv_bytes(cfg8b, 3, 2, "fp16"), True, hint="DTYPE_BYTES[canonical_dtype(str(dtype))]")
check_equal("the default is the model's own grouping", kv_bytes(cfg8b, 1, 1, "bf16", "gqa") == one, True)
check_equal("MHA keeps n_heads / n_kv_heads times more", kv_bytes(cfg8b, 1, 1, "bf16", "mha") * cfg8b.n_kv_heads
            == one * cfg8b.n_heads, True, hint="one K/V head per query head")
check_equal("MQA keeps one K/V head", kv_bytes(cfg8b, 1, 1, "bf16", "mqa") * cfg8b.n_kv_heads == one, True)
# Your formula against the DynamicCache of Part 2's generate(): prompt + steps - 1 tokens (the last new token is
# never fed back), every sequence, in the model's dtype.
check_equal("your formula = the bytes the real model's DynamicCache held after generate()",
            kv_bytes(LLM.config, GEN_PROMPT + GEN_STEPS - 1, GEN_BATCH, PROF.run.dtype) == PROF.meta["cache_bytes"], True,
            hint="the model's config (LLM.config) and its dtype: fp32 on a CPU, fp16 on a GPU")
### BEGIN HIDDEN TESTS
from common.grading.verdicts.probe import Probe
from common.models import get_config as _gc

probe = Probe()
_cases = [("llama-3.1-8b", 1, 1, "bf16"), ("llama-3.1-8b", 6, 5, "bf16"), ("llama-3.1-8b", 3, 2, "torch.float32"),
          ("llama-3.1-70b", 4096, 3, "bf16"), ("qwen2.5-0.5b", 1000, 7, "int8"), ("llama-2-7b", 333, 2, "torch.float16"),
          ("tiny-block", 17 + probe.seed % 1000, 1 + probe.seed % 9, "torch.float32")]
_sent = []
for _name, _seq, _b, _d in _cases:
    _dt = getattr(torch, _d.split(".")[1]) if _d.startswith("torch.") else _d
    _sent.append({"default": kv_bytes(_gc(_name), _seq, _b, _dt),
                  **{_att: kv_bytes(_gc(_name), _seq, _b, _dt, _att) for _att in ("mha", "gqa", "mqa")}})
probe.send("cases", _sent)
### JUDGEMENT
import torch

from answers import kv_bytes as reference
from common.checks import grader
from common.models import get_config

data, seed = probe.received()
cases = [("llama-3.1-8b", 1, 1, "bf16"), ("llama-3.1-8b", 6, 5, "bf16"), ("llama-3.1-8b", 3, 2, "torch.float32"),
         ("llama-3.1-70b", 4096, 3, "bf16"), ("qwen2.5-0.5b", 1000, 7, "int8"), ("llama-2-7b", 333, 2, "torch.float16"),
         ("tiny-block", 17 + seed % 1000, 1 + seed % 9, "torch.float32")]
grader.assert_equal(data["cases"][0]["default"], 131072, name="Llama-3.1-8B, one bf16 token = the worked example")
for (name, seq, batch, d), got in zip(cases, data["cases"], strict=True):
    dtype = getattr(torch, d.split(".")[1]) if d.startswith("torch.") else d
    grader.assert_equal(type(got["default"]).__name__, "int", name="a Python int")
    grader.assert_equal(got["default"], reference(get_config(name), seq, batch, dtype), name=f"kv_bytes {name} {d}")
    for att in ("mha", "gqa", "mqa"):
        grader.assert_equal(got[att], reference(get_config(name), seq, batch, dtype, att), name=f"{att} {name} {d}")
### END HIDDEN TESTS

# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "kv_limits_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

for _, row in LIMITS.iterrows():
    got = max_tokens_beside_weights(row["chip"], cfg8b, int(row["chips"]), row["dtype"])
    check_equal(f"{row['system']}: tokens beside the weights on {row['chips']}x {row['chip']} match the table below",
                type(got) is int and got == int(row["max_tokens"]), True,
                hint="(chips x main-memory capacity - weight bytes) // KV bytes per token")
n = lpu_chips(cfg8b, 1, CONTEXT)
check_type("lpu_chips(...)", n, int)
sram = get_chip("groq-lpu").main_memory.total_capacity
for kvd in ("fp16", "fp8"):
    n = lpu_chips(cfg8b, 4, CONTEXT, kvd)
    need = cfg8b.n_params * 2 + kv_bytes(cfg8b, CONTEXT, 4, kvd)
    check_equal(f"{n} LPUs hold the 16-bit weights and a {kvd} cache", n * sram >= need, True)
    check_equal(f"{n - 1} LPUs would not", (n - 1) * sram < need, True, hint="the fewest: round the chip count up")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe
from common.memory.kvcache import kv_limits as _kv_limits
from common.models import get_config as _gc

probe = Probe()
_rng = _random.Random(probe.seed)
_lim = _kv_limits("llama-3.1-8b", 8192)  # the catalog's table, made afresh
probe.send("table", [max_tokens_beside_weights(str(_row["chip"]), _gc("llama-3.1-8b"), int(_row["chips"]), str(_row["dtype"]))
                     for _, _row in _lim.iterrows()])
_beside = [("h100-sxm", "llama-3.1-70b", 8, "bf16"), ("tpu-v5e", "llama-3.1-70b", 4, "bf16"), ("spyre", "llama-2-7b", 1, "fp16"),
           ("h100-sxm", "llama-3.1-8b", 1, "fp8"), ("tpu-v5e", "llama-3.1-8b", _rng.choice((2, 4, 8)), "int8"),
           ("wse-3", "llama-3.1-8b", 1, "fp32"), ("groq-lpu", "llama-3.1-8b", 1, "fp16")]
probe.send("beside", [max_tokens_beside_weights(_chip, _gc(_m), _n, _d) for _chip, _m, _n, _d in _beside])
_lpu = [("llama-3.1-8b", 1, 8192, "fp16"), ("llama-3.1-8b", 4, 8192, "fp8"), ("llama-3.1-70b", 1, 2048, "fp16"),
        ("llama-3.1-70b", 8, 32768, "fp8"), ("llama-3.1-70b", 32, 128000, "fp16"), ("llama-3.1-70b", 16, 65536, "int8"),
        ("llama-3.1-70b", _rng.randint(2, 64), _rng.randint(1000, 100_000), _rng.choice(("fp8", "fp32")))]
probe.send("lpu", [lpu_chips(_gc(_m), _b, _ctx, _d) for _m, _b, _ctx, _d in _lpu])
probe.send("lpu_default", lpu_chips(_gc("llama-3.1-70b"), 8, 32768))
### JUDGEMENT
import random

from answers import lpu_chips as lpu_reference, max_tokens_beside_weights as beside_reference
from common.checks import grader
from common.memory.kvcache import kv_limits
from common.models import get_config

data, seed = probe.received()
rng = random.Random(seed)
limits = kv_limits("llama-3.1-8b", 8192)
grader.assert_equal(data["table"], [int(x) for x in limits["max_tokens"]], name="tokens beside the weights, Part 3 table")
beside = [("h100-sxm", "llama-3.1-70b", 8, "bf16"), ("tpu-v5e", "llama-3.1-70b", 4, "bf16"), ("spyre", "llama-2-7b", 1, "fp16"),
          ("h100-sxm", "llama-3.1-8b", 1, "fp8"), ("tpu-v5e", "llama-3.1-8b", rng.choice((2, 4, 8)), "int8"),
          ("wse-3", "llama-3.1-8b", 1, "fp32"), ("groq-lpu", "llama-3.1-8b", 1, "fp16")]
for (chip, model, n, d), got in zip(beside, data["beside"], strict=True):
    grader.assert_equal(type(got).__name__, "int", name="tokens: a Python int")
    grader.assert_equal(got, beside_reference(chip, get_config(model), n, d), name=f"tokens beside the weights, {n}x {chip} {d}")
lpu = [("llama-3.1-8b", 1, 8192, "fp16"), ("llama-3.1-8b", 4, 8192, "fp8"), ("llama-3.1-70b", 1, 2048, "fp16"),
       ("llama-3.1-70b", 8, 32768, "fp8"), ("llama-3.1-70b", 32, 128000, "fp16"), ("llama-3.1-70b", 16, 65536, "int8"),
       ("llama-3.1-70b", rng.randint(2, 64), rng.randint(1000, 100_000), rng.choice(("fp8", "fp32")))]
for (model, b, ctx, d), got in zip(lpu, data["lpu"], strict=True):
    grader.assert_equal(type(got).__name__, "int", name="LPU count: a Python int")
    grader.assert_equal(got, lpu_reference(get_config(model), b, ctx, d), name=f"LPU chips, {model} batch {b} {ctx} {d}")
grader.assert_equal(data["lpu_default"], lpu_reference(get_config("llama-3.1-70b"), 8, 32768), name="the default cache is fp16")
### END HIDDEN TESTS

# %%
show = LIMITS[["system", "chips", "chip", "kv_level", "dtype", "free_bytes", "max_tokens", "max_batch", "onchip_level",
               "onchip_bytes", "onchip_context"]].copy()
show["free_bytes"] = (show["free_bytes"] / 1e9).round(2)
show["onchip_bytes"] = (show["onchip_bytes"] / 1e6).round(1)
show = show.rename(columns={"free_bytes": "free GB", "onchip_bytes": "on-chip MB",
                            "max_batch": f"max batch @ {CONTEXT}", "onchip_context": "ctx whose 1 layer fits on-chip"})
print(f"{MODEL}: {cfg8b.kv_bytes_per_token(2) / 1024:.0f} KiB of KV per token in 16 bit (catalog capacities, formula)")
try:
    per = {att: kv_bytes(cfg8b, 1, 1, "bf16", att) for att in ("mha", "gqa", "mqa")}
    print(f"your kv_bytes, bf16 KiB per token: MHA {per['mha'] / 1024:.0f} ({cfg8b.n_heads} K/V heads), GQA "
          f"{per['gqa'] / 1024:.0f} ({cfg8b.n_kv_heads}), MQA {per['mqa'] / 1024:.0f} (1); at {CONTEXT} tokens "
          f"MHA needs {per['mha'] * CONTEXT / 2**30:.1f} GiB per sequence, GQA {per['gqa'] * CONTEXT / 2**30:.1f}")
except (NotImplementedError, TypeError, KeyError):
    print("kv_bytes (with attention) is not written yet: no MHA/GQA/MQA comparison")
print(show.to_string(index=False))
plot_kv_limits(MODEL, LIMITS, CONTEXTS)
plt.show()

# %% [markdown]
# The Spyre row is the odd one: 128 GB of LPDDR5 holds a huge cache, but every decode step streams it through
# 32 × 2 MB of LX (less the compiler's reservations) at 204.8 GB/s. The WSE and LPU rows are the opposite: there is
# no slower memory to spill to, so the cache must fit in SRAM — beside 16 GB of weights, a wafer holds a few
# hundred thousand tokens and a 75-chip LPU pipeline only a few thousand; more context means more chips.

# %% [markdown]
# ### Where the context runs out (the explorer)
#
# `EX.context(**changes)` asks the simulator's placement: where the KV cache lives (`kv_level`), whether weights +
# KV still `fits` on the `chips`, and what paging buys (`batch_contiguous`: each sequence reserves the whole
# context; `batch_paged`: only the 16-token blocks it fills).
#
# **Spec.** `longest_context(model, backend, chips, batch, dtype=None, step=256)`: the longest context, a multiple
# of `step`, whose decode step `chips` chips of `backend` still hold (0 if none; at most `max_seq_len`). Search
# `fits` (`bisect` takes a `key`): a formula misses whole-layer wafers and tied embeddings stored twice.

# %%
EX = explore(MODEL, batch=8, seq=CONTEXT, static_path="dfa_out/lab4_explorer.png")
# paged: requests that fill a quarter of the context on average
print(EX.context(mean_tokens=CONTEXT // 4).drop(columns="problem").to_string(index=False, float_format="{:.3g}".format))
EX.context_figure(CONTEXTS)  # the cell's result: the figure

# %% nbgrader={"grade": false, "grade_id": "longest_context", "locked": false, "schema_version": 3, "solution": true, "task": false}
def longest_context(model, backend, chips, batch, dtype=None, step=256):
    """Longest multiple of step at which `chips` chips of backend still hold the weights + KV cache of batch."""
    ### BEGIN SOLUTION
    def fits(k):  # k steps of context
        return EX.context(model=model, backends=(backend,), chip_counts={backend: chips}, batch=batch, dtype=dtype,
                          seq=k * step)["fits"].iloc[0]
    return step * bisect.bisect_left(range(1, get_config(model).max_seq_len // step + 1), 1, key=lambda k: not fits(k))
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "longest_context_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

n = longest_context(MODEL, "wse", 2, 16)
check_type("longest_context(...)", n, int)
fit = [bool(EX.context(backends=("wse",), chip_counts={"wse": 2}, batch=16, seq=max(s, 1))["fits"].iloc[0])
       for s in (n, n + 256)]
check_equal(f"two WSE-3 wafers at batch 16 hold {n} tokens, a multiple of 256, and not 256 more", fit + [n % 256],
            [True, False, 0], hint="the last multiple of step whose row still fits")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()
_rng = _random.Random(probe.seed)
_other = _rng.choice(("gpu", "tpu", "spyre"))
_cases = [("llama-3.1-8b", "wse", _rng.choice((3, 4)), _rng.choice((12, 16, 24, 32, 48)), None, 256),
          ("qwen2.5-0.5b", "lpu", _rng.randint(7, 10), _rng.choice((4, 8, 16)), None, 128),
          ("llama-3.1-70b", "lpu", _rng.randint(700, 1000), _rng.choice((4, 8)), _rng.choice((None, "int8")), 512),
          ("llama-3.1-8b", _other, _rng.choice({"gpu": (1, 2), "tpu": (4, 8), "spyre": (1, 2)}[_other]),
           _rng.choice((16, 32, 64)), None, 256)]
probe.send("cases", [longest_context(*_c) for _c in _cases])
### JUDGEMENT
from answers import context_cases, longest_context as reference
from common.checks import grader

data, seed = probe.received()
for case, got in zip(context_cases(seed), data["cases"], strict=True):
    model, backend, chips, batch, dtype, step = case
    grader.assert_equal(type(got).__name__, "int", name="a Python int")
    grader.assert_equal(got, reference(*case), name=f"longest context, {model} batch {batch} on {chips}x {backend} "
                                                    f"({dtype or 'native'}), step {step}")
### END HIDDEN TESTS

# %% [markdown]
# ## Part 4 — When the KV cache outgrows the fastest level (simulated)
#
# `simulate_llm(MODEL, backend, phase="decode", batch=SWEEP_BATCH, seq=s)` simulates one decode step with `s`
# cached tokens on the fewest chips whose main memory holds weights + KV cache (tensor parallel on GPU/TPU/Spyre,
# a layer pipeline on WSE/LPU). On the GPU and TPU the cache streams from HBM every step. On Spyre, attention
# stages K and V from LPDDR5 into LX sticks — K, read through a transposed view, is *re-sticked* (copied with the
# stick on the other dimension) — and what does not fit the LX budget spills back to LPDDR5. On the WSE and the
# LPU the cache stays in SRAM: more context, more wafers or chips.
#
# **Predict first.** Before you write `kv_sweep`, commit a ranking of three or more systems by how much this
# decode step slows from the shortest to the longest context, most first.

# %%
from common.explore import predict, widgets_can_render
from common.landscape import SYSTEMS, download_map, keep_on_drive, open_map, upload_map

KEEP_ON_DRIVE = False  # Colab only: True keeps your map and your predictions on Google Drive
if KEEP_ON_DRIVE and not FAST:
    keep_on_drive()
lm = open_map(4, scratch=FAST)
P_SWEEP = predict("course4.lab4.kv-slowdown", f"{MODEL} decode, batch {SWEEP_BATCH}: most slow-down over SWEEP_SEQS "
                  "first", kind="ranking", choices=tuple(SYSTEM_CHIPS), lm=lm, course=4)
if widgets_can_render():
    display(P_SWEEP.form())  # pick and commit here, or call P_SWEEP.commit([...]) in the next cell

# %% nbgrader={"grade": false, "grade_id": "predict_sweep", "locked": false, "schema_version": 3, "solution": true, "task": false}
# Your ranking, most slow-down first (three or more systems), committed before the sweep runs.
### BEGIN SOLUTION
P_SWEEP.commit(["Spyre", "LPU", "GPU", "WSE", "TPU"])
### END SOLUTION

# %% [markdown]
# **Spec.** `kv_sweep(model, backend, seqs, batch)`: one simulated decode step per `s` in `seqs`; a `DataFrame`
# with columns `seq`, `kv_bytes` (your `kv_bytes` for the `s + 1` positions the step holds, in the report's
# `dtype`), `chips` (`report.chips`), `time_s` and `bound` (`report.bottleneck`).

# %% nbgrader={"grade": false, "grade_id": "kv_sweep", "locked": false, "schema_version": 3, "solution": true, "task": false}
def kv_sweep(model, backend, seqs, batch):
    """Simulated decode step per context length: seq, kv_bytes, chips, time_s, bound."""
    ### BEGIN SOLUTION
    cfg = get_config(model)
    rows = []
    for s in seqs:
        r = simulate_llm(model, backend, phase="decode", batch=batch, seq=s)
        rows.append({"seq": s, "kv_bytes": kv_bytes(cfg, s + 1, batch, r.dtype), "chips": r.chips,
                     "time_s": r.time_s, "bound": r.bottleneck})
    return pd.DataFrame(rows)
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "kv_sweep_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import torch

from common.checks import check_equal, check_tensor, check_type

sw = kv_sweep(MODEL, "spyre", SWEEP_SEQS, SWEEP_BATCH)
check_type("kv_sweep(...)", sw, pd.DataFrame)
ref = [simulate_llm(MODEL, "spyre", phase="decode", batch=SWEEP_BATCH, seq=s) for s in SWEEP_SEQS]
check_tensor("time_s per context", torch.tensor(sw["time_s"].to_numpy(float)),
             torch.tensor([r.time_s for r in ref], dtype=torch.float64), rtol=1e-9, dtype=torch.float64)
check_tensor("kv_bytes per context", torch.tensor(sw["kv_bytes"].to_numpy(float)),
             torch.tensor([float(cfg8b.kv_bytes_per_token(2) * (s + 1) * SWEEP_BATCH) for s in SWEEP_SEQS],
                          dtype=torch.float64), rtol=1e-12, dtype=torch.float64, hint="s + 1 positions, fp16 on Spyre")
check_equal("chips", [int(c) for c in sw["chips"]], [r.chips for r in ref])
### BEGIN HIDDEN TESTS
from common.grading.verdicts.probe import Probe

probe = Probe()
_seqs = (8, 16 + probe.seed % 9)
_sent = {}
for _be in ("tpu", "lpu", "spyre"):
    _s = kv_sweep("test", _be, _seqs, 3)
    _sent[_be] = {"columns": [str(c) for c in _s.columns], **{c: [v.item() if hasattr(v, "item") else v for v in _s[c]]
                                                              for c in ("seq", "kv_bytes", "chips", "time_s", "bound")}}
probe.send("sweeps", _sent)
### JUDGEMENT
import torch

from answers import kv_bytes
from common.checks import grader
from common.models import get_config
from common.sim import simulate_llm

data, seed = probe.received()
seqs = (8, 16 + seed % 9)
for be, got in data["sweeps"].items():
    grader.assert_equal(sorted(got["columns"]), sorted(["seq", "kv_bytes", "chips", "time_s", "bound"]), name=f"{be} columns")
    runs = [simulate_llm("test", be, phase="decode", batch=3, seq=q) for q in seqs]
    grader.assert_equal([int(x) for x in got["seq"]], list(seqs), name=f"{be} seq")
    grader.assert_tensor(torch.tensor([float(x) for x in got["time_s"]], dtype=torch.float64),
                         torch.tensor([r.time_s for r in runs], dtype=torch.float64), rtol=1e-9, dtype=torch.float64,
                         name=f"{be} times")
    grader.assert_equal([int(c) for c in got["chips"]], [r.chips for r in runs], name=f"{be} chips")
    grader.assert_equal([str(b) for b in got["bound"]], [r.bottleneck for r in runs], name=f"{be} bound")
    grader.assert_equal([int(x) for x in got["kv_bytes"]], [kv_bytes(get_config("test"), q + 1, 3, r.dtype)
                                                            for q, r in zip(seqs, runs, strict=True)],
                        name=f"{be} kv_bytes: s + 1 positions in the report's dtype")
assert sorted(data["sweeps"]) == ["lpu", "spyre", "tpu"], "a sweep per backend"
### END HIDDEN TESTS

# %%
SWEEPS = {}
for system, chip in SYSTEM_CHIPS.items():
    try:
        SWEEPS[system] = kv_sweep(MODEL, system.lower(), SWEEP_SEQS, SWEEP_BATCH)
    except NotImplementedError:
        print("kv_sweep is not written yet: the figure shows only the Spyre counters, the table stays empty")
        break
try:  # the reveal (once kv_sweep is written); score = step time at the longest context / at the shortest
    if SWEEPS:
        P_SWEEP.reveal({system: df["time_s"].iloc[-1] / df["time_s"].iloc[0] for system, df in SWEEPS.items()})
        print(f"saved {lm.save()}")
except DFAError as exc:  # no ranking committed yet
    print(exc)
spyre_runs = [simulate_llm(MODEL, "spyre", phase="decode", batch=SWEEP_BATCH, seq=s) for s in SWEEP_SEQS]
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(16, 5.6), layout="constrained", width_ratios=[1.6, 1])
for system, df in SWEEPS.items():
    ax.loglog(df["kv_bytes"] / 1e9, df["time_s"] * 1e3, "o-", color=COLORS[system], label=system)
    for _, r in df.iterrows():
        ax.annotate(f"{int(r['chips'])}x", (r["kv_bytes"] / 1e9, r["time_s"] * 1e3), fontsize=7, color=COLORS[system],
                    xytext=(4, 5 if system == "LPU" else -10), textcoords="offset points")
# where one layer's K/V outgrows the largest on-chip level (GPU L2, TPU VMEM, Spyre LX; the WSE and LPU have no
# slower level: their chip counts grow instead)
for i, system in enumerate(s for s in SWEEPS if get_chip(SYSTEM_CHIPS[s]).off_chip is not None):
    chip = get_chip(SYSTEM_CHIPS[system])
    edge = onchip_bytes(chip) * int(SWEEPS[system]["chips"].iloc[0]) * get_config(MODEL).n_layers / 1e9
    ax.axvline(edge, color=COLORS[system], ls=":", lw=1)
    ax.text(edge, 0.02 + 0.3 * i, f" {system}: one layer's KV > "
            f"{max(chip.on_chip, key=lambda lv: lv.total_capacity).name}", color=COLORS[system], fontsize=7,
            rotation=90, va="bottom", transform=ax.get_xaxis_transform(),
            bbox={"fc": "white", "ec": "none", "alpha": 0.7, "pad": 1})
ax.set(xlabel="KV cache of the step [GB] (all layers, whole batch)", ylabel="decode step time [ms] (log scale)",
       title=f"SIMULATED decode of {MODEL}, batch {SWEEP_BATCH}, context {SWEEP_SEQS[0]}-{SWEEP_SEQS[-1]}\n"
             "labels: chips (or wafers, cards) the simulator needed for weights + KV")
ax.legend(fontsize=8, loc="upper left")
ax.grid(True, which="both", color="#dddddd", lw=0.5)
seqs = np.asarray(SWEEP_SEQS, float)
for key, label, style in (("lpddr_to_lx_bytes", "LPDDR5 -> LX", "s-"), ("lx_spill_bytes", "LX spills", "o--"),
                          ("restickify_bytes", "re-sticked (K transposed)", "^:")):
    ax2.loglog(seqs, [r.counters[key] / 1e9 if r.counters[key] > 0 else np.nan for r in spyre_runs], style,
               label=label)  # zero (no spill) is left out of the log axis
ax2.set(xlabel="context length [tokens]", ylabel="bytes per decode step [GB] (log scale)",
        title=f"SIMULATED Spyre counters for the same steps (fp16, {spyre_runs[0].chips} card)")
ax2.legend(fontsize=8)
ax2.grid(True, which="both", color="#dddddd", lw=0.5)
plt.show()

# %% [markdown]
# ## Analysis
#
# A few sentences each, with your numbers.

# %% [markdown]
# **Q1 (Part 1).** At the tile that fits, which moved fewer off-chip bytes in your run — the scratchpad or the
# 8-way cache — and why? Why is a hit rate above 90 % not evidence of low traffic? Name one kind of kernel for
# which you would rather have the cache.

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_cache_vs_scratchpad", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# At the largest tile that fits (T=32) the 8-way cache moved ~10-25 % fewer bytes than the explicit schedule
# (N=128: 0.54 vs 0.59 MB; N=256: 3.3 vs 4.5 MB): LRU keeps part of an A row-panel between consecutive output
# tiles, reuse the naive schedule never asks for, while still paying write-allocate fetches of every C line and
# some conflict misses. A fully associative LRU cycling over more lines than it holds evicts exactly the line it
# needs next and moves more than the scratchpad. Every hit rate is ~93-96 %: it counts element accesses, almost
# all of which hit inside a freshly fetched line; traffic is misses x line bytes, and a few % of a huge access
# count is many bytes (1.5-2x between configurations with similar hit rates). The scratchpad's bytes are the
# formula, known at compile time; a better schedule (keep the A panel resident) would beat the cache. A cache wins
# for irregular or data-dependent accesses no compiler can schedule ahead: gathers, sparse ops, pointer chasing.
# === END MARK SCHEME ===

# %% [markdown]
# **Q2 (Part 2).** In your timeline, which of weights, activations and KV cache is largest during prefill, and
# during decode? How would a cache preallocated at `max_seq` look? What, besides K and V, makes your fit's
# intercept, and how large is it?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_timeline", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# Weights: constant, allocated before the run, left out of the plot (hundreds of MB: the 151,936 x 896
# embedding alone is ~545 MB in fp32, more than all the rest). Activations: the spikes during prefill (MLP
# intermediate, attention scores ~ batch x heads x prompt^2) that drop to zero when each step ends; small in
# decode. KV cache: the band that rises by batch x 2 x layers x kv_heads x head_dim x bytes every decode step (the
# fitted slope matched the config's formula exactly). In prefill the activations peak above the cache; in decode
# the cache grows while activations stay small. With a preallocated cache the KV band would be flat at its max_seq
# size from the start - no growth, but reserved bytes that hold no token yet (see Going further). The intercept:
# the last position's logits, batch x vocab (151,936) x 4 B (~0.6 MB per sequence in fp32), made inside the forward
# pass and handed to generate()'s sampler after the region ends, so they count as "KV cache" by the rule; constant
# per step, so they move the intercept, not the slope.
# === END MARK SCHEME ===

# %% [markdown]
# **Q3 (Part 4's prediction).** What ratio did you expect per system? Explain the biggest miss.

# %%
rows = []
for system, df in SWEEPS.items():
    first, last = df.iloc[0], df.iloc[-1]
    rows.append({"system": system, f"time @ {int(first['seq'])} [ms]": round(first["time_s"] * 1e3, 3),
                 f"time @ {int(last['seq'])} [ms]": round(last["time_s"] * 1e3, 3),
                 "ratio": round(last["time_s"] / first["time_s"], 2),
                 "chips": f"{int(first['chips'])} -> {int(last['chips'])}",
                 "bound": f"{first['bound']} -> {last['bound']}"})
print(f"SIMULATED decode of {MODEL}, batch {SWEEP_BATCH}:")
print(pd.DataFrame(rows).to_string(index=False))

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_compare", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# Prediction from bytes per step: GPU and TPU stream weights (16 GB) + KV from HBM, so time grows with
# (16 GB + KV) / bandwidth - about x2-3 once KV reaches ~30-60 GB - unless more chips are added (the TPU goes from
# 2 to 4-8 chips, which splits both weights and KV: only ~x1.3-1.6). The WSE reads SRAM at PB/s: time is fabric and
# scheduling, it grows ~x2 mostly because a second wafer joins the pipeline. The LPU must hold the cache in SRAM:
# chips grow with context (73 -> 220-370) and the token crosses every chip, so ~x3-4. Spyre is hit hardest: every
# step streams the whole cache from LPDDR5 at ~150 GB/s, and once a layer's K/V outgrow LX they are re-sticked and
# spilled, adding LPDDR5 traffic - x5 at 64k, x10 at 128k. Typical miss: forgetting that adding chips (TPU, GPU at
# 128k) makes the step *faster*. Full marks: the ratio expected for each system (its ranking committed before
# the sweep), and the biggest miss explained by its mechanism (chips added, LPDDR5 streaming and spills, SRAM
# pipeline length).
# === END MARK SCHEME ===

# %% [markdown]
# **Q4 (Parts 2 and 3).** The profiled decoder grows its cache with `torch.cat`, and your `memory_ops` says what a
# cat moves. For Llama-3.1-8B in bf16, one sequence with 8192 cached tokens: how many bytes does growing the cache
# by one token move this way (all layers), against the new token's own bytes, and how long at the copy bandwidth
# you measured?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_cat_growth", "locked": false, "points": 1, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# torch.cat([cache, new]) reads the whole old cache and the new position and writes both into a new buffer:
# 2 x (8192 + 1) x 128 KiB = ~2.15 GB moved per decode step (kv_bytes(cfg8b, 8193, 1, "bf16") = ~1.07 GB, read and
# written), for 131,072 B (128 KiB) of new data: ~16,000x more than the token itself, and growing with the
# context. At the learner's measured copy bandwidth (typically 5-20 GB/s on a laptop or Colab CPU) that is
# ~0.1-0.4 s per token for the copy alone; even at HBM speed (~3 TB/s) ~0.7 ms, as much as the memory-bound step
# itself. Full marks: the ~2 x KV bytes with a number against the token's 128 KiB, and the time from their own
# measured bandwidth. (Not asked: a preallocated cache or paged blocks write only the new position in place.)
# === END MARK SCHEME ===

# %% [markdown]
# ## Landscape map
#
# This course's rows for all five systems: on-chip capacity, off-chip bandwidth and the layout constraint each
# memory imposes (catalog), the largest 8B KV cache beside the weights (your Part 3 function), and two rows you
# write:
#
# - `"on-chip memory managed by"` — who decides which bytes are on chip, and when (Part 1: a hardware cache at run
#   time, or software ahead of time);
# - `"KV-cache strategy"` — where the KV cache lives and what the system does as it grows (Parts 3 and 4).
#
# **Spec.** `MY_ROWS[attribute][system]`: for each attribute of `ATTRIBUTES` and each of the five systems, 3 to 25
# words in your own words (a phrase copied from this notebook does not count), different for every system. Name
# the mechanism (which memory, who moves the bytes); where your Part 4 sweep needed more chips or wafers for a
# longer context, say so. The check below tests the shape only; the grader also reads the words.
#
# One map serves all courses; missing catalog and simulator rows are rebuilt. On Colab,
# `KEEP_ON_DRIVE = True` (Part 4's prediction cell) keeps it on Drive.

# %%
from common.landscape.courses import alignment_constraints
from common.landscape.rows import add_rows, row_problems

chips = {s: get_chip(SYSTEM_CHIPS[s]) for s in SYSTEMS}
ALIGNMENT = alignment_constraints()  # catalog facts: the layout rule of each system's memory
ATTRIBUTES = ("on-chip memory managed by", "KV-cache strategy")
N_CELLS = len(ATTRIBUTES) * len(SYSTEMS)

# %% nbgrader={"grade": false, "grade_id": "landscape_rows", "locked": false, "schema_version": 3, "solution": true, "task": false}
MY_ROWS = {}
### BEGIN SOLUTION
MY_ROWS = {
    "on-chip memory managed by": {
        "GPU": "hardware caches (L1/L2) decide at run time; kernels also fill shared memory explicitly",
        "TPU": "the XLA compiler stages each fusion's operands into VMEM ahead of time",
        "WSE": "the compiler places weights and activations in every PE's local SRAM",
        "LPU": "the compiler schedules every SRAM read and write statically, cycle by cycle",
        "Spyre": "the compiler plans each DMA between LPDDR5 and LX; no cache",
    },
    "KV-cache strategy": {
        "GPU": "HBM, paged blocks (vLLM); caches in front",
        "TPU": "HBM pages staged into VMEM by the compiler; long contexts add chips",
        "WSE": "on-wafer SRAM next to each layer; more wafers when full",
        "LPU": "SRAM across the chip pipeline; context adds chips",
        "Spyre": "LPDDR5 blocks, streamed into LX sticks; spills past LX",
    },
}
### END SOLUTION

# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "landscape_rows_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_no_problems

check_no_problems("landscape rows", row_problems(MY_ROWS, ATTRIBUTES),
                  hint="every attribute, all five systems, 3 to 25 words each, different per system")
### BEGIN HIDDEN TESTS
from common.grading.verdicts.probe import Probe

probe = Probe()
probe.send("rows", {str(_a): {str(_s): str(_t) for _s, _t in dict(MY_ROWS.get(_a, {})).items()} for _a in ATTRIBUTES})
### JUDGEMENT
from answers import LANDSCAPE_SHOWN, LANDSCAPE_VOCAB, copied, scales_out
from common.checks import grader
from common.landscape import SYSTEMS as systems
from common.landscape.courses import alignment_constraints
from common.landscape.rows import row_problems, vocabulary_misses
from common.sim import simulate_llm as simulate

data, seed = probe.received()
rows = data["rows"]
attributes = ("on-chip memory managed by", "KV-cache strategy")
grader.assert_equal(row_problems(rows, attributes), [], name="every attribute, all five systems, 3 to 25 words, distinct")
miss = set(vocabulary_misses(rows, LANDSCAPE_VOCAB))  # a term naming the mechanism, none contradicting it
shown = (*LANDSCAPE_SHOWN, *alignment_constraints().values())
miss |= {(a, s) for a in attributes for s in systems if copied(rows[a][s], shown)}  # own words
# The evidence of the Part 4 sweep (8B, batch 4, from 1024 cached tokens), simulated here: a KV row must say that
# more context takes more chips where the simulator added chips by 65536 tokens (the FAST sweep's end), and must
# not claim it for a system that needs no more chips even at 131000 (the full sweep's end).
chip_counts = {s: [simulate("llama-3.1-8b", s.lower(), phase="decode", batch=4, seq=q).chips
                   for q in (1024, 65536, 131000)] for s in systems}  # not `chips`: a direct run shares one kernel
says = {s: scales_out(rows["KV-cache strategy"][s]) for s in systems}
miss |= {("KV-cache strategy", s) for s in systems
         if (chip_counts[s][1] > chip_counts[s][0] and not says[s]) or
         (chip_counts[s][2] == chip_counts[s][0] and says[s])}
grader.assert_in_range(1 - len(miss) / (len(attributes) * len(systems)), 0.8, 1.0,
                       name="share of landscape cells that name the right mechanism, in own words, consistent with "
                            f"the simulated sweep (cells missed: {sorted(miss)})")
### END HIDDEN TESTS

# %%
try:
    beside = {s: max_tokens_beside_weights(r["chip"], cfg8b, int(r["chips"]), r["dtype"])
              for s, (_, r) in zip(LIMITS["system"], LIMITS.iterrows(), strict=True)}
    src = "learner"
except NotImplementedError:
    beside, src = dict(zip(LIMITS["system"], LIMITS["max_tokens"], strict=True)), "catalog"
for s in SYSTEMS:
    c = chips[s]
    lm.add(s, "on-chip memory (B)", float(sum(lv.total_capacity for lv in c.on_chip)), course=4, source="catalog",
           overwrite=True)
    lm.add(s, "off-chip bandwidth (B/s)", float(c.off_chip.bandwidth) if c.off_chip else "none: SRAM only", course=4,
           source="catalog", overwrite=True)
    lm.add(s, "alignment constraint", ALIGNMENT[s], course=4, source="catalog", overwrite=True)
    lm.add(s, "KV tokens beside 8B weights (fewest chips)", int(beside[s]), course=4, source=src, overwrite=True)
rows = globals().get("MY_ROWS", {})
if row_problems(rows, ATTRIBUTES):
    print("landscape rows not written yet (MY_ROWS): the map shows the catalog rows and your Part 3 numbers")
else:
    add_rows(lm, rows, course=4)
lm.save()
fig, ax = plt.subplots(figsize=(15, 1.2 + 0.55 * len(lm.frame())), layout="constrained")
lm.render(ax=ax, title="Accelerator landscape with the Course 4 rows (catalog and learner rows labelled)")
plt.show()

# %% [markdown]
# ## Wrap-up
#
# - **A cache decides at run time, a scratchpad at compile time.** The scratchpad's bytes are a formula you can
#   optimise; the cache's depend on addresses, associativity and replacement, and a high hit rate can still mean
#   several times the compulsory traffic.
# - **Inference memory = weights (constant) + activations (per step) + KV cache (grows per token).**
# - **Views are free, copies move 2 N b bytes.** A cache grown by `torch.cat` re-copies itself every step; a
#   preallocated or paged cache writes only the new token.
# - **KV bytes = layers × 2 × kv_heads × head_dim × seq × batch × bytes.** Beside the 8B model's weights it caps
#   batch × context: ~half a million tokens on one H100, ~9,000 on the 75 Groq LPUs that hold the weights, ~850,000
#   on a Spyre card (which streams them through 64 MB of LX every step).
# - When the KV cache outgrows the fastest level, GPUs and TPUs slow down with HBM traffic, Spyre spills and
#   re-sticks, and the WSE and LPU add wafers or chips.
#
# Next: the **Dataflow Deep Dive** (`deepdive4_spyre`) follows one Spyre decode step op by op: the LPDDR5↔LX
# counters, what tile size and stick alignment do to them, and what happens when a working set exceeds a core's
# 2 MB scratchpad.

# %% [markdown]
# ## Going further (optional)
#
# Ungraded: nothing here counts toward your points, and the checks only tell you whether your code is right.
# Two sub-parts, independent of each other: the Part 1 comparison at one tile, and the paged KV-cache allocator
# that serving stacks (vLLM) use instead of a `torch.cat`-grown or contiguous cache.

# %% [markdown]
# ### Both memories at the largest tile that fits (Part 1)
#
# **Spec.** `compare_memories(n, capacity_bytes, line_bytes,
# ways)`: for the n×n×n fp32 matmul, a dict of Python `int`s: `tile` (the largest square tile, a multiple of one
# cache line of fp32 `line_bytes // 4`, whose double-buffered tiles fit `capacity_bytes`), `scratchpad` (bytes your
# `dma_plan` moves with that tile) and `cache` (bytes your `cache_traffic` moves for the same tiling through a
# `ways`-way cache of `capacity_bytes` with `line_bytes`-byte lines). Use your own functions.

# %% nbgrader={"grade": false, "grade_id": "same_capacity", "locked": false, "schema_version": 3, "solution": true, "task": false}
def compare_memories(n, capacity_bytes, line_bytes, ways):
    """Largest fitting square tile, and the off-chip bytes of the scratchpad schedule and of the cache with it."""
    ### BEGIN SOLUTION
    tile = largest_tile(capacity_bytes, 4, multiple=line_bytes // 4)
    t = MatmulTiling(n, n, n, tile, tile, tile, 4)
    return {"tile": int(tile), "scratchpad": int(dma_plan(t, capacity_bytes)["bytes"].sum()),
            "cache": int(cache_traffic(t, CacheConfig(capacity_bytes, line_bytes, ways))["offchip_bytes"])}
    ### END SOLUTION


try:
    SAME = compare_memories(N, SCRATCHPAD_BYTES, LINE_BYTES, WAYS)
    print(f"tile {SAME['tile']}: scratchpad {SAME['scratchpad'] / 1e6:.3f} MB, {WAYS}-way cache "
          f"{SAME['cache'] / 1e6:.3f} MB off-chip (compulsory "
          f"{compulsory_bytes(MatmulTiling(N, N, N, N, N, N, 4)) / 1e6:.3f} MB)")
except NotImplementedError:
    SAME = None
    print("compare_memories (or a function it uses) is not written yet")

# %%
from common.checks import check_equal, check_type

mine = compare_memories(N, SCRATCHPAD_BYTES, LINE_BYTES, WAYS)
check_type("compare_memories(...)", mine, dict)
check_equal("keys", sorted(mine), ["cache", "scratchpad", "tile"])
T, step = mine["tile"], LINE_BYTES // 4
check_type("tile", T, int)
check_equal("the tile is a multiple of one fp32 line and fits", T % step == 0 and
            footprint_bytes(T, T, T, 4) <= SCRATCHPAD_BYTES, True)
check_equal("the next multiple does not fit", footprint_bytes(T + step, T + step, T + step, 4) > SCRATCHPAD_BYTES, True)
_t = MatmulTiling(N, N, N, T, T, T, 4)
check_equal("scratchpad = the bytes of your dma_plan", mine["scratchpad"] == int(dma_plan(_t, SCRATCHPAD_BYTES)["bytes"]
            .sum()), True)
check_equal("cache = the off-chip bytes of your cache_traffic", mine["cache"] == cache_traffic(
            _t, CacheConfig(SCRATCHPAD_BYTES, LINE_BYTES, WAYS))["offchip_bytes"], True)

# %% [markdown]
# ### A paged KV-cache allocator (vLLM)
#
# **The principle.** Sequences finish at unpredictable lengths. Reserving a contiguous region of the maximum
# length for each request (what serving systems did before 2023) wastes most of it — *internal fragmentation* —
# and limits the batch. **Paging** (Kwon et al., *vLLM / PagedAttention*, SOSP 2023) splits the cache into
# fixed-size **blocks** of `block_size` token slots; each request has a **block table** (logical block → physical
# block), a new block is taken only when the last one is full, and all blocks return to the free pool when the
# request ends. The waste is then under one block per request; attention gathers K/V through the block table.
#
# **The vendors.** vLLM does this on GPUs in HBM; TPU serving stacks page the HBM cache and stream pages into
# VMEM; on Spyre the blocks live in LPDDR5 and are staged into LX in 128-byte sticks; on the WSE and the LPU the
# cache must fit in SRAM, so every wasted slot is SRAM that could hold a token.
#
# **Spec.** `PagedKVAllocator(num_blocks, block_size)` with
# - `allocate(req, n_tokens)`: a new request holding `n_tokens` (its prompt); takes ⌈n_tokens / block_size⌉
#   blocks, **the lowest free block ids first**; returns its block table (a list of `int`);
# - `append(req, n_tokens=1)`: the request grows; a new block only when its last block is full; returns the table;
# - `free(req)`: all its blocks go back to the free pool;
# - `block_table(req)` (a list), `tokens_used()` (tokens stored over all requests), `slots_allocated()`
#   (blocks held × block_size) and `num_free_blocks` (a property);
# - when the pool runs out, raise a `MemoryError`.
#
# Worked example (block_size 4, 8 blocks): `allocate("a", 5)` → `[0, 1]`; `allocate("b", 3)` → `[2]`;
# `append("a", 3)` → `[0, 1]`; `append("a")` → `[0, 1, 3]`; `free("b")`; `allocate("c", 9)` → `[2, 4, 5]`.

# %% nbgrader={"grade": false, "grade_id": "paged_allocator", "locked": false, "schema_version": 3, "solution": true, "task": false}
import heapq


class PagedKVAllocator:
    """Fixed-size KV blocks, one block table per request, lowest free block id first."""

    def __init__(self, num_blocks, block_size):
        self.num_blocks, self.block_size = num_blocks, block_size
        ### BEGIN SOLUTION
        self._free = list(range(num_blocks))  # already a heap
        self._tables, self._tokens = {}, {}
        ### END SOLUTION

    def _take(self, n):  # a helper you may use: the n lowest free block ids, or a MemoryError
        ### BEGIN SOLUTION
        if n > len(self._free):
            raise MemoryError(f"{n} blocks needed, {len(self._free)} free")
        return [heapq.heappop(self._free) for _ in range(n)]
        ### END SOLUTION

    def allocate(self, req, n_tokens):
        ### BEGIN SOLUTION
        self._tables[req] = self._take(-(-n_tokens // self.block_size))
        self._tokens[req] = n_tokens
        return list(self._tables[req])
        ### END SOLUTION

    def append(self, req, n_tokens=1):
        ### BEGIN SOLUTION
        total = self._tokens[req] + n_tokens
        self._tables[req] += self._take(max(0, -(-total // self.block_size) - len(self._tables[req])))
        self._tokens[req] = total
        return list(self._tables[req])
        ### END SOLUTION

    def free(self, req):
        ### BEGIN SOLUTION
        for b in self._tables.pop(req):
            heapq.heappush(self._free, b)
        del self._tokens[req]
        ### END SOLUTION

    def block_table(self, req):
        ### BEGIN SOLUTION
        return list(self._tables[req])
        ### END SOLUTION

    def tokens_used(self):
        ### BEGIN SOLUTION
        return sum(self._tokens.values())
        ### END SOLUTION

    def slots_allocated(self):
        ### BEGIN SOLUTION
        return self.block_size * sum(len(t) for t in self._tables.values())
        ### END SOLUTION

    @property
    def num_free_blocks(self):
        ### BEGIN SOLUTION
        return len(self._free)
        ### END SOLUTION


# %%
from common.checks import check_equal, check_type

# The worked example, checked against the rules of the spec (not against an answer key).
NUM, BS = 8, 4
a = PagedKVAllocator(NUM, BS)
held, tokens = {}, {}


def _rule_check(what, req, table, n_tokens):
    """The table a call returned: a list of ints, enough blocks, new ones the lowest that were free."""
    check_type(f"{what}: block table", table, list)
    before = held.get(req, [])
    free_before = sorted(set(range(NUM)) - {b for q, t in held.items() for b in t})
    new = table[len(before):]
    check_equal(f"{what}: the blocks it already had are kept, in order", table[:len(before)] == before, True)
    check_equal(f"{what}: ceil(tokens / block_size) blocks", len(table) == -(-n_tokens // BS), True)
    check_equal(f"{what}: new blocks are the lowest free ids, in increasing order", new == free_before[:len(new)], True)
    held[req], tokens[req] = list(table), n_tokens


for what, req, call, n in (('allocate("a", 5)', "a", lambda: a.allocate("a", 5), 5),
                           ('allocate("b", 3)', "b", lambda: a.allocate("b", 3), 3),
                           ('append("a", 3)', "a", lambda: a.append("a", 3), 8),
                           ('append("a")', "a", lambda: a.append("a"), 9)):
    _rule_check(what, req, call(), n)
a.free("b")
held.pop("b"), tokens.pop("b")
_rule_check('after free("b"), allocate("c", 9)', "c", a.allocate("c", 9), 9)
check_equal("block_table('c') is the table allocate returned", a.block_table("c") == held["c"], True)
check_equal("tokens_used() counts the tokens stored", a.tokens_used() == sum(tokens.values()), True)
check_equal("slots_allocated() = blocks held x block_size", a.slots_allocated() == BS * sum(map(len, held.values())),
            True)
check_equal("num_free_blocks = blocks not held", a.num_free_blocks == NUM - sum(map(len, held.values())), True)
try:
    a.allocate("d", BS * (a.num_free_blocks + 1))
    raised = False
except MemoryError:
    raised = True
check_equal("out of blocks raises MemoryError", raised, True)

# %% [markdown]
# ### Fragmentation on a trace
#
# `TRACE` is a seeded trace of requests with varied prompt and output lengths (log-normal, within `MAX_LEN`),
# arriving over time. `common.memory.kvcache.replay(TRACE, make_allocator, block_size, max_len)` runs continuous
# batching one decode step at a time with *your* allocator — allocate the prompt on arrival, append one token per
# step, free when done — and returns one row per step: `used` tokens, `paged` slots your allocator holds,
# `contiguous` slots a `max_len`-per-request reservation would hold, and `live` requests.
#
# **Spec.** `waste(frame)`: a dict `{"paged": w_p, "contiguous": w_c}` of slot-weighted waste over the whole
# replay, $w = 1 - \sum_\text{steps}\text{used} \,/\, \sum_\text{steps}\text{allocated}$ (Python `float`s).

# %% nbgrader={"grade": false, "grade_id": "waste", "locked": false, "schema_version": 3, "solution": true, "task": false}
def waste(frame):
    """Share of allocated slot-steps that hold no token, for the paged and the contiguous allocator."""
    ### BEGIN SOLUTION
    used = frame["used"].sum()
    return {"paged": float(1 - used / frame["paged"].sum()),
            "contiguous": float(1 - used / frame["contiguous"].sum())}
    ### END SOLUTION


# %%
from common.checks import check_equal, check_type

# a three-step toy frame: used 2, 4, 6 tokens; paged holds 4, 4, 8 slots; contiguous 8 slots per live request
toy = pd.DataFrame({"step": [0, 1, 2], "live": [1, 1, 2], "used": [2, 4, 6], "paged": [4, 4, 8],
                    "contiguous": [8, 8, 16]})
w = waste(toy)
check_type("waste(...)", w, dict)
check_equal("keys", sorted(w), ["contiguous", "paged"])
check_type("paged waste", w["paged"], float)
check_type("contiguous waste", w["contiguous"], float)
check_equal("slot-weighted, not a mean of per-step shares", abs(w["paged"] - (1 - 12 / 16)) < 1e-12 and
            abs(w["contiguous"] - (1 - 12 / 32)) < 1e-12, True,
            hint="1 - (sum of used over all steps) / (sum of allocated over all steps)")

# %%
try:
    FRAG = replay(TRACE, PagedKVAllocator, BLOCK_SIZE, MAX_LEN)
except NotImplementedError:
    FRAG = None
    print("PagedKVAllocator is not written yet: no replay to draw")
try:
    waste(pd.DataFrame({"used": [1], "paged": [2], "contiguous": [4]}))
    HAVE_WASTE = True
except NotImplementedError:
    HAVE_WASTE = False
    print("waste is not written yet: the block-size panel is left out")
sizes = (1, 4, 16, 64, 256)
by_size = {bs: waste(replay(TRACE, PagedKVAllocator, bs, MAX_LEN)) for bs in sizes} if (
    FRAG is not None and HAVE_WASTE) else {}
if FRAG is not None:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(15, 4.8), layout="constrained", width_ratios=[1.5, 1])
    ax.fill_between(FRAG["step"], FRAG["contiguous"], color="#bbbbbb", label=f"contiguous: {MAX_LEN} slots per request")
    ax.fill_between(FRAG["step"], FRAG["paged"], color=tint(SEQUENCE[0], 0.4), label=f"paged (your allocator): blocks of {BLOCK_SIZE} "
                    "slots")
    ax.plot(FRAG["step"], FRAG["used"], color=SEQUENCE[0], lw=1.2, label="tokens actually stored")
    ax.set(xlabel="decode step", ylabel="KV slots (tokens)",
           title=f"SIMULATED continuous batching of {len(TRACE)} requests (seeded trace)")
    ax.legend(fontsize=8)
    ax.grid(True, color="#dddddd", lw=0.5)
    if by_size:
        vals = [100 * by_size[b]["paged"] for b in sizes]
        bars = ax2.bar(np.arange(len(sizes)), [v if v > 0 else np.nan for v in vals], color=tint(SEQUENCE[0], 0.4),
                       edgecolor=SEQUENCE[0])
        ax2.set_xticks(np.arange(len(sizes)), [str(b) for b in sizes])
        ax2.set_xlim(-0.6, len(sizes) - 0.4)
        ax2.bar_label(bars, labels=[f"{v:.2g} %" if v > 0 else "" for v in vals], fontsize=8)
        ax2.axhline(100 * by_size[sizes[0]]["contiguous"], color="#777777", ls="--", lw=1)
        ax2.text(0, 100 * by_size[sizes[0]]["contiguous"], " contiguous pre-allocation", va="bottom", fontsize=8)
        ax2.set_yscale("log")
        for i, v in enumerate(vals):
            if v == 0:  # nothing to draw on a log axis
                ax2.text(i, ax2.get_ylim()[0], "0 %\n(no waste)", ha="center", va="bottom", fontsize=8)
        ax2.set(xlabel="block size (token slots)", ylabel="wasted slot-steps [%] (log scale)",
                title="internal fragmentation vs block size (your waste)")
        ax2.grid(True, which="both", axis="y", color="#dddddd", lw=0.5)
    plt.show()
print({b: {k: f"{100 * v:.2f} %" for k, v in w.items()} for b, w in by_size.items()})


# %% [markdown]
# **To think about.** How much did paging save on the trace, and why does a larger block waste more while a block
# of 1 is not what vLLM uses? On the WSE or the LPU, where the cache must stay in SRAM, what would fragmentation
# cost you, in chips or in batch size?
