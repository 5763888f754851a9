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
# # Course 5 · Lab: Debugging across dataflow stacks — planted bugs and PyTorch's own stack
#
# On a dataflow accelerator a wrong result or a slowdown shows up far from its cause. This lab gives you a taxonomy to name the layer, tools to localise and reduce, three bugs planted for *you* (picked by your learner id) in the simulated IBM Spyre stack (`common.sim`, backend `spyre`; a fourth is optional, under Going further), and a bisection of PyTorch's real CPU compiler stack. Times on the Spyre are *simulated*; hardware numbers come from the catalog.
#
# **Learning objectives**
#
# - classify failures into an eight-layer taxonomy, from graph capture to numerics, on five stacks
# - find the first diverging node of a compiled graph against a CPU reference
# - reduce a failing graph to a 1-minimal reproducer that fails the same way (delta debugging)
# - work around a stick-boundary copy bug and a hang on the simulated Spyre
# - bisect eager → aot_eager → inductor on your GPU (else the CPU) and tell a real bug from rounding noise against an fp64 truth
# - bound a timing region, split it into kernel, transfer and host time, compare with the optimum, and remove a CPU fallback
#
# **Expected time:** about 120 minutes (plus about 22 optional)  
# **Runtime:** Colab CPU runtime (2 vCPUs) or any laptop; a GPU, when there is one, runs Part 3's measured cells (the Spyre stack is simulated)

# %% [markdown] include="grading"
# *(shared cell `grading`: `dfa release` writes it here)*

# %% include="setup"
# %run -m common.grading.authoring.labsource setup

# %% tags=["parameters"]
import os

# Learner defaults. CI and the autograder run the FAST setting (nbgrader sets NBGRADER_EXECUTION; papermill
# passes FAST=True): fewer extra checks, the same bugs.
# DFA_FAST=1 picks the same FAST setting but keeps the explorer's widgets live (NBGRADER_EXECUTION makes it print).
FAST = bool(os.environ.get("NBGRADER_EXECUTION") or os.environ.get("DFA_FAST"))
LEARNER_ID = "demo-learner"   # <- put your course id here: it picks YOUR planted bugs

# %% deletable=false editable=false nbgrader={"grade": false, "grade_id": "settings", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Settings (kept out of the parameters cell). Your visible bugs come from your learner id alone; the grader
# also tests your functions on variants you never see.
import logging
import warnings

warnings.filterwarnings("ignore")  # tracing warnings from torch.fx / FakeTensor are not part of the lab
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch.fx as fx
import torch.nn.functional as F

from common.palette import EMPHASIS, SEQUENCE
from common.chips import get_chip
from common.debug import bugs, taxonomy
from common.debug.divergence import first_divergence
from common.debug.reducer import Failure, Reproducer, is_one_minimal, reduce, same_failure
from common.debug.timing import timing_region
from common.measure.lab_device import lab_device
from common.sim import faults

SEED = bugs.learner_seed(LEARNER_ID)
BUGS = bugs.learner_bugs(LEARNER_ID)
STICK_ELEMS = int(get_chip("spyre").fact("stick_bytes")) // 2  # fp16 elements per 128-byte stick (catalog)
# A fixed output must match the CPU within max|diff| <= TOL x max|CPU|: the simulated Spyre's fp16 tolerance
# (common.sim.machines.spyre.SpyrePolicy.rtol_vs_eager), wider for the sharp large-logit softmax, where rounding the
# logits to fp16 alone moves the weights by up to ~1 %.
TOL = {"wrong": 5e-3, "hang": 5e-3, "nan": 2e-2, "slow": 5e-3}
pd.set_option("display.width", 160)
pd.set_option("display.max_colwidth", 90)
if LEARNER_ID == "demo-learner" and not FAST:
    print("NOTE: LEARNER_ID is still 'demo-learner': set your own id in the parameters cell and re-run, "
          "or you will solve the demo bugs")
print(f"learner {LEARNER_ID!r}: seed {SEED}; planted bugs: {', '.join(BUGS)} ('nan' is the optional one)")
HERE = lab_device(inductor=True)  # Part 3 measures here: the GPU if torch sees one Triton can compile for
print(f"Part 3's measured cells run {HERE.on}; torch.compile's Inductor writes {HERE.inductor} there")

# %% [markdown]
# ## Part 1 — The failure taxonomy
#
# **The principle.** A wrong number or a slow step on an accelerator is seen at the *output*, but it is made at
# one layer of a long stack: Python is captured into a graph, lowered and decomposed into the back end's ops,
# each op is covered natively or falls back to the host, tensors are laid out in tiles or sticks, kernels are
# fused and generated, tensors are placed in memory levels and moved by DMA, kernels and transfers are
# scheduled and synchronised, and every value is rounded. Naming the layer first tells you which tool to reach
# for. The eight layers, front end first:
#
# | # | layer key | what fails there | tool that localises it |
# |---|---|---|---|
# | 1 | `capture` | Dynamo graph capture | `torch._dynamo.explain`, graph-break logs |
# | 2 | `lowering` | AOTAutograd, decompositions, lowering | `make_fx`, `aot_eager` bisection |
# | 3 | `coverage` | op coverage and CPU fallback | fallback counters, strict mode |
# | 4 | `layout` | sticks, tiles, padding, transposes | layout dumps, restickify counters |
# | 5 | `codegen` | fusion and generated kernels | first-divergence finder, kernel text |
# | 6 | `memory` | placement, scratchpad, DMA | transfer logs, spill counters |
# | 7 | `schedule` | order, waits between work, deadlocks | timeline, dependency cycle check |
# | 8 | `numerics` | precision, overflow, accumulation | NaN/inf per node, fp32 reference |
#
# **A hang** is sorted by what the stuck work was *waiting for*, not by who reported it: a watchdog only
# reports. A transfer that never completes (a DMA timeout) is `memory`; work waiting on other work (a cycle of
# waits, ranks stuck in different collectives) is `schedule`.
#
# **The vendors.** The same layer looks different on each stack: a missing op is an extern kernel under
# Inductor, a CPU round trip on XLA and on torch-spyre, and a *compile error* on the Cerebras wafer and the
# Groq LPU, which have no host to fall back to. `common.debug.taxonomy` holds the table with one example per
# layer and system, each with its public source (an issue or a document) or marked *illustrative*.
#
# **Spec.** Below are ten failure reports written for you: a symptom, then the log of the run, one numbered
# entry (`e1`, `e2`, ...) per stage it went through, each with the numbers that say whether that stage went
# right. Every report names several stages, so its words do not give the layer away: its numbers do. For each
# report id, set `MY_EVIDENCE[id]` to the entry where the information was *first* wrong and `MY_LAYERS[id]` to
# the layer key of that entry's stage. Read each entry against what it should be: a transfer that moved every
# byte and reads back equal to the host copy is not a DMA problem; a kernel that is right on the inputs it
# received did not make the error; an entry after the first wrong one only inherits it ("not reached", a wrong
# output); a hang is sorted by what the stuck work waited for. A report counts when both its entry and its
# layer are right; at least 8 of 10 earn the points.

# %%
print(taxonomy.frame(examples=False).to_string())
print()
print(taxonomy.render("Spyre"))
REPORTS = taxonomy.draw_reports(SEED, 10)
for r in REPORTS:
    print(f"\n[{r.id}] ({r.system}) {r.text}")

# %% nbgrader={"grade": false, "grade_id": "classify", "locked": false, "schema_version": 3, "solution": true, "task": false}
# Per report id shown above: the entry first wrong, MY_EVIDENCE["R.."] = "e..", and the layer key of its stage
# (taxonomy.LAYER_KEYS), MY_LAYERS["R.."] = "<layer key>".
MY_EVIDENCE, MY_LAYERS = {}, {}
### BEGIN SOLUTION
# The demo learner's ten reports read by hand (the source notebook runs as "demo-learner"): the first entry whose
# numbers go wrong, and its stage's layer.
_read = {"R01": ("e3", "layout"), "R02": ("e5", "codegen"), "R03": ("e1", "coverage"), "R04": ("e2", "layout"),
         "R05": ("e3", "coverage"), "R06": ("e5", "codegen"), "R07": ("e2", "coverage"), "R08": ("e3", "schedule"),
         "R09": ("e4", "codegen"), "R10": ("e3", "memory")}
MY_EVIDENCE = {r.id: _read[r.id][0] for r in REPORTS}
MY_LAYERS = {r.id: _read[r.id][1] for r in REPORTS}
### END SOLUTION

# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "classify_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_no_problems, check_type

check_type("MY_LAYERS", MY_LAYERS, dict)
check_type("MY_EVIDENCE", MY_EVIDENCE, dict)
_ids = [r.id for r in REPORTS]
_entries = {r.id: [line.split()[0] for line in r.text.splitlines()[1:]] for r in REPORTS}
check_no_problems("MY_LAYERS", [f"no layer for report {i}" for i in _ids if i not in MY_LAYERS]
                  + [f"{k!r} is not one of the reports shown ({', '.join(_ids)})" for k in MY_LAYERS if k not in _ids]
                  + [f"{k}: {v!r} is not a layer key" for k, v in MY_LAYERS.items()
                     if k in _ids and v not in taxonomy.LAYER_KEYS],
                  hint=f"one layer key per report shown; valid keys: {', '.join(taxonomy.LAYER_KEYS)}")
