"""What kind of work every aten op does, and how many FLOPs one call of it counts: ``rule_for(op)``.

Kinds: creation, view, movement, pointwise, reduction, matmul, collective, metadata. The kind comes from the
installed torch's own op metadata, so an op nobody listed - or one a newer torch adds - still gets one:

1. ``torch.utils.flop_counter``'s registry (mm, bmm, convolution, attention...)          -> matmul
2. a per-op count where the work is not one FLOP per element (softmax, layer norm, sort...) -> its ``TABLE`` kind;
   ops of other libraries by qualified name (``NAMED``: transformers' grouped MoE matmul)
3. the namespace ``_c10d_functional`` (all_reduce, all_gather...)                          -> collective
4. the schema: no tensor among the returns (sym_size, _local_scalar_dense...)             -> metadata
5. ``Tag.view_copy`` (lift_fresh_copy, t_copy...)                                        -> movement
6. the schema: no tensor among the arguments (full, arange, randn...)                      -> creation
7. the schema: the first return aliases an input and nothing is written, or ``Tag.inplace_view`` -> view
8. ``Tag.pointwise`` -> pointwise;  9. ``Tag.reduction`` -> reduction
10. an in-place op (``add_``) takes the rule of its functional form (``add``)
11. otherwise a decomposition in ``torch._decomp``: the kind of the heaviest op it dispatches on example meta
    tensors (``common.graph.op_decompose``); when dispatched, the op counts what it decomposes into
    (``common.graph.costs.VectorFlopMode``)

The name tables ``MOVEMENT``, ``CREATION`` and ``VIEW`` hold EXCEPTIONS only, each with its reason: ops whose
tags say pointwise but which only copy (clone, where), ops that read a tensor for its size only (zeros_like),
and the one view no schema marks (``_unsafe_view``). They apply before steps 5-11. An op with no rule at all
(``rule_for`` is None) is left to the documented CPU fallback with a report event (``common.sim.fallback``).

FLOP conventions (as in LLM-Viewer and most roofline tools): one FLOP per output element of a pointwise op,
one per input element of a reduction, none for creation, views, movement and metadata; the tables below give
counts for composites. A Core ATen op (``torch.Tag.core``) always has a rule (tests/test_op_coverage.py).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree
from torch.utils.flop_counter import flop_registry

from common.graph.op_decompose import DECOMPOSITIONS, decomposition_kind

aten = torch.ops.aten
KINDS = ("creation", "view", "movement", "pointwise", "reduction", "matmul", "collective", "metadata")


@dataclass(frozen=True)
class Rule:
    kind: str  # one of KINDS
    source: str  # where the rule comes from: "flop_counter", "table", "schema", "tag", "decomposition", ...
    flops: Callable | None = None  # (args, kwargs, out) -> FLOPs; None: counted by flop_counter, or zero

    def count(self, args, kwargs, out) -> float:
        return float(self.flops(args, kwargs, out)) if self.flops is not None else 0.0


def _tensors(tree) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _first_in(args, kwargs, out) -> int:
    first = next(iter(_tensors(args)), None)
    return first.numel() if first is not None else 0


def _out_elems(args, kwargs, out) -> int:
    return sum(t.numel() for t in _tensors(out))


def _per_input(n: float):
    return lambda args, kwargs, out: n * _first_in(args, kwargs, out)


def _per_output(n: float):
    return lambda args, kwargs, out: n * _tensors(out)[0].numel() if _tensors(out) else 0


def _per_source(args, kwargs, out) -> int:  # accumulating scatters: one addition per source element (last tensor)
    ts = _tensors(args)
    return ts[-1].numel() if ts else 0


def _sdpa_cpu(args, kwargs, out) -> int:  # QK^T and PV: 2 x (B H Sq Skv D) MACs, 2 FLOPs each
    q, k = _tensors(args)[:2]  # (B, H, Sq, D), (B, H, Skv, D)
    return 4 * q.numel() * k.shape[-2]


def _sort(args, kwargs, out) -> float:  # n log2 n comparisons along the sorted dimension
    x = _tensors(args)[0]
    dim = args[1] if len(args) > 1 and isinstance(args[1], int) else kwargs.get("dim", -1)
    n = x.shape[dim] if x.dim() else 1
    return x.numel() * max(1.0, math.log2(max(n, 1)))


def _cdist(args, kwargs, out) -> int:  # |x1_i - x2_j|^p: subtract, power, add per (pair, feature)
    x1 = _tensors(args)[0]  # (..., P, M); out (..., P, R)
    return 3 * _tensors(out)[0].numel() * x1.shape[-1]


def _pdist(args, kwargs, out) -> int:
    x = _tensors(args)[0]  # (N, M); out N (N - 1) / 2
    return 3 * _tensors(out)[0].numel() * x.shape[-1]


def _fft(args, kwargs, out) -> float:  # 2.5 N log2 N per real transform of length N (half of 5 N log2 N)
    x = _tensors(args)[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dim", [-1])
    n = math.prod(x.shape[d] for d in dims) if x.dim() else 1
    big = max(x.numel(), _out_elems(args, kwargs, out))
    return 2.5 * big * max(1.0, math.log2(max(n, 1)))


def _grouped_mm(args, kwargs, out) -> int:  # (S, K) rows, each times its expert's (K, N): 2 S K N
    return 2 * _tensors(out)[0].numel() * _tensors(args)[0].shape[-1]


def _window(args, kwargs, out) -> float:  # pooling: one add / comparison per window element per output
    kernel = next((a for a in args[1:] if isinstance(a, (list, tuple))), [1])
    return _tensors(out)[0].numel() * math.prod(int(k) for k in kernel)


# Per-op counts where the work is not one FLOP per element (or flop_counter does not count it).
TABLE: dict = {
    **{p: ("reduction", _per_input(n)) for p, n in {
        aten._softmax: 5, aten._log_softmax: 5, aten._safe_softmax: 5, aten.native_layer_norm: 8,
        aten.sum: 1, aten.mean: 1, aten.amax: 1, aten.amin: 1, aten.max: 1, aten.min: 1, aten.var: 3,
        aten.var_mean: 4, aten.std: 3, aten.argmax: 1, aten.argmin: 1, aten.linalg_vector_norm: 2,
        aten._fused_rms_norm: 4, aten.native_group_norm: 8, aten._native_batch_norm_legit: 7,
        aten.native_layer_norm_backward: 12, aten.native_group_norm_backward: 12,
        # a scan is one add (multiply) per element; top-k one comparison per input element
        aten.cumsum: 1, aten.cumprod: 1, aten.logcumsumexp: 3, aten.topk: 1,
        # a histogram: one bin computation and count per input element (Mixtral's router counts with histc)
        aten.histc: 2, aten.bincount: 1,
        aten._adaptive_avg_pool2d: 1, aten._adaptive_avg_pool3d: 1, aten.col2im: 1, aten._embedding_bag: 1,
        aten.embedding_dense_backward: 1, aten.max_pool2d_with_indices_backward: 1,
        aten._adaptive_avg_pool2d_backward: 1,
        # batch norm with given statistics: (x - mean) * invstd * weight + bias
        aten.native_batch_norm: 4, aten._native_batch_norm_legit_no_training: 4}.items()},
    **{p: ("pointwise", _per_input(n)) for p, n in {
        aten.rsqrt: 1, aten.gelu: 8, aten.silu: 4, aten.sigmoid: 4, aten.tanh: 4, aten.exp: 1, aten.pow: 1,
        aten.native_dropout: 2}.items()},  # dropout: compare a random draw, scale the kept value
    aten.sort: ("reduction", _sort), aten.argsort: ("reduction", _sort),
    aten.max_pool2d_with_indices: ("reduction", _per_input(1)),  # a window that tiles its input
    aten.max_pool3d_with_indices: ("reduction", _window), aten.avg_pool2d: ("reduction", _window),
    aten.avg_pool3d: ("reduction", _window), aten.avg_pool2d_backward: ("reduction", _per_input(1)),
    aten.scatter_add: ("reduction", _per_source), aten.index_add: ("reduction", _per_source),
    aten.scatter_reduce: ("reduction", _per_source),
    aten._cdist_forward: ("matmul", _cdist), aten._pdist_forward: ("matmul", _pdist),
    aten._fft_r2c: ("matmul", _fft), aten._fft_c2r: ("matmul", _fft), aten._fft_c2c: ("matmul", _fft),
    # interpolation: bilinear reads 4 taps (3 lerps of 3 FLOPs); nearest copies one
    aten.upsample_bilinear2d: ("pointwise", _per_output(9)), aten.grid_sampler_2d: ("pointwise", _per_output(9)),
    aten.upsample_nearest2d: ("movement", None),
    aten._scaled_dot_product_flash_attention_for_cpu: ("matmul", _sdpa_cpu),
}

if hasattr(aten, "_grouped_mm"):  # torch's grouped GEMM (an MoE's experts in one call); flop_counter lacks it
    TABLE[aten._grouped_mm] = ("matmul", _grouped_mm)
# Ops of other libraries, by qualified name: transformers' MoE runs its experts as one custom grouped matmul.
NAMED = {"transformers::grouped_mm_fallback": ("matmul", _grouped_mm)}

# EXCEPTIONS: the ops whose kind torch's metadata (tags, schema aliasing, decompositions) gets wrong or does not
# give, each with its reason. Everything else is derived from the installed torch (``rule_for``); tests/
# test_op_coverage.py checks that every entry here changes the kind its op would otherwise get.
_COPIES = "copies or rearranges values, no arithmetic"
_SELECTS = "selects values by index or mask: moves them, computes none"
_PADS = "writes its input and a border: a copy (its decomposition builds indices with pointwise ops)"
MOVEMENT = {  # pure data movement: bytes, no FLOPs
    **dict.fromkeys((aten.clone, aten.contiguous, aten._to_copy), f"tagged pointwise or untagged, but {_COPIES}"),
    **dict.fromkeys((aten.copy_, aten.copy), "writes one tensor into another: a copy, no FLOPs"),
    **dict.fromkeys((aten.cat, aten.flip, aten.im2col), _COPIES),
    aten.roll: f"{_COPIES} (its decomposition counts the index arithmetic of a rotation as pointwise work)",
    **dict.fromkeys((aten.embedding, aten.index_select, aten.gather, aten.index, aten.masked_select,
                     aten.nonzero), _SELECTS),
    **dict.fromkeys((aten.index_put, aten.scatter, aten.masked_scatter, aten.select_scatter,
                     aten.diagonal_scatter, aten.as_strided_scatter),
                    "writes values at given positions (no accumulation): a copy"),
    **dict.fromkeys((aten.constant_pad_nd, aten.reflection_pad1d, aten.reflection_pad2d, aten.reflection_pad3d,
                     aten.replication_pad1d, aten.replication_pad2d, aten.replication_pad3d), _PADS),
    aten.where: "tagged pointwise, but picks one of two values per element: no arithmetic",
    **dict.fromkeys((aten.triu, aten.tril), "keeps a triangle (its decomposition computes the mask): a copy"),
}
CREATION = {  # writes a tensor whose values depend on a size or a scalar only (plus the random generators)
    **dict.fromkeys((aten.zeros_like, aten.ones_like, aten.full_like, aten.empty_like, aten.new_zeros,
                     aten.new_ones, aten.new_full, aten.new_empty, aten.new_empty_strided),
                    "takes a tensor for its size, dtype and device only: reads none of its values"),
    **dict.fromkeys((aten.rand_like, aten.randn_like, aten.randint_like), "a random tensor of another's size"),
    **dict.fromkeys((aten.fill, aten.fill_), "overwrites every element with a scalar: reads none"),
    **dict.fromkeys((aten.normal_, aten.uniform_, aten.random_, aten.bernoulli_, aten.exponential_),
                    "overwrites every element with a random draw: reads none"),
}
# Views whose schema does not say so. Every other view is one by its schema's aliasing or Tag.inplace_view, or
# by its decomposition (unsafe_split decomposes into split: views).
VIEW = {aten._unsafe_view: "returns a fresh tensor to autograd, an alias of its input in memory; no decomposition"}
COLLECTIVE_NAMESPACES = ("_c10d_functional", "c10d_functional", "_dtensor")


def _has(op, tag: str) -> bool:
    """Whether ``op`` carries ``torch.Tag.<tag>`` (False where this torch has no such tag)."""
    t = getattr(torch.Tag, tag, None)
    return t is not None and t in getattr(op, "tags", ())


def _packet(op):
    return getattr(op, "overloadpacket", op)


def _returns_tensor(schema) -> bool:
    return any("Tensor" in str(r.type) for r in schema.returns)


def _takes_tensor(schema) -> bool:
    return any("Tensor" in str(a.type) for a in schema.arguments)


def _is_view(op, schema) -> bool:
    if _has(op, "inplace_view"):
        return True
    first = schema.returns[0].alias_info if schema.returns else None
    writes = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    return first is not None and not first.is_write and not writes


def _functional(op):
    """``aten.add_.Tensor`` -> ``aten.add.Tensor`` (same overload, else the default); None if there is none."""
    name = _packet(op).__name__
    base = getattr(aten, name[:-1], None) if name.endswith("_") and not name.startswith("_") else None
    if base is None:
        return None
    overload = getattr(op, "_overloadname", "default")
    return getattr(base, overload, None) or getattr(base, "default", None)


@functools.cache
def rule_for(op) -> Rule | None:
    """The kind and FLOP rule of one op (an ``OpOverload``); None for a callable torch knows nothing about."""
    return _rule(op, exceptions=True)


def rule_without_exceptions(op) -> Rule | None:
    """The rule torch's metadata alone gives ``op`` (MOVEMENT, CREATION and VIEW ignored): what an exception
    there overrides (tests/test_op_coverage.py checks that each one changes it)."""
    return _rule(op, exceptions=False)


def _kind_of(op) -> str | None:  # an op's kind inside a decomposition
    rule = rule_for(op)
    return rule.kind if rule is not None else None


def _rule(op, exceptions: bool) -> Rule | None:  # noqa: C901  (one rule per step of the module docstring)
    packet = _packet(op)
    if packet in flop_registry:
        return Rule("matmul", "flop_counter")
    if packet in TABLE:
        kind, fn = TABLE[packet]
        return Rule(kind, "table", fn)
    if isinstance(op, torch._ops.OpOverload) and op.name() in NAMED:
        kind, fn = NAMED[op.name()]
        return Rule(kind, "table", fn)
    schema = getattr(op, "_schema", None)
    if schema is None or not isinstance(op, torch._ops.OpOverload):
        return None
    movement, creation, view = (MOVEMENT, CREATION, VIEW) if exceptions else ({}, {}, {})
    namespace = getattr(op, "namespace", "")
    if namespace in COLLECTIVE_NAMESPACES:
        return Rule("collective", "namespace")
    if not _returns_tensor(schema):
        return Rule("metadata", "schema")
    if packet in movement or _has(op, "view_copy"):
        return Rule("movement", "exception" if packet in movement else "tag")
    if packet in creation or not _takes_tensor(schema):
        seeded = _has(op, "nondeterministic_seeded")  # one generator step per element, like pointwise
        return Rule("creation", "exception" if packet in creation else "schema", _out_elems if seeded else None)
    if _is_view(op, schema) or packet in view:
        return Rule("view", "schema" if _is_view(op, schema) else "exception")
    if _has(op, "pointwise"):
        return Rule("pointwise", "tag", _out_elems)
    if _has(op, "reduction"):
        return Rule("reduction", "tag", _per_input(1))
    functional = _functional(op)
    base = _rule(functional, exceptions) if functional is not None else None
    if base is not None:
        return Rule(base.kind, f"in-place {base.source}", base.flops)
    if op in DECOMPOSITIONS:  # counted as what it decomposes into when dispatched (common.graph.costs)
        return Rule(decomposition_kind(op, _kind_of) or "decomposed", "decomposition")
    return None


def is_view_op(op) -> bool:
    rule = rule_for(op) if isinstance(op, torch._ops.OpOverload) else None
    return rule is not None and rule.kind == "view"


def core_aten_ops() -> list:
    """Every aten overload tagged ``torch.Tag.core`` (the Core ATen opset)."""
    ops = []
    for name in dir(aten):
        packet = getattr(aten, name, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        ops += [o for o in (getattr(packet, ov) for ov in packet.overloads()) if torch.Tag.core in o.tags]
    return ops
