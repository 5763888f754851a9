"""Grader-side answers of Lab 5 (instructor edition only; imported by hidden tests, never by the learner).

* ``REPORT_LAYERS``: the layer of every failure report of ``common.debug.taxonomy.REPORTS`` (its ids are
  neutral; the rule for a hang: what the stuck work waited for — a transfer is ``memory``, other work is
  ``schedule``; the watchdog only reports).
* ``layer_of(bug)``: the layer of a planted bug: wrong value -> codegen (the copy kernel's range stops at a
  whole stick while the DMA moved every byte), NaN -> numerics, slow -> coverage (a CPU fallback), hang ->
  memory for a DMA that never completes, schedule for a cyclic wait.
* ``secret_bug(key, tag, like)``: a variant the learner never saw, seeded by
  ``sha256(GRADER_SALT | GRADER_STUDENT | key | tag | i)`` (the first ``i`` whose bug satisfies ``like``).
* ``split_time(events, t0, t1, priority)``: the exclusive split under any priority order, obtained from the
  library's fixed-order ``exclusive_split`` by relabelling each event's kind (rank r of ``priority`` gets the
  kind of the library's rank r), then renaming the result back.
* ``perf_region(bug)``: (t0, t1) of the kernel holding the host op, and its cause, from ``timing_region``.
* Part 3 (the CPU stack): ``classify_divergence`` (the spec's rule), ``divergence_cases(tag)`` (salted synthetic
  match/noise/bug cases, including bugs a fixed bf16 tolerance lets through), ``Chain``/``DropBlock`` (models
  with salted sizes) and ``planted_backend(kind, name)`` (torch.compile backends that plant a bug or noise).
* ``LANDSCAPE_VOCAB``: the terms each landscape cell must use, and those that contradict it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

import torch

from common.debug import bugs
from common.debug.timing import CATEGORIES, category, exclusive_split, timing_region

SALT = globals().get("GRADER_SALT") or os.environ.get("DFA_SALT", "local-dev-salt")
STUDENT = globals().get("GRADER_STUDENT", "local")

REPORT_LAYERS = {
    "R01": "capture", "R02": "codegen", "R03": "lowering", "R04": "capture", "R05": "coverage",
    "R06": "capture", "R07": "lowering", "R08": "layout", "R09": "schedule", "R10": "layout",
    "R11": "codegen", "R12": "memory", "R13": "layout", "R14": "schedule", "R15": "numerics",
    "R16": "codegen", "R17": "coverage", "R18": "schedule", "R19": "numerics", "R20": "lowering",
    "R21": "memory", "R22": "memory", "R23": "coverage", "R24": "numerics",
}

_FIXED = {"wrong": "codegen", "nan": "numerics", "slow": "coverage"}
_HANG = {"dma_timeout": "memory", "deadlock": "schedule"}


def layer_of(bug) -> str:
    return _HANG[bug._rule["fault"]] if bug.key == "hang" else _FIXED[bug.key]


def secret_seed(key: str, tag: str, i: int = 0) -> int:
    return int(hashlib.sha256(f"{SALT}|{STUDENT}|{key}|{tag}|{i}".encode()).hexdigest()[:8], 16)


def secret_bug(key: str, tag: str = "hidden", like=lambda b: True):
    """The first secret variant of bug ``key`` for which ``like(bug)`` holds."""
    for i in range(200):
        bug = bugs.make_bug(key, secret_seed(key, tag, i))
        if like(bug):
            return bug
    raise RuntimeError(f"no secret {key} variant satisfies the condition")


_KIND = {"kernel": "compute", "communication": "comm", "transfer": "dma", "host": "host", "overhead": "launch"}


def split_time(events, t0, t1, priority=CATEGORIES[:-1]) -> dict[str, float]:
    rank = {c: i for i, c in enumerate(priority)}
    relabelled = [dataclasses.replace(e, kind=_KIND[CATEGORIES[rank[category(e)]]]) for e in events]
    out = exclusive_split(relabelled, t0, t1)
    return {**{priority[i]: out[CATEGORIES[i]] for i in range(len(priority))}, "idle": out["idle"]}


def perf_region(bug) -> tuple[tuple[float, float], str]:
    report = bug.report()
    kernel = next(e.kernel for e in report.events if e.kind == "host")
    region = timing_region(report, kernel, kernel)
    return (region.t0, region.t1), region.causes()[0]


# --- Part 3: bisecting the CPU torch.compile stack ----------------------------------------------------------

def classify_divergence(out, eager, truth) -> str:
    """'match' if bitwise equal to eager; 'noise' if no farther from the fp64 truth than 2x eager's own error
    (plus one ulp of the output dtype at the truth's scale); else 'bug'."""
    if out.dtype == eager.dtype and out.shape == eager.shape and torch.equal(out, eager):
        return "match"
    if out.shape != truth.shape or not torch.isfinite(out).all():
        return "bug"
    scale = truth.abs().max().item()
    err_out = (out.double() - truth).abs().max().item()
    err_eager = (eager.double() - truth).abs().max().item()
    return "noise" if err_out <= 2 * err_eager + torch.finfo(out.dtype).eps * scale else "bug"


def divergence_cases(tag: str):
    """Synthetic (out, eager, truth, verdict) cases the learner never saw, seeded per learner and offering."""
    g = torch.Generator().manual_seed(secret_seed("divergence", tag))
    cases = []
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        truth = torch.randn(64, 32, generator=g, dtype=torch.float64) * (1 + 3 * torch.rand(1, generator=g).item())
        eager = truth.to(dtype)                                   # one rounding: the best any dtype can do
        # another rounding order: at most one ulp from the truth, like a fused kernel that rounds once
        ulp = torch.finfo(dtype).eps * truth.abs().to(dtype).double().clamp_min(torch.finfo(dtype).tiny)
        nudged = (truth + 0.4 * ulp * torch.sign(torch.randn(truth.shape, generator=g))).to(dtype)
        cases.append((eager.clone(), eager, truth, "match"))
        cases.append((nudged, eager, truth, "noise"))
        # a real bug that a fixed tolerance would let through: 1.2 % on a few elements (torch.testing's bf16
        # rtol is 1.6 %), or 0.1 % in fp32 where eager is exact to 1e-7
        bad = eager.clone()
        idx = truth.abs().view(-1).topk(3).indices  # the largest elements: relative error 1.2 % there
        rel = 0.012 if dtype != torch.float32 else 1e-3
        flat = bad.view(-1)
        flat[idx] = (flat[idx].double() + rel * truth.abs().max()).to(dtype)
        cases.append((bad, eager, truth, "bug"))
        nan = eager.clone()
        nan.view(-1)[int(idx[0])] = float("nan")
        cases.append((nan, eager, truth, "bug"))
    return cases


class Chain(torch.nn.Module):
    """A bf16 pointwise chain with salted coefficients: Inductor fuses it and rounds once."""

    def __init__(self, a: float, b: float):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x):  # (N, D) -> (N, D)
        return torch.tanh(x * self.a + self.b) * torch.sigmoid(x) + 0.1 * x * x