check_no_problems("MY_EVIDENCE", [f"no entry for report {i}" for i in _ids if i not in MY_EVIDENCE]
                  + [f"{k}: {v!r} is not an entry of that report ({', '.join(_entries[k])})"
                     for k, v in MY_EVIDENCE.items() if k in _ids and v not in _entries[k]],
                  hint="one entry id per report, as its log numbers them (e1, e2, ...)")
### BEGIN HIDDEN TESTS
from common.grading.verdicts.probe import Probe

probe = Probe()  # sends the learner's readings; the judgement rewrites the reports from the learner id itself
probe.send("learner", str(LEARNER_ID))
for _name, _given in (("layers", MY_LAYERS), ("evidence", MY_EVIDENCE)):
    try:
        probe.send(_name, {str(k): str(v) for k, v in dict(_given).items()})
    except Exception:  # not a dict of plain values: nothing to judge
        probe.send(_name, None)
### JUDGEMENT
from answers import read_report
from common.checks import grader
import common.debug.bugs as bugs
import common.debug.taxonomy as taxonomy

data, seed = probe.received()
layers, evidence = data["layers"] or {}, data["evidence"] or {}
right = 0
for r in taxonomy.draw_reports(bugs.learner_seed(data["learner"]), 10):
    entry, layer = read_report(r.text)
    right += evidence.get(r.id) == entry and layers.get(r.id) == layer
grader.assert_in_range(right, 8, 10, name="reports read right, entry first wrong and its layer (at least 8 of 10)")
### END HIDDEN TESTS

# %% [markdown]
# ## Part 2 — Two planted failures (Bugs 1 and 2)
#
# **The method.** (1) *Reproduce* the failure and write down how it fails: the exception type, or the op of
# the first node whose value is wrong. (2) *Localise*: run the compiled graph on the simulated Spyre and on the
# CPU reference **node by node** and find the first node whose output differs beyond the backend's tolerance
# (`first_divergence`: two `torch.fx.Interpreter`s over the same aten graph, results kept in `node.meta`).
# (3) *Reduce* to a minimal reproducer that still fails **the same way** (`reduce`: delta debugging over the
# graph's nodes, then over every input dimension; the result is 1-minimal). (4) *Name the layer* from what you
# learnt. (5) *Work around*: change the model or the way you call it, not the compiler, and check the output
# against the CPU.
#
# Each of these bugs (`BUGS["wrong"]`, `BUGS["hang"]`, and the optional `BUGS["nan"]`, named after the symptom) is
# a model `bug.model`, its inputs `bug.args`, and a buggy simulated compiler: `bug.run(model=None, *args)`
# compiles and runs on the simulated Spyre (default: the bug's own model and inputs), `bug.reference()` is the
# CPU answer, `bug.compile(model, args)` returns the `CompiledGraph` (its `.aten` graph, `.program`,
# `.report`), and `bug.compile_fn` is what `reduce` needs to recompile candidates exactly like the failing run.
#
# **A fix must run on the device.** `bugs.device_problems(bug, out)` checks a fix's output against the device's
# trace of every run (`bug.runs`): it must be made of what `bug.run(...)` returned, with the model's FLOPs on the
# device's counters, and the graph you ran must compute the model on fresh inputs too, so `bug.reference()`
# scores nothing. The grader runs each fix on a variant you have not seen: read shapes from the graph.
#
# A worked example on a graph that is not yours: a 65-element fp16 copy, followed by two pointwise ops.

# %%
class CopyThenScale(torch.nn.Module):
    def forward(self, x):
        return x.clone() * 2 + 1

x65 = torch.randn(1, 65, dtype=torch.float16) + 3.0
demo = bugs.make_bug("wrong", 0)                      # the wrong-value rule, on our own little model
demo_compiled = demo.compile(CopyThenScale(), (x65,))
d = first_divergence(None, (x65,), compiled=demo_compiled)
print(d)
print(d.table.to_string(index=False))
r = reduce(demo_compiled, (x65,), demo.compile_fn)
print("reproducer:", r)
print(r.gm.code)

# %% [markdown]
# ### Bug 1 — a wrong value
#
# Run it: the output differs from the CPU, with no error. Then localise, reduce, name the layer, and fix it.
#
# **Spec.** (a) Set `STICK_NODE` (the name of the first diverging node in the compiled aten graph, a `str`)
# and `STICK_REPRO` (the `Reproducer` returned by `reduce`). (b) `STICK_LAYER`: a layer key. (c) Write
# `fix_stick(bug)`: it must return the output of **the simulated Spyre** (`bug.run(...)`) on a rewritten model
# that computes the same function and is correct — for example an FX pass over `bugs.trace(bug.model)` that
# pads each copy's input to whole sticks (`STICK_ELEMS` elements, from the catalog) and cuts the result back.
# Fix the copy, do not route around it: the grader checks that your runs still copy every element the model
# copies through the (faulty) copy kernels, so turning the clone into another op scores 0.
# It must work for any variant of this bug, so read shapes from the graph
# (`torch.fx.passes.shape_prop.ShapeProp`), do not hard-code yours.

# %%
bug = BUGS["wrong"]
out, ref = bug.run(), bug.reference()
bad = ((out.float() - ref.float()).abs() > 1e-2).nonzero()
print(f"SIMULATED Spyre vs CPU: {len(bad)} wrong elements of {out.numel()}; first few at {bad[:4].tolist()}")
print("transfer counters of the compile (LPDDR5 bytes):", {k: v for k, v in bug.report().counters.items()
                                                         if "lpddr" in k})

# %% nbgrader={"grade": false, "grade_id": "stick_locate", "locked": false, "schema_version": 3, "solution": true, "task": false}
STICK_NODE = STICK_REPRO = None  # set both: a node name, a Reproducer
### BEGIN SOLUTION
_c = BUGS["wrong"].compile(BUGS["wrong"].model, BUGS["wrong"].args)
STICK_NODE = first_divergence(None, BUGS["wrong"].args, compiled=_c).node
STICK_REPRO = reduce(_c, BUGS["wrong"].args, BUGS["wrong"].compile_fn)
### END SOLUTION
print(STICK_NODE, STICK_REPRO)

# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "stick_locate_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

_bug = BUGS["wrong"]
_aten = _bug.compile(_bug.model, _bug.args).aten
check_type("STICK_NODE", STICK_NODE, str)
check_equal("STICK_NODE names a node of the compiled aten graph",
            STICK_NODE in {n.name for n in _aten.graph.nodes if n.op == "call_function"}, True,
            hint="a name from first_divergence(...).table['node']")
check_type("STICK_REPRO", STICK_REPRO, Reproducer)
check_equal("reproducer: one node", len(STICK_REPRO.nodes), 1, hint="reduce(...) cuts it to a single node")
### BEGIN HIDDEN TESTS
from common.grading.verdicts.probe import Probe

probe = Probe()
def _plain_repro(r):  # a Reproducer as plain data: how it fails, its ops, its input shapes
    try:
        return {"type": type(r).__name__, "failure": str(r.failure), "ops": [str(o) for o in r.ops],
                "shapes": [[int(n) for n in x.shape] for x in r.inputs if isinstance(x, torch.Tensor)]}
    except Exception:
        return None


probe.send("learner", str(LEARNER_ID))
probe.send("node", STICK_NODE if isinstance(STICK_NODE, str) else repr(STICK_NODE))
probe.send("repro", _plain_repro(STICK_REPRO))
### JUDGEMENT
from answers import repro_key
from common.checks import grader
import common.debug.bugs as bugs

data, seed = probe.received()
node, repro = repro_key(bugs.make_bug("wrong", bugs.learner_seed(data["learner"])))
got = data["repro"] or {}
grader.assert_equal(data["node"], node, name="first diverging node")
grader.assert_equal(got.get("type"), "Reproducer", name="STICK_REPRO is what reduce returns")
grader.assert_equal(got.get("failure"), repro["failure"], name="reproducer fails the same way")
grader.assert_equal(got.get("ops"), repro["ops"], name="reproducer: one node, the diverging op")
grader.assert_equal(got.get("shapes"), repro["shapes"], name="reproducer is 1-minimal (its smallest failing shape)")
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "stick_layer", "locked": false, "schema_version": 3, "solution": true, "task": false}
STICK_LAYER = None  # a layer key
### BEGIN SOLUTION
STICK_LAYER = "codegen"  # the DMA moved every byte; the copy kernel's range stops at a whole stick
### END SOLUTION
print(STICK_LAYER)

# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "stick_layer_tests", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal

check_equal("STICK_LAYER is a layer key", STICK_LAYER in taxonomy.LAYER_KEYS, True,
            hint=f"one of {', '.join(taxonomy.LAYER_KEYS)}")
### BEGIN HIDDEN TESTS
from common.grading.verdicts.probe import Probe

probe = Probe()
probe.send("learner", str(LEARNER_ID))
probe.send("layer", STICK_LAYER if isinstance(STICK_LAYER, str) else repr(STICK_LAYER))
### JUDGEMENT
from answers import layer_of
from common.checks import grader
import common.debug.bugs as bugs

data, seed = probe.received()
grader.assert_equal(data["layer"], layer_of(bugs.make_bug("wrong", bugs.learner_seed(data["learner"]))),
                    name="layer of the wrong-value bug")
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "fix_stick", "locked": false, "schema_version": 3, "solution": true, "task": false}
from torch.fx.passes.shape_prop import ShapeProp


