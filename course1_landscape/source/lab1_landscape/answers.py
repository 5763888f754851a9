"""Grader-side answers of Course 1 Lab 1 (common/grading/verdicts/answerkeys.py): what its hidden tests' judgements compare
with. A judgement runs in the grader, on plain data its probe sent, with inputs it rebuilt from the seed.

* ``gemm_cost`` / ``softmax_cost``: 2mkn FLOPs and (mk + kn + mn) b bytes; 5 FLOPs per element and 2 rows cols b.
* ``achieved``: rates = work / median, intensity = flops / bytes, roof = min(peak, intensity x bandwidth).
* ``profile_summary_of(events, rows, k)``: from a profile as plain data (events as ``[start, self_cpu_memory_usage]``,
  key_averages rows as ``[key, self_cpu_time_total]``): ``peak_bytes`` = max(0, the highest running total of the
  events' memory in start-time order); ``top_ops`` = the keys of the k rows with the most self CPU time.
  ``profile_summary(prof, k)`` is the same on a ``torch.profiler.profile``.
* ``expected_time``: compute term = flops / the catalog's peak at dtype, memory term = bytes / main-memory
  bandwidth; the larger, and "compute" on a tie.
* ``machine_row``: what ``five_machine_table`` holds for one report.
* ``first_compute_bound_batch(machine, seq)``: the explorer question, answered without the explorer: the first
  batch of the explorer's menu (``common.explore.widget.BATCHES``) at which ``simulate_llm`` of Part 5's model
  (all 24 layers) says the decode step with ``seq`` cached tokens is compute-bound; None if none is.
* ``LANDSCAPE_VOCAB[attribute][system] = (accept, reject)``: the learner's QUALITATIVE descriptions of the four
  dataflow machines, judged by ``common.landscape.rows.vocabulary_misses`` (rows[attribute][system]): a cell passes
  when it names a term of that machine's mechanism for that attribute and none that contradicts it (another
  machine's mechanism). ``memory_level_misses``: the memory-hierarchy cell of each machine must name a memory level
  of its chip, as the learner's own Part 5 table lists them (``bytes_<level>``), from the catalog.
* ``LLAMA70B_NOTES``: what a good answer to the optional (Going further, ungraded) 70B prediction names.
* ``TRADEOFFS_NOTES``: what a good answer to the optional (Going further, ungraded) trade-offs question names, for
  instructors who discuss it; no test uses it.
"""

from __future__ import annotations

import math
import re

MIN_VOCAB_CELLS = 16  # of the 20 dataflow cells (4 systems x 5 attributes): generous to wording, not to copying


# ---- Part 2: op costs --------------------------------------------------------------------------------------
def gemm_cost(m, k, n, dtype_bytes=4) -> dict:
    flops, nbytes = 2.0 * m * k * n, float((m * k + k * n + m * n) * dtype_bytes)
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes}


def softmax_cost(rows, cols, dtype_bytes=4) -> dict:
    flops, nbytes = 5.0 * rows * cols, 2.0 * rows * cols * dtype_bytes
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes}


# ---- Part 3: achieved, profile -----------------------------------------------------------------------------
def achieved(flops, nbytes, median_s, peak, bandwidth) -> dict:
    intensity = flops / nbytes
    roof = min(peak, intensity * bandwidth)
    return {"flops_per_s": flops / median_s, "bytes_per_s": nbytes / median_s, "intensity": intensity,
            "attainable_flops_per_s": roof, "fraction": flops / median_s / roof}


def profile_summary_of(events, rows, k=3) -> dict:
    """peak_bytes (int) and top_ops from plain data: events [[start, self_cpu_memory_usage]], rows [[key, self_us]]."""
    live = peak = 0
    for _start, nbytes in sorted(events, key=lambda e: e[0]):
        live += nbytes
        peak = max(peak, live)
    top = sorted(rows, key=lambda r: r[1], reverse=True)[:k]
    return {"peak_bytes": int(peak), "top_ops": [key for key, _ in top], "top_us": [us for _, us in top]}


