"""Planted bugs on the simulated Spyre stack, seeded per learner.

Each bug is a small model, its inputs, and a *rule* the simulated compiler/runtime applies when it compiles
any graph (the full model, a reduced subgraph, or a learner's rewrite), so a reproducer fails for the same
reason the model did and a real workaround makes it pass:

* ``wrong``    every copy kernel computes its range in whole 64-element sticks
               (fault ``stick_copy`` on every copy op): a copy whose innermost dim is not a multiple of 64
               loses its tail (torch-spyre issue #524); the model has one such copy among aligned ones.
* ``hang``     a bundle whose input DMA exceeds a limit never completes:
               reported as a DMA timeout (``dma_timeout``) or, in the other variant, as a cyclic wait
               (``deadlock``). Smaller calls stay under the limit.
* ``nan``      softmax is compiled without the row-max subtraction (``fp16_overflow`` on every
               softmax): a branch with large logits gives inf/inf = NaN in fp16, the other branch is fine.
* ``slow``     a CPU fallback (``cumsum``, ``tril`` or ``repeat``, each with a native
               rewrite): correct but slow (a host round trip and a second bundle launch); the fix keeps the
               output and removes the cause.

``learner_seed(learner_id)`` hashes the learner id; ``make_bug(key, seed)`` varies which op, shape and layer
carry the fault (the answers change, the failure mode does not). A bug handed to the learner carries no
answer: no layer, no diverging node, no cause, and keys named after the symptom. The answer keys live with the
lab's grader-side answers, not here; the grader tests a fix on variants made from its own seed.

The simulated device keeps a trace: every completed ``bug.run`` appends a ``DeviceRun`` (the compiled graph,
its inputs, its output) to ``bug.runs``. ``device_problems`` reads that trace to tell a fix that ran on the
device from a CPU answer handed back: the output must be made of device outputs, those runs must have done
the model's FLOPs (the device's counters), and the graphs they ran must compute the model on fresh inputs.
For ``wrong`` the runs must also still copy through the faulty copy kernels (``faulty_copy_elements``): a rewrite
that turns the copy into another op routes around the fault instead of fixing the range.
``device_trace`` writes the same evidence as plain data (a hidden test's probe sends it; the grader judges it).
"""
from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch import nn

from common.debug.divergence import compile_graph
from common.errors import DFAError, unknown
from common.sim import faults as F

BUG_KEYS = ("wrong", "hang", "nan", "slow")


def learner_seed(learner_id: str) -> int:
    """A stable 32-bit seed from the learner id (sha256, not Python's hash()): the learner's visible bugs."""
    if not isinstance(learner_id, str) or not learner_id.strip():
        raise DFAError(f"learner_id must be a non-empty string, got {learner_id!r}")
    digest = hashlib.sha256(f"course5|{learner_id.strip().lower()}".encode()).hexdigest()
    return int(digest[:8], 16)


def _seed_hitting(i: int, n: int) -> int:
    """A Fault seed whose pick() lands on candidate i of n (Fault.pick uses random.Random(seed))."""
    return next(s for s in range(10_000) if random.Random(s).randrange(n) == i)


def plant_everywhere(compiled, kind: str) -> int:
    """Plant fault ``kind`` on every candidate op of an already compiled graph; returns how many."""
    cands = F.candidates(F.Fault(kind), compiled.ops)
    compiled.plant([F.Fault(kind, seed=_seed_hitting(i, len(cands))) for i in range(len(cands))])
    return len(cands)


def faulty_copy_elements(compiled) -> int:
    """Elements written by the copies a ``stick_copy`` fault is planted on: sum of prod(output shape)."""
    hit = {node for fault, node in compiled.planted if fault.kind == "stick_copy"}
    return sum(math.prod(o.shape) for o in compiled.ops if o.name in hit)


# ---- the models ----------------------------------------------------------------------------------------------
class FeatureMixer(nn.Module):
    """Three projections of widths ``widths``; each branch keeps a copy of its activation (e.g. for a cache)."""

    def __init__(self, d_in: int, widths: tuple[int, ...]):
        super().__init__()
        self.proj = nn.ModuleList(nn.Linear(d_in, w) for w in widths)
        self.out = nn.Linear(sum(widths), d_in)

    def forward(self, x):  # x: (B, T, d_in)
        kept = [p(x).clone() for p in self.proj]  # (B, T, w) each
        return self.out(torch.relu(torch.cat(kept, dim=-1)))  # (B, T, d_in)


