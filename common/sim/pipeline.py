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

from common.costs import NodeCost, op_name, touched_bytes
from common.sim.fallback import (
    computed_dtypes,
    dtype_note,
    host_fallbacks,  # noqa: F401  (re-exported: run.simulate calls it after the schedule)
    int64_bytes,
    narrows_int64_bytes,
    op_coverage,
    program_dtype,
)
from common.sim.program import Kernel, Op, Program

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
        narrow = narrows_int64_bytes(policy)
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
        out_bytes = cost.bytes_written - (int64_bytes(node.meta.get("val")) / 2 if narrow else 0.0)
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
    kinds = {n.name: n.meta["cost"].kind for n in gm.graph.nodes if "cost" in n.meta}
    on, _ = computed_dtypes(policy, ops, kinds)
    program = Program(policy.name, policy.chip.name, policy.n_chips, program_dtype(policy, ops, on), kernels)
    program.stages.update(stages)
    program.notes.extend(policy.notes())
    program.notes.append(dtype_note(policy, ops, kinds))
    return program


