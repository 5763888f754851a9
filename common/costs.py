"""Work and traffic of every FX node: FLOPs from ``torch.utils.flop_counter``, bytes from tensor metadata.

``CostProp`` is a ``torch.fx.Interpreter`` (like ``ShapeProp``): it runs the graph - on FakeTensors for big
models - and stores ``node.meta["cost"] = NodeCost(...)`` and ``node.meta["val"]``. Bytes are the
*unfused, no-reuse* traffic of each op: every tensor it reads streamed in once, every tensor it writes
streamed out once. Views (reshape, permute, expand, slice...) move nothing. A view that broadcasts
(stride 0) counts its distinct elements only. Intensity = FLOPs / (bytes read + bytes written).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

if TYPE_CHECKING:  # pandas (~0.3 s to import) is loaded by the table views, not the simulators
    import pandas as pd

aten = torch.ops.aten

# Ops that only reinterpret metadata (aliases of their input): zero bytes, zero FLOPs.
VIEW_OPS = {
    aten.view, aten._unsafe_view, aten.reshape, aten.permute, aten.transpose, aten.t, aten.expand,
    aten.slice, aten.select, aten.unsqueeze, aten.squeeze, aten.alias, aten.as_strided, aten.split,
    aten.split_with_sizes, aten.unbind, aten.view_as_real, aten.view_as_complex, aten.detach, aten.lift_fresh,
    aten.unflatten, aten.flatten, aten.narrow, aten.chunk, aten.diagonal, aten.unsafe_split,
    aten.unsafe_split_with_sizes, aten.transpose_, aten.t_, aten.squeeze_, aten.unsqueeze_,
}
VIEW_METHODS = {"view", "reshape", "permute", "transpose", "t", "expand", "unsqueeze", "squeeze", "contiguous_view",
                "flatten", "unflatten", "narrow", "chunk", "split", "size", "dim", "__getitem__"}


# FLOPs per element for ops flop_counter does not cover (it counts matmul, conv and attention only).
# Convention, as in LLM-Viewer and most roofline tools: one FLOP per output element for pointwise ops,
# one per input element for reductions, and these counts for common fused composites.
FLOPS_PER_INPUT_ELEMENT = {
    aten._softmax: 5, aten._log_softmax: 5, aten.native_layer_norm: 8, aten.sum: 1, aten.mean: 1,
    aten.amax: 1, aten.amin: 1, aten.max: 1, aten.min: 1, aten.var: 3, aten.var_mean: 4, aten.std: 3,
    aten.cumsum: 1, aten.argmax: 1, aten.rsqrt: 1, aten.gelu: 8, aten.silu: 4, aten.sigmoid: 4, aten.tanh: 4,
    aten.exp: 1, aten.pow: 1, aten.linalg_vector_norm: 2, aten._fused_rms_norm: 4,
    # batch norm with given statistics: (x - mean) * invstd * weight + bias
    aten.native_batch_norm: 4, aten._native_batch_norm_legit_no_training: 4,
    # one comparison per input element: a pooling window that tiles its input, a top-k selection pass
    aten.max_pool2d_with_indices: 1, aten.topk: 1,
}
# Accumulating scatters: one addition per *source* element (their last tensor argument).
FLOPS_PER_SOURCE_ELEMENT = {aten.scatter_add: 1, aten.index_add: 1}
# attention ops that flop_counter does not register (the CPU flash kernel): QK^T and PV, 2 FLOPs per MAC
ATTENTION_OPS = {aten._scaled_dot_product_flash_attention_for_cpu}
# Metadata queries that dispatch but compute and move nothing.
METADATA_OPS = {torch.ops.prim.device}


# Pure data movement or creation: bytes, but no arithmetic.
NO_FLOP_OPS = {
    aten.clone, aten.copy_, aten._to_copy, aten.copy, aten.cat, aten.stack, aten.embedding, aten.index_select,
    aten.gather, aten.fill_, aten.zeros_like, aten.ones_like, aten.full, aten.empty, aten.arange, aten.zeros,
    aten.ones, aten.scalar_tensor, aten.index, aten.index_put, aten.index_put_, aten.slice_scatter, aten.repeat,
    aten.constant_pad_nd, aten.new_zeros, aten.new_empty, aten.full_like, aten.empty_like, aten.where,
    aten.scatter, aten.triu, aten.tril, aten.index_copy, aten.index_copy_, aten.flip, aten.roll,
}


GATHER_OPS = {aten.embedding, aten.index_select}


class VectorFlopMode(TorchDispatchMode):
    """Counts the FLOPs ``FlopCounterMode`` leaves out: pointwise ops and reductions (see table above)."""

    def __init__(self):
        super().__init__()
        self.flops = 0
        self.uncosted: list[str] = []  # ops no rule covers, in dispatch order: their FLOPs would be a guess

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        packet = _packet(func)
        if packet in flop_registry or packet in VIEW_OPS or packet in NO_FLOP_OPS or packet in METADATA_OPS:
            return out
        per_input = FLOPS_PER_INPUT_ELEMENT.get(packet)
        if per_input is not None:
            first = next(iter(_tensors(args)), None)
            self.flops += per_input * (first.numel() if first is not None else 0)
        elif packet in FLOPS_PER_SOURCE_ELEMENT:
            source = _tensors(args)[-1]
            self.flops += FLOPS_PER_SOURCE_ELEMENT[packet] * source.numel()
        elif packet in ATTENTION_OPS:
            q, k = _tensors(args)[:2]  # (B, H, Sq, D), (B, H, Skv, D)
            self.flops += 4 * q.numel() * k.shape[-2]  # 2 x (B H Sq Skv D) MACs: QK^T and PV
        elif torch.Tag.pointwise in getattr(func, "tags", ()):
            self.flops += sum(t.numel() for t in _tensors(out))
        else:
            self.uncosted.append(f"aten.{packet.__name__}" if hasattr(packet, "__name__") else str(packet))
        return out


@dataclass(frozen=True)
class NodeCost:
    """FLOPs and bytes of one node, with its output shape and dtype."""

    flops: float
    bytes_read: float
    bytes_written: float
    shape: tuple = ()
    dtype: str = ""
    is_view: bool = False

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """FLOP per byte moved; 0 for nodes that move nothing."""
        return self.flops / self.bytes if self.bytes else 0.0


def touched_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements a (possibly broadcast) view addresses: prod(size where stride != 0)."""
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            n *= int(size)
    return n * t.element_size()