def fix_stick(bug):
    """The simulated Spyre's output of a rewritten bug.model whose copies cover whole sticks."""
    ### BEGIN SOLUTION
    gm = bugs.trace(bug.model)
    ShapeProp(gm).propagate(*bug.args)
    for node in list(gm.graph.nodes):
        if node.op == "call_method" and node.target == "clone":
            w = node.args[0].meta["tensor_meta"].shape[-1]
            if w % STICK_ELEMS == 0:
                continue
            with gm.graph.inserting_before(node):  # pad to whole sticks, copy, cut back
                pad = gm.graph.call_function(F.pad, (node.args[0], (0, -w % STICK_ELEMS)))
            node.args = (pad,)
            with gm.graph.inserting_after(node):
                cut = gm.graph.call_function(torch.narrow, (node, -1, 0, w))
            node.replace_all_uses_with(cut, delete_user_cb=lambda u, cut=cut: u is not cut)
    gm.recompile()
    return bug.run(gm)
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "fix_stick_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_tensor

_bug = BUGS["wrong"]
_n0 = len(_bug.runs)
_fixed = fix_stick(_bug)
check_equal("fix ran on the simulated Spyre", bugs.device_problems(_bug, _fixed, _n0, rtol=TOL["wrong"]), [],
            hint="return what bug.run(your_rewritten_model) gives")
_ref = _bug.reference().float()
check_tensor("fixed output vs CPU", _fixed.float(), _ref, rtol=0.0, atol=TOL["wrong"] * _ref.abs().max().item(),
             hint="within the simulated Spyre's fp16 tolerance of the CPU answer")
### BEGIN HIDDEN TESTS
from common.debug import bugs as _bugs
from common.grading.verdicts.probe import Probe

probe = Probe()  # fresh bugs: the learner's own and an unseen variant from the grader's seed
for _name, _seed in (("mine", _bugs.learner_seed(LEARNER_ID)), ("unseen", probe.seed)):
    _b = _bugs.make_bug("wrong", _seed)
    _out = fix_stick(_b)
    probe.send(_name, {"out": _out if isinstance(_out, torch.Tensor) else None,
                       "trace": _bugs.device_trace(_b, 0, probe.seed)})
probe.send("learner", str(LEARNER_ID))
probe.send("tools", [f.__code__.co_filename for f in (_bugs.make_bug, _bugs.device_trace, _bugs.PlantedBug.run,
                                                      _bugs.PlantedBug.compile, _bugs.PlantedBug.reference)])
### JUDGEMENT
import torch

from answers import trace_problems
from common.checks import grader
import common.debug.bugs as bugs

fix = "fix_stick"
data, seed = probe.received()
variants = {"mine": bugs.make_bug("wrong", bugs.learner_seed(data["learner"])), "unseen": bugs.make_bug("wrong", seed)}
for path in data["tools"]:  # the probe ran the fix on the simulator's own PlantedBug, not a rebound one
    grader.assert_equal(path.replace("\\", "/").endswith("common/debug/bugs.py"), True,
                        name="the probe ran the simulated Spyre's own PlantedBug")
for name, bug in variants.items():
    got = data[name]
    grader.assert_type(got["out"], torch.Tensor, name=f"{fix} returns a tensor ({name} variant)")
    grader.assert_equal(trace_problems(bug, got["out"], got["trace"], rtol=5e-3, fresh_seed=seed), [],
                        name=f"{fix} runs on the device ({name} variant)")
    ref = bug.reference().float()
    grader.assert_tensor(got["out"].float(), ref, rtol=0.0, atol=5e-3 * ref.abs().max().item(),
                         name=f"{fix} vs the CPU ({name} variant)")
### END HIDDEN TESTS

# %% [markdown]
# ### Bug 2 — a hang
#
# On real hardware this one never returns; the simulated runtime's watchdog turns the hang into an error
# report instead. Read the message: it names the kernel and what it was waiting for.
#
# **Spec.** (a) Set `HANG_ERROR` (the exception *type* the run raises, e.g. `faults.SimTimeoutError` or
# `faults.DeadlockError`) and `HANG_REPRO` (from `reduce`). (b) `HANG_LAYER`: a layer key (Part 1's rule for
# hangs). (c) Write `fix_hang(bug)`: the simulated Spyre's output for all of `bug.args[0]`, obtained with calls
# that do not hang (hint: what does the minimal reproducer's shape tell you about the size a single call may
# have?). It must work for another variant too, including the other kind of hang.

# %%
bug = BUGS["hang"]
try:
    bug.run()
    print("no error?!")
except (faults.SimTimeoutError, faults.DeadlockError) as exc:
    print(f"{type(exc).__name__}: {exc}")
print(bug.compile(bug.model, bug.args).program.summary())

# %% nbgrader={"grade": false, "grade_id": "hang_locate", "locked": false, "schema_version": 3, "solution": true, "task": false}
HANG_ERROR = HANG_REPRO = None  # set both: an exception type, a Reproducer
### BEGIN SOLUTION
_bug = BUGS["hang"]
try:
    _bug.run()
except (faults.SimTimeoutError, faults.DeadlockError) as _exc:
    HANG_ERROR = type(_exc)
HANG_REPRO = reduce(_bug.compile(_bug.model, _bug.args), _bug.args, _bug.compile_fn)
### END SOLUTION
print(getattr(HANG_ERROR, "__name__", HANG_ERROR), HANG_REPRO)

# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "hang_locate_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

check_equal("HANG_ERROR is an exception type", isinstance(HANG_ERROR, type) and issubclass(HANG_ERROR, Exception),
            True, hint="the class of the exception, e.g. type(exc)")
check_type("HANG_REPRO", HANG_REPRO, Reproducer)
check_equal("the reproducer raises (it does not diverge)", HANG_REPRO.failure.kind, "raises")
### BEGIN HIDDEN TESTS
from common.grading.verdicts.probe import Probe

probe = Probe()
def _plain_repro(r):  # a Reproducer as plain data: how it fails, its ops, its input shapes
    try:
        return {"type": type(r).__name__, "failure": str(r.failure), "ops": [str(o) for o in r.ops],
                "shapes": [[int(n) for n in x.shape] for x in r.inputs if isinstance(x, torch.Tensor)]}
    except Exception:
        return None


probe.send("learner", str(LEARNER_ID))
probe.send("error", HANG_ERROR.__name__ if isinstance(HANG_ERROR, type) else repr(HANG_ERROR))
probe.send("repro", _plain_repro(HANG_REPRO))
### JUDGEMENT
from answers import repro_key
from common.checks import grader
import common.debug.bugs as bugs

data, seed = probe.received()
error, repro = repro_key(bugs.make_bug("hang", bugs.learner_seed(data["learner"])))
got = data["repro"] or {}
grader.assert_equal(data["error"], error, name="exception type")
grader.assert_equal(got.get("type"), "Reproducer", name="HANG_REPRO is what reduce returns")
grader.assert_equal(got.get("failure"), repro["failure"], name="reproducer raises the same")
grader.assert_equal(got.get("ops"), repro["ops"], name="hang reproducer: one node")
grader.assert_equal(got.get("shapes"), repro["shapes"], name="hang reproducer is 1-minimal (its smallest shape)")
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "hang_layer", "locked": false, "schema_version": 3, "solution": true, "task": false}
HANG_LAYER = None  # a layer key
### BEGIN SOLUTION
HANG_LAYER = "memory" if HANG_ERROR is faults.SimTimeoutError else "schedule"  # a transfer, or a wait cycle
### END SOLUTION
print(HANG_LAYER)

# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "hang_layer_tests", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal

check_equal("HANG_LAYER is a layer key", HANG_LAYER in taxonomy.LAYER_KEYS, True,
            hint=f"one of {', '.join(taxonomy.LAYER_KEYS)}")
### BEGIN HIDDEN TESTS
from common.grading.verdicts.probe import Probe

probe = Probe()
probe.send("learner", str(LEARNER_ID))
probe.send("layer", HANG_LAYER if isinstance(HANG_LAYER, str) else repr(HANG_LAYER))
### JUDGEMENT
from answers import layer_of
from common.checks import grader
import common.debug.bugs as bugs

data, seed = probe.received()
grader.assert_equal(data["layer"], layer_of(bugs.make_bug("hang", bugs.learner_seed(data["learner"]))),
                    name="layer of the hang")
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "fix_hang", "locked": false, "schema_version": 3, "solution": true, "task": false}
def fix_hang(bug):
    """The simulated Spyre's output for bug.args[0], computed in calls small enough not to hang."""
    ### BEGIN SOLUTION
    x = bug.args[0].reshape(1, -1, bug.args[0].shape[-1])  # (1, B*T, d): rows are independent in an MLP
    rows = x.shape[1]
    while rows >= 1:
        try:
            parts = [bug.run(None, x[:, i:i + rows]) for i in range(0, x.shape[1], rows)]
            return torch.cat(parts, dim=1).reshape(*bug.args[0].shape[:-1], -1)
        except (faults.SimTimeoutError, faults.DeadlockError):
            rows //= 2
    raise RuntimeError("even one row hangs")
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "fix_hang_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_tensor

_bug = BUGS["hang"]
_n0 = len(_bug.runs)
_fixed = fix_hang(_bug)
check_equal("fix ran on the simulated Spyre", bugs.device_problems(_bug, _fixed, _n0, rtol=TOL["hang"]), [],
            hint="assemble the outputs of bug.run(None, smaller_input) calls")
_ref = _bug.reference().float()
check_tensor("fixed output vs CPU", _fixed.float(), _ref, rtol=0.0, atol=TOL["hang"] * _ref.abs().max().item(),
             hint="within the simulated Spyre's fp16 tolerance of the CPU answer")
### BEGIN HIDDEN TESTS
from common.debug import bugs as _bugs
from common.grading.verdicts.probe import Probe

