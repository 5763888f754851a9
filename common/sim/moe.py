"""Mixture-of-experts steps in the simulator: expected routing, resident vs streamed experts, expert parallelism.

* ``plan_layer``: before the decoder layer is captured, its ``MoE`` block is set to the expected load of the
  step's N token rows (N = batch in decode, batch x seq in prefill): D(N) = E (1 - (1 - k/E)^N) experts touched
  (rounded to whole experts), ceil(N k / D) rows each (``common.models.moe``). The captured graph then holds
  the router GEMM (N, C) x (C, E), top-k, a gather of the routed rows, three batched GEMMs over the D touched
  experts and a weighted index_add back: the active work, not all E experts. The batched GEMMs' M is the most
  loaded expert's rows (``common.models.moe.max_load_rows``): the slowest expert sets the time. The GPU policy
  costs them as a grouped GEMM: each expert's M rows are quantised onto the thread-block tile
  (``common.sim.machines.gpu``), and the HBM term reads each touched expert's weights once whatever M is.
* Resident vs streamed: the layer's expert parameters are whole (E, C, F) tensors, so every backend's memory
  footprint (``Workload.weight_bytes`` = n_params x dtype; the SRAM machines' ``spatial.resident_sizes``)
  holds all E experts, while a step reads only the D touched ones (the GEMMs read ``w[:D]``). At batch 1
  Mixtral streams 2 of its 8 experts per layer; by batch 16 nearly all 8.
* ``after_run`` (called once by ``run.simulate``): on a tensor-parallel machine with n > 1 chips the
  ``moe_parallel`` option (``common.sim.args.MOE_PARALLEL``; default "expert", a stack may set it) picks how
  the experts use them.
  Either way each chip computes 1/n of every MoE layer's expert FLOPs and reads 1/n of the touched experts'
  weight bytes (``Policy.share``); what differs is the communication:
  "expert" (expert parallelism): the experts are spread over ep = min(n, E) chips and each MoE layer pays two
  all-to-alls, dispatch before the expert GEMMs and combine after them. Each chip owns ceil(N / n) token rows
  and sends each row's k copies, (ep - 1) / ep of them to other chips:
      bytes per chip per all-to-all = ceil(N / n) x k x C x dtype_bytes x (ep - 1) / ep,
      time = hop latency + bytes / (link_bandwidth / 2)   (the catalog's link figure is both directions per
  chip; an all-to-all over a switch or torus injects on all of a chip's links; the messages to the other chips
  leave together, so one hop's latency, ``common.chips.catalog.links``, is paid once).
  "tensor": every expert's GEMMs are split over the n chips (w1 / w3 by columns, w2 by rows), every chip holds
  all N token rows, no all-to-all; the layer's output is the sum of the chips' partial outputs: one all-reduce
  of N x C x dtype_bytes after the expert GEMMs, the machine's own all-reduce (``Policy.allreduce_event``: a
  ring on the GPU, a bidirectional ring over ICI on the TPU), as after a dense row-parallel MLP.
  Every later event moves back by the inserted communication's time. The pipelined SRAM machines
  (LPU, WSE) need none: a layer's experts sit on the chips of its pipeline stage and the token already
  travels through them with the pipeline's hops.
  It also copies the config's ``unmodelled`` features (e.g. gpt-oss's sliding window) into the report notes.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import replace

from common.chips import DTYPE_BYTES
from common.errors import DFAError
from common.models.moe import ExpectedLoad, MoE
from common.sim.args import moe_parallel_name
from common.sim.policy import is_expert_op
from common.sim.program import Event, Kernel, Op


def plan_layer(layer, config, rows: int, dtype: str) -> dict:
    """Set ``layer.mlp`` (a ``MoE``) to the expected load of ``rows`` token rows; the workload's MoE record."""
    if not isinstance(getattr(layer, "mlp", None), MoE):
        return {}
    load = ExpectedLoad.of(config.n_experts, config.top_k, rows)
    layer.mlp.set_plan(load)
    expert = config.expert_params() * DTYPE_BYTES[dtype]
    return {
        "experts": config.n_experts,
        "top_k": config.top_k,
        "rows": rows,
        "expected_experts": load.expected,
        "experts_touched": load.experts,
        "rows_per_expert": load.rows,
        "mean_rows_per_expert": load.mean_rows,
        "imbalance": load.imbalance,
        "resident_expert_bytes": config.n_moe_layers * config.n_experts * expert,
        "streamed_expert_bytes": config.n_moe_layers * load.experts * expert,
        "active_params": config.n_active_params,
        "total_params": config.n_params,
        "formula": "experts touched D = E (1 - (1 - k/E)^N); rows per expert = the most loaded expert's, "
        "ceil(min(N, m/D + sqrt(2 (m/D) ln D))), m = N k (uniform balls-into-bins maximum: an estimate, the "
        "least imbalance a trained router shows)",
    }


