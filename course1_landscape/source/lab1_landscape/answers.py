"""Grader-side answers of Course 1 Lab 1 (common/grading/answerkeys.py): what its hidden tests compare with.

* ``profile_summary``: from a ``torch.profiler.profile`` run with ``profile_memory=True``:
  - ``peak_bytes`` = max(0, the highest running total of ``self_cpu_memory_usage`` over ``prof.events()`` taken in
    start-time order): allocations count positive when their op starts, frees negative (the ``[memory]`` rows are
    frees outside any op), so the total is the memory the profiled region held above what was live at its start;
  - ``top_ops`` = the ``key`` of the ``k`` rows of ``prof.key_averages()`` with the largest ``self_cpu_time_total``.
* ``TRADEOFFS_NOTES``: what a good answer to the optional (Going further, ungraded) trade-offs question names, for
  instructors who discuss it; no test uses it.
"""

from __future__ import annotations


def profile_summary(prof, k=3) -> dict:
    """peak_bytes (int) and top_ops (the k op names with the most self CPU time, largest first)."""
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    live = peak = 0
    for e in events:
        live += e.self_cpu_memory_usage
        peak = max(peak, live)
    rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    return {"peak_bytes": int(peak), "top_ops": [e.key for e in rows[:k]]}


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