probe = Probe()  # the learner's own hang and, from the grader's seed, one unseen variant of each kind
_variants = {"mine": _bugs.make_bug("hang", _bugs.learner_seed(LEARNER_ID))}
for _kind in ("dma_timeout", "deadlock"):
    _variants[_kind] = next(b for b in (_bugs.make_bug("hang", probe.seed + i) for i in range(200))
                            if b._rule["fault"] == _kind)
for _name, _b in _variants.items():
    _out = fix_hang(_b)
    probe.send(_name, {"out": _out if isinstance(_out, torch.Tensor) else None,
                       "trace": _bugs.device_trace(_b, 0, probe.seed)})
probe.send("learner", str(LEARNER_ID))
probe.send("tools", [f.__code__.co_filename for f in (_bugs.make_bug, _bugs.device_trace, _bugs.PlantedBug.run,
                                                      _bugs.PlantedBug.compile, _bugs.PlantedBug.reference)])
### JUDGEMENT
import torch

from answers import trace_problems, variant
from common.checks import grader
import common.debug.bugs as bugs

fix = "fix_hang"
data, seed = probe.received()
variants = {"mine": bugs.make_bug("hang", bugs.learner_seed(data["learner"]))}
for kind in ("dma_timeout", "deadlock"):
    variants[kind] = variant("hang", seed, like=lambda b, kind=kind: b._rule["fault"] == kind)
for path in data["tools"]:  # the probe ran the fix on the simulator's own PlantedBug, not a rebound one
    grader.assert_equal(path.replace("\\", "/").endswith("common/debug/bugs.py"), True,
                        name="the probe ran the simulated Spyre's own PlantedBug")
for name, bug in variants.items():
    got = data[name]
    grader.assert_type(got["out"], torch.Tensor, name=f"{fix} returns a tensor ({name} variant)")
    grader.assert_equal(trace_problems(bug, got["out"], got["trace"], rtol=5e-3, fresh_seed=seed), [],
                        name=f"{fix} runs on the device ({name} variant)")
    ref = bug.reference().float()
    grader.assert_tensor(got["out"].float(), ref, rtol=0.0, atol=5e-3 * ref.abs().max().item(),
                         name=f"{fix} vs the CPU ({name} variant)")
### END HIDDEN TESTS

# %% [markdown]
# ## Part 3 — Bisecting PyTorch's own stack: a bug, or noise?
#
# **The principle.** A wrong output entered the stack at one layer. Cut the stack at each depth in turn, front
# end first: the first depth whose output goes wrong names the layer. PyTorch's own stack can be cut this way
# with `torch.compile(model, backend=...)`, on your GPU if you have one (`HERE`, chosen in the settings cell),
# else on the CPU; the helpers run where the model and its inputs are:
#
# | backend | what runs | a difference first seen here entered at |
# |---|---|---|
# | `"eager"` | Dynamo captures an FX graph and runs it as it is | `capture` |
# | `"aot_eager"` | + AOTAutograd: a functionalised aten graph, after decompositions | `lowering` |
# | `"inductor"` | + Inductor: fused loops, generated C++ (CPU) or Triton kernels (GPU) | `codegen` |
#
# **Different is not wrong.** A fused kernel rounds in another order: Inductor computes a bf16 (or fp16) chain in
# fp32 and rounds once, where eager rounds after every op, so the last bits change. Judge a difference against the
# *truth*, the same model in float64 (`fp64_reference`), not against eager with a fixed tolerance: a tolerance
# wide enough for bf16 rounding (torch.testing uses 1.6 %) lets a 1 % bug through.
#
# **Spec.** (a) `classify_divergence(out, eager, truth)` returns `"match"` if `out` equals `eager` bit for bit
# (same dtype and shape, `torch.equal`); else `"noise"` if `out` is finite, has the truth's shape, and
# `max|out − truth| ≤ 2·max|eager − truth| + eps·max|truth|` (`eps = torch.finfo(out.dtype).eps`, one ulp at the
# truth's scale); else `"bug"`. Worked example: truth `[1.0, 2.0]`, eager (bf16) `[1.0, 2.0]`; out
# `[1.0, 2.015625]` (one bf16 ulp off) is noise, `[1.0, 2.03125]` is a bug. (b) `bisect_stack(model, args,
# backends=STACK, seed=0)` returns `{label: verdict}` in the order of `backends`: the eager output
# (`stack_run(model, args, None, seed)`) and the truth (`fp64_reference(model, args, seed)`), then each backend's
# output (`stack_run(model, args, backend, seed)`: it resets Dynamo and seeds the RNG), classified. A label is
# `backend_label(backend)`. The grader runs it on backends you have not seen.

# %%
from common.debug.stack import STACK, backend_label, fp64_reference, stack_run


class Chain(torch.nn.Module):
    def forward(self, x):  # (N, D) -> (N, D): pointwise ops that Inductor fuses into one loop
        return torch.tanh(x * 1.7 + 0.3) * torch.sigmoid(x) + 0.1 * x * x


# (256, 64) in HERE's 16-bit dtype: bf16 on a CPU and from Ampere on, fp16 on an older GPU (a T4 has no bf16)
x_chain = torch.randn(256, 64, generator=torch.Generator().manual_seed(SEED)).to(HERE.device, HERE.half)
eager_chain, truth_chain = stack_run(Chain(), (x_chain,)), fp64_reference(Chain(), (x_chain,))
inductor_chain = stack_run(Chain(), (x_chain,), "inductor")
_err = {k: (v.double() - truth_chain).abs().max().item() for k, v in {"eager": eager_chain,
                                                                       "inductor": inductor_chain}.items()}
print(f"MEASURED {HERE.on}, {str(HERE.half).removeprefix('torch.')} {tuple(x_chain.shape)}, Inductor writing "
      f"{HERE.inductor}: {(inductor_chain != eager_chain).sum().item()} of {eager_chain.numel()} elements differ "
      f"between eager and inductor; largest error against fp64: eager {_err['eager']:.2e}, "
      f"inductor {_err['inductor']:.2e}")

# %% nbgrader={"grade": false, "grade_id": "classify_divergence", "locked": false, "schema_version": 3, "solution": true, "task": false}
def classify_divergence(out, eager, truth):
    """'match' (bit-equal to eager), 'noise' (no farther from the fp64 truth than the rule allows) or 'bug'."""
    ### BEGIN SOLUTION
    if out.dtype == eager.dtype and out.shape == eager.shape and torch.equal(out, eager):
        return "match"
    if out.shape != truth.shape or not torch.isfinite(out).all():
        return "bug"
    err_out = (out.double() - truth).abs().max().item()
    err_eager = (eager.double() - truth).abs().max().item()
    bound = 2 * err_eager + torch.finfo(out.dtype).eps * truth.abs().max().item()
    return "noise" if err_out <= bound else "bug"
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "classify_divergence_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal

_truth = torch.tensor([1.0, 2.0], dtype=torch.float64)
_eager = _truth.bfloat16()
check_equal("worked example: eager itself", classify_divergence(_eager.clone(), _eager, _truth), "match")
check_equal("worked example: one bf16 ulp off",
            classify_divergence(torch.tensor([1.0, 2.015625]).bfloat16(), _eager, _truth), "noise")
check_equal("worked example: 1.6 % off", classify_divergence(torch.tensor([1.0, 2.03125]).bfloat16(), _eager, _truth),
            "bug", hint="a difference beyond the rule is a bug, even within a bf16 tolerance")
check_equal("a NaN is never noise",
            classify_divergence(torch.tensor([1.0, float("nan")]).bfloat16(), _eager, _truth), "bug")
check_equal("your chain under inductor", classify_divergence(inductor_chain, eager_chain, truth_chain) != "bug", True,
            hint="Inductor's rounding is as close to fp64 as eager's")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()  # fresh cases from the grader's seed: the worked examples, then per dtype four kinds of output
_cases = [(torch.tensor([1.0, 2.0], dtype=torch.float64).bfloat16(), torch.tensor([1.0, 2.0]).bfloat16()),
          (torch.tensor([1.0, 2.015625]).bfloat16(), torch.tensor([1.0, 2.0]).bfloat16()),
          (torch.tensor([1.0, 2.03125]).bfloat16(), torch.tensor([1.0, 2.0]).bfloat16()),
          (torch.tensor([1.0, float("nan")]).bfloat16(), torch.tensor([1.0, 2.0]).bfloat16())]
_cases = [(_o, _e, torch.tensor([1.0, 2.0], dtype=torch.float64)) for _o, _e in _cases]
_g = torch.Generator().manual_seed(probe.seed)
for _dt in (torch.bfloat16, torch.float16, torch.float32):
    _t = torch.randn(64, 32, generator=_g, dtype=torch.float64) * (1 + 3 * torch.rand(1, generator=_g).item())
    _e = _t.to(_dt)
    _ulp = torch.finfo(_dt).eps * _t.abs().to(_dt).double().clamp_min(torch.finfo(_dt).tiny)
    _nudged = (_t + 0.4 * _ulp * torch.sign(torch.randn(_t.shape, generator=_g))).to(_dt)
    _off, _idx = _e.clone(), _t.abs().view(-1).topk(3).indices
    _flat = _off.view(-1)
    _flat[_idx] = (_flat[_idx].double() + (0.012 if _dt != torch.float32 else 1e-3) * _t.abs().max()).to(_dt)
    _nan = _e.clone()
    _nan.view(-1)[int(_idx[0])] = float("nan")
    _cases += [(_e.clone(), _e, _t), (_nudged, _e, _t), (_off, _e, _t), (_nan, _e, _t)]
