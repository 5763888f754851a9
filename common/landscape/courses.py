"""The rows of the landscape map that need no learner: what each course's lab adds from the catalog and the
simulators, rebuilt the same way (same model, sizes and chips as the lab's learner defaults) for a learner whose
map lacks them (a new machine, a wiped Colab session, a course skipped).

    from common.landscape.courses import fill_course, missing
    missing(lm, 3)          # the (system, attribute) cells of Course 3's rebuildable rows that lm lacks
    fill_course(lm, 3)      # compute Course 3's rows and add the missing cells; returns how many

``fill_course`` only adds cells the map does not have: it never replaces a row, so a learner's row (or a lab's
own measurement) always stays. The rows a learner writes or computes with their own functions are not here.
"""
from __future__ import annotations

from collections.abc import Callable

from common.chips import get_chip
from common.landscape.map import SYSTEM_OF_BACKEND, SYSTEMS, LandscapeMap, dominant_operator
from common.memory.kvcache import SYSTEM_CHIPS

# The learner defaults of each lab's parameters cell (the rebuilt rows are the rows an untouched lab adds).
LAB1_MODEL, LAB1_SEQ = "qwen2.5-0.5b-instruct", 512  # Part 5: the real model at real size, DECODE_SEQ
LAB2_BLOCK, LAB2_INPUT = (256, 4), (2, 64, 256)  # TinyTransformerBlock(D_MODEL, N_HEADS), (BATCH, SEQ, D_MODEL)
LAB3_MODEL, LAB3_SEQ = "test", 24
LAB4_MODEL, LAB4_CONTEXT = "llama-3.1-8b", 8192
LAB5_MODEL, LAB5_SEQ = "tiny-block", 64
LAB6_MODEL, LAB6_SEQ, LAB6_DTYPES = "llama-3.1-8b", 1024, ("bf16", "fp16")

Row = tuple[str, str, object, str]  # (system, attribute, value, source)

# Each course's rebuildable attributes, known without computing anything (``missing`` reads only these).
ATTRIBUTES: dict[int, tuple[str, ...]] = {
    1: ("decode step latency (s)", "decode throughput (tokens/s)", "dominant operator",
        "main-memory bytes per decode step"),
    2: ("block graph (fx): nodes / edges", "block ops compute- / memory-bound (16-bit, catalog ridge)"),
    3: (f"kernels per decoder layer ({LAB3_MODEL}, prefill)",),
    4: ("on-chip memory (B)", "off-chip bandwidth (B/s)", "alignment constraint",
        "KV tokens beside 8B weights (fewest chips)"),
    5: (f"CPU round trips per {LAB5_MODEL} decode step",),
    6: ("peak FLOP/s", "peak bandwidth (B/s)", "decode bound"),
}


def alignment_constraints() -> dict[str, str]:
    """Course 4's 'alignment constraint' row: the layout rule of each system's memory, from catalog facts."""
    tpu, spy, lpu, wse = (get_chip(SYSTEM_CHIPS[s]) for s in ("TPU", "Spyre", "LPU", "WSE"))
    return {
        "GPU": "hardware caches: any layout (line-granular traffic); shared memory: banks",
        "TPU": f"({tpu.fact('sublanes')},{tpu.fact('lanes')}) tiles in VMEM; "
               f"{tpu.fact('mxu_dim')}x{tpu.fact('mxu_dim')} MXU",
        "WSE": f"{wse.estimates['fabric_bytes_per_cycle_per_link'].value:g}-B wavelets between PEs (estimate)",
        "LPU": f"{lpu.fact('mxm_dim')}x{lpu.fact('mxm_dim')} MXM tiles (K, N padded)",
        "Spyre": f"{spy.fact('stick_bytes')}-B sticks on the innermost dim",
    }


def _decode_reports(model: str, seq: int) -> dict:
    from common.sim import BACKEND_NAMES, simulate_llm

    return {SYSTEM_OF_BACKEND[b]: simulate_llm(model, b, phase="decode", batch=1, seq=seq) for b in BACKEND_NAMES}


def _course1() -> list[Row]:
    rows = []
    for system, r in _decode_reports(LAB1_MODEL, LAB1_SEQ).items():
        op, share = dominant_operator(r)
        values = (r.time_s, r.tokens_per_s, f"{op} ({share:.0%} of compute time)",
                  r.bytes.get(get_chip(r.chip).main_memory.name, 0.0))
        rows += [(system, a, v, "simulated") for a, v in zip(ATTRIBUTES[1], values, strict=True)]
    return rows


