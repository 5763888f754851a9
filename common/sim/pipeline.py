"""The shared compiler pipeline: decompose -> fuse -> tile/layout -> place -> schedule -> execute (costs).

Every architecture runs these same passes; a ``Policy`` (one small module per architecture) answers the
questions each pass asks: which ops are native, what may fuse, how a kernel is tiled, where its bytes live,
how long it takes and how kernels are ordered in time. Each stage's output is kept in ``program.stages``.

Input: an aten-level ``GraphModule`` annotated by ``common.graph.costs.annotate`` (``meta["cost"]``, ``meta["val"]``).
"""
from __future__ import annotations

import weakref
from collections import defaultdict
from typing import TYPE_CHECKING, NamedTuple

import torch
import torch.fx as fx

from common.graph.costs import NodeCost, op_name, touched_bytes
from common.sim.fallback import (
    _input_dtypes,
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
# The pipeline's op kinds (program.OP_KINDS) from common.graph.op_kinds' kinds; creation is a write-only pointwise
# kernel.
PIPELINE_KIND = {"matmul": "matmul", "reduction": "reduction", "movement": "copy", "collective": "copy",
                 "view": "view", "pointwise": "pointwise", "creation": "pointwise"}


def op_kind(name: str, cost_kind: str = "") -> str:
    """The pipeline kind of an op: matmul | copy | gather | reduction | pointwise | view. Ops the passes treat by
    name (matmuls with (b, M, K, N), copies, table lookups) first, then the op's kind from ``common.graph.op_kinds``."""
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


class _NodeRead(NamedTuple):
    """What an op reads from one input, as the graph says it (no policy involved)."""
    src: str  # the node that owns the storage (views followed back)
    nbytes: float  # bytes of the distinct elements the view addresses
    int64: bool
    shape: tuple
    transposed: bool  # innermost stride != 1
    is_param: bool  # ``src`` is a parameter (a weight)
    param: str  # its name (the placeholder's ``meta["source"]``)


class _NodeOps(NamedTuple):
    """A costed aten node's policy-independent facts: ``decompose`` reads these for every backend."""
    node: fx.Node
    name: str
    cost: NodeCost
    reads: tuple[_NodeRead, ...]
    first_root: str | None  # root of the first input: the table of a lookup, the destination of a copy_
    mnk: tuple | None
    input_dtypes: tuple[str, ...]


_GRAPH_FACTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _graph_facts(gm: fx.GraphModule) -> tuple[list[_NodeOps], dict[str, str]]:
    """The costed nodes of an annotated graph, read once per graph: a sweep compiles each captured step for
    every backend. (An annotated graph is not edited afterwards: its ``meta["cost"]`` would be stale too; the
    node count is checked all the same.)"""
    known = _GRAPH_FACTS.get(gm)
    if known is not None and known[0] is gm.graph and known[1] == len(gm.graph.nodes):
        return known[2], known[3]
    nodes = []
    for node in gm.graph.nodes:
        cost: NodeCost | None = node.meta.get("cost")
        if node.op != "call_function" or cost is None or cost.is_view or cost.kind == "metadata":
            continue
        name = op_name(node)
        reads = []
        for arg in node.all_input_nodes:
            val = arg.meta.get("val")
            if isinstance(val, torch.Tensor):
                src = _root(arg)
                reads.append(_NodeRead(src.name, float(touched_bytes(val)), val.dtype == torch.int64,
                                       tuple(val.shape), val.dim() >= 2 and val.stride()[-1] != 1 and val.shape[-1] > 1,
                                       src.meta.get("kind") == "param", src.meta.get("source", src.name)))
        first = _root(node.all_input_nodes[0]).name if node.all_input_nodes else None
        nodes.append(_NodeOps(node, name, cost, tuple(reads), first,
                              _mnk(node) if op_kind(name, cost.kind) == "matmul" else None,
                              tuple(_input_dtypes(node))))
    kinds = {n.name: n.meta["cost"].kind for n in gm.graph.nodes if "cost" in n.meta}
    _GRAPH_FACTS[gm] = (gm.graph, len(gm.graph.nodes), nodes, kinds)
    return nodes, kinds


def decompose(gm: fx.GraphModule, policy) -> list[Op]:
    """Stage 1: aten nodes -> ``Op`` records, each classified by kind and by the policy's op coverage."""
    ops = []
    narrow = narrows_int64_bytes(policy)
    scale = gm.meta.get("byte_scale", 1.0)  # 8-bit workloads are traced in 16 bit (workload.py)
    for n in _graph_facts(gm)[0]:
        name, cost = n.name, n.cost
        in_bytes: dict[str, float] = defaultdict(float)
        params, in_shapes, transposed, param_inputs = [], {}, [], []
        for r in n.reads:
            half = narrow and r.int64  # held as int32 on the machine: 4 bytes an element
            in_bytes[r.src] = max(in_bytes[r.src], r.nbytes / (2 if half else 1))
            in_shapes[r.src] = r.shape
            if r.transposed:
                transposed.append(r.src)
            if r.is_param:
                params.append(r.param)
                param_inputs.append(r.src)
        if scale != 1.0:
            in_bytes = defaultdict(float, {k: v * scale for k, v in in_bytes.items()})
        if op_kind(name) == "gather" and n.first_root is not None:  # a lookup reads the rows it returns, not the table
            in_bytes[n.first_root] = min(in_bytes[n.first_root], cost.bytes_written)
        if name == "aten.copy_":  # the destination is written, not read
            in_bytes.pop(n.first_root, None)
        coverage, parts, reason = op_coverage(policy, name, n.node, cost, n.input_dtypes)
        kind = op_kind(name, cost.kind)
        out_bytes = cost.bytes_written - (int64_bytes(n.node.meta.get("val")) / 2 if narrow else 0.0)
        ops.append(Op(n.node.name, name, kind, coverage, cost.flops, out_bytes, dict(in_bytes),
                      cost.shape, cost.dtype, n.mnk if kind == "matmul" else None, parts,
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


def _copy(op: Op) -> Op:
    """``dataclasses.replace(op)`` (a shallow copy; Op has no ``__post_init__``) without its per-field calls."""
    out = object.__new__(Op)
    out.__dict__.update(op.__dict__)
    return out


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
    stages = {"decompose": [_copy(o) for o in ops]}
    kernels = fuse(ops, policy)
    stages["fuse"] = [[o.op for o in k.ops] for k in kernels]
    for k in kernels:
        k.layer = layer
        policy.tile(k)
        policy.place(k)
        policy.widen_expert_weights(k)  # expert GEMMs a stack runs in a wider dtype read wider weights
    kinds = _graph_facts(gm)[1]
    on, _ = computed_dtypes(policy, ops, kinds)
    program = Program(policy.name, policy.chip.name, policy.n_chips, program_dtype(policy, ops, on), kernels)
    program.stages.update(stages)
    program.notes.extend(policy.notes())
    program.notes.append(dtype_note(policy, ops, kinds))
    return program


