"""Grader-side answers of Lab 5 (instructor edition only; imported by the judgements, never by the learner).

Every judgement rebuilds what it checks from plain data and a seed: the learner's visible bugs from the learner id
the probe sent (``bugs.learner_bugs``), the unseen variants from the grader's seed (``variant``).

* ``read_report(text)``: the first log entry of a failure report whose numbers go wrong, and its layer (the stage
  of the entry; the rule for a hang: what the stuck work waited for: a transfer is ``memory``, other work is
  ``schedule``).
* ``layer_of(bug)``: the layer of a planted bug: wrong value -> codegen (the copy kernel's range stops at a
  whole stick while the DMA moved every byte), NaN -> numerics, slow -> coverage (a CPU fallback), hang ->
  memory for a DMA that never completes, schedule for a cyclic wait.
* ``variant(key, seed, like)``: the unseen variant of bug ``key``: ``make_bug(key, seed + i)`` for the first
  ``i`` whose bug satisfies ``like`` (the probe makes the same one).
* ``repro_key(bug)``: the first diverging node (or the exception type) and the reducer's 1-minimal reproducer
  of a bug, as the plain data a probe sends for the learner's.
* ``trace_problems(bug, out, trace, rtol, fresh_seed)``: ``bugs.device_problems`` on the data of
  ``bugs.device_trace``: the output is made of device outputs, those runs did the model's FLOPs, and every graph
  they ran computes the model on the fresh inputs the judgement draws itself.
* ``split_time(events, t0, t1, priority)``: the exclusive split under any priority order, obtained from the
  library's fixed-order ``exclusive_split`` by relabelling each event's kind (rank r of ``priority`` gets the
  kind of the library's rank r), then renaming the result back.
* ``perf_region(bug)``: (t0, t1) of the kernel holding the host op, and its cause, from ``timing_region``.
* Part 3 (the CPU stack): ``classify_divergence`` (the spec's rule), ``divergence_cases(seed)`` (seeded synthetic
  match/noise/bug cases, including bugs a fixed bf16 tolerance lets through; the probe builds the same inputs).
* ``landscape_vocab(hang_bug)``: the terms each landscape cell must use, and those that contradict it.
"""

from __future__ import annotations

import dataclasses
import re

import torch

from common.debug import bugs
from common.debug.divergence import first_divergence
from common.debug.reducer import reduce
from common.debug.timing import CATEGORIES, category, exclusive_split, timing_region

# --- Part 1: reading a failure report ------------------------------------------------------------------------
_STAGE_LAYER = (("Dynamo trace", "capture"), ("AOTAutograd", "lowering"), ("device kernels", "coverage"),
                ("stick format", "layout"), ("scratchpad plan", "memory"),
                ("DMA in", "memory"), ("kernel k", "codegen"), ("dependencies", "schedule"),
                ("value check", "numerics"))


def _nums(pattern: str, text: str) -> list[float]:
    m = re.search(pattern, text)
    return [float(g) for g in m.groups()] if m else []


def _entry_wrong(body: str) -> bool:
    """Do the numbers of one log entry say that something went wrong there?"""
    if body.endswith("not reached"):
        return False
    if body.startswith("Dynamo trace"):
        graphs, times = _nums(r"(\d+) graph\(s\)", body) + _nums(r"compiled (\d+) time", body)
        return graphs > 1 or times > 1
    if body.startswith(("AOTAutograd", "device kernels")):
        done, total = _nums(r"(\d+) of (\d+)", body)
        return done < total
    if body.startswith("stick format"):
        ratio = _nums(r"computes ([\d.]+)x", body)
        if ratio:
            return ratio[0] > 1.0
        same, total = _nums(r"equals x at (\d+) of (\d+)", body)
        return same < total
    if body.startswith("scratchpad plan"):
        need, have = _nums(r"needs (\d+) MiB of (\d+) MiB", body)
        return need > have
    if body.startswith("DMA in"):
        moved, total = _nums(r"(\d+) of (\d+) bytes", body)
        same = _nums(r"host copy at (\d+) of (\d+)", body)
        return moved < total or (bool(same) and same[0] < same[1])
    if body.startswith("kernel k"):
        diff, tol = (float(v) for v in re.search(r"CPU (\S+) \(fp16 tolerance (\S+)\)", body).groups())
        bad = _nums(r"non-finite outputs: (\d+)", body)
        return not diff <= tol or bad[0] > 0
    if body.startswith("dependencies"):
        waits = dict(re.findall(r"(k\d+) waits for (k\d+)", body))
        cycle = any(waits.get(b) == a for a, b in waits.items())
        ops = re.findall(r"is in (\w+) #(\d+)|in (\w+) #(\d+)", body)
        return cycle or len({o[0] or o[2] for o in ops}) > 1
    if body.startswith("value check"):
        return _nums(r"non-finite values: (\d+)", body)[0] > 0
    raise ValueError(f"unknown log entry {body!r}")