def profile_summary(prof, k=3) -> dict:
    """The same on a torch.profiler record."""
    events = [[e.time_range.start, e.self_cpu_memory_usage] for e in prof.events()]
    rows = [[e.key, e.self_cpu_time_total] for e in prof.key_averages()]
    out = profile_summary_of(events, rows, k)
    return {"peak_bytes": out["peak_bytes"], "top_ops": out["top_ops"]}


# ---- Part 4: the GPU terms ---------------------------------------------------------------------------------
def expected_time(flops, nbytes, chip, dtype="fp16") -> dict:
    from common.chips import get_chip

    c = get_chip(chip)
    compute_s, memory_s = flops / c.peak(dtype), nbytes / c.main_memory.bandwidth
    return {"compute_s": compute_s, "memory_s": memory_s, "time_s": max(compute_s, memory_s),
            "bound": "compute" if compute_s >= memory_s else "memory"}


# ---- Part 5: five machines ---------------------------------------------------------------------------------
def machine_row(report, error=math.nan) -> dict:
    row = {"chip": report.chip, "chips": report.chips, "dtype": report.dtype, "time_s": report.time_s,
           "tokens_per_s": report.tokens_per_s, "bottleneck": report.bottleneck, "max_abs_error": error}
    row.update({f"bytes_{level}": b for level, b in report.bytes.items()})
    return row


# ---- Part 5: the explorer question -------------------------------------------------------------------------
EXPLORER_MODEL = "qwen2.5-0.5b-instruct"  # Part 5's real model, simulated at its real size


def first_compute_bound_batch(machine, seq, model=EXPLORER_MODEL):
    from common.explore.widget import BATCHES
    from common.sim import simulate_llm

    return next((b for b in BATCHES
                 if simulate_llm(model, machine, phase="decode", batch=b, seq=seq).bottleneck == "compute"), None)


# ---- Landscape map: the learner's descriptions ---------------------------------------------------------------
_NOT = r"(?<!no )(?<!not )(?<!without )"  # "no HBM", "not at run time" name the mechanism by its absence
_NOT_CACHES = _NOT + r"(?<!no hardware )(?<!without hardware )\b(hardware[- ]managed )?caches\b"
_AT_RUN_TIME = _NOT + r"\b(dynamic(ally)? schedul|run[- ]?time schedul|hardware schedul|out[- ]of[- ]order)"
_GPU_ONLY = (r"\bsimt\b", r"\bwarps?\b", r"\bcuda\b", r"\btriton\b", r"one by one", r"kernels? (are )?launch")

