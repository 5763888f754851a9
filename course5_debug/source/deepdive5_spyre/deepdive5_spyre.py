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
# # Course 5 · Dataflow Deep Dive — A Spyre copy that stops one stick short
#
# In the original specialization this module reads kernel descriptions produced by the real torch-spyre compiler on
# an IBM Spyre card. Here the same reading is done on the **simulated Spyre** of `common.sim` (a model of
# torch-spyre's compiler passes; every number that is not from the hardware catalog is **simulated**). The bug is
# the one the core lab plants first: `x.clone()` of 65 fp16 values returns the first 64 right and the last one
# wrong (torch-spyre issue #524). The core lab found *where* it diverges; this deep dive reads *why*, in the
# compiled kernel itself — and sees why the transfer log never showed it.
#
# **Learning objectives**
#
# - read a compiled kernel description: input/output layouts in sticks, the copy range each stick gets, the cores that own the sticks, and the DMA transfer log
# - compute, from the catalog's stick size, how many sticks N elements of a dtype need and which element range each per-stick copy must cover
# - write a checker that finds the first element a kernel's copy ranges miss, and confirm it against the values
# - explain why a correct transfer log says nothing about a compute kernel's range, and write a workaround that is correct under the planted fault
#
# **Expected time:** about 49 minutes  
# **Runtime:** a free Colab CPU runtime or any laptop (the Spyre is simulated)

# %% [markdown] include="grading"
# *(shared cell `grading`: `dfa release` writes it here)*

# %% include="setup"
# %run -m common.grading.authoring.labsource setup

# %% tags=["parameters"]
import os

# The autograder and CI run FAST (nbgrader sets NBGRADER_EXECUTION; papermill passes FAST=True).
# DFA_FAST=1 picks the same FAST setting but keeps the explorer's widgets live (NBGRADER_EXECUTION makes it print).
FAST = bool(os.environ.get("NBGRADER_EXECUTION") or os.environ.get("DFA_FAST"))
CASES = (63, 64, 65, 128)   # clone lengths (fp16) compared throughout; 65 is the failing one
N_FAIL = 65
LANDSCAPE_PATH = None       # None: the map all six courses share ($DFA_LANDSCAPE, else ~/.local/share/dataflow-labs)

# %%
# Settings derived from FAST (kept out of the parameters cell, so papermill's FAST=True reaches them).
import tempfile
import warnings

import matplotlib.pyplot as plt
import pandas as pd
import torch

from common.measure import bench
from common.chips import DTYPE_BYTES, get_chip
from common.errors import DFAError
from common.debug import kernel_text as KT
from common.sim.faults import Fault

warnings.filterwarnings("ignore", category=UserWarning)  # Dynamo's notes on recompiles are not for this lab
SIZES = (65, 200) if FAST else (1, 65, 130, 200, 1000)   # lengths the workaround is verified on in Part 4
if FAST:
    LANDSCAPE_PATH = LANDSCAPE_PATH or os.path.join(tempfile.mkdtemp(prefix="dfa_"), "landscape_map.json")
pd.set_option("display.width", 160)
pd.set_option("display.max_colwidth", 70)

SPYRE = get_chip("spyre")
STICK_BYTES = int(SPYRE.fact("stick_bytes"))
info = bench.machine_info()
print(f"this machine: {info['cpu']} ({info['cores']} cores), torch {torch.__version__}; FAST={FAST}")
print(f"catalog: {SPYRE.name} stick = {STICK_BYTES} bytes (source: {SPYRE.sources['facts.stick_bytes']})")

# The reproducer, correct and faulty, for every length in CASES: x.clone() compiled with
# torch.compile(..., backend="dfa_spyre"), with or without the planted stick_copy fault.
RUNS = {(n, faulty): KT.compile_clone(n, faulty=faulty) for n in CASES for faulty in (False, True)}
print(f"compiled {len(RUNS)} SIMULATED graphs")

