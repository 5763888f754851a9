"""The shared compiler pipeline: decompose -> fuse -> tile/layout -> place -> schedule -> execute (costs).

Every architecture runs these same passes; a ``Policy`` (one small module per architecture) answers the
questions each pass asks: which ops are native, what may fuse, how a kernel is tiled, where its bytes live,
how long it takes and how kernels are ordered in time. Each stage's output is kept in ``program.stages``.

Input: an aten-level ``GraphModule`` annotated by ``common.costs.annotate`` (``meta["cost"]``, ``meta["val"]``).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from common.costs import NodeCost, op_name, touched_bytes
from common.errors import DFAError
from common.sim.program import Event, Kernel, Op, Program

if TYPE_CHECKING:  # pandas is loaded by kernels_frame only
    import pandas as pd

aten = torch.ops.aten

MATMUL_OPS = {"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution", "aten.linear",
              "aten.matmul", "aten._scaled_dot_product_flash_attention_for_cpu",
              "aten._scaled_dot_product_efficient_attention", "aten._scaled_dot_product_flash_attention"}
COPY_OPS = {"aten.clone", "aten.copy_", "aten._to_copy", "aten.cat", "aten.stack", "aten.slice_scatter",
            "aten.index_put", "aten.index_put_", "aten.constant_pad_nd", "aten.repeat", "aten.copy",
            "aten.contiguous"}
GATHER_OPS = {"aten.embedding", "aten.index_select", "aten.index", "aten.gather"}
# The pipeline's op kinds (program.OP_KINDS) from common.op_kinds' kinds; creation is a write-only pointwise kernel.
PIPELINE_KIND = {"matmul": "matmul", "reduction": "reduction", "movement": "copy", "collective": "copy",
                 "view": "view", "pointwise": "pointwise", "creation": "pointwise"}
# Kinds that compute values in a dtype (a machine needs that datapath); movement and creation only lay bytes down.
COMPUTING = ("matmul", "reduction", "pointwise")


def op_kind(name: str, cost_kind: str = "") -> str:
    """The pipeline kind of an op: matmul | copy | gather | reduction | pointwise | view. Ops the passes treat by
    name (matmuls with (b, M, K, N), copies, table lookups) first, then the op's kind from ``common.op_kinds``."""
    if name in MATMUL_OPS:
        return "matmul"
    if name in COPY_OPS:
        return "copy"
    if name in GATHER_OPS:
        return "gather"
    return PIPELINE_KIND.get(cost_kind, "pointwise")


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


def runs_dtype(policy, dtype: str) -> bool:
    """Whether the machine computes in ``dtype`` (a torch dtype name): floats through its float datapath,
    anything else only if the policy lists it (``policy.computes_in``; None lists everything)."""
    if dtype in FLOAT or not dtype:
        return True
    table = getattr(policy, "computes_in", None)
    return table is None or dtype in table or _narrowed(policy, dtype)


def _narrows_bytes(policy) -> bool:
    """Whether int64 tensors are counted at 4 bytes an element (narrowed to int32) in the ops' byte counts;
    a policy that lays int64 out as int32 itself (Spyre's sticks: ``narrows_int64_in_layout``) sees 8."""
    return _narrowed(policy, "int64") and not getattr(policy, "narrows_int64_in_layout", False)


def _int64_bytes(val) -> float:
    return float(sum(t.numel() * 8 for t in pytree.tree_leaves(val)
                     if isinstance(t, torch.Tensor) and t.dtype == torch.int64))


def _input_dtypes(node: fx.Node) -> list[str]:
    return [str(a.meta["val"].dtype).replace("torch.", "") for a in node.all_input_nodes
            if isinstance(a.meta.get("val"), torch.Tensor)]


def op_coverage(policy, name: str, node: fx.Node, cost: NodeCost) -> tuple[str, tuple[str, ...], str]:
    """(coverage, decomposed_into, fallback reason): the policy's op tables, then two reasons to leave the
    machine - an op no cost rule covers runs on the host (timed there, by its bytes), and an op computing in a
    dtype the machine has no datapath for runs on the host in that dtype."""
    if cost.kind == "uncosted":
        return "fallback", (), "no cost rule in common.op_kinds"
    coverage, parts = policy.coverage(name)
    if coverage == "fallback":
        return coverage, parts, "not in the backend's op coverage"
    if cost.kind in COMPUTING:
        for dt in dict.fromkeys([cost.dtype, *_input_dtypes(node)]):
            if not runs_dtype(policy, dt):
                return "fallback", (), f"dtype {dt}: no {dt} datapath on {policy.chip.name}"
    return coverage, parts, ""


def _root(node: fx.Node) -> fx.Node:
    """Follow view ops back to the node that owns the storage."""
    while True:
        cost: NodeCost | None = node.meta.get("cost")
        if node.op in ("placeholder", "get_attr") or cost is None or not cost.is_view:
            return node
        producers = [a for a in node.all_input_nodes
                     if isinstance(a.meta.get("val"), (torch.Tensor, list, tuple))]  # tuples: split / chunk
        if not producers:
            return node
        node = producers[0]