LANDSCAPE_VOCAB = {
    "execution model": {
        "TPU": ((r"systolic", r"\bmxus?\b", r"matrix (multiply )?units?", r"static (graph|program)", r"whole[- ]graph",
                 r"\bxla\b", r"\bhlo\b", r"compiled (graph|program)", r"one program"),
                (*_GPU_ONLY, r"wafer", r"cycle[- ]exact", r"superdsc", _AT_RUN_TIME)),
        "WSE": ((r"spatial", r"wafer", r"\bpes?\b", r"processing elements?", r"\bcores?\b", r"dataflow",
                 r"data[- ]driven", r"layers? (mapped|placed|pipelined)", r"pipelin", r"fabric"),
                (*_GPU_ONLY, r"systolic", r"\bmxus?\b", r"superdsc", r"cycle[- ]exact")),
        "LPU": ((r"determinis", r"static(ally)? schedul", r"compiler[- ]schedul", r"cycle", r"\bslices?\b",
                 r"\bstreams?\b", r"ahead[- ]of[- ]time", r"in lockstep", r"assembly line", r"conveyor"),
                (*_GPU_ONLY, _AT_RUN_TIME, r"wafer", r"superdsc", r"systolic array of the tpu")),
        "Spyre": ((r"dataflow cores?", r"\bcores?\b", r"bundles?", r"superdsc", r"\bsdsc", r"fused (ops|graph|runs?)",
                   r"device programs?", r"\bhost\b", r"fallback", r"accelerator card", r"pcie"),
                  (*_GPU_ONLY, r"wafer", r"cycle[- ]exact", r"systolic", r"\bmxus?\b")),
    },
    "memory hierarchy": {
        "TPU": ((r"\bhbm\b", r"\bvmem\b", r"vector memory", r"software[- ]managed", r"\bici\b"),
                (r"\bsram only", r"\blpddr", r"wafer", r"\bsmem\b")),
        "WSE": ((r"\bsram\b", r"on[- ]wafer", r"on[- ]chip memory", r"next to (every|each) (core|pe)",
                 r"distributed memory", r"no (hbm|dram|off[- ]chip)"),
                (_NOT + r"\bhbm\b", _NOT + r"\bdram\b", r"\blpddr", r"\bvmem\b", _NOT + r"\bl2\b")),
        "LPU": ((r"\bsram\b", r"on[- ]chip (memory|only)", r"no (caches?|dram|hbm|off[- ]chip)", r"230 ?mb"),
                (_NOT + r"\bhbm\b", _NOT + r"\bdram\b", r"\blpddr", r"\bvmem\b",
                 _NOT_CACHES, r"wafer")),
        "Spyre": ((r"\blpddr", r"\blx\b", r"scratchpads?", r"software[- ]managed"),
                  (_NOT + r"\bhbm\b", r"\bvmem\b", r"wafer", _NOT + r"hardware[- ]managed caches?", r"\bsmem\b")),
    },
    "programming model": {
        "TPU": ((r"\bjax\b", r"pytorch[/ -]xla", r"torch[_ -]xla", r"\bxla\b", r"tensorflow", r"\btf\b", r"tracing",
                 r"traced", r"static shapes?", r"whole[- ]graph", r"\blazy tensors?"),
                (*_GPU_ONLY, r"torch[- ]spyre", r"groqflow", r"cerebras", r"\bcsl\b")),
        "WSE": ((r"cerebras", r"\bsdk\b", r"\bcsl\b", r"pytorch", r"\btorch\b", r"placement", r"graph compiler",
                 r"model zoo", r"compiled to"),
                (*_GPU_ONLY, r"\bjax\b", r"groqflow", r"torch[- ]spyre", r"\bxla\b")),
        "LPU": ((r"groq", r"\bonnx\b", r"pytorch", r"\btorch\b", r"\bapi\b", r"graph compiler",
                 r"compiled (ahead|offline)", r"cloud", r"no (kernels|cuda)"),
                (*_GPU_ONLY, r"torch[- ]spyre", r"\bcsl\b", r"\bjax\b")),
        "Spyre": ((r"torch[- ]spyre", r"torch\.compile", r"backend", r"pytorch", r"\bvllm\b", r"fallbacks?",
                   r"\beager\b"),
                  (*_GPU_ONLY, r"\bjax\b", r"groqflow", r"\bcsl\b", r"cerebras")),
    },
    "compiler strategy": {
        "TPU": ((r"\bfus(e|es|ed|ion)\b", r"\bpad", r"\btil(e|es|ing)\b", r"\blayouts?\b", r"\(8, ?128\)",
                 r"whole[- ]program", r"\bhlo\b", r"\bxla\b", r"static shapes?", r"recompil"),
                (r"wafer", r"place and route", r"superdsc", r"\bsticks?\b", r"cycle[- ]exact", r"\bruntime dispatch")),
        "WSE": ((r"\bplac(e|es|ed|ing|ement)\b", r"\brout(e|es|ed|ing)\b", r"\bmap(s|ped|ping)?\b", r"pipelin",
                 r"spatial", r"across the (wafer|fabric)", r"layers? (per|to|onto)", r"\bkernels? per layer"),
                (r"\bsticks?\b", r"superdsc", r"\(8, ?128\)", r"cycle[- ]exact", r"\bruntime dispatch")),
        "LPU": ((r"\bstatic schedul", r"schedul", r"cycle", r"determinis", r"ahead[- ]of[- ]time",
                 r"every (cycle|transfer)", r"chip[- ]to[- ]chip", r"instruction"),
                (_AT_RUN_TIME, r"\bsticks?\b", r"superdsc", r"\(8, ?128\)", r"wafer")),
        "Spyre": ((r"\bfus(e|es|ed|ion)\b", r"bundles?", r"superdsc", r"\bsdsc", r"\bsticks?\b", r"restickif",
                   r"\btil(e|es|ing)\b", r"scratchpad", r"\blx\b", r"residen", r"fallbacks?"),
                  (r"wafer", r"cycle[- ]exact", r"\(8, ?128\)", r"place and route", r"\bmxus?\b")),
    },
    "key trade-off": {
        "TPU": ((r"static shapes?", r"dynamic shapes?", r"\bpad", r"recompil", r"flexib", r"general[- ]purpose",
                 r"irregular", r"control flow", r"retrac"),
                (r"wafer", r"\bsticks?\b", r"230 ?mb", r"superdsc")),
        "WSE": ((r"capacity", r"\bfit\b", r"(wafer|system) cost", r"\bcost", r"\bprice", r"power", r"several wafers",
                 r"many wafers", r"stream(ing)? (the )?weights", r"\byield"),
                (r"\bhbm[- ]bound", r"\bsticks?\b", r"superdsc", r"\(8, ?128\)")),
        "LPU": ((r"hundreds of chips", r"many chips", r"\bchips\b", r"capacity", r"\bcost", r"230 ?mb", r"scale[- ]out",
                 r"\bracks?\b", r"memory size", r"small memory"),
                (r"\bhbm[- ]bound", r"wafer", r"\bsticks?\b", r"superdsc")),
        "Spyre": ((r"\bpower", r"watts?\b", r"energy", r"bandwidth", r"coverage", r"fallbacks?", r"\bpadding",
                   r"enterprise", r"\bserver", r"\bcost"),
                  (r"wafer", r"cycle[- ]exact", r"230 ?mb", r"\(8, ?128\)")),
    },
}