_verdicts = [None] * len(_cases)
for _i in _random.Random(probe.seed).sample(range(len(_cases)), len(_cases)):  # in a shuffled order, on copies
    _v = classify_divergence(*(_c.clone() for _c in _cases[_i]))
    _verdicts[_i] = _v if isinstance(_v, str) else repr(_v)
probe.send("verdicts", _verdicts)
### JUDGEMENT
from answers import classify_divergence as reference, divergence_cases
from common.checks import grader

data, seed = probe.received()
want = ["match", "noise", "bug", "bug"] + [reference(o, e, t) for o, e, t, _ in divergence_cases(seed)]  # the rule
grader.assert_equal(len(data["verdicts"]), len(want), name="one verdict per case")
for i, (got, expected) in enumerate(zip(data["verdicts"], want, strict=True)):
    grader.assert_equal(got, expected, name=f"case {i} ({'worked example' if i < 4 else 'unseen'})")
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "bisect_stack", "locked": false, "schema_version": 3, "solution": true, "task": false}
def bisect_stack(model, args, backends=STACK, seed=0):
    """{backend label: classify_divergence verdict} for the model through each backend, in order."""
    ### BEGIN SOLUTION
    eager = stack_run(model, args, None, seed)
    truth = fp64_reference(model, args, seed)
    return {backend_label(b): classify_divergence(stack_run(model, args, b, seed), eager, truth) for b in backends}
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "bisect_stack_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_type

_got = bisect_stack(Chain(), (x_chain,))
check_type("bisect_stack(...)", _got, dict)
check_equal("one verdict per backend, in order", list(_got), [backend_label(b) for b in STACK])
check_equal("verdicts are match / noise / bug", sorted(set(_got.values()) - {"match", "noise", "bug"}), [])
check_equal("the chain: no bug at any depth", "bug" in _got.values(), False,
            hint="a rounding difference against eager is noise if fp64 agrees")
### BEGIN HIDDEN TESTS
import random as _random

from common.grading.verdicts.probe import Probe

probe = Probe()


class _Chain(torch.nn.Module):  # a bf16 pointwise chain with seeded coefficients
    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x):  # (N, D) bf16 -> (N, D)
        return torch.tanh(x * self.a + self.b) * torch.sigmoid(x) + 0.1 * x * x


class _Drop(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)

    def forward(self, x):  # (N, d) -> (N, d)
        return F.dropout(self.lin(x), 0.25, training=True)


def _planted(kind, name):  # a backend that runs Dynamo's graph, then plants a difference
    def backend(gm, example_inputs):
        def run(*args):
            if kind == "rounds_once":  # the graph in float64, rounded once: closer to the truth than eager
                dt = next(a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
                out = gm(*[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args])
                return type(out)(o.to(dt) if isinstance(o, torch.Tensor) else o for o in out)
            if kind == "reseeds":
                torch.manual_seed(torch.initial_seed() + 1)
            out = list(gm(*args))
            if kind == "shifts":  # 5 % of the output's scale on three elements
                first = out[0].clone()
                first.view(-1)[:3] += 0.05 * first.abs().max()
                out[0] = first
            return tuple(out)
        return run

    backend.__name__ = name
    return backend


def _plain(verdicts):
    try:
        return [[str(k), v if isinstance(v, str) else repr(v)] for k, v in dict(verdicts).items()]
    except Exception:
        return None


_names = _random.Random(probe.seed).sample(("alpha", "beta", "gamma", "delta", "omega"), 3)  # neutral labels
_g = torch.Generator().manual_seed(probe.seed)
_a, _b = 1 + torch.rand(1, generator=_g).item(), torch.rand(1, generator=_g).item() - 0.5
_x = torch.randn(96, 40, generator=_g).bfloat16()  # (96, 40) bf16
probe.send("chain", _plain(bisect_stack(_Chain(_a, _b), (_x,),
                                        (_planted("shifts", _names[0]), "eager", _planted("rounds_once", _names[1])))))
torch.manual_seed(probe.seed)
_m, _xd = _Drop(24), torch.randn(32, 24, generator=_g)  # (32, 24) fp32
probe.send("drop", _plain(bisect_stack(_m, (_xd,), ("aot_eager", _planted("reseeds", _names[2])),
                                       seed=probe.seed % 1000)))
### JUDGEMENT
import random

from common.checks import grader

data, seed = probe.received()
names = random.Random(seed).sample(("alpha", "beta", "gamma", "delta", "omega"), 3)
grader.assert_equal(data["chain"], [[names[0], "bug"], ["eager", "match"], [names[1], "noise"]],
                    name="unseen backends: one verdict each, in order")
grader.assert_equal(data["drop"], [["aot_eager", "match"], [names[2], "bug"]], name="dropout: each run seeded alike")
### END HIDDEN TESTS

# %% [markdown]
# **Your bisection.** `DropBlock` is a linear layer followed by dropout in training mode, so the graph draws random
# numbers. Bisect it, then test the hypothesis the table suggests: Inductor can be told to call the same random
# number generator as eager (`torch._inductor.config.fallback_random`, documented in PyTorch's torch.compile
# troubleshooting guide for exactly this comparison). Q4 below asks what you conclude.

# %%
class DropBlock(torch.nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)

    def forward(self, x):  # (N, d) -> (N, d)
        return F.dropout(self.lin(x), 0.2, training=True)


from common.debug.stack import fp64_draws_alike

# The fp64 truth judges a random model only where fp32 and fp64 dropout drop the same elements: the CPU's
# generator does; a GPU is asked, and where it does not, DropBlock runs on the CPU.
DROP_ON = HERE if fp64_draws_alike(HERE.device, (128, 64), 0.2) else lab_device(
    "cpu", why=f"on {HERE.name} fp32 and fp64 dropout drop different elements, so fp64 is no truth there")
torch.manual_seed(SEED)
drop, x_drop = DropBlock(), torch.randn(128, 64)  # (128, 64) fp32
drop, x_drop = drop.to(DROP_ON.device), x_drop.to(DROP_ON.device)
try:
    print(f"DropBlock, fp32, MEASURED {DROP_ON.on}:", bisect_stack(drop, (x_drop,), seed=SEED))
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fallback_random=True):
        print("DropBlock with fallback_random=True:", bisect_stack(drop, (x_drop,), ("inductor",), seed=SEED))
except (NameError, NotImplementedError):
    print("bisect_stack is not written yet: no bisection of DropBlock")

# %% [markdown]
# ## Part 4 — Bug 3, a performance bug
#
# **The principle.** "It is slow" is a statement about a *region* of a timeline. Bound the region first (from
# the first event you care about to the last), then split its wall time by what ran: **kernel** (device
# compute), **communication** (between chips), **transfer** (DMA between memory levels, host↔device copies),
# **host** (an op running on the CPU), **overhead** (launches, syncs) and **idle**. Overlapping events are
# charged once, to the highest of these priorities, so the parts add up to the wall time and *transfer* is the
# transfer time no kernel hides. Then compare with the **optimum**: the sum of the roofline floors of the
# region's work (every kernel at max(FLOPs/peak, bytes/bandwidth), a fallback op as if it ran on the device).
# A region far above its optimum has a cause you can name.
# **The vendor.** On torch-spyre an op without a device kernel runs on the host: the device is synchronised,
# inputs are copied over PCIe, the op runs on the CPU, outputs are copied back, and the next bundle pays a new
# launch — torch-spyre tracks this as a performance issue of its own ("Reduce use of CPU fallbacks in model
# forward passes", torch-spyre#1532).
#

# %%
bug = BUGS["slow"]
slow = bug.report()
print(f"SIMULATED output check: max rel. error vs CPU "
      f"{((bug.run() - bug.reference()).abs().max() / bug.reference().abs().max()).item():.1e} (correct, but slow)")
print(slow.frame()[["name", "kind", "engine", "start_s", "duration_s", "bound", "kernel"]].to_string(index=False))
fig, ax = plt.subplots(figsize=(11, 2.6), layout="constrained")
slow.gantt(ax=ax, title=f"SIMULATED Spyre timeline of your perf bug ({type(bug.model).__name__}, "
                        f"input {tuple(bug.args[0].shape)}, fp16)")
plt.show()

# %% [markdown]
# **Spec.** (a) Delimit the region of the slow part: `PERF_REGION = (t0, t1)`, the start of the first and the
# end of the last event of the kernel that holds the host op (`timing_region(report, "kN", "kN")` does this
# for kernel `kN`). (b) `PERF_CAUSE`: the cause as `timing_region(...).causes()` names it, e.g.
# `"fallback:aten.xyz"`. (c) `fix_perf(bug)`: a model (an `nn.Module`) computing the same function with
# native ops only, so that the simulated step is at least 1.3× faster and the answer still matches the CPU
# (see `common.sim.machines.spyre.NEAREST_NATIVE` for what torch-spyre suggests instead of each fallback). The module
# is compiled the way `bug.report(model)` compiles any model: it must be traceable by `torch.fx.symbolic_trace`
# (no data-dependent Python control flow in `forward`). It must compute the function, not hold an answer: it is
# checked on fresh inputs of the same shape, and on another seed of the same model class.