class MLP(nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.up, self.down = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):  # (B, T, d)
        return self.down(torch.nn.functional.gelu(self.up(x)))


class TwoScaleAttention(nn.Module):
    """Two attention branches over the same q, k with different logit scales (one far too large)."""

    def __init__(self, d: int, scales: tuple[float, float]):
        super().__init__()
        self.q, self.k = nn.Linear(d, d), nn.Linear(d, d)
        self.scales = scales

    def forward(self, x):  # (B, T, d)
        q, k = self.q(x), self.k(x)
        out = 0
        for s in self.scales:
            att = torch.softmax(q @ k.transpose(-1, -2) * s, dim=-1)  # (B, T, T)
            out = out + att @ x  # (B, T, d)
        return out


class RunningMean(nn.Module):
    """Causal running mean over time, then a projection: the cumsum falls back to the CPU on Spyre."""

    def __init__(self, d: int, steps: int):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.register_buffer("count", torch.arange(1, steps + 1, dtype=torch.float32).reshape(1, steps, 1))

    def forward(self, x):  # (B, T, d) with T == steps
        return self.proj(torch.cumsum(x, dim=1) / self.count)


class DecayMix(nn.Module):
    """Mixes each step with the earlier ones through a learned lower-triangular matrix, re-masked every call:
    aten.tril falls back to the CPU on Spyre."""

    def __init__(self, d: int, steps: int):
        super().__init__()
        self.decay = nn.Parameter(torch.rand(steps, steps) / steps)
        self.proj = nn.Linear(d, d)

    def forward(self, x):  # (B, T, d)
        return self.proj(torch.tril(self.decay) @ x)  # (T, T) @ (B, T, d) -> (B, T, d)


class RepeatKV(nn.Module):
    """Shares one key projection between ``groups`` heads by repeating it (aten.repeat falls back)."""

    def __init__(self, d: int, groups: int):
        super().__init__()
        self.k, self.groups = nn.Linear(d, d), groups
        self.out = nn.Linear(d * groups, d)

    def forward(self, x):  # (B, T, d)
        return self.out(self.k(x).repeat(1, 1, self.groups))  # (B, T, d * groups) -> (B, T, d)


# ---- a bug ---------------------------------------------------------------------------------------------------
@dataclass
class DeviceRun:
    """One completed run on the simulated Spyre: the compiled graph, the inputs it was called with, its output."""

    compiled: object
    args: tuple
    out: object


@dataclass
class PlantedBug:
    key: str
    seed: int
    model: nn.Module
    args: tuple
    calls: int = 0
    runs: list = field(default_factory=list, repr=False)  # the device's trace: one DeviceRun per completed run
    _rule: dict = field(default_factory=dict, repr=False)  # how the buggy compiler treats every graph
    _cache: dict = field(default_factory=dict, repr=False)

    def _key(self, model, args) -> tuple:
        """A compile depends on the graph and the input shapes, dtypes and strides, not on the values: a
        parameter-free GraphModule is keyed by its code, anything else by identity (kept alive in the cache)."""
        shapes = tuple((tuple(a.shape), a.dtype, a.stride()) if isinstance(a, torch.Tensor) else a for a in args)
        stateless = isinstance(model, fx.GraphModule) and not any(True for _ in model.parameters()) \
            and not any(True for _ in model.buffers())
        return (model.code if stateless else id(model), shapes)

    def compile(self, model, args):
        """Compile ``model`` (module or GraphModule) for simulated Spyre with this bug's rule applied (cached:
        the reducer and the checks recompile the same candidates many times)."""
        key = self._key(model, args)
        if key not in self._cache:
            if len(self._cache) >= 512:
                self._cache.clear()
            self._cache[key] = (model, self._compile(model, args))
        return self._cache[key][1]

    def _compile(self, model, args):
        compiled = compile_graph(model, args, "spyre")
        if self.key == "wrong":
            plant_everywhere(compiled, "stick_copy")
        elif self.key == "nan":
            plant_everywhere(compiled, "fp16_overflow")
        elif self.key == "hang":
            limit = self._rule["dma_limit_bytes"]
            for k in compiled.program.kernels:
                if sum(k.inputs.values()) > limit:
                    names = [o.name for o in compiled.ops]  # the kernel may start with an inserted restickify
                    idx = next(names.index(o.name) for o in k.ops if o.name in names)
                    compiled.plant([F.Fault(self._rule["fault"], seed=_seed_hitting(idx, len(compiled.ops)),
                                            params={"timeout_s": 1.0})])
                    break
        return compiled

    def compile_fn(self, gm, inputs):
        return self.compile(gm, inputs)

    def run(self, model=None, *args):
        """Run ``model`` (default: the bug's) on the buggy simulated Spyre; raises as its runtime would."""
        model = self.model if model is None else model
        args = args or self.args
        self.calls += 1
        compiled = self.compile(model, args)
        out = compiled(*args)
        self.runs.append(DeviceRun(compiled, tuple(args), out))
        return out

    def reference(self, *args) -> torch.Tensor:
        """The CPU eager output of the original model (fp32, or fp16 for an fp16 model)."""
        with torch.no_grad():
            return self.model(*(args or self.args))

    def report(self, model=None, *args):
        """The simulated Report of one compile (no run)."""
        return self.compile(self.model if model is None else model, args or self.args).report