# %% [markdown]
# ## Part 1 — The failing clone and its compiled kernel
#
# **Principle.** A compiled program is a list of kernels, and each kernel's description says what it reads, what it
# writes, in which layout and over which range. When a value comes back wrong but the shapes are right and nothing
# raised, the description of the kernel that produced it is the first thing to read: a range computed with the
# wrong rounding shows up there long before anyone finds it in a debugger.
#
# **Vendor.** Spyre keeps tensors in **sticks** of 128 bytes (catalog: torch-spyre's `BYTES_IN_STICK`) along the
# innermost dimension: 64 fp16 values per stick, a partial stick padded. A copy kernel is split per stick across
# the cores. Below is the simulator's listing of the failing clone (`KT.describe`): each SuperDSC op with its
# input and output layouts (`shape -> sticks (device shape)`), its cores, the range the copy writes per row, then
# one line per stick — the elements the stick holds, the elements the copy writes, the device bytes that is —,
# then the transfer log and the LPDDR5↔LX counters.
#
# *How the simulator records the bug.* The simulated compiler's own plan (`plan["copy_range_elems"]`) is correct;
# the planted `stick_copy` fault changes what the compiled graph computes. `common.debug.kernel_text` therefore
# derives the faulty kernel's range from the fault's own rule (`faults.stick_copy_stop`) and labels it
# `from the fault rule`, next to what the program records.
#
# **Spec.** `sticks_needed(n, dtype="fp16", stick_bytes=STICK_BYTES)` → `int`: how many sticks one row of `n`
# elements (`n ≥ 1`) of `dtype` (a catalog dtype name: `"fp16"`, `"bf16"`, `"fp32"`, `"int8"` …) occupies when a
# stick holds `stick_bytes` bytes (default: the catalog's, `SPYRE.fact("stick_bytes")`; a design study may ask
# about another stick size, so do not assume 128). Take the element size from `DTYPE_BYTES`. Examples with the
# catalog's stick: 65 fp16 → 2, 65 fp32 → 3, 150 int8 → 2; with 64-byte sticks 65 fp16 → 3.

# %%
print(KT.describe(RUNS[(N_FAIL, True)]))
bad = RUNS[(N_FAIL, True)]
wrong = (bad.out != bad.x).nonzero().flatten().tolist()
print(f"\nvalues: {len(wrong)} of {N_FAIL} wrong, at {wrong}: got {bad.out[wrong].tolist()}, "
      f"expected {bad.x[wrong].tolist()}")
# The same kernel compiled without the fault, next to the faulty one (range_from: where the copy range comes from)
pd.concat({label: KT.kernel_table(RUNS[(N_FAIL, faulty)]) for label, faulty in (("correct", False), ("FAULTY", True))})[
    ["op", "output", "cores_used", "split", "program_range", "copy_range", "range_from"]]