# %% nbgrader={"grade": false, "grade_id": "perf", "locked": false, "schema_version": 3, "solution": true, "task": false}
PERF_REGION, PERF_CAUSE = None, None  # set: (t0, t1) in seconds, and the cause string
### BEGIN SOLUTION
_r = BUGS["slow"].report()
_k = next(e.kernel for e in _r.events if e.kind == "host")
_reg = timing_region(_r, _k, _k)
PERF_REGION = (_reg.t0, _reg.t1)
PERF_CAUSE = _reg.causes()[0]
### END SOLUTION
print("region:", PERF_REGION, "cause:", PERF_CAUSE)

# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "perf_tests", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_in_range, check_type

_r = BUGS["slow"].report()
check_type("PERF_REGION", PERF_REGION, tuple)
check_equal("PERF_REGION has two times", len(PERF_REGION), 2)
check_in_range("region start", PERF_REGION[0], 0.0, _r.time_s)
check_in_range("region end", PERF_REGION[1], PERF_REGION[0], _r.time_s * (1 + 1e-9))
check_type("PERF_CAUSE", PERF_CAUSE, str)
check_equal("PERF_CAUSE names a fallback", PERF_CAUSE.startswith("fallback:aten."), True,
            hint="as timing_region(...).causes() writes it")
### BEGIN HIDDEN TESTS
from common.grading.verdicts.probe import Probe

probe = Probe()
probe.send("learner", str(LEARNER_ID))
probe.send("region_type", type(PERF_REGION).__name__)
try:
    probe.send("region", [float(t) for t in PERF_REGION])
except Exception:
    probe.send("region", None)
probe.send("cause", PERF_CAUSE if isinstance(PERF_CAUSE, str) else repr(PERF_CAUSE))
### JUDGEMENT
from answers import perf_region
from common.checks import grader
import common.debug.bugs as bugs

data, seed = probe.received()
(t0, t1), cause = perf_region(bugs.make_bug("slow", bugs.learner_seed(data["learner"])))
grader.assert_equal(data["region_type"], "tuple", name="PERF_REGION is a tuple")
grader.assert_equal(len(data["region"] or []), 2, name="PERF_REGION has two times")
grader.assert_scalar(data["region"][0], t0, rel=1e-9, abs_tol=1e-15, name="region start")
grader.assert_scalar(data["region"][1], t1, rel=1e-9, name="region end")
grader.assert_equal(data["cause"], cause, name="cause")
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "fix_perf", "locked": false, "schema_version": 3, "solution": true, "task": false}
def fix_perf(bug):
    """An nn.Module equal to bug.model without CPU fallbacks (traceable by torch.fx.symbolic_trace)."""
    ### BEGIN SOLUTION
    m = bug.model

    class Native(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m
            t = bug.args[0].shape[1]
            tri = torch.tril(torch.ones(t, t))
            self.register_buffer("avg", tri / tri.sum(1, keepdim=True))  # running mean as one matmul
            if hasattr(m, "decay"):
                self.register_buffer("masked", torch.tril(m.decay.detach()))  # mask once, not every call

        def forward(self, x):  # (B, T, d)
            if hasattr(self.m, "count"):
                return self.m.proj(self.avg @ x)
            if hasattr(self.m, "decay"):
                return self.m.proj(self.masked @ x)
            k = self.m.k(x)  # (B, T, d) -> (B, T, groups * d) with a view and one copy
            b, t, d = k.shape
            return self.m.out(k.unsqueeze(2).expand(b, t, self.m.groups, d).reshape(b, t, self.m.groups * d))
    return Native()
    ### END SOLUTION


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "fix_perf_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_equal, check_in_range, check_tensor

_bug = BUGS["slow"]
_fixed = fix_perf(_bug)
check_equal("fix_perf(bug) is an nn.Module", isinstance(_fixed, torch.nn.Module), True)
fx.symbolic_trace(_fixed)  # raises if forward cannot be traced
_fast = timing_region(_bug.report(_fixed))
check_equal("no fallback left", _fast.causes(), [])
check_in_range("SIMULATED speed-up", _bug.report().time_s / _fast.wall_s, 1.3, 100.0)
_ref = _bug.reference().float()
check_tensor("fixed model on the simulated Spyre vs CPU", _bug.run(_fixed).float(), _ref, rtol=0.0,
             atol=TOL["slow"] * _ref.abs().max().item())
_x = torch.randn(_bug.args[0].shape, generator=torch.Generator().manual_seed(1))
_ref = _bug.reference(_x).float()
check_tensor("fixed model on fresh inputs of the same shape", _bug.run(_fixed, _x).float(), _ref, rtol=0.0,
             atol=TOL["slow"] * _ref.abs().max().item(), hint="compute the function; do not store an answer")
### BEGIN HIDDEN TESTS
from common.debug import bugs as _bugs
from common.debug.timing import timing_region as _tr
from common.grading.verdicts.probe import Probe, graph_nodes as _graph_nodes

probe = Probe()  # fresh bugs: the learner's own and an unseen one of the same model class and another shape
_mine = _bugs.make_bug("slow", _bugs.learner_seed(LEARNER_ID))
_other = next(b for b in (_bugs.make_bug("slow", probe.seed + i) for i in range(200))
              if type(b.model) is type(_mine.model) and b.args[0].shape != _mine.args[0].shape)
for _name, _b in (("mine", _mine), ("unseen", _other)):
    _x0 = _b.args[0].clone()
    _x1 = torch.randn(_x0.shape, generator=torch.Generator().manual_seed(probe.seed))
    _f = fix_perf(_b)
    _row = {"module": isinstance(_f, torch.nn.Module)}
    try:
        fx.symbolic_trace(_f)
        _row["ops"] = [n["target"] for n in _graph_nodes(_b.compile(_f, (_x0.clone(),)).aten)
                       if n["op"] == "call_function"]
        _row["causes"] = [str(c) for c in _tr(_b.report(_f)).causes()]
        _row["time_s"] = float(_b.report(_f).time_s)
        _row["outs"] = [_b.run(_f, _x0.clone()), _b.run(_f, _x1)]
    except Exception as _exc:
        _row["error"] = f"{type(_exc).__name__}: {_exc}"
    probe.send(_name, _row)
probe.send("learner", str(LEARNER_ID))
### JUDGEMENT
import torch

from answers import variant
from common.checks import grader
import common.debug.bugs as bugs
from common.sim.machines.spyre import NEAREST_NATIVE

data, seed = probe.received()
mine = bugs.make_bug("slow", bugs.learner_seed(data["learner"]))
other = variant("slow", seed, like=lambda b: type(b.model) is type(mine.model) and b.args[0].shape != mine.args[0].shape)
for name, bug in (("mine", mine), ("unseen", other)):
    got = data[name]
    grader.assert_equal(got["module"], True, name=f"fix_perf(bug) is an nn.Module ({name})")
    grader.assert_equal(got.get("error"), None, name=f"fix traces, compiles and runs ({name})")
    grader.assert_equal(got["causes"], [], name=f"no fallback left ({name})")
    host = [t for t in got["ops"] if ".".join(t.split(".")[:2]) in NEAREST_NATIVE]
    grader.assert_equal(host, [], name=f"no op without a Spyre kernel in the compiled graph ({name})")
    grader.assert_in_range(bug.report().time_s / got["time_s"], 1.3, 100.0, name=f"SIMULATED speed-up ({name})")
    inputs = (bug.args[0], torch.randn(bug.args[0].shape, generator=torch.Generator().manual_seed(seed)))
    for i, (x, out) in enumerate(zip(inputs, got["outs"], strict=True)):
        ref = bug.reference(x).float()
        grader.assert_tensor(out.float(), ref, rtol=0.0, atol=5e-3 * ref.abs().max().item(),
                             name=f"fixed model on the simulated Spyre vs CPU ({name}, input {i})")
### END HIDDEN TESTS

# %%
bug = BUGS["slow"]
try:
    fixed_report = bug.report(fix_perf(bug))
except (NameError, NotImplementedError):
    fixed_report = None
    print("fix_perf is not written yet: only the slow step is shown")
rows = {"slow (as given)": timing_region(bug.report())}
if fixed_report is not None:
    rows["fixed"] = timing_region(fixed_report)
cats = ("kernel", "communication", "transfer", "host", "overhead", "idle")
colors = (SEQUENCE[1], SEQUENCE[2], SEQUENCE[0], EMPHASIS, "#bbbbbb", "#eeeeee")
fig, ax = plt.subplots(figsize=(10, 3.2), layout="constrained")
for i, (label, region) in enumerate(rows.items()):
    left, split = 0.0, region.split()
    for c, col in zip(cats, colors):
        ax.barh(i, split[c] * 1e6, left=left, color=col, edgecolor="#999999", lw=0.4, label=c if i == 0 else None)
        left += split[c] * 1e6
    ax.plot(region.optimum_s() * 1e6, i, "k|", ms=22, mew=2, label="optimum (sum of floors)" if i == 0 else None)
    print(region)
ax.set_yticks(range(len(rows)), list(rows))
ax.invert_yaxis()
ax.set_xlabel("SIMULATED time (µs), exclusive split")
ax.set_title(f"SIMULATED Spyre: where the time of your perf bug ({type(bug.model).__name__}) goes, before and after")
ax.legend(ncol=7, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3))
plt.show()

# %% [markdown]
# ## Analysis
#
# **The five stacks.** What each failure layer looks like elsewhere: a few sentences each, with numbers from your
# own runs.

