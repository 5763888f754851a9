"""What a simulated machine computes in, and what leaves it: the dtypes of its datapaths and its CPU fallbacks.

* dtypes: each policy lists the non-float dtypes its machine computes in (``computes_in``, each with its source;
  None = every dtype). Floats go through the machine's float datapath with its rounding rules. An int64 op on a
  machine with only a 32-bit integer path runs narrowed to int32 (index bookkeeping: positions, masks).
* coverage: an op the policy's tables exclude, an op no cost rule covers (``common.graph.op_kinds``), or an op computing
  in a dtype the machine lacks is a CPU fallback, with its reason (``Op.fallback_reason``).
* host round trip: a fallback kernel becomes sync, device->host, the op on the host CPU, host->device
  (``host_fallbacks``, after the policy's schedule); Spyre schedules its own (``schedules_host_fallbacks``).
"""
from __future__ import annotations

from collections import defaultdict

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from common.errors import DFAError
from common.graph.costs import NodeCost
from common.sim.program import Event, Kernel, Op, Program

# Kinds that compute values in a dtype (a machine needs that datapath); movement and creation only lay bytes down.
COMPUTING = ("matmul", "reduction", "pointwise")


# ---- dtypes: what a machine computes in ------------------------------------------------------------------
FLOAT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}


def computed_dtype(policy, dtype: str, kind: str = "") -> str:
    """The dtype an op's values are computed in on ``policy``'s machine: a float matmul multiplies operands
    rounded to ``policy.matmul_operand_dtype`` (bf16 on a TPU), other float ops take the machine's storage
    rounding (``policy.storage_dtype``, e.g. fp16 on Spyre), every other dtype is its own (int64 narrowed)."""
    if dtype in FLOAT:
        if kind == "matmul" and policy.matmul_operand_dtype:
            return policy.matmul_operand_dtype
        return policy.storage_dtype or FLOAT[dtype]
    return "int32" if _narrowed(policy, dtype) else dtype


def _narrowed(policy, dtype: str) -> bool:
    """int64 on a machine with a 32-bit integer path but no 64-bit one: index and position bookkeeping (arange,
    masks, cache positions) runs narrowed to int32, as torch-spyre stores int64 indices as int32 on the device;
    exact while the values fit in 31 bits (token ids, positions and lengths of these models always do)."""
    table = getattr(policy, "computes_in", None)
    return dtype == "int64" and table is not None and "int64" not in table and "int32" in table


def check_int32_range(policy, tensors: dict) -> None:
    """On a machine that narrows int64 to int32, an int64 value outside int32's range would wrap there: a
    one-line error instead of silently exact results. Checked on a compiled graph's inputs and outputs (values
    inside the graph are not seen; positions, lengths and token ids never come near 2^31)."""
    if not _narrowed(policy, "int64"):
        return
    info = torch.iinfo(torch.int32)
    for where, tree in tensors.items():
        for t in pytree.tree_leaves(tree):
            if isinstance(t, torch.Tensor) and t.dtype == torch.int64 and t.numel() and not (
                    info.min <= int(t.min()) and int(t.max()) <= info.max):
                bad = int(t.max()) if int(t.max()) > info.max else int(t.min())
                raise DFAError(f"dfa_{policy.name} holds int64 as int32 (no 64-bit integer path on "
                               f"{policy.chip.name}): {where} value {bad} does not fit; run it on dfa_gpu or dfa_tpu")


def runs_dtype(policy, dtype: str) -> bool:
    """Whether the machine computes in ``dtype`` (a torch dtype name): floats through its float datapath,
    anything else only if the policy lists it (``policy.computes_in``; None lists everything)."""
    if dtype in FLOAT or not dtype:
        return True
    table = getattr(policy, "computes_in", None)
    return table is None or dtype in table or _narrowed(policy, dtype)


def narrows_int64_bytes(policy) -> bool:
    """Whether int64 tensors are counted at 4 bytes an element (narrowed to int32) in the ops' byte counts;
    a policy that lays int64 out as int32 itself (Spyre's sticks: ``narrows_int64_in_layout``) sees 8."""
    return _narrowed(policy, "int64") and not getattr(policy, "narrows_int64_in_layout", False)