def _mnk(node: fx.Node) -> tuple | None:
    """(batch, M, K, N) of a matmul node from its operand shapes."""
    tensors = [a.meta.get("val") for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
    name = op_name(node)
    if name in ("aten.mm", "aten.addmm") and len(tensors) >= 2:
        a, b = tensors[-2], tensors[-1]
        return (1, a.shape[0], a.shape[1], b.shape[1])
    if name in ("aten.bmm", "aten.baddbmm") and len(tensors) >= 2:
        a, b = tensors[-2], tensors[-1]
        return (a.shape[0], a.shape[1], a.shape[2], b.shape[2])
    return None


def decompose(gm: fx.GraphModule, policy) -> list[Op]:  # noqa: C901  (one pass over the nodes)
    """Stage 1: aten nodes -> ``Op`` records, each classified by kind and by the policy's op coverage."""
    ops = []
    for node in gm.graph.nodes:
        cost: NodeCost | None = node.meta.get("cost")
        if node.op != "call_function" or cost is None or cost.is_view or cost.kind == "metadata":
            continue
        name = op_name(node)
        in_bytes: dict[str, float] = defaultdict(float)
        params, in_shapes, transposed, param_inputs = [], {}, [], []
        narrow = _narrows_bytes(policy)
        for arg in node.all_input_nodes:
            val = arg.meta.get("val")
            if isinstance(val, torch.Tensor):
                src = _root(arg)
                half = narrow and val.dtype == torch.int64  # held as int32 on the machine: 4 bytes an element
                in_bytes[src.name] = max(in_bytes[src.name], float(touched_bytes(val)) / (2 if half else 1))
                in_shapes[src.name] = tuple(val.shape)
                if val.dim() >= 2 and val.stride()[-1] != 1 and val.shape[-1] > 1:
                    transposed.append(src.name)
                if src.meta.get("kind") == "param":
                    params.append(src.meta.get("source", src.name))
                    param_inputs.append(src.name)
        scale = gm.meta.get("byte_scale", 1.0)  # 8-bit workloads are traced in 16 bit (workload.py)
        if scale != 1.0:
            in_bytes = defaultdict(float, {k: v * scale for k, v in in_bytes.items()})
        if op_kind(name) == "gather" and node.all_input_nodes:  # a lookup reads the rows it returns, not the table
            table = _root(node.all_input_nodes[0]).name
            in_bytes[table] = min(in_bytes[table], cost.bytes_written)
        if name == "aten.copy_":  # the destination is written, not read
            dest = _root(node.all_input_nodes[0]).name
            in_bytes.pop(dest, None)
        coverage, parts, reason = op_coverage(policy, name, node, cost)
        kind = op_kind(name, cost.kind)
        out_bytes = cost.bytes_written - (_int64_bytes(node.meta.get("val")) / 2 if narrow else 0.0)
        ops.append(Op(node.name, name, kind, coverage, cost.flops, out_bytes, dict(in_bytes),
                      cost.shape, cost.dtype, _mnk(node) if kind == "matmul" else None, parts,
                      tuple(params), in_shapes=in_shapes, transposed_inputs=tuple(transposed),
                      param_inputs=tuple(param_inputs), fallback_reason=reason))
    _mark_attention(ops)
    return ops


def _mark_attention(ops: list[Op]) -> None:
    """Tag bmm -> (pointwise | softmax | copy)* -> bmm chains, the pattern flash-attention kernels replace."""
    by_name = {o.name: o for o in ops}
    consumers = defaultdict(list)
    for o in ops:
        for p in o.in_bytes:
            consumers[p].append(o)
    pattern_id = 0
    for start in ops:
        if start.op != "aten.bmm" or start.pattern:
            continue
        chain, cur, seen_softmax = [start], start, False
        while len(consumers[cur.name]) == 1:
            nxt = consumers[cur.name][0]
            if nxt.op == "aten.bmm":
                if seen_softmax:
                    chain.append(nxt)
                    for o in chain:
                        o.pattern = f"attention{pattern_id}"
                    pattern_id += 1
                break
            if nxt.kind not in ("pointwise", "reduction", "copy"):
                break
            seen_softmax |= nxt.op in ("aten._softmax", "aten._safe_softmax")
            chain.append(nxt)
            cur = nxt
    del by_name


def fuse(ops: list[Op], policy) -> list[Kernel]:
    """Stage 2: greedy fusion in program order. An op joins the most recent kernel when it consumes one of that
    kernel's ops and ``policy.can_fuse(kernel, op)`` allows it; fallback ops always stand alone."""
    kernels: list[Kernel] = []
    owner: dict[str, Kernel] = {}
    for op in ops:
        if op.pattern:
            _bring_pattern_kernel_forward(kernels, owner, op)
        last = kernels[-1] if kernels else None
        feeds = last is not None and any(owner.get(p) is last for p in op.in_bytes)
        if (last is not None and feeds and op.coverage != "fallback" and last.kind != "fallback"
                and policy.can_fuse(last, op)):
            last.ops.append(op)
            if op.pattern.startswith("attention") and last.ops[0].op == "aten.bmm":
                last.kind = "attention"
            elif last.kind not in ("matmul", "attention") and op.kind == "matmul":
                last.kind = "matmul"
        else:
            kind = "fallback" if op.coverage == "fallback" else ("pointwise" if op.kind == "view" else op.kind)
            last = Kernel(f"k{len(kernels)}", kind, [op])
            kernels.append(last)
        owner[op.name] = last
    _boundary_bytes(kernels, ops)
    return kernels


def _bring_pattern_kernel_forward(kernels: list[Kernel], owner: dict, op: Op) -> None:
    """An attention chain can be interrupted by an independent kernel (e.g. the copy that lays out V).
    If no kernel after the chain's kernel consumes it, moving the chain's kernel last keeps the order
    topological and lets the rest of the chain fuse into it."""
    home = next((k for k in reversed(kernels) if any(o.pattern == op.pattern for o in k.ops)), None)
    if home is None or home is kernels[-1]:
        return
    later = kernels[kernels.index(home) + 1:]
    if any(owner.get(p) is home for k in later for o in k.ops for p in o.in_bytes):
        return
    kernels.remove(home)
    kernels.append(home)


def _boundary_bytes(kernels: list[Kernel], ops: list[Op]) -> None:
    """What crosses each kernel boundary: inputs from outside (deduplicated), outputs consumed outside."""
    owner = {o.name: k for k in kernels for o in k.ops}
    consumers = defaultdict(set)
    for o in ops:
        for p in o.in_bytes:
            consumers[p].add(owner[o.name].name)
    for k in kernels:
        k.inputs, k.outputs = {}, {}
        for o in k.ops:
            for p, b in o.in_bytes.items():
                if owner.get(p) is not k:
                    k.inputs[p] = max(k.inputs.get(p, 0.0), b)
            outside = consumers[o.name] - {k.name}
            if outside or not consumers[o.name]:  # consumed elsewhere, or a graph output / side effect
                k.outputs[o.name] = o.out_bytes


def kernels_frame(program: Program) -> pd.DataFrame:
    """One row per kernel: what fused, its tiling, bytes per level (the inspectable 'program listing')."""
    rows = []
    for k in program.kernels:
        row = {"kernel": k.name, "kind": k.kind, "ops": " + ".join(o.op.replace("aten.", "") for o in k.ops),
               "flops": k.flops, "padded_flops": k.padded_flops, "layer": k.layer}
        row.update({f"bytes_{lvl}": b for lvl, b in k.bytes.items()})
        row.update({f"tile_{key}": v for key, v in k.tiling.items() if not isinstance(v, (dict, list))})
        rows.append(row)
    import pandas as pd

    return pd.DataFrame(rows)


def compile_graph(gm: fx.GraphModule, policy, *, layer: int | None = None) -> Program:
    """Run decompose -> fuse -> tile -> place on an annotated aten graph; scheduling happens in ``execute``."""
    ops = decompose(gm, policy)
    # Each stage is recorded as it leaves its pass: later passes (e.g. Spyre's restickify insertion in ``tile``)
    # rewrite Op fields, so the decompose record keeps copies, and the fuse record is taken before tiling.
    stages = {"decompose": [replace(o) for o in ops]}
    kernels = fuse(ops, policy)
    stages["fuse"] = [[o.op for o in k.ops] for k in kernels]
    for k in kernels:
        k.layer = layer
        policy.tile(k)
        policy.place(k)
    program = Program(policy.name, policy.chip.name, policy.n_chips, policy.dtype, kernels)
    program.stages.update(stages)
    program.notes.extend(policy.notes())
    kinds = {n.name: n.meta["cost"].kind for n in gm.graph.nodes if "cost" in n.meta}
    program.notes.append(dtype_note(policy, ops, kinds))
    return program


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
    outputs cross back. Every figure is a catalog estimate (common/catalog/host.py). A transfer pays the host
    link's latency before its bytes (``common.catalog.links.host_link_latency``); one with no bytes is not made."""
    from common.catalog.links import host_link_latency
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
    out, shift = [], 0.0
    for e in sorted(events, key=lambda e: e.start):
        k = fallback.get((e.kernel, tuple(e.detail.get("ops", ()))))
        if k is None and e.kernel in names and e.kind == "launch":
            continue  # nothing is launched on the device for an op the host runs
        if k is None or e.kind != "compute":
            out.append(e.copy(start=e.start + shift))  # (Event.copy: dataclasses.replace, 6x cheaper)
            continue
        trip = round_trip(policy, k, e.start + shift)
        out += trip
        shift += trip[-1].end - trip[0].start - e.duration
    return out


def dtype_note(policy, ops: list[Op], kinds: dict[str, str]) -> str:
    """Which dtypes the program's computing ops (``kinds``: node -> common.op_kinds kind) computed in on the
    machine, and which went to the host, where they compute in their own dtype (the one the machine lacks)."""
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
    parts = [f"{d} x{n}" for d, n in sorted(on.items())]
    host = [f"{d} x{n}" for d, n in sorted(off.items())]
    return (f"dtypes computed on {policy.chip.name}: {', '.join(parts) or 'none'}"
            + (f"; on the host (CPU fallback): {', '.join(host)}" if host else ""))
