"""Pointwise fusion over an aten FX graph: the pieces Course 3's learners build their own pass from.

Input: an aten-level ``GraphModule`` whose nodes carry ``meta["val"]`` (``common.graph.capture.capture_aten`` or
``make_fx``).

* ``classify(node)`` - *pointwise* when its ``OpOverload`` carries ``torch.Tag.pointwise`` (torch's own op tags;
  in-place ops excluded), *matmul* for ``mm`` / ``addmm`` / ``bmm``, *view* for metadata-only ops (a fused kernel
  indexes through them), *other* for everything else (reductions, copies, gathers...: barriers).
* ``check_group(gm, names)`` - is one group (node names) legal: only pointwise / matmul / view nodes, exactly one
  value leaving it (a value read outside the group must be written to memory anyway), at most one matmul,
  connected.
* ``fuse_groups(gm, groups)`` - the rewrite: each group becomes one ``call_module`` node running a small
  ``GraphModule`` of the group's ops (same ops, same order: identical numerics), placed where its sink was.
* ``fusion_savings(gm)`` - the same graph on the simulated machines, op by op and as each backend fuses it.

Finding the groups and the bytes they save is the lab's exercise (``my_find_groups``, ``bytes_saved``).
"""

from __future__ import annotations

import operator

import pandas as pd
import torch
import torch.fx as fx

from common.errors import DFAError

aten = torch.ops.aten
MATMUL_OPS = (aten.mm, aten.addmm, aten.bmm)
VIEW_OPS = (
    aten.view,
    aten._unsafe_view,
    aten.reshape,
    aten.unsqueeze,
    aten.squeeze,
    aten.expand,
    aten.permute,
    aten.transpose,
    aten.t,
    aten.alias,
)
_POINTWISE_TAG = getattr(getattr(torch, "Tag", None), "pointwise", None)
_INPLACE_TAG = getattr(getattr(torch, "Tag", None), "inplace", None)


def _packet(node: fx.Node):
    return getattr(node.target, "overloadpacket", None) if node.op == "call_function" else None


def is_pointwise(node: fx.Node) -> bool:
    """Elementwise by torch's own tag (``torch.Tag.pointwise``); mutating (``inplace``) ops never fuse here."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    tags = set(getattr(node.target, "tags", ()))
    return _POINTWISE_TAG in tags and _INPLACE_TAG not in tags and isinstance(node.meta.get("val"), torch.Tensor)


def is_matmul(node: fx.Node) -> bool:
    return _packet(node) in MATMUL_OPS


def is_view(node: fx.Node) -> bool:
    return _packet(node) in VIEW_OPS


def classify(node: fx.Node) -> str:
    """'pointwise' | 'matmul' | 'view' | 'other' (placeholders, outputs and every barrier op)."""
    if is_pointwise(node):
        return "pointwise"
    if is_matmul(node):
        return "matmul"
    return "view" if is_view(node) else "other"


def check_group(gm: fx.GraphModule, names) -> None:
    """Raise a DFAError if fusing ``names`` would be illegal: unknown or non-fusable nodes, more than one value
    leaving the group (an interior value read outside), or a group that is not connected."""
    by_name = {n.name: n for n in gm.graph.nodes}
    missing = [x for x in names if x not in by_name]
    if missing:
        raise DFAError(f"group {list(names)} names nodes not in the graph: {missing}")
    nodes = [by_name[x] for x in names]
    bad = [n.name for n in nodes if classify(n) == "other"]
    if bad:
        raise DFAError(f"group {list(names)}: {bad} are not pointwise, matmul or view ops (barriers)")
    inside = set(nodes)
    leaving = [n.name for n in nodes if not set(n.users) <= inside or not n.users]
    if len(leaving) != 1:
        raise DFAError(
            f"group {list(names)} must have exactly one value leaving it; these are read outside "
            f"the group: {leaving} (fusing across a multi-consumer node is illegal)"
        )
    if sum(is_matmul(n) for n in nodes) > 1:
        raise DFAError(f"group {list(names)} holds more than one matmul")
    linked = {nodes[0]}
    for _ in nodes:  # connected through producer/consumer edges inside the group
        linked |= {m for n in linked for m in (*n.all_input_nodes, *n.users) if m in inside}
    if linked != inside:
        raise DFAError(f"group {list(names)} is not connected: {sorted(x.name for x in inside - linked)}")


def fuse_groups(gm: fx.GraphModule, groups) -> fx.GraphModule:
    """A copy of ``gm`` in which every group (a list of node names) is one ``call_module`` node ``fused_<i>``
    whose submodule runs the group's ops in graph order. Checks legality first (``check_group``)."""
    names_list = [list(g) for g in groups]
    for names in names_list:
        check_group(gm, names)
    seen = [x for names in names_list for x in names]
    if len(seen) != len(set(seen)):
        raise DFAError("a node appears in more than one group")
    new = fx.GraphModule(gm, _copy_graph(gm.graph))
    new.meta.update(gm.meta)
    by_name = {n.name: n for n in new.graph.nodes}
    for i, names in enumerate(names_list):
        nodes = sorted((by_name[x] for x in names), key=list(new.graph.nodes).index)
        inside = set(nodes)
        sink = next(n for n in nodes if not set(n.users) <= inside or not n.users)
        inputs = list(dict.fromkeys(a for n in nodes for a in n.all_input_nodes if a not in inside))
        sub = fx.Graph()
        env = {a: sub.placeholder(a.name) for a in inputs}
        for a in inputs:
            env[a].meta.update(a.meta)
        for n in nodes:
            env[n] = sub.node_copy(n, env.__getitem__)
        sub.output(env[sink])
        name = f"fused_{i}"
        new.add_submodule(name, fx.GraphModule(torch.nn.Module(), sub, class_name=f"Fused{i}"))
        with new.graph.inserting_after(sink):
            call = new.graph.call_module(name, tuple(inputs))
        call.meta.update(sink.meta)
        call.meta["fused_ops"] = [f"aten.{_packet(n).__name__}" for n in nodes if _packet(n) is not None]
        sink.replace_all_uses_with(call)
        for n in reversed(nodes):
            new.graph.erase_node(n)
    new.graph.lint()
    new.recompile()
    return new