def int64_bytes(val) -> float:
    return float(sum(t.numel() * 8 for t in pytree.tree_leaves(val)
                     if isinstance(t, torch.Tensor) and t.dtype == torch.int64))


def _input_dtypes(node: fx.Node) -> list[str]:
    return [str(a.meta["val"].dtype).replace("torch.", "") for a in node.all_input_nodes
            if isinstance(a.meta.get("val"), torch.Tensor)]


def op_coverage(policy, name: str, node: fx.Node, cost: NodeCost,
                input_dtypes: tuple[str, ...] | None = None) -> tuple[str, tuple[str, ...], str]:
    """(coverage, decomposed_into, fallback reason): the policy's op tables, then two reasons to leave the
    machine - an op no cost rule covers runs on the host (timed there, by its bytes), and an op computing in a
    dtype the machine has no datapath for runs on the host in that dtype. ``input_dtypes``: the node's input
    dtypes when the caller has read them already (``pipeline.decompose`` reads each graph once)."""
    if cost.kind == "uncosted":
        return "fallback", (), "no cost rule in common.graph.op_kinds"
    coverage, parts = policy.coverage(name)
    if coverage == "fallback":
        return coverage, parts, "not in the backend's op coverage"
    if cost.kind in COMPUTING:
        for dt in dict.fromkeys([cost.dtype, *(_input_dtypes(node) if input_dtypes is None else input_dtypes)]):
            if not runs_dtype(policy, dt):
                return "fallback", (), f"dtype {dt}: no {dt} datapath on {policy.chip.name}"
    return coverage, parts, ""


# ---- CPU fallbacks: a graph break to the host and back ------------------------------------------------------
def host_link_bandwidth(policy, op: str) -> float:
    """Bytes/s between the device and its host (both directions), from the catalog field ``policy.host_link``
    names; a machine whose catalog record has none cannot time a round trip: a one-line error."""
    where = getattr(policy, "host_link", None)
    value = None
    if where == "link_bandwidth":
        value = policy.chip.link_bandwidth
    elif where:
        value = policy.chip.facts.get(where)
    if not value:
        raise DFAError(f"dfa_{policy.name} cannot run {op}: it must run on the host, and the catalog has no "
                       f"host-link bandwidth for {policy.chip.name} to time the round trip")
    return value


def round_trip(policy, kernel: Kernel, start: float) -> list[Event]:
    """A fallback kernel as the host runs it: the host waits for the device (``host_sync_s``), the op's inputs
    cross the host link, the op runs eagerly on the CPU (``host_cpu_flops`` / ``host_cpu_bytes_per_s``), its
    outputs cross back. Every figure is a catalog estimate (common/chips/catalog/host.py). A transfer pays the host
    link's latency before its bytes (``common.chips.catalog.links.host_link_latency``); one with no bytes is not
    made."""
    from common.chips.catalog.links import host_link_latency
    op = kernel.ops[0]
    chip = policy.chip
    one_way = host_link_bandwidth(policy, op.op) / 2
    latency = host_link_latency(chip).value
    d2h, h2d = sum(kernel.inputs.values()), sum(kernel.outputs.values())
    why = {"fallback": op.op, "reason": op.fallback_reason or "not in the backend's op coverage",
           "dtype": op.dtype}
    sync = chip.estimate("host_sync_s")
    cpu = max(kernel.flops / chip.estimate("host_cpu_flops"), (d2h + h2d) / chip.estimate("host_cpu_bytes_per_s"),
              policy.cycle_s())
    events, t = [], start
    for name, kind, engine, duration, nbytes, bound in (
            (f"sync {kernel.name}", "sync", "host", sync, 0.0, "scheduling"),
            (f"d2h {kernel.name}", "dma", "host link", latency + d2h / one_way, d2h, "communication"),
            (f"host {op.op}", "host", "host", cpu, 0.0, "scheduling"),
            (f"h2d {kernel.name}", "dma", "host link", latency + h2d / one_way, h2d, "communication")):
        if kind == "dma" and not nbytes:
            continue
        events.append(Event(name, kind, engine, t, duration, 0, kernel.flops if kind == "host" else 0.0,
                            {"host link": nbytes} if nbytes else {}, bound, kernel.name, duration, dict(why)))
        t += duration
    return events