# %% [markdown]
# **Q1 (Bug 1).** The transfer counters of the failing copy were right and its output was wrong. Which layer
# does that rule out, which does it point to, and what experiment on shapes (63, 64, 65, 128 elements) would
# convince a torch-spyre developer?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_stick", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# Correct DMA traffic rules out memory placement/DMA: every byte reached LX and came back. The values past the
# first whole stick are wrong, so the kernel's loop range is wrong: code generation (the stick layout itself is
# right — the tensor occupies two sticks with 126 B of padding). 63 and 64 elements (one stick) and 128 (two full
# sticks) are right, 65 loses element 64: the range is computed as whole sticks, at least one.
# === END MARK SCHEME ===

# %% [markdown]
# **Q2 (comparative prediction).** Before the simulators answer, rank the five machines by the SIMULATED time of
# one step of your **performance bug's** model, fastest first: what does each do with the op Spyre falls back on?
# The reveal sets it beside the simulated order and adds both to your map.

# %%
from common.errors import DFAError
from common import explore
from common.landscape import open_map

lm = open_map(5, scratch=FAST)  # your landscape map: the prediction is kept beside it
P_SLOW = explore.predict("course5.lab5.perf-bug-rank", "your perf bug's model, one step: fastest first",
                         kind="ranking", choices=("gpu", "tpu", "wse", "lpu", "spyre"), lm=lm, course=5)
if explore.widgets_can_render():
    display(P_SLOW.form())  # pick and commit here, or call P_SLOW.commit([...]) in the next cell

# %% nbgrader={"grade": false, "grade_id": "predict_slow", "locked": false, "schema_version": 3, "solution": true, "task": false}
# Your ranking, fastest first (three or more machines), committed before the next cell runs the simulators.
### BEGIN SOLUTION
P_SLOW.commit(["lpu", "wse", "tpu", "gpu", "spyre"])
### END SOLUTION

# %%
from common.debug.divergence import compile_graph

bug = BUGS["slow"]
rows = []
for backend in ("gpu", "tpu", "wse", "lpu", "spyre"):
    c = compile_graph(bug.model, bug.args, backend)
    rows.append({"system": backend, "fallback ops": c.report.counters.get("fallback_ops", 0),
                 "SIMULATED time (us)": round(c.report.time_s * 1e6, 2), "bottleneck": c.report.bottleneck})
print(f"your perf model ({type(bug.model).__name__}) on the five simulated systems:")
print(pd.DataFrame(rows).to_string(index=False))
try:  # the score is steps per second: higher is faster
    P_SLOW.reveal({r["system"]: 1e6 / r["SIMULATED time (us)"] for r in rows})
    lm.save()
except DFAError as exc:  # no ranking committed yet
    print(exc)

# %% [markdown]
# **Q2 (why).** On GPU (Inductor), TPU (XLA), the LPU and the WSE, is that op a host round trip, nothing at all,
# or a compile error, and in which layer? Where did your ranking miss, and what does the simulator *not* model?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_compare", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# GPU: the op has a CUDA kernel (or Inductor's extern fallback) — no host round trip. TPU/XLA: cumsum, tril and
# repeat lower to HLO — native, nothing visible. LPU and WSE: no host to fall back to — an op without a kernel is
# a compile error (coverage layer), and these ops are supported, so nothing. Only Spyre pays the sync + PCIe +
# host + relaunch. The simulators agree (fallback_ops > 0 only on Spyre); they do not model compile errors for
# uncovered ops on WSE/LPU, nor Inductor's extern kernels breaking fusion on the GPU.
# === END MARK SCHEME ===

# %% [markdown]
# **Q3 (method).** Your hang was reported by the runtime either as a DMA timeout or as a deadlock: which was
# it, and which layer does that put it in? On which systems can a run-time deadlock not happen at all, and why? How would the same oversized transfer surface there?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_hang", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# On the Groq LPU the compiler schedules every instruction and transfer statically: there are no run-time waits
# to form a cycle, so a conflict is a compile-time scheduling failure; the Cerebras WSE also fixes its routes at
# compile time (a cyclic routing plan is rejected). An oversized transfer there does not fit the compiler's SRAM
# plan: the compile fails or asks for more chips (memory layer) instead of hanging. On GPU/TPU/Spyre waits are
# resolved at run time, so the same mistake becomes a watchdog timeout or a deadlock report. The learner names
# their own: a DMA timeout (memory: a transfer never completed) or a deadlock (schedule: a cycle of waits).
# === END MARK SCHEME ===

# %% [markdown]
# **Q4 (bug or noise).** Your bisection of `DropBlock`: at which depth did the output first change, and was it a
# bug by the rule of Part 3? What did `fallback_random=True` show? Is it a compiler defect to report, a layer's
# documented behaviour, or noise — and how would you compare eager and compiled outputs of a model with dropout?

# %% [markdown] nbgrader={"grade": true, "grade_id": "q_bisect", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# === BEGIN MARK SCHEME ===
# eager and aot_eager match bit for bit: capture and lowering keep aten's random numbers. Inductor is a "bug" by
# the rule: thousands of elements differ by O(1), a different dropout mask, not rounding. With fallback_random=True
# Inductor matches bit for bit, so the cause is Inductor's code generation for random ops (it draws from its own
# generator instead of calling aten's): documented behaviour of the codegen layer, not a defect and not noise.
# Compare with fallback_random=True, or in eval mode, or compare statistics (the kept fraction, the mean), never
# elements of two different masks.
# === END MARK SCHEME ===

# %% [markdown]
# ## Landscape map
#
# Add this course's rows to the accelerator landscape map, then render the map so far: for each system, in your
# own words, how an unsupported op and a hang surface (Part 1's taxonomy, Q2 and Q3 are your sources; the grader
# reads them for the mechanism they name, and your Spyre hang row must be *your* hang), and the simulated cost of
# your performance bug.
#
# One map serves all six courses; its catalog and simulator rows are rebuilt when missing. On Colab,
# `KEEP_ON_DRIVE = True` keeps it on Google Drive.

# %%
import tempfile

from common.landscape import SYSTEMS, download_map, keep_on_drive, open_map, upload_map
from common.landscape.rows import add_rows, row_problems

KEEP_ON_DRIVE = False  # Colab only: True keeps your map on Google Drive for the next course
if KEEP_ON_DRIVE and not FAST:
    keep_on_drive()
ATTRIBUTES = ("unsupported op", "a hang surfaces as")

# %% nbgrader={"grade": false, "grade_id": "landscape_rows", "locked": false, "schema_version": 3, "solution": true, "task": false}
# In your own words (3 to 25 each), per system: MY_ROWS[attribute][system] = "..."; Q2, Q3 and Part 1's
# taxonomy are your sources. Your Spyre hang row says what YOUR hang was.
MY_ROWS = {}
### BEGIN SOLUTION
MY_ROWS = {
    "unsupported op": {
        "GPU": "an extern aten kernel that breaks the fusion, no host trip",
        "TPU": "a CPU round trip with a device sync (XLA fallback)",
        "WSE": "a compile error: no host to fall back to",
        "LPU": "a compile error: the static schedule has no host path",
        "Spyre": "a CPU fallback: sync, PCIe round trip, relaunch",
    },
    "a hang surfaces as": {
        "GPU": "a watchdog timeout in a stuck NCCL collective",
        "TPU": "a barrier or collective timeout at run time",
        "WSE": "a routing plan rejected at compile time",
        "LPU": "a scheduling failure at compile time, never at run time",
        "Spyre": ("a DMA timeout: a transfer never completed" if HANG_ERROR is faults.SimTimeoutError
                  else "a deadlock report: a cycle of waits between kernels"),
    },
}
### END SOLUTION

# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "landscape_rows_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from common.checks import check_no_problems

check_no_problems("your landscape rows", row_problems(MY_ROWS, ATTRIBUTES),
                  hint="every attribute, all five systems, 3 to 25 words each, different per system")
### BEGIN HIDDEN TESTS
from common.grading.verdicts.probe import Probe

probe = Probe()
probe.send("learner", str(LEARNER_ID))
try:
    probe.send("rows", {str(a): {str(k): str(v) for k, v in dict(cells).items()} for a, cells in dict(MY_ROWS).items()})
except Exception:
    probe.send("rows", None)
### JUDGEMENT
from answers import landscape_vocab
from common.checks import grader
import common.debug.bugs as bugs
from common import landscape
from common.landscape.rows import row_problems, vocabulary_misses

data, seed = probe.received()
attributes = ("unsupported op", "a hang surfaces as")
rows = data["rows"] or {}
grader.assert_equal(row_problems(rows, attributes), [], name="rows complete: every attribute and system, 3 to 25 words")
vocab = landscape_vocab(bugs.make_bug("hang", bugs.learner_seed(data["learner"])))  # the key's hang, not theirs
misses = vocabulary_misses(rows, vocab)
grader.assert_in_range(1 - len(misses) / (len(attributes) * len(landscape.SYSTEMS)), 0.8, 1.0,
                       name="rows name the right mechanisms")
grader.assert_equal(("a hang surfaces as", "Spyre") in misses, False, name="your Spyre hang row agrees with your hang")
### END HIDDEN TESTS

# %%
from common.landscape.courses import fill_course

# lm: the map the Analysis opened (open_map(5, scratch=FAST)), with your Q2 prediction in it
if not FAST:  # the simulator's row of this course (the autograder's scratch map does without it)
    fill_course(lm, 5)
if row_problems(MY_ROWS, ATTRIBUTES):
    print("your landscape rows are not written yet (MY_ROWS): the map shows the earlier courses and the "
          "simulated rows of this one")
else:
    add_rows(lm, MY_ROWS, course=5)
bug = BUGS["slow"]
try:
    speedup = bug.report().time_s / bug.report(fix_perf(bug)).time_s
    lm.add("Spyre", "fallback removed: step speed-up", round(speedup, 2), course=5, source="simulated",
           overwrite=True)
