"""Grader-side answers of Lab 3 (instructor edition only: ``source/`` is never released or published).

Hidden tests import from here (``from answers import count_ops as _co``); nothing in ``common`` holds these.

* ``request_latency(prefill, decode, new_tokens)`` — per backend of ``prefill``: later_s = prefill median +
  (new_tokens - 1) x decode median; first_s = prefill first call + decode first call + (new_tokens - 2) x decode
  median (the prefill's first call alone for one token).
* ``count_ops(gm)`` — Counter of ``common.compile.tools.qualified_op_name(n)`` over the call_function / call_module /
  call_method nodes, without the ``getitem`` that unpacks multi-output ops.
* ``kernel_names(code)`` — every NAME of a line ``NAME = async_compile.<x>(`` whose NAME holds "fused", in order
  of definition, once each; ``fused_kernels(code)`` — ``{name: ops_in_kernel_name(name)}`` of those.
* ``find_groups(gm)`` — maximal legal pointwise-fusion groups: union of the edges p -> n with n pointwise or a
  view, p pointwise, a view or a matmul, and users(p) == {n}; at most one matmul per group, groups with fewer
  than two compute ops dropped; each group a list of node names in graph order.
* ``bytes_saved(gm, names)`` — 2 x sum(numel x element size) over the group's compute nodes except the one whose
  value leaves the group (one write and one read saved per interior value; views move nothing).
* ``mxu_tiling(M, K, N, mxu, sublanes)`` — M padded to ``sublanes``, K and N to ``mxu``;
  passes = K'/mxu x N'/mxu; efficiency = MKN / (M'K'N').
* ``sticks(shape, elem_bytes, stick_bytes, dim=-1)`` — per = stick_bytes // elem_bytes elements per stick along
  ``dim``; per_row = ceil(shape[dim] / per); rows = product of the other dims; sticks = rows x per_row;
  device_shape = (per_row, *other dims in order, per); padding = sticks x stick_bytes - numel x elem_bytes.
* ``schedule_overhead(report)`` — on the critical engine: busy = sum of compute events, named = sum of the
  others, idle = time_s - |union of the events' intervals|, gaps = idle stretches > 1 ns (before, between, after
  the events), share = (named + idle) / time_s. ``gaps`` is what ``common.sim.report.attribution_of`` (the idle
  seconds of any events) does not give.
* ``LANDSCAPE_VOCAB[attribute][system] = (accept, reject)`` — regular expressions for the learner's landscape rows
  (``common.landscape.rows.vocabulary_misses``): a cell passes when it names one accepted mechanism and none that
  contradicts it (another machine's unit, run-time scheduling on a static machine).
* ``number_misses(rows)`` — the (attribute, system, number) of every number >= 16 in a TPU, LPU or Spyre tiling or
  layout row that is not one of that machine's catalog figures (``CATALOG_NUMBERS``: facts, compute units, the
  numbers in its matrix-unit text, elements per stick); small counts (2 corelets, 8 sublanes) are free.
* ``rows_without_figures(rows)`` — the TPU, LPU and Spyre tiling rows that state none of that machine's catalog
  figures (>= 16): the row must carry Part 5's evidence (128 / 256 MXU, 320 MXM, 64 per stick, 32 cores), not only
  a mechanism's name.
* ``gate_reference(d, seed, x)`` — the original ``Gate`` (``.item()``, ``if``) built with ``seed``, on ``x``.
* ``no_gain_backend(savings)`` — the first backend (pivot order) whose fused time is within 1 % of op by op.
* ``canon(groups)`` — groups as sorted lists of sorted node names; AssertionError if not lists of str.

Hidden tests are probe + judgement (``common.grading.verdicts.probe``): the judgement rebuilds every input from the seed the
probe used and calls these on it, never on an object the learner's kernel held.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import torch
from common.chips import chips_of_kind
from common.compile.tools import qualified_op_name, ops_in_kernel_name
from common.compile.fusion import classify


def gate_reference(d: int, seed: int, x: torch.Tensor) -> torch.Tensor:
    """Lab 3's ``Gate(d, seed)(x)``: parameters made in the same order after ``torch.manual_seed(seed)``."""
    torch.manual_seed(seed)
    up, down = torch.nn.Linear(d, 2 * d), torch.nn.Linear(2 * d, d)
    with torch.no_grad():
        h = up(x)
        scale = h.abs().mean().item()
        h = torch.relu(h) if h.sum() > 0 else torch.tanh(h)
        return down(h / (scale + 1e-3))