def host_fallbacks(policy, programs: list[Program], events: list[Event]) -> list[Event]:
    """Put every fallback kernel on the host. A policy that schedules its own round trips (Spyre:
    ``schedules_host_fallbacks``) gets its host events labelled with the reason; for the others, the event the
    schedule made for a fallback kernel (and its launch) becomes a ``round_trip`` and everything after it on the
    timeline moves by the difference: a graph break serialises the device and the host."""
    fallback = {(k.name, tuple(k.op_names)): k for p in programs for k in p.kernels if k.kind == "fallback"}
    if not fallback:
        return events
    names = {name for name, _ in fallback}
    if getattr(policy, "schedules_host_fallbacks", False):
        for e in events:
            k = next((k for (n, _), k in fallback.items() if n == e.kernel), None) if e.kind == "host" else None
            if k is not None:
                e.detail.setdefault("reason", k.ops[0].fallback_reason or "not in the backend's op coverage")
                e.detail.setdefault("dtype", k.ops[0].dtype)
        return events
    trips, t_shift = {}, 0.0  # fallback event -> its round trip; built in time order so earlier trips shift later
    for e in sorted(events, key=lambda e: e.start):
        k = fallback.get((e.kernel, tuple(e.detail.get("ops", ())))) if e.kind == "compute" else None
        if k is not None:
            trips[id(e)] = trip = round_trip(policy, k, e.start + t_shift)
            t_shift += trip[-1].end - trip[0].start - e.duration
    if not trips:
        return events
    starts = sorted((e.start, trips[id(e)][-1].end - trips[id(e)][0].start - e.duration) for e in events
                    if id(e) in trips)
    out = []
    for e in events:  # program order kept: each event moves by the extra time of the round trips before it
        if id(e) in trips:
            out += trips[id(e)]
        elif not (e.kernel in names and e.kind == "launch"):  # nothing is launched on the device for a host op
            shift = sum(d for t, d in starts if t < e.start)
            out.append(e.copy(start=e.start + shift) if shift else e)
    return out


def computed_dtypes(policy, ops: list[Op], kinds: dict[str, str]) -> tuple[dict[str, int], dict[str, int]]:
    """Counts of computing ops (``kinds``: node -> common.graph.op_kinds kind) by the dtype they computed in: on the
    machine, and on the host (CPU fallbacks, which compute in their own dtype, the one the machine lacks)."""
    on, off = defaultdict(int), defaultdict(int)
    for o in ops:
        if kinds.get(o.name) not in COMPUTING or not o.dtype:
            continue
        if o.coverage == "fallback":
            lacking = o.fallback_reason.split(":")[0].removeprefix("dtype ") if o.fallback_reason.startswith(
                "dtype ") else ""
            off[lacking or FLOAT.get(o.dtype, o.dtype)] += 1
        else:
            on[computed_dtype(policy, o.dtype, kinds.get(o.name, ""))] += 1
    return dict(on), dict(off)


def program_dtype(policy, ops: list[Op], on: dict[str, int]) -> str:
    """The dtype a program is labelled with: the policy's float type while any of its ops holds float values
    (an embedding lookup moves fp16 rows even when its only arithmetic is a bool mask), else the dtype most of
    its computing ops (``on``, from ``computed_dtypes``) ran in: an integer-only graph is never labelled fp16."""
    if not on or any(o.dtype in FLOAT for o in ops):
        return policy.dtype
    return max(sorted(on), key=on.get)


def dtype_note(policy, ops: list[Op], kinds: dict[str, str]) -> str:
    """Which dtypes the program's computing ops computed in on the machine, and which went to the host."""
    on, off = computed_dtypes(policy, ops, kinds)
    parts = [f"{d} x{n}" for d, n in sorted(on.items())]
    host = [f"{d} x{n}" for d, n in sorted(off.items())]
    return (f"dtypes computed on {policy.chip.name}: {', '.join(parts) or 'none'}"
            + (f"; on the host (CPU fallback): {', '.join(host)}" if host else ""))