def all_to_all_bytes(rows: int, top_k: int, d_model: int, dtype_bytes: float, n_chips: int, n_experts: int) -> float:
    """Bytes one chip sends in one all-to-all: ceil(N / n) x k x C x dtype_bytes x (ep - 1) / ep, ep = min(n, E)."""
    ep = min(n_chips, n_experts)
    return math.ceil(rows / n_chips) * top_k * d_model * dtype_bytes * (ep - 1) / ep


def _expert_kernels(workload, programs) -> tuple[dict[str, set[str]], bool]:
    """Kernel name -> its op names, for the layer segments' kernels that read expert weights (a model with
    dense or sliding-window layers has several layer segments); and whether a layer repeats (then its events
    are named "L<r>.<kernel>", r counted over all layer segments, which no other segment's events are)."""
    kernels: dict[str, set[str]] = {}
    repeated = False
    for program, seg in zip(programs, workload.segments, strict=True):
        if seg.name == "layer":
            for k in program.kernels:
                if any(is_expert_op(o) for o in k.ops):
                    kernels.setdefault(k.name, set()).update(k.op_names)
            repeated = repeated or seg.repeat > 1 or len([s for s in workload.segments if s.name == "layer"]) > 1
    return kernels, repeated


def _expert_spans(workload, programs, events) -> dict[str, list[float]]:
    """Layer instance ("L3", or "" for a one-layer segment) -> [first expert GEMM start, last expert GEMM end]."""
    kernels, repeated = _expert_kernels(workload, programs)
    spans: dict[str, list[float]] = {}
    for ev in events:
        ops = set(ev.detail.get("ops", ()))
        if ev.kind != "compute" or ev.kernel not in kernels or not ops <= kernels[ev.kernel]:
            continue  # (Spyre's per-op events carry one of their kernel's ops)
        key = ev.name.split(".")[0] if repeated else ""
        if not repeated or key.startswith("L"):
            span = spans.setdefault(key, [ev.start, ev.end])
            span[0], span[1] = min(span[0], ev.start), max(span[1], ev.end)
    return spans


def _insert(events: list[Event], inserts: list[tuple[float, Event]]) -> list[Event]:
    """Each (time, event) placed at its time plus the inserted events before it; later events move back."""
    inserts = sorted(inserts, key=lambda x: x[0])
    times, shifts, total = [t for t, _ in inserts], [], 0.0
    for _, ev in inserts:
        total += ev.duration
        shifts.append(total)
    out = []
    for ev in events:  # every event from an insertion point on (1 ps of float slack) moves by what came before
        i = bisect.bisect_right(times, ev.start + 1e-12)
        out.append(replace(ev, start=ev.start + shifts[i - 1]) if i else ev)
    for i, (t, ev) in enumerate(inserts):
        out.append(replace(ev, start=t + (shifts[i - 1] if i else 0.0)))
    out.sort(key=lambda ev: ev.start)
    return out


def _tensor_parallel(policy, workload, programs, events, moe) -> list[Event]:
    """Every expert split over the chips: one all-reduce of the layer's N x C output after its expert GEMMs."""
    nbytes = moe["rows"] * workload.config.d_model * DTYPE_BYTES[workload.dtype]
    combine = Kernel("moe output", "matmul", [Op("moe_out", "aten.index_add", "copy", "native", 0.0, nbytes, {},
                                                 params=("mlp.experts.down_proj",))], outputs={"moe_out": nbytes})
    inserts = []
    for key, (_, end) in _expert_spans(workload, programs, events).items():
        ev = policy.allreduce_event(combine, end, policy.critical_engine)
        name = f"{key}.allreduce(moe output)".lstrip(".")
        inserts.append((end, replace(ev, name=name, kernel="", detail={**ev.detail, "moe_parallel": "tensor"})))
    sent = inserts[0][1].bytes["link"] if inserts else 0.0
    programs[0].notes.append(
        f"mixture of experts: tensor parallel over {policy.n_chips} chips (moe_parallel='tensor'): every "
        f"expert's GEMMs split {policy.n_chips} ways, {moe['experts_touched']} of {moe['experts']} experts "
        f"touched per layer, no all-to-all; one all-reduce of the layer's output ({sent:.0f} B on the wire per "
        "chip) after its expert GEMMs")
    return _insert(events, inserts)