def no_gain_backend(savings) -> str:
    t = savings.pivot(index="backend", columns="program", values="time_s")
    return str(t.index[(t["fused"] - t["op by op"]).abs() <= 0.01 * t["op by op"]][0])


def canon(groups) -> list[list[str]]:
    if not isinstance(groups, list) or not all(isinstance(g, list) and all(isinstance(n, str) for n in g)
                                               for g in groups):
        raise AssertionError("hidden test 'groups' failed: expected a list of lists of node names (str)")
    return sorted(sorted(g) for g in groups)


def count_ops(gm) -> Counter:
    ops = ("call_function", "call_module", "call_method")
    return Counter(qualified_op_name(n) for n in gm.graph.nodes if n.op in ops and getattr(n.target, "__name__", "") != "getitem")


def request_latency(prefill, decode, new_tokens: int) -> dict:
    p, d = prefill.set_index("backend"), decode.set_index("backend")
    out = {}
    for b in p.index:
        first = float(p.loc[b, "first_call_s"])
        if new_tokens > 1:
            first += float(d.loc[b, "first_call_s"]) + (new_tokens - 2) * float(d.loc[b, "median_s"])
        later = float(p.loc[b, "median_s"]) + (new_tokens - 1) * float(d.loc[b, "median_s"])
        out[str(b)] = {"first_s": first, "later_s": later}
    return out


_KERNEL_DEF = re.compile(r"^(\w*fused\w*?)\s*=\s*async_compile\.\w+\(", re.M)


def kernel_names(code: str) -> list[str]:
    return list(dict.fromkeys(_KERNEL_DEF.findall(code)))


def fused_kernels(code: str) -> dict[str, list[str]]:
    return {name: ops_in_kernel_name(name) for name in kernel_names(code)}


def find_groups(gm) -> list[list[str]]:
    nodes = list(gm.graph.nodes)
    group = {n: {n} for n in nodes}
    for n in nodes:
        for p in n.all_input_nodes:
            if group[p] is group[n] or set(p.users) != {n}:
                continue
            if classify(n) not in ("pointwise", "view") or classify(p) not in ("pointwise", "view", "matmul"):
                continue
            merged = group[p] | group[n]
            if sum(classify(m) == "matmul" for m in merged) > 1:
                continue
            for m in merged:
                group[m] = merged
    out = {id(s): s for s in group.values()}.values()
    return [
        [m.name for m in nodes if m in s] for s in out if sum(classify(m) in ("pointwise", "matmul") for m in s) >= 2
    ]


def bytes_saved(gm, names) -> int:
    inside = {n for n in gm.graph.nodes if n.name in set(names)}
    total = 0
    for n in inside:
        leaves = not n.users or not set(n.users) <= inside
        if not leaves and classify(n) in ("pointwise", "matmul"):
            total += n.meta["val"].numel() * n.meta["val"].element_size()
    return 2 * total