DATAFLOW_SYSTEMS = ("TPU", "WSE", "LPU", "Spyre")
ATTRIBUTES = ("execution model", "memory hierarchy", "programming model", "compiler strategy", "key trade-off")


def as_rows(qualitative) -> dict:
    """QUALITATIVE (system -> attribute -> text) as the rows ``vocabulary_misses`` reads (attribute -> system)."""
    return {a: {s: str(qualitative.get(s, {}).get(a, "")) for s in qualitative} for a in ATTRIBUTES}


_LEVEL_WORDS = {"LPDDR5": r"\blpddr", "LX": r"\blx\b", "HBM": r"\bhbm\b", "VMEM": r"\bvmem\b", "SRAM": r"\bsram\b"}


def memory_level_misses(qualitative, levels) -> list[str]:
    """The systems whose memory-hierarchy text names none of ``levels[system]`` (the memory levels of its chip)."""
    misses = []
    for system, names in levels.items():
        text = str(qualitative.get(system, {}).get("memory hierarchy", ""))
        pats = [_LEVEL_WORDS.get(n, r"\b" + re.escape(n.lower()) + r"\b") for n in names]
        if not any(re.search(p, text, re.IGNORECASE) for p in pats):
            misses.append(system)
    return misses


TRADEOFFS_NOTES = """\
TPU: gives up general-purpose SIMT flexibility (dynamic shapes, arbitrary kernels; XLA needs static graphs and pads
to (8,128) tiles / MXU size) for dense systolic matmul efficiency and a compiler-scheduled memory system.
WSE: gives up a memory-capacity hierarchy (no HBM; weights must fit in SRAM or be streamed) for enormous on-wafer
bandwidth and no off-chip traffic for activations.
LPU: gives up caches, dynamic scheduling and memory capacity (230 MB SRAM per chip, so hundreds of chips for 70B)
for a deterministic static schedule and very low, predictable latency.
Spyre: gives up peak bandwidth and op coverage (fallbacks to the host, stick layouts with padding, restickify
copies) for low power: scratchpad-managed dataflow cores attached to an enterprise server.
A good answer gives a give-up and a gain for each, tied to an observation of the lab."""

LLAMA70B_NOTES = """\
Batch-1 decode reads every weight once per token: intensity about 1 FLOP/byte, so time is about weight bytes over the
aggregate bandwidth of wherever the weights live. WSE (on-wafer SRAM; 140 GB needs several wafers, so wafer-to-wafer
communication bounds it) and LPU (weights spread over hundreds of chips' SRAM) win; a TPU slice (many v5e chips of
HBM in parallel) next; the GPU (two H100s of HBM) after; Spyre last (LPDDR5). The winners buy speed with many chips:
cost and power per token. A good answer ranks by the bandwidth of the memory holding the weights and the chip count,
and explains any surprise against the simulator's output.
"""
