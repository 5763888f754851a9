"""Work and traffic of every FX node: FLOPs by the op's rule (``common.graph.op_kinds``: flop_counter for matmuls,
convolutions and attention, a per-element convention or a per-op count for the rest), bytes from tensor metadata.

``CostProp`` is a ``torch.fx.Interpreter`` (like ``ShapeProp``): it runs the graph - on FakeTensors for big
models - and stores ``node.meta["cost"] = NodeCost(...)`` (with the op's kind) and ``node.meta["val"]``. Bytes
are the *unfused, no-reuse* traffic of each op: every tensor it reads streamed in once, every tensor it writes
streamed out once. Views (reshape, permute, expand, slice...) move nothing; a creation op (full, new_ones) reads
nothing. A view that broadcasts (stride 0) counts its distinct elements only.
Intensity = FLOPs / (bytes read + bytes written).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from common.graph.op_decompose import KIND_WEIGHT
from common.graph.op_kinds import DECOMPOSITIONS, VIEW, rule_for

if TYPE_CHECKING:  # pandas (~0.3 s to import) is loaded by the table views, not the simulators
    import pandas as pd

aten = torch.ops.aten

VIEW_OPS = VIEW  # the views torch's schemas do not mark (every other view: common.graph.op_kinds.is_view_op)
VIEW_METHODS = {"view", "reshape", "permute", "transpose", "t", "expand", "unsqueeze", "squeeze", "contiguous_view",
                "flatten", "unflatten", "narrow", "chunk", "split", "size", "dim", "__getitem__"}
GATHER_OPS = {aten.embedding, aten.index_select}
_WEIGHT = KIND_WEIGHT  # which kind names a node that dispatches several ops: the heaviest work


class VectorFlopMode(TorchDispatchMode):
    """Counts the FLOPs ``FlopCounterMode`` leaves out (every op but matmul, conv and attention), by the op's
    rule (``common.graph.op_kinds.rule_for``), and records each dispatched op's kind."""

    def __init__(self):
        super().__init__()
        self.flops = 0.0
        self.kinds: list[str] = []  # kind of each dispatched op, in dispatch order
        self.uncosted: list[str] = []  # ops no rule covers: their FLOPs would be a guess

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        rule = rule_for(func) if isinstance(func, torch._ops.OpOverload) else None
        if rule is None:
            self.uncosted.append(f"{getattr(func, 'namespace', 'aten')}.{_packet(func).__name__}"
                                 if hasattr(_packet(func), "__name__") else str(func))
            self.kinds.append("uncosted")
        elif rule.source == "decomposition":  # counted as what it dispatches to with these inputs
            self.kinds.append(self._decomposed(func, args, kwargs))
        else:
            try:
                self.flops += rule.count(args, kwargs, out) if rule.source != "flop_counter" else 0.0
                self.kinds.append(rule.kind)
            except (TypeError, IndexError, ValueError, AttributeError):  # a call the rule was not written for:
                self.uncosted.append(f"{getattr(func, 'namespace', 'aten')}.{_packet(func).__name__}")
                self.kinds.append("uncosted")  # the op then runs on the host rather than being timed wrong
        return out

    def _decomposed(self, func, args, kwargs) -> str:
        """Count an op with no rule of its own as the ops ``torch._decomp`` decomposes it into (run on copies,
        so an in-place op is not applied twice); matmuls among them reach the FlopCounterMode below."""
        copies = pytree.tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, (args, kwargs))
        inner = VectorFlopMode()
        with inner:
            DECOMPOSITIONS[func](*copies[0], **copies[1])
        self.flops += inner.flops
        self.uncosted += inner.uncosted
        return dominant_kind(inner.kinds)


def dominant_kind(kinds) -> str:
    """The kind of the heaviest work among ``kinds`` ("uncosted" if any op had no rule)."""
    kinds = list(kinds)
    if "uncosted" in kinds:
        return "uncosted"
    return max(kinds, key=lambda k: _WEIGHT.get(k, -1), default="metadata")


@dataclass(frozen=True)
class NodeCost:
    """FLOPs and bytes of one node, with its output shape and dtype."""

    flops: float
    bytes_read: float
    bytes_written: float
    shape: tuple = ()
    dtype: str = ""
    is_view: bool = False
    kind: str = ""  # common.graph.op_kinds.KINDS, or "uncosted" for an op no rule covers

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


def op_bytes(target, ins: list, outs: list, kind: str) -> tuple[float, float]:
    """(read, written) bytes of one op with inputs ``ins`` and outputs ``outs`` (tensors): written = its outputs
    (an in-place op: its first argument); read = each distinct input once (``touched_bytes``), except that a
    creation op reads only sizes, ``copy_`` does not read its destination, and a lookup (GATHER_OPS) reads the
    rows it returns, not the whole table. ``target``: the aten op, or None for a module or method call."""
    ins = [] if kind == "creation" else list(ins)
    written = sum(t.numel() * t.element_size() for t in outs)
    if target is not None and _mutated_first_arg(target) and ins:
        written = ins[0].numel() * ins[0].element_size()
        if _packet(target) is aten.copy_:
            ins = ins[1:]
    read = 0
    if target is not None and _packet(target) in GATHER_OPS and ins:
        ins, read = ins[1:], written
    seen: set[int] = set()
    for t in ins:
        if id(t) not in seen:
            seen.add(id(t))
            read += touched_bytes(t)
    return float(read), float(written)


def op_name(node: fx.Node, gm: fx.GraphModule | None = None) -> str:
    """Short readable name of what a node does: 'aten.mm', 'linear (attn.q)', 'softmax', 'add'."""
    if node.op == "call_function":
        packet = _packet(node.target)
        if isinstance(packet, torch._ops.OpOverloadPacket):
            return f"{getattr(node.target, 'namespace', 'aten')}.{packet.__name__}"
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
        unknown, dispatched = len(self._vector.uncosted), len(self._vector.kinds)
        result = super().run_node(n)
        flops = float(self._counter.get_total_flops() + self._vector.flops - before)
        if len(self._vector.uncosted) > unknown:  # read by the simulated backends: such an op goes to the host
            n.meta["uncosted"] = sorted(set(self._vector.uncosted[unknown:]))
        n.meta["val"] = result
        n.meta["cost"] = self._cost(n, result, flops, dominant_kind(self._vector.kinds[dispatched:]))
        return result

    def _cost(self, n: fx.Node, result, flops: float, kind: str) -> NodeCost:
        outs = _tensors(result)
        shape = tuple(outs[0].shape) if outs else ()
        dtype = str(outs[0].dtype).replace("torch.", "") if outs else ""
        if n.op in ("placeholder", "output", "get_attr"):
            return NodeCost(0.0, 0.0, 0.0, shape, dtype, is_view=True, kind="view")
        if self._is_view(n):
            return NodeCost(0.0, 0.0, 0.0, shape, dtype, is_view=True, kind="view")
        ins = _tensors(self.fetch_args_kwargs_from_env(n))
        if n.op == "call_module":
            ins += list(self.module.get_submodule(n.target).parameters())
        read, written = op_bytes(n.target if n.op == "call_function" else None, ins, outs, kind)
        return NodeCost(flops, float(read), float(written), shape, dtype, kind=kind)

    def _is_view(self, n: fx.Node) -> bool:
        if n.op == "call_function":
            rule = rule_for(n.target) if isinstance(n.target, torch._ops.OpOverload) else None
            return (rule is not None and rule.kind == "view") or n.target in (getattr, len) or \
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
