"""The kind of an op that torch decomposes, read off its decomposition: run ``torch._decomp``'s Python
decomposition on meta tensors (shapes only, no data, no memory) built from the op's schema, and take the
heaviest kind among the ops it dispatches to (``KIND_WEIGHT``: matmul > reduction > pointwise > ...).

This is how an op the kind tables never name still gets a kind on a torch the project has not seen: torch 2.11
tags ``aten.leaky_relu`` core only (no ``pointwise`` tag); its decomposition dispatches ``gt``, ``mul`` and
``where``, so it is pointwise, as torch 2.13's tag says.

Example inputs come from the schema alone: every argument without a default gets a meta tensor (tried in a few
ranks, for ops that need a 1-D, 2-D or 4-D input), a small int, a float, ``False``...; arguments with a default
keep it. An op whose decomposition cannot run on any of them has no derived kind (None): its caller then
resolves the kind when the op is dispatched with real inputs (``common.graph.costs.VectorFlopMode``).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

try:  # torch's table of Python decompositions (private module; every torch this project supports has it)
    from torch._decomp import decomposition_table as DECOMPOSITIONS
except ImportError:  # pragma: no cover
    DECOMPOSITIONS = {}

# Which kind wins when one op dispatches several (a decomposition, or one FX node): the heaviest work names it.
KIND_WEIGHT = {k: i for i, k in enumerate(("metadata", "view", "creation", "movement", "collective", "pointwise",
                                           "reduction", "matmul"))}
SHAPES = ((2, 4), (1, 2, 4, 4), (4,), (2, 3, 4))  # ranks tried for every tensor argument, in order
_IN_PROGRESS: set = set()  # ops being derived (a decomposition that dispatches itself has no kind from it)


def _example(arg, shape: tuple):
    """An example value for one schema argument without a default; raises TypeError for a type it cannot make."""
    t = str(arg.type).replace("Optional[", "").rstrip("]")
    name = arg.name
    if t.startswith("Tensor"):
        return torch.empty(shape, device="meta")
    if t.startswith("List[Tensor"):
        return [torch.empty(shape, device="meta")] * 2
    if t in ("int", "SymInt"):
        return 0 if "dim" in name else 1
    if t.startswith(("List[int", "List[SymInt")):
        return [0] if "dim" in name else list(shape)
    if t in ("float", "number", "Scalar"):
        return 0.5
    if t == "bool":
        return False
    if t == "ScalarType":
        return torch.float32
    raise TypeError(f"no example for {name}: {arg.type}")


def example_inputs(op, shape: tuple) -> tuple[list, dict]:
    """(args, kwargs) for ``op`` from its schema: required arguments only, with tensors of ``shape`` on meta."""
    args, kwargs = [], {}
    for a in op._schema.arguments:
        if a.has_default_value():
            continue
        value = _example(a, shape)
        if a.kwarg_only:
            kwargs[a.name] = value
        else:
            args.append(value)
    return args, kwargs


class _Kinds(TorchDispatchMode):
    """Records the kind of every op dispatched under it (``kind_of``: op -> kind, or None for no rule)."""

    def __init__(self, kind_of: Callable):
        super().__init__()
        self.kind_of, self.kinds = kind_of, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.kinds.append(self.kind_of(func) if isinstance(func, torch._ops.OpOverload) else None)
        return func(*args, **(kwargs or {}))


def heaviest(kinds) -> str | None:
    """The heaviest of ``kinds`` (None if any is None: an op without a kind gives the whole no kind)."""
    kinds = list(kinds)
    if not kinds or any(k is None or k not in KIND_WEIGHT for k in kinds):
        return None
    return max(kinds, key=KIND_WEIGHT.__getitem__)


def decomposition_kind(op, kind_of: Callable) -> str | None:
    """The heaviest kind among the ops ``op``'s decomposition dispatches on example meta inputs, or None (no
    decomposition, none of the examples runs, or an op inside it has no kind). ``kind_of``: op -> kind or None."""
    if op not in DECOMPOSITIONS or op in _IN_PROGRESS:
        return None
    _IN_PROGRESS.add(op)
    try:
        for shape in SHAPES:
            try:
                args, kwargs = example_inputs(op, shape)
            except TypeError:
                return None
            mode = _Kinds(kind_of)
            try:
                with warnings.catch_warnings(), torch.no_grad(), mode:
                    warnings.simplefilter("ignore")
                    DECOMPOSITIONS[op](*args, **kwargs)
            except Exception:  # noqa: BLE001  (an example the op rejects: try the next rank)
                continue
            return heaviest(mode.kinds)
        return None
    finally:
        _IN_PROGRESS.discard(op)