def mxu_tiling(M, K, N, mxu, sublanes) -> dict:
    def up(v, m):
        return -(-v // m) * m

    mp, kp, np_ = up(M, sublanes), up(K, mxu), up(N, mxu)
    return {
        "M_padded": mp,
        "K_padded": kp,
        "N_padded": np_,
        "mxu_passes": (kp // mxu) * (np_ // mxu),
        "efficiency": (M * K * N) / (mp * kp * np_),
    }


def sticks(shape, elem_bytes, stick_bytes, dim=-1) -> dict:
    shape = tuple(int(s) for s in shape)
    d = dim % len(shape)
    per = stick_bytes // elem_bytes
    per_row = -(-shape[d] // per)
    others = shape[:d] + shape[d + 1 :]
    n = math.prod(others) * per_row
    return {
        "sticks": n,
        "device_shape": (per_row, *others, per),
        "padding_bytes": n * stick_bytes - math.prod(shape) * elem_bytes,
    }


def schedule_overhead(report) -> dict:
    evs = sorted((e for e in report.events if e.engine == report.critical_engine), key=lambda e: e.start)
    busy = sum(e.duration for e in evs if e.kind == "compute")
    named = sum(e.duration for e in evs if e.kind != "compute")
    covered, end, gaps = 0.0, 0.0, 0
    for e in evs:
        gaps += e.start - end > 1e-9
        covered += max(0.0, e.end - max(e.start, end))
        end = max(end, e.end)
    gaps += report.time_s - end > 1e-9
    idle = report.time_s - covered
    return {"busy_s": busy, "named_s": named, "idle_s": idle, "gaps": int(gaps),
            "overhead_share": (named + idle) / report.time_s}


# The learner's landscape rows: per cell (accept, reject). Accept names the mechanism in any of its usual words;
# reject names another machine's mechanism or the opposite scheduling model.
_RUNTIME = r"run[- ]?time|dynamic(ally)?"
_NOT_GPU_IR, _NOT_XLA, _NOT_SPYRE = (
    r"\b(stable)?hlo\b|\bxla\b|superdsc|\bsdsc\b",
    r"\b(stable)?hlo\b",
    r"superdsc|\bsdsc\b",
)
LANDSCAPE_VOCAB = {
    "IR stages": {
        "GPU": (
            (r"inductor", r"triton", r"\bptx\b", r"cuda", r"loop[- ]?(level )?ir", r"c\+\+|openmp"),
            (_NOT_GPU_IR,),
        ),
        "TPU": (
            (r"\bxla\b", r"\b(stable)?hlo\b", r"\bllo\b", r"torch[-_ ]?xla", r"\bjax\b", r"\bmlir\b"),
            (r"triton", _NOT_SPYRE),
        ),
        "WSE": (
            (
                r"cerebras",
                r"graph compiler",
                r"wafer",
                r"\bcsl\b",
                r"regions?",
                r"plac(e|ed|es|ement|ing)\b",
                r"fabric",
                r"\bpes?\b|processing elements?",
            ),
            (r"triton", _NOT_XLA, _NOT_SPYRE),
        ),
        "LPU": (
            (
                r"groq",
                r"cycle",
                r"instructions?",
                r"slices?",
                r"static(ally)?[- ]schedul",
                r"schedul\w* (at|by the) compile",
                r"compile[- ]time",
            ),
            (r"triton", _NOT_XLA, _NOT_SPYRE, _RUNTIME),
        ),
        "Spyre": ((r"torch[-_ ]?spyre", r"superdsc|\bsdsc\b|\bdsc\b", r"bundles?"), (r"triton", _NOT_XLA)),
    },
    "fusion strategy": {
        "GPU": (
            (
                r"pointwise|point-wise|element[- ]?wise",
                r"reductions?",
                r"loops?",
                r"epilogues?",
                r"flash",
                r"librar(y|ies)|cublas|cutlass",
                r"triton kernels?",
                r"inductor",
            ),
            (_NOT_SPYRE, r"bundles?", r"whole[- ](graph|program)", r"one (static )?program"),
        ),
        "TPU": (
            (
                r"\bxla\b",
                r"loop|input|output",
                r"epilogues?",
                r"into (the |its )?(matmul|dot|mxu|gemm|convolution)",
                r"(matmul|dot|gemm)s? (absorb|take|get)",
                r"pointwise|element[- ]?wise",
            ),
            (_NOT_SPYRE, r"bundles?", r"launch", _RUNTIME),
        ),
        "WSE": (
            (
                r"one (matmul|gemm|layer)",
                r"(matmul|gemm) per kernel",
                r"chain",
                r"vector",
                r"pipelin",
                r"regions?",
                r"layers?",
                r"sram|on[- ]wafer",
            ),
            (_NOT_SPYRE, r"bundles?", r"\bhbm\b", r"launch"),
        ),
        "LPU": (
            (r"\bmxm\b", r"stream", r"slices?", r"vector|\bvxm\b", r"chain", r"one (matmul|gemm) per", r"sram"),
            (_NOT_SPYRE, r"bundles?", r"\bhbm\b|\bdram\b", _RUNTIME),
        ),
        "Spyre": (
            (r"superdsc|\bsdsc\b|\bdsc\b", r"bundles?", r"\blx\b|scratchpad", r"runs? of (device )?ops", r"device ops"),
            (r"triton", r"\bhbm\b"),
        ),
    },
    "tiling decision": {
        "GPU": (
            (
                r"thread[- ]?blocks?|\bctas?\b|block tiles?|tiles?",
                r"\bsms?\b|streaming multiprocessors?",
                r"waves?",
                r"warps?",
                r"tensor cores?",
                r"shared memory|\bsmem\b",
                r"autotun",
            ),
            (r"\bmxu\b", r"sticks?", r"\b320\b"),
        ),
        "TPU": (
            (r"\bmxu\b", r"\b(128|256)\b", r"sublanes?", r"systolic", r"pad"),
            (r"\b320\b", r"sticks?", r"warps?|thread[- ]?blocks?"),
        ),
        "WSE": (
            (r"\bpes?\b|processing elements?", r"regions?", r"rows?|col(umn)?s?", r"cores", r"wafer", r"fabric"),
            (r"\bmxu\b", r"sticks?", r"\bhbm\b"),
        ),
        "LPU": (
            (r"\b320\b", r"\bmxm\b", r"stream", r"superlanes?|lanes?", r"vectors?"),
            (r"sticks?", r"warps?|thread[- ]?blocks?", _RUNTIME),
        ),
        "Spyre": (
            (r"sticks?", r"cores?", r"\blx\b|scratchpad", r"corelets?", r"\b8\s*x\s*8\b"),
            (r"\bmxu\b", r"\b320\b", r"warps?"),
        ),
    },
}


def _numbers(text) -> list[int]:
    """Integers named in a text: '128x128' and '(8,128)' give two each, '5,120' one; 'fp16', 'v5e', 'int8' none."""
    text = re.sub(r"(\d)\s*[x×]\s*(?=\d)", r"\1 ", text)
    text = re.sub(r"\(\s*(\d+)\s*,\s*(\d+)\s*\)", r"\1 \2", text)
    text = re.sub(r"\b[A-Za-z]+\d[\w]*", " ", text)
    return [
        int(n.replace(",", ""))
        for n in re.findall(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d.])|(?<![\d.])\d+(?![\d.])", text)
    ]


def _catalog_numbers(kind: str) -> set[int]:
    out = set()
    for chip in chips_of_kind(kind):
        out |= {int(v) for v in chip.facts.values() if float(v).is_integer()} | {int(chip.compute_units)}
        out |= set(_numbers(chip.matrix_unit))
        if "stick_bytes" in chip.facts:
            out |= {int(chip.facts["stick_bytes"]) // b for b in (1, 2, 4)}
    return out


CATALOG_NUMBERS = {"TPU": _catalog_numbers("tpu"), "LPU": _catalog_numbers("lpu"), "Spyre": _catalog_numbers("spyre")}


def number_misses(rows) -> list[tuple[str, str, int]]:
    misses = []
    for attribute in ("tiling decision",):
        for system, allowed in CATALOG_NUMBERS.items():
            text = str(rows.get(attribute, {}).get(system, "")) if isinstance(rows, dict) else ""
            misses += [(attribute, system, n) for n in _numbers(text) if n >= 16 and n not in allowed]
    return misses


def rows_without_figures(rows) -> list[str]:
    return [system for system, allowed in CATALOG_NUMBERS.items()
            if not any(n >= 16 and n in allowed for n in _numbers(str(rows.get("tiling decision", {}).get(system, ""))))]