def make_bug(key: str, seed: int) -> PlantedBug:
    """Bug ``key`` in the variant chosen by ``seed`` (see the module docstring)."""
    if key not in BUG_KEYS:
        raise unknown("bug", key, BUG_KEYS)
    rng = random.Random(f"{key}:{seed}")
    torch.manual_seed(rng.randrange(2**31))
    if key == "wrong":
        odd = rng.choice((65, 72, 80, 97, 100, 130))
        widths = [rng.choice((64, 128)), rng.choice((64, 128))]
        widths.insert(rng.randrange(3), odd)
        model = FeatureMixer(32, tuple(widths)).half()  # fp16 end to end, as in torch-spyre #524
        x = torch.randn(2, rng.choice((3, 4, 5)), 32, dtype=torch.float16)
        return PlantedBug(key, seed, model, (x,))
    if key == "hang":
        d, hidden = 64, 128
        model = MLP(d, hidden)
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        rows_ok = rng.randrange(24, 100)
        x = torch.randn(4, 32, d)  # 128 rows > rows_ok: the full call is too large
        fault = rng.choice(("dma_timeout", "deadlock"))
        return PlantedBug(key, seed, model, (x,),
                          _rule={"dma_limit_bytes": weights + rows_ok * d * x.element_size(), "fault": fault})
    if key == "nan":
        big = rng.choice((6.0, 8.0, 10.0))
        scales = [32 ** -0.5, 32 ** -0.5]
        scales[rng.randrange(2)] = big
        model = TwoScaleAttention(32, tuple(scales))
        return PlantedBug(key, seed, model, (torch.randn(2, rng.choice((6, 8, 12)), 32),))
    op = rng.choice(("cumsum", "tril", "repeat"))
    steps = rng.choice((32, 48, 64))
    model = {"cumsum": lambda: RunningMean(256, steps), "tril": lambda: DecayMix(256, steps),
             "repeat": lambda: RepeatKV(128, rng.choice((2, 4)))}[op]()
    return PlantedBug(key, seed, model, (torch.randn(2, steps, model.proj.in_features if op != "repeat"
                                                     else 128),))


def learner_bugs(learner_id: str) -> dict[str, PlantedBug]:
    """The four bugs of one learner (from the learner id alone)."""
    seed = learner_seed(learner_id)
    return {k: make_bug(k, seed) for k in BUG_KEYS}


def _values(t: torch.Tensor) -> torch.Tensor:
    return t.detach().double().flatten().nan_to_num(nan=1e300, posinf=1e301, neginf=-1e301)


