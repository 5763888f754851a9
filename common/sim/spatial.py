"""Spatial placement and pipelined scheduling shared by the SRAM-only dataflow backends (``lpu``, ``wse``).

Both machines keep the whole model in on-chip SRAM and run a step as a pipeline: a token's activations flow
through *stages* (LPU: chips; WSE: rectangular PE regions) that each own part of the weights.

* ``resident_sizes`` bytes each segment instance (prologue, layer 0..L-1, epilogue) keeps in SRAM for the whole
  run: its weights plus, for a decoder layer, its share of the KV cache. ``fit`` of both backends sizes the
  machine from these.
* ``flow``        the step's kernel instances in execution order, each with its resident bytes, the activation
  bytes it reads (what the stage running it must receive first) and the live activation set before it.
* ``pack_even``   cuts the resident-byte stream into n equal pieces (LPU chips): a kernel may straddle pieces.
* ``pack_whole``  assigns whole segment instances to n bins in order, balanced by bytes (WSE wafers).
* ``lay_out``     times a linear pipeline of S stages and n microbatches. A stage's events either *occupy* it
  (compute, a link busy sending) or are pure *latency* (wavelets in flight) that the next microbatch overlaps:
  ``T = sum_s passage_s + (n - 1) max_s occupancy_s``. With n > 1 the critical engine shows a named pipeline
  fill, the bottleneck stage's n microbatches and a named drain; the other stages' work is drawn off the
  critical path (on their own engine) so that totals of FLOPs and bytes count every stage once.
* ``best_microbatches``  the compiler's microbatch size: the one whose pipeline finishes first.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

from common.sim.program import Event, Kernel


def one_matmul_per_kernel(kernel: Kernel, op) -> bool:
    """Fusion rule of both dataflow machines: vector work chains onto the matmul it feeds or follows (its values
    stream between functional units / stay in the PE), a second matmul starts a new kernel, except inside a
    bmm -> softmax -> bmm attention chain."""
    if op.pattern and op.pattern == kernel.ops[0].pattern:
        return True
    return op.kind != "matmul" or not any(o.kind == "matmul" for o in kernel.ops)


def weight_traffic(kernel: Kernel) -> float:
    """Weight bytes one pass of a kernel reads (an embedding lookup reads its rows, not the table)."""
    return sum(o.in_bytes.get(p, 0.0) for o in kernel.ops for p in o.param_inputs)


def param_sizes(gm) -> dict[str, float]:
    """Parameter placeholder -> bytes it occupies in SRAM: the whole tensor, at the workload's dtype. Read once
    per graph (``fit`` and ``flow`` of both backends ask for every step of a sweep); a copy is returned."""
    scale = gm.meta.get("byte_scale", 1.0)  # 8-bit steps are traced in 16 bit (workload.llm_step)
    known = _PARAM_SIZES.get(gm)
    if known is None or known[0] is not gm.graph or known[1] != len(gm.graph.nodes) or known[2] != scale:
        sizes = {n.name: n.meta["val"].numel() * n.meta["val"].element_size() * scale for n in gm.graph.nodes
                 if n.op == "placeholder" and n.meta.get("kind") == "param" and n.meta.get("val") is not None}
        known = _PARAM_SIZES[gm] = (gm.graph, len(gm.graph.nodes), scale, sizes)
    return dict(known[3])


_PARAM_SIZES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def kv_per_layer(workload) -> float:
    cfg = workload.config
    return workload.kv_bytes / cfg.n_layers if cfg is not None and cfg.n_layers else 0.0


def _segment_kv(workload, seg) -> float:
    """One repeat's KV cache: the segment's own (layers of several kinds) or the mean over layers."""
    return seg.kv_bytes if getattr(seg, "kv_bytes", None) is not None else kv_per_layer(workload)


def resident_sizes(workload) -> list[float]:
    """Resident bytes of every segment instance in execution order (a repeated layer once per repeat).
    A parameter read by two segments (a tied embedding and LM head) is held by both: they sit at the two ends
    of the pipeline, so a spatial compiler stores it twice."""
    sizes = []
    for seg in workload.segments:
        own = sum(param_sizes(seg.gm).values())
        own += _segment_kv(workload, seg) if seg.name == "layer" else 0.0
        sizes += [own] * seg.repeat
    return sizes


def too_big(workload, policy, need: int, total: float, what: str) -> None:
    """The fewest-chips rule, shared with every policy (``Policy.apply_chip_count``)."""
    policy.apply_chip_count(workload, need, total, what)


# ---- the step as a flow of kernel instances --------------------------------------------------------------
@dataclass
class Step:
    kernel: Kernel
    segment: int  # index into workload.segments
    stage: int  # segment instance: 0 = first segment, then one per repeat of each segment
    name: str  # event name: "k3", or "L12.k3" inside the 13th layer
    resident: float  # weights (+ KV cache) this kernel keeps in SRAM
    live_in: float  # activation bytes live just before it (the residual stream included)
    needs: float  # activation bytes it reads: what the stage that runs it must receive before it starts


def _carried_input(gm) -> str | None:
    """The segment input that flows from the previous segment (x of a layer, the tokens of the prologue): the
    first tensor input. Other inputs - RoPE tables, the mask - are per-step side inputs every stage rebuilds
    from the position, and the KV cache is resident, so neither crosses a stage boundary."""
    for n in gm.graph.nodes:
        if n.op == "placeholder" and n.meta.get("kind") == "input" and n.meta.get("val") is not None:
            return n.name
    return None


def flow(programs, workload) -> list[Step]:
    steps, stage = [], 0
    repeats: dict[str, int] = {}  # repeats of each segment name so far: layer kinds are numbered on
    for si, (program, seg) in enumerate(zip(programs, workload.segments, strict=True)):
        kv = _segment_kv(workload, seg)
        first = repeats.get(seg.name, 0)
        repeats[seg.name] = first + seg.repeat
        numbered = seg.repeat > 1 or sum(s.name == seg.name for s in workload.segments) > 1
        ks = program.kernels
        owner = {o.name: i for i, k in enumerate(ks) for o in k.ops}
        carried = _carried_input(seg.gm)
        # resident: each parameter belongs to the first kernel that reads it; the KV cache to attention
        sizes, seen, resident = param_sizes(seg.gm), set(), []
        for k in ks:
            mine = {p for o in k.ops for p in o.param_inputs} - seen
            seen |= mine
            resident.append(sum(sizes.get(p, 0.0) for p in mine))
        attn = [i for i, k in enumerate(ks) if k.kind == "attention"] or \
               [i for i, k in enumerate(ks) if any(o.op == "aten.bmm" for o in k.ops)]
        if seg.name == "layer" and kv:
            for i in attn or [len(ks) - 1]:
                resident[i] += kv / len(attn or [0])
        # live activations: produced before kernel i (or carried in) and read at or after it
        born, last, size = {}, {}, {}
        for i, k in enumerate(ks):
            for p, b in k.inputs.items():
                if p in owner:
                    born[p] = owner[p]
                elif p == carried:
                    born[p] = -1
                else:
                    continue
                last[p] = i
                size[p] = max(size.get(p, 0.0), b)
        live = [sum(size[p] for p in size if born[p] < i <= last[p]) for i in range(len(ks))]
        needs = [sum(b for p, b in k.inputs.items() if p in owner or p == carried) for k in ks]
        for r in range(first, first + seg.repeat):
            for i, k in enumerate(ks):
                name = f"L{r}.{k.name}" if numbered else k.name
                steps.append(Step(k, si, stage, name, resident[i], live[i], needs[i]))
            stage += 1
    return steps


def pack_even(sizes: list[float], n: int) -> list[list[tuple[int, float]]]:
    """Cut the stream of ``sizes`` into ``n`` equal consecutive pieces; item -> [(piece, fraction of it)].
    A zero-size item runs where the stream is: on the piece that holds the next byte."""
    total = sum(sizes)
    per = total / n if total > 0 else 1.0
    out, cursor = [], 0.0
    for s in sizes:
        first = min(int(cursor / per), n - 1)
        if s <= 0:
            out.append([(first, 1.0)])
            continue
        pieces, lo, end = [], cursor, cursor + s
        for c in range(first, n):
            hi = end if c == n - 1 else min(end, (c + 1) * per)
            if hi - lo > 1e-9 * s:
                pieces.append((c, hi - lo))
            lo = hi
            if hi >= end:
                break
        got = sum(b for _, b in pieces)
        out.append([(c, b / got) for c, b in pieces])
        cursor = end
    return out


def pack_whole(sizes: list[float], n: int) -> list[int]:
    """Whole items to ``n`` bins in order, balanced: an item goes to the bin its byte midpoint falls in."""
    total = sum(sizes)
    if total <= 0:
        return [0] * len(sizes)
    out, cursor = [], 0.0
    for s in sizes:
        out.append(min(n - 1, int((cursor + s / 2) / (total / n))))
        cursor += s
    return out


# ---- pipelined schedule ---------------------------------------------------------------------------------
@dataclass
class Stage:
    label: str
    chip: int
    engine: str  # where its work is drawn when it is off the critical path
    events: list[Event] = field(default_factory=list)  # one microbatch, in order (see ``lay_out``)

    @property
    def occupancy(self) -> float:
        """Time one microbatch holds the stage: its events but the pure-latency ones."""
        return sum([e.duration for e in self.events if not e.detail.get("latency")])

    @property
    def passage(self) -> float:
        """Time from a microbatch entering the stage to it entering the next: every event, less the part of
        one that overlaps the stage before (``detail["overlap_s"]``: a transfer started under compute)."""
        return sum([e.duration - e.detail.get("overlap_s", 0.0) for e in self.events])


class Tally:
    """A stage as ``step_time`` reads it, for a microbatch size being compared (no events, no names): each
    event's time holding the stage (``held``: all but pure latency) and its time on a microbatch's way
    through (``passed``: less any overlap with the stage before), in event order, so that ``occupancy`` and
    ``passage`` are ``Stage``'s sums, bit for bit."""
    __slots__ = ("held", "passed")

    def __init__(self):
        self.held: list[float] = []
        self.passed: list[float] = []

    def add(self, duration: float, overlap: float = 0.0, latency: bool = False) -> None:
        if not latency:
            self.held.append(duration)
        self.passed.append(duration - overlap)

    @property
    def events(self) -> list[float]:  # empty when the stage has no events (``step_time`` skips it)
        return self.passed

    @property
    def occupancy(self) -> float:
        return sum(self.held)

    @property
    def passage(self) -> float:
        return sum(self.passed)