except (NameError, NotImplementedError):
    print("fix_perf is not written yet: no speed-up row")
_mine = [globals().get(n) for n in ("STICK_LAYER", "HANG_LAYER")]
if all(isinstance(v, str) for v in _mine):  # your own verdicts on the wrong value and the hang
    lm.add("Spyre", "layers of my planted bugs (wrong value, hang)", ", ".join(_mine), course=5, source="learner", overwrite=True)
else:
    print("the layers of Part 2 are not set yet: no row for them")
lm.save()
print(lm.frame().to_string())
fig, ax = plt.subplots(figsize=(15, 1.2 + 0.55 * len(lm.frame())), layout="constrained")
lm.render(ax=ax, title="Accelerator landscape after Course 5 (catalog, learner and SIMULATED rows labelled)")
plt.show()

# %% [markdown]
# ## Wrap-up
#
# - **Name the layer first**: eight layers from capture to numerics; the symptom is seen at the output, the
#   cause sits where the information was first wrong.
# - **Localise node by node**: the first node that differs from a CPU reference is where the error enters;
#   everything after it only inherits it.
# - **Reduce until it is 1-minimal and still fails the same way** — same exception, same diverging op — or you
#   will fix a different bug.
# - **Bound the region, then split its time**: kernel, transfer, communication, host, overhead; compare with the
#   sum of the floors, and name the cause (here a CPU fallback).
# - **Work around in the model, report to the compiler**: padding to whole sticks, a max-shifted softmax,
#   smaller calls and native rewrites are workarounds; the minimal reproducer is the bug report.
#
# Next: the **Dataflow Deep Dive** (`deepdive5_spyre`) reads the compiled kernel descriptions of the failing
# `clone` and shows the copy range stopping at one stick, next to the correct 63-, 64-, 65- and 128-element
# cases.

# %% [markdown]
# ## Going further (optional)
#
# Two more exercises, not graded: a fourth planted bug (a NaN) with the Part 2 method, and the exclusive time
# split that `timing_region(...).split()` did for you in Part 4.

# %% [markdown]
# ### A fourth planted bug — NaN
#
# **Spec.** (a) Set `OVERFLOW_NODE` (first diverging node) and `OVERFLOW_REPRO`. (b) `OVERFLOW_LAYER`: a
# layer key. (c) Write `fix_overflow(bug)`: the simulated Spyre's output of a rewritten model that is finite
# and matches the CPU. The compiler's softmax is what it is — change what it is given (a softmax is unchanged
# when a constant is subtracted from each row). Again it must work for any variant.

# %%
bug = BUGS["nan"]
out = bug.run()
print(f"SIMULATED Spyre: {torch.isnan(out).sum().item()} NaN of {out.numel()}; CPU reference finite: "
      f"{torch.isfinite(bug.reference()).all().item()}")

# %% nbgrader={"grade": false, "grade_id": "overflow_locate", "locked": false, "schema_version": 3, "solution": true, "task": false}
OVERFLOW_NODE = OVERFLOW_REPRO = None  # set both: a node name, a Reproducer
### BEGIN SOLUTION
_bug = BUGS["nan"]
_c = _bug.compile(_bug.model, _bug.args)
OVERFLOW_NODE = first_divergence(None, _bug.args, compiled=_c).node
OVERFLOW_REPRO = reduce(_c, _bug.args, _bug.compile_fn)
### END SOLUTION
print(OVERFLOW_NODE, OVERFLOW_REPRO)

# %%
from common.checks import check_equal, check_type

_bug = BUGS["nan"]
_aten = _bug.compile(_bug.model, _bug.args).aten
check_type("OVERFLOW_NODE", OVERFLOW_NODE, str)
check_equal("OVERFLOW_NODE names a node of the compiled aten graph",
            OVERFLOW_NODE in {n.name for n in _aten.graph.nodes if n.op == "call_function"}, True,
            hint="a name from first_divergence(...).table['node']")
check_type("OVERFLOW_REPRO", OVERFLOW_REPRO, Reproducer)
check_equal("the reproducer diverges (it does not raise)", OVERFLOW_REPRO.failure.kind, "diverges")

# %% nbgrader={"grade": false, "grade_id": "overflow_layer", "locked": false, "schema_version": 3, "solution": true, "task": false}
OVERFLOW_LAYER = None  # a layer key
### BEGIN SOLUTION
OVERFLOW_LAYER = "numerics"
### END SOLUTION
print(OVERFLOW_LAYER)

# %%
from common.checks import check_equal

check_equal("OVERFLOW_LAYER is a layer key", OVERFLOW_LAYER in taxonomy.LAYER_KEYS, True,
            hint=f"one of {', '.join(taxonomy.LAYER_KEYS)}")

# %% nbgrader={"grade": false, "grade_id": "fix_overflow", "locked": false, "schema_version": 3, "solution": true, "task": false}
def fix_overflow(bug):
    """The simulated Spyre's output of bug.model with every softmax input shifted by its row maximum."""
    ### BEGIN SOLUTION
    gm = bugs.trace(bug.model)
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is torch.softmax:
            x = node.args[0]
            dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else -1)
            with gm.graph.inserting_before(node):
                peak = gm.graph.call_method("amax", (x,), {"dim": dim, "keepdim": True})
                shifted = gm.graph.call_function(torch.sub, (x, peak))
            node.args = (shifted, *node.args[1:])
    gm.recompile()
    return bug.run(gm)
    ### END SOLUTION


# %%
from common.checks import check_equal, check_tensor

_bug = BUGS["nan"]
_n0 = len(_bug.runs)
_fixed = fix_overflow(_bug)
check_equal("fix ran on the simulated Spyre", bugs.device_problems(_bug, _fixed, _n0, rtol=TOL["nan"]), [],
            hint="return what bug.run(your_rewritten_model) gives")
_ref = _bug.reference().float()
check_tensor("fixed output vs CPU", _fixed.float(), _ref, rtol=0.0, atol=TOL["nan"] * _ref.abs().max().item(),
             hint="within the simulated Spyre's fp16 tolerance of the CPU answer")

# %% [markdown]
# ### The exclusive time split, written yourself
#
# **Spec.** Write `split_time(events, t0, t1, priority=PRIORITY)`: a dict with the six categories (keys
# `kernel`, `communication`, `transfer`, `host`, `overhead`, `idle`) → seconds of `[t0, t1]`, exclusive,
# summing to `t1 - t0`. Each instant goes to the first category of `priority` (a tuple of the five non-idle
# categories, highest first) that has an event running then, or to `idle`. Asking another order answers
# another question: with transfer first, the result's `transfer` is all the time a DMA ran, hidden or not. An
# event's category comes from `event.kind`: compute → kernel, comm → communication, dma → transfer,
# host → host, launch/sync → overhead. Worked example: a compute event over [0, 2] and a dma event over [1, 3]
# in the window [0, 4] → kernel 2, transfer 1, idle 1; with `priority` starting `("transfer", "kernel", …)` →
# transfer 2, kernel 1, idle 1. (`timing_region(...).split()` uses the default order only.)

# %% nbgrader={"grade": false, "grade_id": "split_time", "locked": false, "schema_version": 3, "solution": true, "task": false}
PRIORITY = ("kernel", "communication", "transfer", "host", "overhead")


def split_time(events, t0, t1, priority=PRIORITY):
    """Exclusive seconds of [t0, t1] per category: the first of `priority` running at each instant, else idle."""
    kind_to = {"compute": "kernel", "comm": "communication", "dma": "transfer", "host": "host",
               "launch": "overhead", "sync": "overhead"}
    ### BEGIN SOLUTION
    order = (*priority, "idle")
    spans = [(max(e.start, t0), min(e.end, t1), order.index(kind_to.get(e.kind, "overhead")))
             for e in events if e.end > t0 and e.start < t1 and e.duration > 0]
    cuts = sorted({t0, t1, *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    out = dict.fromkeys(order, 0.0)
    for a, b in zip(cuts, cuts[1:]):
        active = [p for s, e, p in spans if s <= a and e >= b]
        out[order[min(active)] if active else "idle"] += b - a
    return out
    ### END SOLUTION


# %%
from common.checks import check_equal, check_in_range, check_scalar, check_type
from common.sim.program import Event

_ev = [Event("a", "compute", "cores", 0.0, 2.0), Event("b", "dma", "dma", 1.0, 2.0)]
_got = split_time(_ev, 0.0, 4.0)
check_type("split_time", _got, dict)
for _k, _v in {"kernel": 2.0, "transfer": 1.0, "idle": 1.0, "host": 0.0}.items():
    check_scalar(f"worked example: {_k}", _got.get(_k), _v, abs_tol=1e-12)
_got = split_time(_ev, 0.0, 4.0, ("transfer", "kernel", "communication", "host", "overhead"))
for _k, _v in {"kernel": 1.0, "transfer": 2.0, "idle": 1.0}.items():
    check_scalar(f"worked example, transfer first: {_k}", _got.get(_k), _v, abs_tol=1e-12)
_r = BUGS["slow"].report()
_got = split_time(_r.events, 0.0, _r.time_s)
check_equal("six categories", sorted(_got), sorted(("kernel", "communication", "transfer", "host", "overhead",
                                                    "idle")))
check_scalar("your perf bug: parts add up to the step", sum(_got.values()), _r.time_s, rel=1e-9)
check_in_range("your perf bug: no negative part", min(_got.values()), 0.0, _r.time_s)