# %% nbgrader={"grade": false, "grade_id": "sticks_needed", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sticks_needed(n, dtype="fp16", stick_bytes=STICK_BYTES):
    """Sticks one row of n elements of `dtype` occupies with `stick_bytes`-byte sticks: ceil(n / per stick)."""
    ### BEGIN SOLUTION
    per_stick = stick_bytes // DTYPE_BYTES[dtype]
    return -(-int(n) // per_stick)
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "sticks_needed_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal

for n in CASES:  # what the simulated compiler decided for the fp16 clones
    compiled = len(KT.stick_ranges(RUNS[(n, False)]))
    check_equal(f"sticks_needed({n}, 'fp16')", sticks_needed(n, "fp16"), compiled,
                hint="ceil(n / (stick bytes / element bytes)); the stick size is SPYRE.fact('stick_bytes')")
check_equal("sticks_needed(65, 'fp32')", sticks_needed(65, "fp32"), 3, hint="4-byte elements: 32 per stick")
check_equal("sticks_needed(65, 'fp16', stick_bytes=64)", sticks_needed(65, "fp16", stick_bytes=64), 3,
            hint="a 64-byte stick holds 32 fp16 values")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()  # fixed cases, the visible ones, and seeded ones: any length, dtype and stick size
_rng = _random.Random(probe.seed)
_cases = [(1, "fp16", 128), (129, "fp16", 128), (150, "int8", 128), (33, "fp32", 128), (4096, "bf16", 128),
          (129, "fp16", 64), (100, "fp32", 64), (257, "int8", 256), (200, "fp16", 256), (31, "fp32", 32),
          (63, "fp16", 128), (64, "fp16", 128), (65, "fp16", 128), (128, "fp16", 128), (65, "fp32", 128),
          (65, "fp16", 64)]
_cases += [(_rng.randint(1, 5000), _rng.choice(("fp16", "bf16", "fp32", "int8")), _rng.choice((32, 64, 128, 256)))
           for _ in range(12)]
_got = [sticks_needed(_n, _dt, _sb) for _n, _dt, _sb in _cases]
probe.send("types", [type(v).__name__ for v in _got])
probe.send("sticks", [int(v) if isinstance(v, int) else None for v in _got])
### JUDGEMENT
import random

from answers import sticks_needed as reference
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
cases = [(1, "fp16", 128), (129, "fp16", 128), (150, "int8", 128), (33, "fp32", 128), (4096, "bf16", 128),
         (129, "fp16", 64), (100, "fp32", 64), (257, "int8", 256), (200, "fp16", 256), (31, "fp32", 32),
         (63, "fp16", 128), (64, "fp16", 128), (65, "fp16", 128), (128, "fp16", 128), (65, "fp32", 128),
         (65, "fp16", 64)]
cases += [(rng.randint(1, 5000), rng.choice(("fp16", "bf16", "fp32", "int8")), rng.choice((32, 64, 128, 256)))
          for _ in range(12)]
grader.assert_equal(data["types"], ["int"] * len(cases), name="sticks_needed returns Python ints")
for (n, dtype, stick), got in zip(cases, data["sticks"], strict=True):
    grader.assert_equal(got, reference(n, dtype, stick), name=f"sticks for {n} {dtype}, {stick} B")
### END HIDDEN TESTS

# %% [markdown]
# ## Part 2 — The range each per-stick copy must cover
#
# **Principle.** A copy split per stick is correct when, together, the per-stick copies write every element once:
# stick `s` of a row of `n` elements holds elements `[s·e, min((s+1)·e, n))` with `e` elements per stick, and the
# last stick of a row whose length is not a multiple of `e` holds fewer than `e` — plus padding slots nobody
# should read. A range computed as a whole number of sticks *rounded down* (`n // e` sticks) forgets that last
# partial stick; rounded up, it would be right.
#
# **Spec.** `stick_copy_range(n, stick, dtype="fp16")` → a tuple `(start, stop)` of two `int`s: the elements of an
# `n`-element row that stick number `stick` holds, i.e. the range its copy must cover. Raise `ValueError` if
# `stick` is not in `range(sticks_needed(n, dtype))`. Examples: `(65, 1)` → `(64, 65)`; `(128, 1)` → `(64, 128)`;
# `(63, 0)` → `(0, 63)`; `(65, 2)` → `ValueError`.

# %% nbgrader={"grade": false, "grade_id": "stick_copy_range", "locked": false, "schema_version": 3, "solution": true, "task": false}
def stick_copy_range(n, stick, dtype="fp16"):
    """(start, stop): the elements of an n-element row held by stick number `stick`."""
    ### BEGIN SOLUTION
    per_stick = STICK_BYTES // DTYPE_BYTES[dtype]
    if not 0 <= stick < -(-n // per_stick):
        raise ValueError(f"stick {stick} out of range for {n} {dtype} elements")
    return (stick * per_stick, min((stick + 1) * per_stick, n))
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "stick_copy_range_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal

check_equal("stick_copy_range(65, 1)", stick_copy_range(65, 1), (64, 65), hint="the last stick holds 1 element")
check_equal("stick_copy_range(128, 1)", stick_copy_range(128, 1), (64, 128))
check_equal("stick_copy_range(63, 0)", stick_copy_range(63, 0), (0, 63))
try:
    stick_copy_range(65, 2)
    raised = False
except ValueError:
    raised = True
check_equal("stick 2 of a 65-element row raises ValueError", raised, True)
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()  # fixed cases (the visible ones too) and seeded ones, each answered as a range or an error
_rng = _random.Random(probe.seed)
_cases = [(65, 1, "fp16"), (128, 1, "fp16"), (63, 0, "fp16"), (65, 2, "fp16"), (130, 2, "fp16"), (100, 0, "fp32"),
          (100, 3, "fp32"), (300, 2, "int8"), (1, 0, "fp16"), (4096, 63, "fp16"), (64, 1, "fp16"), (33, 2, "fp32"),
          (10, -1, "fp16")]
for _ in range(12):
    _n, _dt = _rng.randint(1, 3000), _rng.choice(("fp16", "bf16", "fp32", "int8"))
    _cases.append((_n, _rng.randint(-1, _n // 16 + 1), _dt))
_got = []
for _n, _st, _dt in _cases:
    try:
        _r = stick_copy_range(_n, _st, _dt)
        _got.append([type(_r).__name__, [int(v) if type(v) is int else repr(v) for v in _r]])
    except ValueError:
        _got.append(["ValueError", None])
    except Exception as _exc:
        _got.append([type(_exc).__name__, None])
probe.send("ranges", _got)
### JUDGEMENT
import random

from answers import stick_copy_range as reference
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
cases = [(65, 1, "fp16"), (128, 1, "fp16"), (63, 0, "fp16"), (65, 2, "fp16"), (130, 2, "fp16"), (100, 0, "fp32"),
         (100, 3, "fp32"), (300, 2, "int8"), (1, 0, "fp16"), (4096, 63, "fp16"), (64, 1, "fp16"), (33, 2, "fp32"),
         (10, -1, "fp16")]
for _ in range(12):
    n, dtype = rng.randint(1, 3000), rng.choice(("fp16", "bf16", "fp32", "int8"))
    cases.append((n, rng.randint(-1, n // 16 + 1), dtype))
for (n, stick, dtype), got in zip(cases, data["ranges"], strict=True):
    want = reference(n, stick, dtype)
    if want is None:
        grader.assert_equal(got[0], "ValueError", name=f"stick {stick} of {n} {dtype} must raise ValueError")
    else:
        grader.assert_equal(got, ["tuple", list(want)], name=f"range of stick {stick} of {n} {dtype}")
### END HIDDEN TESTS

# %%
def required_range(n, s):
    try:
        return stick_copy_range(n, s)
    except (NameError, NotImplementedError):  # not written yet: the simulator's own per-stick layout
        NOTES.add("stick_copy_range is not written yet: 'must cover' is the simulator's own layout")
        return KT.stick_ranges(RUNS[(n, False)])["elements"][s]


NOTES = set()


rows = []
for (n, faulty), run in RUNS.items():
    for _, s in KT.stick_ranges(run).iterrows():
        need = required_range(n, s.stick)
        rows.append({"N": n, "compile": "FAULTY" if faulty else "correct", "stick": s.stick, "core": s.core,
                     "must cover": need, "kernel copies": s.copied, "device bytes": s.bytes,
                     "verdict": "ok" if tuple(s.copied) == tuple(need) else f"MISSES {s.missed}"})
if NOTES:
    print(*NOTES, sep="\n")
pd.DataFrame(rows)


# %% [markdown]
# ## Part 3 — A coverage checker, and the picture stick by stick
#
# **Principle.** Reading one listing by eye works for 2 sticks, not for a model with thousands of copies. A checker
# takes the ranges a kernel's copies cover and the length they must cover, and names the first element nobody
# writes: that is both the bug report ("element 64 of 65 is never written") and, if the checker is right, the
# first wrong value you would find by comparing outputs.
#
# **Spec.** `first_uncovered(ranges, n)` → the smallest `int` `i` in `range(n)` that no half-open range
# `(start, stop)` in `ranges` contains, or `None` if every element is covered. Ranges may come in any order,
# overlap, be empty (`start == stop`) or reach past `n`. Example: `[(0, 64), (64, 64)]`, `n = 65` → `64`;
# `[(64, 65), (0, 64)]`, `n = 65` → `None`. The kernel's ranges are the `copied` column of
# `KT.stick_ranges(run)`.

# %% nbgrader={"grade": false, "grade_id": "first_uncovered", "locked": false, "schema_version": 3, "solution": true, "task": false}
def first_uncovered(ranges, n):
    """First element of range(n) not inside any half-open (start, stop) range, or None."""
    ### BEGIN SOLUTION
    for i in range(n):
        if not any(a <= i < b for a, b in ranges):
            return i
    return None
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "first_uncovered_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal

faulty_ranges = [tuple(r) for r in KT.stick_ranges(RUNS[(N_FAIL, True)])["copied"]]
correct_ranges = [tuple(r) for r in KT.stick_ranges(RUNS[(N_FAIL, False)])["copied"]]
check_equal("first element the faulty 65-element copy misses", first_uncovered(faulty_ranges, N_FAIL), 64)
check_equal("the correct copy covers everything", first_uncovered(correct_ranges, N_FAIL), None,
            hint="return None when every element is covered")
check_equal("ranges in any order", first_uncovered([(64, 65), (0, 64)], 65), None)
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()  # fixed cases (the visible ones too) and seeded ranges: any order, overlapping, empty, past n
_rng = _random.Random(probe.seed)
_cases = [([], 3), ([(0, 10)], 4), ([(2, 5), (0, 2)], 6), ([(1, 1), (0, 1)], 2), ([(0, 3), (4, 9)], 9),
          ([(0, 64), (64, 64)], 65), ([(64, 65), (0, 64)], 65), ([(0, 64), (64, 65)], 65)]
for _ in range(24):
    _n = _rng.randint(1, 300)
    _cases.append(([tuple(sorted((_rng.randint(0, _n + 5), _rng.randint(0, _n + 5))))
                    for _ in range(_rng.randint(0, 6))], _n))
_got = [first_uncovered([tuple(r) for r in _r], _n) for _r, _n in _cases]  # each call on its own copy
probe.send("first", [v if v is None or type(v) is int else repr(v) for v in _got])
### JUDGEMENT
import random

from answers import first_uncovered as reference
from common.checks import grader

data, seed = probe.received()
rng = random.Random(seed)
cases = [([], 3), ([(0, 10)], 4), ([(2, 5), (0, 2)], 6), ([(1, 1), (0, 1)], 2), ([(0, 3), (4, 9)], 9),
         ([(0, 64), (64, 64)], 65), ([(64, 65), (0, 64)], 65), ([(0, 64), (64, 65)], 65)]
for _ in range(24):
    n = rng.randint(1, 300)
    cases.append(([tuple(sorted((rng.randint(0, n + 5), rng.randint(0, n + 5)))) for _ in range(rng.randint(0, 6))], n))
for (ranges, n), got in zip(cases, data["first"], strict=True):
    grader.assert_equal(got, reference(ranges, n), name=f"first_uncovered({ranges}, {n})")
### END HIDDEN TESTS

# %%
def safe_first_uncovered(ranges, n):
    """Your first_uncovered, or the string "not written yet" while it is a stub."""
    try:
        return first_uncovered(ranges, n)
    except (NameError, NotImplementedError):
        if not FALLBACK_NOTED:
            print("first_uncovered is not written yet: its column says so")
            FALLBACK_NOTED.append(True)
        return "not written yet"


FALLBACK_NOTED = []


rows = []
for (n, faulty), run in RUNS.items():
    first = safe_first_uncovered([tuple(r) for r in KT.stick_ranges(run)["copied"]], n)
    wrong = (run.out != run.x).nonzero().flatten().tolist()
    rows.append({"N": n, "compile": "FAULTY" if faulty else "correct",
                 "first uncovered (kernel)": "none" if first is None else first,  # yours
                 "first wrong value (numerics)": wrong[0] if wrong else "none", "wrong values": len(wrong)})
print(pd.DataFrame(rows).to_string(index=False))

cases = {f"N={n} {'FAULTY' if f else 'correct'}": RUNS[(n, f)] for n in CASES for f in (False, True)}
ax = KT.coverage_map(cases)
ax.set_title(f"SIMULATED Spyre, fp16 clone compiled with dfa_spyre: what each per-stick copy writes "
             f"({STICK_BYTES}-byte sticks, catalog)", fontsize=10)
plt.show()

# %% [markdown]
# ## Part 4 — Why the transfer log looked right, and a workaround
#
# **Principle.** A transfer log (a DMA trace, a profiler's memcpy rows) records what moved between memories, not
# what a compute kernel then did with it. The DMA engine moves whole sticks, padding included: 65 fp16 values are
# 2 sticks = 256 bytes in and 256 bytes out, with or without the bug. The faulty kernel received every byte it
# needed and wrote only 64 elements of them. Below, the two logs side by side.
#
# **A workaround** changes the program so that the faulty rule can no longer drop anything, until the compiler is
# fixed: e.g. pad the innermost dimension to a whole number of sticks (then `n // e` sticks *is* every stick),
# copy, and slice back — or split off the tail. It keeps the copy and makes the faulty range right. Expressing the
# copy as an op that is not a copy kernel (`x * 1`) routes around the fault without fixing anything: the next copy
# in the model meets it again, so it does not count here.
#
# **Spec.** `safe_clone(x)` → a new tensor (not `x` itself, not a view of it) equal to what a *correct* compile of
# `x.clone()` returns, built from torch ops, for `x` of any shape and dtype (the elements per stick depend on
# `x.element_size()`; the stick size is `STICK_BYTES`). It is checked by compiling it with `dfa_spyre` **with the
# stick_copy fault planted** (`KT.run_with_fault(safe_clone, x, seed)`) for several lengths, dtypes and seeds, and
# once with the fault on *every* copy kernel (`KT.run_with_every_copy_faulty`): your graph must still copy — its
# faulty copies must carry all of `x`'s elements (`KT.faulty_copy_elements`) — and still come back right.

# %%
logs = pd.concat({label: KT.transfer_log(RUNS[(N_FAIL, faulty)]) for label, faulty in (("correct", False),
                                                                                       ("FAULTY", True))})
print(logs.to_string())
same = KT.transfer_log(RUNS[(N_FAIL, False)]).equals(KT.transfer_log(RUNS[(N_FAIL, True)]))
print(f"\nSIMULATED transfer logs identical: {same}; counters identical: "
      f"{RUNS[(N_FAIL, False)].report.counters == RUNS[(N_FAIL, True)].report.counters}")

# %% nbgrader={"grade": false, "grade_id": "safe_clone", "locked": false, "schema_version": 3, "solution": true, "task": false}
import torch.nn.functional as F


def safe_clone(x):
    """x.clone() that survives the stick_copy bug: pad to whole sticks, copy, slice back."""
    ### BEGIN SOLUTION
    per_stick = STICK_BYTES // x.element_size()
    n = x.shape[-1]
    padded = F.pad(x, (0, -n % per_stick))  # (..., whole sticks)
    return padded.clone()[..., :n]
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "safe_clone_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_tensor

for n in SIZES:
    x = KT.clone_input(n)
    want = KT.run_compiled(lambda t: t.clone(), x).out  # a correct compile
    got = KT.run_with_fault(safe_clone, x)
    check_tensor(f"safe_clone under the fault, {n} fp16", got, want, atol=0, rtol=0,
                 hint="pad the last dimension to a multiple of the elements per stick, clone, slice back")
    check_equal(f"safe_clone returns a new tensor ({n} fp16)",
                got.untyped_storage().data_ptr() != x.untyped_storage().data_ptr(), True)
    every = KT.run_with_every_copy_faulty(safe_clone, x)
    check_equal(f"safe_clone still copies all {x.numel()} elements through a copy kernel ({n} fp16)",
                every is not None and KT.faulty_copy_elements(every) >= x.numel(), True,
                hint="fix the range the faulty copy covers (pad to whole sticks); do not route around the copy")
    check_tensor(f"safe_clone with every copy faulty, {n} fp16", every.out if every else x * 0, want, atol=0, rtol=0)
### BEGIN HIDDEN TESTS
import random as _random

import torch as _torch

from common.grading.verdicts.probe import Probe
from common.debug import kernel_text as _KT

probe = Probe()  # fresh inputs of seeded shapes and dtypes, each compiled with the stick_copy fault planted
_rng = _random.Random(probe.seed)
_cases = [((130,), "float16"), ((3, 100), "float16"), ((65,), "float32"), ((257,), "int8"), ((65,), "float16"),
          ((200,), "float16")]
_cases += [((_rng.randint(1, 4), _rng.randint(1, 400)), _rng.choice(("float16", "float32", "int8"))) for _ in range(3)]
probe.send("tools", [f.__code__.co_filename for f in (_KT.run_with_fault, _KT.run_compiled,
                                                       _KT.run_with_every_copy_faulty, _KT.faulty_copy_elements,
                                                       _KT.planted)])  # not rebound
for _i, (_shape, _dt) in enumerate(_cases):
    _dtype = getattr(_torch, _dt)
    _x = (_KT.clone_input(_shape, _dtype, seed=probe.seed + _i) if _dtype.is_floating_point
          else _torch.randint(1, 100, _shape, generator=_torch.Generator().manual_seed(probe.seed + _i), dtype=_dtype))
    _got = _KT.run_with_fault(safe_clone, _x, seed=probe.seed % 7 + _i)
    _every = _KT.run_with_every_copy_faulty(safe_clone, _x)  # None: no copy kernel for the fault to hit
    probe.send(f"case{_i}", {"out": _got if isinstance(_got, _torch.Tensor) else None,
                             "new": isinstance(_got, _torch.Tensor)
                             and _got.untyped_storage().data_ptr() != _x.untyped_storage().data_ptr(),
                             "every_out": _every.out if _every is not None and isinstance(_every.out, _torch.Tensor)
                             else None,
                             "faulty_copy_elements": None if _every is None else int(_KT.faulty_copy_elements(_every))})
### JUDGEMENT
import random

import torch

from common.checks import grader
from common.debug import kernel_text as KT

data, seed = probe.received()
rng = random.Random(seed)
cases = [((130,), "float16"), ((3, 100), "float16"), ((65,), "float32"), ((257,), "int8"), ((65,), "float16"),
         ((200,), "float16")]
cases += [((rng.randint(1, 4), rng.randint(1, 400)), rng.choice(("float16", "float32", "int8"))) for _ in range(3)]
for path in data["tools"]:
    grader.assert_equal(path.replace("\\", "/").endswith("common/debug/kernel_text.py"), True,
                        name="the probe compiled with the simulator's own run_with_fault")
for i, (shape, dt) in enumerate(cases):
    dtype = getattr(torch, dt)
    x = (KT.clone_input(shape, dtype, seed=seed + i) if dtype.is_floating_point
         else torch.randint(1, 100, shape, generator=torch.Generator().manual_seed(seed + i), dtype=dtype))
    want = KT.run_compiled(lambda t: t.clone(), x).out  # a correct compile
    got = data[f"case{i}"]
    grader.assert_type(got["out"], torch.Tensor, name=f"safe_clone {shape} {dt} returns a tensor")
    grader.assert_tensor(got["out"], want, atol=0, rtol=0, name=f"safe_clone {shape} {dt} under the fault")
    grader.assert_equal(got["new"], True, name=f"safe_clone {shape} {dt} returns a new tensor")
    # Fixed, not avoided: with the fault on every copy kernel the graph still copies all of x, and is still right.
    grader.assert_equal(got["faulty_copy_elements"] is not None and got["faulty_copy_elements"] >= x.numel(), True,
                        name=f"safe_clone {shape} {dt} copies all {x.numel()} elements through the faulty copy "
                             "(a workaround that avoids copying routes around the fault)")
    grader.assert_type(got["every_out"], torch.Tensor, name=f"safe_clone {shape} {dt}, every copy faulty")
    grader.assert_tensor(got["every_out"], want, atol=0, rtol=0, name=f"safe_clone {shape} {dt}, every copy faulty")
### END HIDDEN TESTS

# %%
try:
    safe_clone(KT.clone_input(4))  # eagerly first: is it written yet?
    fixed = KT.run_compiled(safe_clone, KT.clone_input(N_FAIL), faults=[Fault("stick_copy")])
    print(KT.describe(fixed))
    print(f"\nSIMULATED values right under the fault: {torch.equal(fixed.out, fixed.x)}")
except (NameError, NotImplementedError):
    print("safe_clone is not written yet")
except DFAError as err:  # a workaround without any copy kernel: the fault has nowhere to go
    print(f"no copy kernel in your workaround ({err}): it routes around the fault instead of fixing it")

# %% [markdown]
# ## Analysis
#
# Answer in a few sentences each, with numbers from your runs (graded by hand).

# %% [markdown]
# **Q1 (why the transfer log looked correct).** Using the two transfer logs and the stick listing of Part 4: how
# many bytes did the DMA move in each direction for the faulty 65-element clone, and why is that exactly the same
# as for the correct one? What *would* have revealed the bug without comparing values, and which layer of the
# course's failure taxonomy does it belong to?

# %% [markdown] nbgrader={"grade": true, "grade_id": "dd_q_transfer_log", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# 256 bytes in and 256 out (2 sticks of 128 B: 130 bytes of data + 126 of padding), identical with and without
# the fault, because the DMA moves whole sticks of the stored layout and the layout was right. The bug is in the
# compute (copy) kernel's range: it writes elements [0, 64) only — n // 64 whole sticks, rounded down — so the
# second stick, though transferred, is never written. A transfer log records movement, not coverage. What reveals
# it: the kernel description (copy range [0, 64) vs a 65-element output; stick 1 copies [64, 64)), or a coverage
# check like first_uncovered over the kernel's ranges. Taxonomy: layout and tiling / code generation (a range
# computed in whole sticks), not memory placement or DMA. Full marks: 256 B each way, why equal, kernel range vs
# transfer, layer named.
# === END MARK SCHEME ===

# %% [markdown]
# **Q2 (comparative prediction: the same class of bug on the other four stacks).** The bug is a tail lost when a
# length is not a multiple of the hardware's layout granule. For the GPU, the TPU, the WSE and the LPU, name the
# granule a compiled kernel's range is computed in (use catalog facts where they exist), predict which lengths
# would fail and how the symptom would show (which elements, which tool shows it), and say whether their
# transfer logs would reveal it. Check one prediction: compile a 65-element clone on one other simulated backend
# (`torch.compile(lambda t: t.clone(), backend="dfa_gpu", options={"faults": [Fault("stick_copy")]})`) and
# say what the planted rule does there.

# %% [markdown] nbgrader={"grade": true, "grade_id": "dd_q_other_stacks", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# GPU: a kernel's grid is computed in blocks (e.g. BLOCK elements per program in Triton); a grid of n // BLOCK
# blocks instead of ceil(n / BLOCK), or a missing mask on the last block, drops (or overreads) the tail: lengths
# not a multiple of BLOCK fail, the last n mod BLOCK elements are wrong, a memcpy/Nsight trace still shows the
# full buffer moved. TPU: arrays are tiled in (8, 128) tiles (catalog sublanes x lanes) and padded; a bounds bug on
# the last partial tile loses the tail of the last 128 lanes or 8 rows — visible in the HLO/LLO tiling, not in HBM
# transfer counts. WSE: a tensor is split across PEs; a remainder not assigned to any PE when n is not divisible
# by the PE count leaves the tail unwritten; the fabric traffic looks complete. LPU: vectors have a fixed length;
# a length not a multiple of it needs padding, and a wrong stream length drops the tail. In all four the transfer
# log shows the right bytes; only the kernel's range (or a value comparison) reveals it. The planted rule on
# dfa_gpu uses the default 128-byte granule (64 fp16): the same element 64 is lost. Full marks: granule per
# system, failing lengths, tail symptom, logs do not show it, one check run.
# === END MARK SCHEME ===

# %% [markdown]
# ## Landscape map
#
# Add this deep dive's rows to the map you keep across the courses (the same file as the core lab; `overwrite=True`
# refreshes them on a re-run): Spyre's copy granule (catalog), the first element the faulty clone misses and the
# bytes its DMA moved (simulated), and the workaround you verified (learner).

# %%
from common.landscape import open_map

bad = RUNS[(N_FAIL, True)]
first = safe_first_uncovered([tuple(r) for r in KT.stick_ranges(bad)["copied"]], N_FAIL)
dma = KT.transfer_log(bad).query("kind == 'dma'")
LM = open_map(5, LANDSCAPE_PATH, scratch=FAST)
LM.add("Spyre", "layout granule a copy range is computed in (bytes)", STICK_BYTES, course=5, source="catalog",
       overwrite=True)
if isinstance(first, int):
    LM.add("Spyre", f"debug: first element a faulty {N_FAIL}-elem fp16 clone misses", first, course=5,
           source="simulated", overwrite=True)
else:
    print("first_uncovered is not written yet (or found nothing): no row for the first missed element")
LM.add("Spyre", f"debug: DMA bytes in, faulty {N_FAIL}-elem clone (same as correct)", float(dma["lpddr_read"].sum()),
       course=5, source="simulated", overwrite=True)
LM.add("Spyre", "debug: stick-boundary workaround", "pad to whole sticks, copy, slice", course=5, source="learner",
       overwrite=True)
print(f"saved {LM.save()}")
ax = LM.render(title=f"Accelerator landscape map after the Course 5 Deep Dive ({len(LM)} cells)")
plt.show()

# %% [markdown]
# ## Wrap-up
#
# - A wrong value with the right shape and no error: read the **kernel description** of the op that produced it —
#   layouts, ranges, cores — before the values.
# - On Spyre a copy is planned per 128-byte **stick**; a range of `n // e` whole sticks forgets the last partial
#   stick, so 65 fp16 elements lose one while 63, 64 and 128 come back right. Always test lengths just above a
#   granule.
# - A **transfer log** shows what moved (whole sticks, padding included), not what a kernel computed: it was
#   identical for the faulty and the correct compile.
# - A workaround (pad to whole sticks, copy, slice) buys time; the fix belongs in the compiler, and the reproducer
#   (one `clone` of 65 fp16 values) is the bug report.
#
# Back to the core lab (`lab5_debug`) for the other planted bugs and the taxonomy across the five systems.