def _tensors(tree) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _packet(target):
    return getattr(target, "overloadpacket", target)


def _mutated_first_arg(target) -> bool:
    """True for in-place aten ops (copy_, index_put_, add_...) whose first argument is written."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.arguments:
        return False
    alias = schema.arguments[0].alias_info
    return bool(alias is not None and alias.is_write)


def op_name(node: fx.Node, gm: fx.GraphModule | None = None) -> str:
    """Short readable name of what a node does: 'aten.mm', 'linear (attn.q)', 'softmax', 'add'."""
    if node.op == "call_function":
        packet = _packet(node.target)
        if isinstance(packet, torch._ops.OpOverloadPacket):
            return f"aten.{packet.__name__}"
        return getattr(node.target, "__name__", str(node.target))
    if node.op == "call_module":
        mod = gm.get_submodule(node.target) if gm is not None else None
        return f"{type(mod).__name__.lower()} ({node.target})" if mod is not None else str(node.target)
    if node.op == "call_method":
        return str(node.target)
    return node.op


class CostProp(fx.Interpreter):
    """Run a GraphModule and annotate every node with ``meta["val"]`` and ``meta["cost"]``."""

    def __init__(self, gm: fx.GraphModule):
        super().__init__(gm)
        self._counter = FlopCounterMode(display=False)
        self._vector = VectorFlopMode()

    def propagate(self, *args):
        with self._counter, self._vector:
            return self.run(*args)

    def run_node(self, n: fx.Node):
        before = self._counter.get_total_flops() + self._vector.flops
        unknown = len(self._vector.uncosted)
        result = super().run_node(n)
        flops = float(self._counter.get_total_flops() + self._vector.flops - before)
        if len(self._vector.uncosted) > unknown:  # read by the simulated backends, which refuse to guess
            n.meta["uncosted"] = sorted(set(self._vector.uncosted[unknown:]))
        n.meta["val"] = result
        n.meta["cost"] = self._cost(n, result, flops)
        return result

    def _cost(self, n: fx.Node, result, flops: float) -> NodeCost:
        outs = _tensors(result)
        shape = tuple(outs[0].shape) if outs else ()
        dtype = str(outs[0].dtype).replace("torch.", "") if outs else ""
        if n.op in ("placeholder", "output", "get_attr"):
            return NodeCost(0.0, 0.0, 0.0, shape, dtype, is_view=True)
        if self._is_view(n):
            return NodeCost(0.0, 0.0, 0.0, shape, dtype, is_view=True)
        ins = _tensors(self.fetch_args_kwargs_from_env(n))
        if n.op == "call_module":
            ins += list(self.module.get_submodule(n.target).parameters())
        written = sum(t.numel() * t.element_size() for t in outs)
        if n.op == "call_function" and _mutated_first_arg(n.target) and ins:
            written = ins[0].numel() * ins[0].element_size()
            if _packet(n.target) in (aten.copy_,):  # copy_ overwrites its destination without reading it
                ins = ins[1:]
        if n.op == "call_function" and _packet(n.target) in GATHER_OPS and ins:
            ins[0] = None  # a lookup reads the rows it returns (counted below), not the whole table
            read_rows = written
        else:
            read_rows = 0
        seen, read = set(), read_rows
        for t in ins:
            if t is None:
                continue
            key = (id(t),)
            if key not in seen:
                seen.add(key)
                read += touched_bytes(t)
        return NodeCost(flops, float(read), float(written), shape, dtype)

    def _is_view(self, n: fx.Node) -> bool:
        if n.op == "call_function":
            return _packet(n.target) in VIEW_OPS or n.target in (getattr, len) or \
                getattr(n.target, "__name__", "") == "getitem"
        if n.op == "call_method":
            return n.target in VIEW_METHODS
        return False


def causal_fraction(start: int, t: int, block: int = 1) -> float:
    """Fraction of the (query, key) score matrix of ``t`` queries at positions start..start+t-1 over the
    S = start + t keys that a causal mask keeps. block = 1: kept pairs / (t S) = (start + (t + 1) / 2) / S,
    i.e. (t + 1) / 2t for a prefill from position 0 (~1/2: counting the full S^2 doubles the work at long S),
    1 for one decode token. block > 1: the fraction of block x block tiles a flash-attention kernel must
    compute because they hold at least one kept pair (aligned query and key tiles), >= the pair fraction.

    >>> causal_fraction(0, 4), causal_fraction(1023, 1), causal_fraction(0, 256, 128)
    (0.625, 1.0, 0.75)
    """
    s = start + t
    if t <= 0 or s <= 0:
        return 1.0
    if block <= 1:
        return (start + (t + 1) / 2) / s
    kept = 0
    for q0 in range(start - start % block, s, block):  # query tiles on the key grid
        q_lo, q_hi = max(q0, start), min(q0 + block, s)
        keys = min(-(-q_hi // block) * block, s)  # key tiles up to the one holding the tile's last query
        kept += (q_hi - q_lo) * keys
    return kept / (t * s)

def annotate(gm: fx.GraphModule, *args) -> fx.GraphModule:
    """Run ``CostProp`` on ``gm`` with ``args`` (real or fake tensors) and return ``gm`` for chaining."""
    with torch.no_grad():
        CostProp(gm).propagate(*args)
    return gm


def node_table(gm: fx.GraphModule, chip=None, dtype: str | None = None, *, include_views: bool = False) -> pd.DataFrame:
    """One row per annotated compute node. With a chip, add its ridge point and each node's bound."""
    rows = []
    for n in gm.graph.nodes:
        cost: NodeCost | None = n.meta.get("cost")
        if cost is None or n.op in ("placeholder", "output", "get_attr"):
            continue
        if cost.is_view and not include_views:
            continue
        rows.append({"node": n.name, "op": op_name(n, gm), "shape": cost.shape, "dtype": cost.dtype,
                     "flops": cost.flops, "bytes_read": cost.bytes_read, "bytes_written": cost.bytes_written,
                     "bytes": cost.bytes, "intensity": cost.intensity})
    import pandas as pd

    df = pd.DataFrame(rows, columns=["node", "op", "shape", "dtype", "flops", "bytes_read", "bytes_written",
                                     "bytes", "intensity"])
    if chip is not None and len(df):
        from common.chips import get_chip
        chip = get_chip(chip)
        dt = dtype or _dominant_dtype(df)
        peak, _ = chip.compute_peak(dt)
        bw = chip.main_memory.bandwidth
        ridge = peak / bw
        df["bound"] = ["compute" if i >= ridge else "memory" for i in df["intensity"]]
        df["floor_s"] = [max(f / peak, b / bw) for f, b in zip(df["flops"], df["bytes"], strict=True)]
        df.attrs.update(chip=chip.name, dtype=dt, ridge=ridge)
    return df


def _dominant_dtype(df: pd.DataFrame) -> str:
    from common.chips import canonical_dtype
    for d in df["dtype"].value_counts().index:
        try:
            return canonical_dtype(d)
        except ValueError:
            continue
    return "fp32"


def summarize(df: pd.DataFrame) -> dict:
    """Totals of a node table: nodes, FLOPs, bytes, overall intensity and (if present) bound counts."""
    out = {"nodes": len(df), "flops": float(df["flops"].sum()), "bytes": float(df["bytes"].sum())}
    out["intensity"] = out["flops"] / out["bytes"] if out["bytes"] else 0.0
    if "bound" in df:
        out.update({f"{k}_bound": int(v) for k, v in df["bound"].value_counts().items()})
    return out