def _contained(part: torch.Tensor, whole: torch.Tensor) -> bool:
    """Is the multiset of values of ``part`` inside that of ``whole``?"""
    if part.numel() > whole.numel():
        return False
    up, cp = torch.unique(part, return_counts=True)
    uw, cw = torch.unique(whole, return_counts=True)
    at = torch.searchsorted(uw, up).clamp(max=len(uw) - 1)
    return bool(((uw[at] == up) & (cw[at] >= cp)).all())


def device_problems(bug: PlantedBug, out, since: int = 0, *, rtol: float = 5e-3, fresh_seed: int = 0) -> list[str]:
    """Why ``out`` is not the simulated Spyre's own answer for ``bug`` (``[]``: it is), from the device's trace
    ``bug.runs[since:]``: ``out`` is made of the outputs of device runs, those runs did at least 90 % of the
    model's FLOPs (the compile's counters), and each graph they ran computes the model on fresh inputs of the
    same shape (within ``rtol`` x max|CPU|), so an answer held as a constant does not count."""
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        return [f"expected a floating-point torch.Tensor, got {type(out).__name__}"]
    runs = [r for r in bug.runs[since:] if isinstance(r.out, torch.Tensor)]
    if not runs:
        return ["no run of the simulated Spyre completed while your fix ran: return what bug.run(...) gives"]
    mine = _values(out)
    used = [r for r in runs if _contained(_values(r.out), mine)]
    if not used or not _contained(mine, torch.cat([_values(r.out) for r in used])):
        return ["your output is not made of the simulated Spyre's outputs: values came from somewhere else "
                "(the CPU?)"]
    need = bug.report().flops
    done = sum(r.compiled.report.flops for r in used)
    if done < 0.9 * need:
        return [f"the device's counters show {done:.3g} FLOPs for the runs your output came from; the model "
                f"needs {need:.3g}: compute the model on the device, do not hand back a stored answer"]
    if bug.key == "wrong":
        copies, copied = faulty_copy_elements(bug.compile(bug.model, bug.args)), \
            sum(faulty_copy_elements(r.compiled) for r in used)
        if copied < copies:
            return [f"your runs copy {copied} elements through the faulty copy kernels, the model copies {copies}: "
                    "fix the range each copy covers (e.g. whole sticks), do not route around the copy"]
    gen = torch.Generator().manual_seed(fresh_seed)
    for r in {id(r.compiled): r for r in used}.values():
        fresh = tuple(torch.randn(a.shape, generator=gen).to(a.dtype) if isinstance(a, torch.Tensor) else a
                      for a in r.args)
        got, want = r.compiled(*fresh).double(), bug.reference(*fresh).double()
        if got.shape != want.shape or not bool(((got - want).abs() <= rtol * want.abs().max() + 1e-12).all()):
            return ["a graph you ran on the device does not compute bug.model on fresh inputs of the same shape: "
                    "it must compute the answer, not hold it"]
    return []


def device_trace(bug: PlantedBug, since: int = 0, fresh_seed: int = 0) -> list[dict]:
    """The device's trace ``bug.runs[since:]`` as plain data: per run its output, the FLOPs on the device's
    counters, the elements its faulty copies wrote, its inputs' shapes and dtypes, and its graph's output on
    fresh inputs of those shapes (run ``j`` draws them from ``torch.Generator().manual_seed(fresh_seed + j)``,
    one ``randn`` per tensor input)."""
    rows = []
    for j, r in enumerate(bug.runs[since:]):
        if not isinstance(r.out, torch.Tensor):
            continue
        gen = torch.Generator().manual_seed(fresh_seed + j)
        fresh = tuple(torch.randn(a.shape, generator=gen).to(a.dtype) if isinstance(a, torch.Tensor) else a
                      for a in r.args)
        rows.append({"out": r.out, "flops": float(r.compiled.report.flops), "j": j,
                     "faulty_copy_elements": faulty_copy_elements(r.compiled),
                     "inputs": [[list(a.shape), str(a.dtype).removeprefix("torch.")] for a in r.args
                                if isinstance(a, torch.Tensor)],
                     "fresh_out": r.compiled(*fresh)})
    return rows


def trace(model) -> fx.GraphModule:
    """``fx.symbolic_trace`` of a bug's model, the level at which the workarounds rewrite it."""
    return model if isinstance(model, fx.GraphModule) else fx.symbolic_trace(model)