class DropBlock(torch.nn.Module):
    """Linear + dropout in training mode: random numbers inside the graph."""

    def __init__(self, d: int):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)

    def forward(self, x):  # (N, d) -> (N, d)
        return torch.nn.functional.dropout(self.lin(x), 0.25, training=True)


def planted_backend(kind: str, name: str):
    """A torch.compile backend that runs Dynamo's graph, then plants a difference:
    'bug' adds 5 % of the output's scale to three elements; 'noise' runs the graph in float64 and rounds once
    (closer to the truth than eager); 'reseed' draws random numbers from another seed (a real bug for dropout).
    """
    def backend(gm, example_inputs):
        def run(*args):
            if kind == "noise":
                up = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
                dtypes = [a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
                out = gm(*up)
                return type(out)(o.to(dtypes[0]) if isinstance(o, torch.Tensor) else o for o in out)
            if kind == "reseed":
                torch.manual_seed(torch.initial_seed() + 1)
            out = list(gm(*args))
            if kind == "bug":
                first = out[0].clone()
                first.view(-1)[:3] += 0.05 * first.abs().max()
                out[0] = first
            return tuple(out)
        return run

    backend.__name__ = name
    return backend


# --- the landscape rows: terms that name each mechanism, and terms that contradict it ------------------------
_COMPILE_ERROR = r"compil\w*[- ]?(time )?(error|fail|reject)|rejected|does not compile|refuse"
_HOST_TRIP = r"(cpu|host)[- ]?(round[- ]?trip|fallback|fall back|op)|round[- ]?trip|pcie|fall(s)? back to the (cpu|host)"
_UNSUPPORTED = {
    "GPU": ((r"extern", r"aten", r"library", r"cuda kernel", r"eager kernel", r"fallback kernel", r"breaks? (the )?fusion"),
            (_COMPILE_ERROR, r"pcie", r"cpu round[- ]?trip")),
    "TPU": ((_HOST_TRIP, r"outside compilation", r"\bsync"), (_COMPILE_ERROR,)),
    "WSE": ((_COMPILE_ERROR, r"no host"), (r"round[- ]?trip", r"(cpu|host) fallback", r"runs on the (cpu|host)")),
    "LPU": ((_COMPILE_ERROR, r"no host"), (r"round[- ]?trip", r"(cpu|host) fallback", r"runs on the (cpu|host)")),
    "Spyre": ((_HOST_TRIP,), (_COMPILE_ERROR,)),
}
_RUN_TIME_HANG = r"watchdog|nccl|barrier"


def landscape_vocab(hang_bug) -> dict:
    """The vocabulary per cell; the Spyre hang row must name the learner's own kind of hang."""
    if hang_bug._rule["fault"] == "dma_timeout":
        spyre = ((r"dma|transfer", r"time[- ]?out"), (r"deadlock", r"cycle", r"circular"))
    else:
        spyre = ((r"deadlock", r"cycle of waits", r"circular wait", r"wait(s|ing)? on each other"),
                 (r"dma time[- ]?out", r"transfer never"))
    hang = {
        "GPU": ((r"watchdog", r"time[- ]?out", r"nccl", r"stuck", r"hang"), (r"compile",)),
        "TPU": ((r"time[- ]?out", r"barrier", r"collective", r"watchdog", r"hang"), (r"compile",)),
        "WSE": ((r"compile", r"routing", r"placement", r"reject"), (_RUN_TIME_HANG,)),
        "LPU": ((r"compile", r"schedul", r"static"), (_RUN_TIME_HANG,)),
        "Spyre": spyre,
    }
    return {"unsupported op": _UNSUPPORTED, "a hang surfaces as": hang}