def _course2() -> list[Row]:
    import torch
    import torch.fx as fx

    from common.graph.costs import annotate, node_table
    from common.models import TinyTransformerBlock

    gm = fx.symbolic_trace(TinyTransformerBlock(*LAB2_BLOCK).half())
    annotate(gm, torch.randn(LAB2_INPUT, generator=torch.Generator().manual_seed(0)).half())
    size = f"{len(gm.graph.nodes)} / {sum(len(n.all_input_nodes) for n in gm.graph.nodes)}"
    rows = []
    for system in SYSTEMS:
        chip = get_chip(SYSTEM_CHIPS[system])
        table = node_table(gm, chip.name, "bf16" if chip.supports("bf16") else "fp16")
        bound = f"{(table['bound'] == 'compute').sum()} / {(table['bound'] == 'memory').sum()}"
        rows += [(system, ATTRIBUTES[2][0], size, "simulated"), (system, ATTRIBUTES[2][1], bound, "simulated")]
    return rows


def _course3() -> list[Row]:
    from common.sim import simulate_llm

    return [(system, ATTRIBUTES[3][0], len(simulate_llm(LAB3_MODEL, system.lower(), phase="prefill", batch=1,
                                                        seq=LAB3_SEQ).programs[1].kernels), "simulated")
            for system in SYSTEMS]


def _course4() -> list[Row]:
    from common.memory.kvcache import kv_limits

    limits = kv_limits(LAB4_MODEL, LAB4_CONTEXT).set_index("system")
    align = alignment_constraints()
    rows = []
    for system in SYSTEMS:
        c = get_chip(SYSTEM_CHIPS[system])
        values = (float(sum(lv.total_capacity for lv in c.on_chip)),
                  float(c.off_chip.bandwidth) if c.off_chip else "none: SRAM only", align[system],
                  int(limits.loc[system, "max_tokens"]))
        rows += [(system, a, v, "catalog") for a, v in zip(ATTRIBUTES[4], values, strict=True)]
    return rows


def _course5() -> list[Row]:
    return [(system, ATTRIBUTES[5][0], sum(e.kind == "host" for e in r.events), "simulated")
            for system, r in _decode_reports(LAB5_MODEL, LAB5_SEQ).items()]


def _course6() -> list[Row]:
    from common.roofline import roofline_for_chip

    rows = []
    for system, r in _decode_reports(LAB6_MODEL, LAB6_SEQ).items():
        rl = roofline_for_chip(SYSTEM_CHIPS[system], LAB6_DTYPES)
        rows += [(system, "peak FLOP/s", rl.peak_flops, "catalog"),
                 (system, "peak bandwidth (B/s)", rl.bandwidth(), "catalog"),
                 (system, "decode bound", f"{r.bottleneck} ({r.chips}x {r.chip})", "simulated")]
    return rows


BUILDERS: dict[int, Callable[[], list[Row]]] = {1: _course1, 2: _course2, 3: _course3, 4: _course4, 5: _course5,
                                                6: _course6}


def course_rows(course: int) -> list[Row]:
    """Course ``course``'s rebuildable rows, computed now: (system, attribute, value, source)."""
    if course not in BUILDERS:
        from common.errors import unknown

        raise unknown("course", course, list(BUILDERS))
    return BUILDERS[course]()


def missing(lm: LandscapeMap, course: int) -> list[tuple[str, str]]:
    """The (system, attribute) cells of ``course``'s rebuildable rows that ``lm`` does not have."""
    have = {(r["system"], r["attribute"]) for r in lm.rows}
    return [(s, a) for a in ATTRIBUTES[course] for s in SYSTEMS if (s, a) not in have]


def fill_course(lm: LandscapeMap, course: int) -> int:
    """Add the cells of ``course``'s rebuildable rows that ``lm`` lacks (never replacing one); returns how many."""
    gaps = set(missing(lm, course))
    if not gaps:
        return 0
    added = 0
    for system, attribute, value, source in course_rows(course):
        if (system, attribute) in gaps:
            added += lm.add(system, attribute, value, course=course, source=source)
    return added


def rebuild(lm: LandscapeMap, courses) -> dict[int, int]:
    """``fill_course`` for each course in ``courses``; returns {course: cells added} for those that gained any."""
    added = {c: fill_course(lm, c) for c in courses}
    return {c: n for c, n in added.items() if n}


__all__ = ["ATTRIBUTES", "BUILDERS", "alignment_constraints", "course_rows", "fill_course", "missing", "rebuild"]