def after_run(policy, workload, programs, events: list[Event]) -> list[Event]:
    """Add the config's unmodelled-feature notes and, on several tensor-parallel chips, the MoE communication
    (all-to-alls for expert parallelism, an all-reduce for tensor-parallel experts)."""
    config, moe = workload.config, workload.meta.get("moe")
    if config is not None and programs:
        programs[0].notes.extend(f"{config.name}: {n}" for n in config.unmodelled)
    if not moe:
        return events
    _row_tile_note(policy, programs)
    if policy.parallelism != "tensor" or policy.n_chips == 1:
        where = "its pipeline stage's chips" if policy.parallelism != "tensor" else "the one chip"
        programs[0].notes.append(
            f"mixture of experts: {moe['experts_touched']} of {moe['experts']} experts per "
            f"layer touched (expected {moe['expected_experts']:.2f}); all experts resident "
            f"on {where}, no all-to-all"
        )
        return events
    if not policy.chip.link_bandwidth:
        raise DFAError(
            f"{policy.chip.name} has no published chip-to-chip bandwidth for expert parallelism; use --chips 1"
        )
    if moe_parallel_name(policy.options.get("moe_parallel")) == "tensor":
        return _tensor_parallel(policy, workload, programs, events, moe)
    n, e = policy.n_chips, moe["experts"]
    sent = all_to_all_bytes(moe["rows"], moe["top_k"], config.d_model, DTYPE_BYTES[workload.dtype], n, e)
    hop = policy.link_latency_s()
    duration = hop + sent / (policy.chip.link_bandwidth / 2)
    detail = {
        "algorithm": "all-to-all",
        "moe_parallel": "expert",
        "chips": n,
        "expert_parallel": min(n, e),
        "replicas": n,
        "rows_per_chip": math.ceil(moe["rows"] / n),
        "top_k": moe["top_k"],
        "bytes_per_chip": sent,
        "hop_latency_s": hop,
        "formula": "hop latency + ceil(N/n) k C dtype_bytes (ep-1)/ep / (link_bandwidth/2)",
    }
    inserts = []
    for k, (start, end) in _expert_spans(workload, programs, events).items():
        for t, what in ((start, "dispatch"), (end, "combine")):
            name = f"{k}.all-to-all {what}".lstrip(".")
            inserts.append((t, Event(name, "comm", policy.critical_engine, t, duration, 0, 0.0, {"link": sent},
                                     "communication", "", duration, dict(detail))))
    programs[0].notes.append(
        f"mixture of experts: expert parallel over {min(n, e)} of {n} chips (moe_parallel='expert'), 2 all-to-alls "
        f"per layer of {sent:.0f} B per chip each over {policy.chip.link_name or 'the links'} "
        f"(+ {hop * 1e6:.2f} us hop latency each)"
    )
    return _insert(events, inserts)


def _row_tile_note(policy, programs) -> None:
    """Say how each expert's rows are padded in the grouped expert GEMM, and in which dtype it runs."""
    tile = policy.expert_row_tile()
    programs[0].notes.append(
        f"grouped expert GEMM: each expert's token rows padded onto {tile[0]}-row tiles ({tile[1]})" if tile else
        f"grouped expert GEMM on {policy.name}: {policy.expert_rows_unpadded}; each expert's rows unpadded")
    if policy.expert_dtype() != policy.dtype:
        programs[0].notes.append(
            f"mixture of experts: expert GEMMs in {policy.expert_dtype()} (moe_expert_dtype), the rest of the step "
            f"in {policy.dtype}: they compute at the {policy.expert_dtype()} peak and read "
            f"{DTYPE_BYTES[policy.expert_dtype()]} B per expert weight")
    mma = policy.expert_mma()
    if mma:
        est = policy.expert_mma_estimate(policy.expert_dtype())
        programs[0].notes.append(
            f"mixture of experts: expert GEMM kernels issue {mma} (moe_expert_mma), at {est.value:.3f} of "
            f"{policy.chip.name}'s dense peak: {est.derivation}" if est else
            f"mixture of experts: moe_expert_mma={mma!r}, but {policy.chip.name} records no {policy.expert_dtype()} "
            f"rate for it (its own instruction, or none measured): expert GEMMs at the chip's own ceiling")