def _scaled(e: Event, start: float, engine: str, n: int) -> Event:
    """``e`` placed at ``start`` on ``engine`` for ``n`` microbatches, in place: ``lay_out``'s stages are built
    for it, and every event in them is its own object with its own ``bytes`` and ``detail``."""
    e.start, e.engine = start, engine
    if n == 1:
        return e
    if e.detail.get("latency"):  # wavelets in flight: one microbatch's latency, however many follow
        e.detail["microbatches"] = n
        return e
    e.duration, e.flops, e.floor = e.duration * n, e.flops * n, e.floor * n
    e.bytes = {lv: b * n for lv, b in e.bytes.items()}
    e.detail["microbatches"] = n
    return e


def lay_out(stages: list[Stage], n: int, critical: str) -> list[Event]:
    """Events of ``n`` microbatches through ``stages`` in order. An event marked ``latency`` (wavelets in flight)
    delays a microbatch but does not hold the stage; one with ``overlap_s`` starts that long before the previous
    event ends. n = 1: every stage in turn on the critical engine. n > 1: ``T = sum passage + (n - 1) x the
    largest occupancy``; the critical engine shows the fill, the bottleneck stage's n microbatches, the drain.
    The stages' events are placed (and scaled) in place and returned: build the stages for this call."""
    stages = [s for s in stages if s.events]
    if not stages:
        return []
    occupancy = [s.occupancy for s in stages]
    b = max(range(len(stages)), key=occupancy.__getitem__)
    starts = [0.0]
    for s in stages[:-1]:
        starts.append(starts[-1] + s.passage)
    total = starts[-1] + stages[-1].passage + (n - 1) * occupancy[b]
    events = []
    info = {"microbatches": n, "stages": len(stages), "bottleneck": stages[b].label, "latency": True}
    if n > 1 and starts[b] > 0:
        events.append(Event("pipeline fill", "sync", critical, 0.0, starts[b], stages[0].chip, bound="scheduling",
                            detail=info))
    for i, s in enumerate(stages):
        t = starts[i]
        engine = critical if n == 1 or i == b else s.engine
        for e in s.events:
            start = t - e.detail.get("overlap_s", 0.0)
            ev = _scaled(e, start if start > 0.0 else 0.0, engine, n)
            events.append(ev)
            t = ev.start + ev.duration
        if n > 1 and i == b and total - t > 1e-12 * total:  # (no float-residue drain after the last stage)
            events.append(Event("pipeline drain", "sync", critical, t, total - t, stages[-1].chip,
                                bound="scheduling", detail=info))
    return events


def step_time(stages: list[Stage], n: int) -> float:
    """``lay_out``'s total without drawing it: sum of passages + (n - 1) x the largest occupancy."""
    stages = [s for s in stages if s.events]
    return sum([s.passage for s in stages]) + (n - 1) * max([s.occupancy for s in stages], default=0.0)


def best_microbatches(rows: int, build) -> tuple[int, list[Stage]]:
    """The compiler's microbatch choice: of 1, 2, 4, ... rows (and all of them), the one whose pipeline finishes
    first. Small microbatches fill the pipeline fast but re-read every weight per microbatch; large ones
    amortise the weights but the fill takes longer. ``build(q)`` makes the stages for a ``q`` fraction of rows."""
    sizes = sorted({min(rows, 1 << i) for i in range(rows.bit_length() + 1)})
    if len(sizes) == 1:  # one row: one choice, nothing to time
        return 1, build(1.0)
    best = None
    for size in sizes:
        n = math.ceil(rows / size)
        stages = build(1.0 / n)
        t = step_time(stages, n)
        if best is None or t < best[0] * (1 - 1e-9):
            best = (t, n, stages)
    return best[1], best[2]