def read_report(text: str) -> tuple[str, str]:
    """(the first log entry whose numbers go wrong, its layer): where the information was first wrong."""
    for line in text.splitlines()[1:]:
        entry, body = line.strip().split(" ", 1)
        if _entry_wrong(body):
            return entry, next(layer for stage, layer in _STAGE_LAYER if body.startswith(stage))
    raise ValueError("no entry of the report goes wrong")


_FIXED = {"wrong": "codegen", "nan": "numerics", "slow": "coverage"}
_HANG = {"dma_timeout": "memory", "deadlock": "schedule"}


def layer_of(bug) -> str:
    return _HANG[bug._rule["fault"]] if bug.key == "hang" else _FIXED[bug.key]


def variant(key: str, seed: int, like=lambda b: True):
    """The first of ``make_bug(key, seed + i)`` for which ``like(bug)`` holds (the probe's unseen variant)."""
    for i in range(200):
        bug = bugs.make_bug(key, seed + i)
        if like(bug):
            return bug
    raise RuntimeError(f"no {key} variant from seed {seed} satisfies the condition")


def repro_key(bug) -> tuple[str, dict]:
    """(first diverging node, or the exception type's name for a run that raises; the 1-minimal reproducer as
    ``{"failure", "ops", "shapes"}``) of ``bug``'s own model and inputs."""
    compiled = bug.compile(bug.model, bug.args)
    d = first_divergence(None, bug.args, compiled=compiled)
    found = type(d.error).__name__ if d.error is not None else d.node
    r = reduce(compiled, bug.args, bug.compile_fn)
    return found, {"failure": str(r.failure), "ops": list(r.ops),
                   "shapes": [list(x.shape) for x in r.inputs if isinstance(x, torch.Tensor)]}


def trace_problems(bug, out, trace, *, rtol: float, fresh_seed: int) -> list[str]:
    """Why ``out`` is not ``bug``'s device answer, judged on ``bugs.device_trace`` data (``[]``: it is)."""
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        return [f"expected a floating-point tensor, got {type(out).__name__}"]
    runs = [r for r in trace if isinstance(r.get("out"), torch.Tensor) and r["out"].is_floating_point()]
    if not runs:
        return ["no run of the simulated Spyre completed while the fix ran"]
    mine = bugs._values(out)
    used = [r for r in runs if bugs._contained(bugs._values(r["out"]), mine)]
    if not used or not bugs._contained(mine, torch.cat([bugs._values(r["out"]) for r in used])):
        return ["the output is not made of the simulated Spyre's outputs"]
    fresh_bug = bugs.make_bug(bug.key, bug.seed)  # a fresh bug: the counters of the model itself
    if sum(float(r["flops"]) for r in used) < 0.9 * fresh_bug.report().flops:
        return ["the device runs the output came from did not do the model's FLOPs"]
    if bug.key == "wrong":  # fixed, not avoided: the runs still copy all the model copies, through the faulty kernels
        copies = bugs.faulty_copy_elements(fresh_bug.compile(fresh_bug.model, fresh_bug.args))
        if sum(int(r.get("faulty_copy_elements") or 0) for r in used) < copies:
            return [f"the device runs copy fewer than the model's {copies} elements through the faulty copy kernels "
                    "(a rewrite that drops the copy routes around the fault)"]
    for r in used:
        gen = torch.Generator().manual_seed(fresh_seed + int(r["j"]))
        fresh = tuple(torch.randn(shape, generator=gen).to(getattr(torch, dtype)) for shape, dtype in r["inputs"])
        want, got = bug.reference(*fresh).double(), r["fresh_out"]
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape) or \
                not bool(((got.double() - want).abs() <= rtol * want.abs().max() + 1e-12).all()):
            return ["a graph run on the device does not compute the model on fresh inputs"]
    return []


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


def divergence_cases(seed: int):
    """Synthetic (out, eager, truth, verdict) cases the learner never saw, from the grader's seed (the probe
    builds the same inputs, in the same order)."""
    g = torch.Generator().manual_seed(seed)
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


# --- the landscape rows: terms that name each mechanism, and terms that contradict it ------------------------
_COMPILE_ERROR = r"compil\w*[- ]?(time )?(error|fail|reject)|rejected|does not compile|refuse"
_HOST_TRIP = (r"(cpu|host)[- ]?(round[- ]?trip|fallback|fall back|op)|round[- ]?trip|pcie"
              r"|fall(s)? back to the (cpu|host)")
_UNSUPPORTED = {
    "GPU": ((r"extern", r"aten", r"library", r"cuda kernel", r"eager kernel", r"fallback kernel",
             r"breaks? (the )?fusion"),
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