def _copy_graph(graph: fx.Graph) -> fx.Graph:
    out = fx.Graph()
    env: dict = {}
    ret = out.graph_copy(graph, env)
    out.output(ret)
    out._codegen = getattr(graph, "_codegen", out._codegen)  # keep a pytree calling convention, if any
    return out


def fused_call_count(gm: fx.GraphModule) -> int:
    """How many fused kernels (``call_module fused_*`` nodes) a rewritten graph holds."""
    return sum(n.op == "call_module" and str(n.target).startswith("fused_") for n in gm.graph.nodes)


def compute_ops(gm: fx.GraphModule) -> list[str]:
    """Names of the non-view call_function nodes left at the top level (what still runs as its own kernel)."""
    return [
        n.name
        for n in gm.graph.nodes
        if n.op == "call_function" and classify(n) != "view" and n.target is not operator.getitem
    ]


# ---- the same graph on the simulated machines: every op its own kernel vs the backend's fusion ---------------
def op_by_op_workload(gm: fx.GraphModule, name: str = "op by op"):
    """``gm`` (aten, with ``meta["val"]``) as a simulator workload with one segment per compute op (its view
    producers travel with it), so no two ops can share a kernel: every intermediate goes through memory, as in
    eager mode. Placeholders keep their ``kind`` (param / input) so weights are still recognised."""
    from common.graph.costs import annotate
    from common.sim.workload import Segment, Workload

    segments = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or classify(node) == "view" or not isinstance(node.meta.get("val"), torch.Tensor):
            continue
        needed, stack = [node], list(node.all_input_nodes)
        while stack:  # views feeding the op are part of its kernel (they move nothing)
            p = stack.pop()
            if classify(p) == "view" and p not in needed:
                needed.append(p)
                stack.extend(p.all_input_nodes)
        order = {n: i for i, n in enumerate(gm.graph.nodes)}
        needed.sort(key=order.get)
        inputs = list(dict.fromkeys(a for n in needed for a in n.all_input_nodes if a not in needed))
        sub = fx.Graph()
        env = {}
        for a in inputs:
            env[a] = sub.placeholder(a.name)
            env[a].meta.update({k: v for k, v in a.meta.items() if k in ("kind", "source", "val")})
        for n in needed:
            env[n] = sub.node_copy(n, env.__getitem__)
        sub.output(env[node])
        seg = fx.GraphModule(torch.nn.Module(), sub)
        segments.append(Segment(node.name, annotate(seg, *[a.meta["val"] for a in inputs])))
    if not segments:
        raise DFAError("the graph has no compute ops to simulate")
    dtype = str(next(s.gm for s in segments).meta.get("dtype", "")) or None
    return Workload(name, segments, dtype=dtype or _dtype_of(gm))


def _dtype_of(gm: fx.GraphModule) -> str:
    from common.chips import canonical_dtype

    vals = [
        n.meta["val"]
        for n in gm.graph.nodes
        if isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].is_floating_point()
    ]
    return canonical_dtype(str(vals[-1].dtype)) if vals else "fp32"


def fusion_savings(gm: fx.GraphModule, backends=("gpu", "tpu", "spyre", "lpu", "wse"), **options) -> pd.DataFrame:
    """Simulate ``gm`` op by op and as the backend compiles it (its own fusion), per backend: bytes at every
    memory level, kernels and time. ``options`` go to every backend (e.g. ``lx_budget_bytes`` for Spyre)."""
    from common.graph.costs import annotate
    from common.sim import simulate
    from common.sim.run import make_policy
    from common.sim.workload import Segment, Workload

    if not any("cost" in n.meta for n in gm.graph.nodes):
        annotate(gm, *[n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"])
    whole = Workload("fused", [Segment("graph", gm)], dtype=_dtype_of(gm))
    split = op_by_op_workload(gm)
    rows = []
    for b in backends:
        opts = {k: v for k, v in options.items() if b == "spyre" or k != "lx_budget_bytes"}
        native = make_policy(b).dtype  # bytes come from the graph; FLOP/s from the chip's native 16-bit type
        for label, wl in (("op by op", split), ("fused", whole)):
            r = simulate(wl, b, dtype=native, **opts)
            rows.append(
                {
                    "backend": b,
                    "chip": r.chip,
                    "program": label,
                    "kernels": sum(len(p.kernels) for p in r.programs),
                    "time_s": r.time_s,
                    **{f"bytes_{lv}": v for lv, v in r.bytes.items()},
                    "spill_bytes": r.counters.get("lx_spill_bytes", 0.0),
                }
            )
    return pd.DataFrame(rows).fillna(0.0)
