"""Run a block without importing ``torch._dynamo`` where torch imports it only to say "don't trace this".

torch wraps its Python meta kernels (every elementwise reference: add, sub, where, cat, arange, ...) and every
``TorchDispatchMode``'s ``__torch_dispatch__`` (FlopCounterMode's, CostProp's) in ``torch._disable_dynamo``,
whose first call imports ``torch._dynamo`` (about a second of CPU on torch 2.13, as long as ``import torch``)
only to mark the function as one Dynamo must not trace. Nothing can be traced by Dynamo before it is imported, so
until then calling the function itself is exactly what the wrapper does. ``_disable_dynamo`` caches the disabled
function in the attribute ``__dynamo_disable`` of the function it wraps; ``deferred_dynamo()`` sets that
attribute to a ``_Deferred`` (the function itself while Dynamo is not loaded, ``torch._dynamo.disable`` of it from
the moment it is) on the wrapped functions reachable from torch's registered decompositions and meta kernels,
the ``torch._refs`` modules and the dispatch modes, and removes what it set when the block ends.

These are private torch internals; on a torch where they differ nothing is set and the block imports Dynamo as
before (slower, same results). ``tests/test_meta_capture.py`` checks that a capture leaves Dynamo unimported.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import types

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_ATTR = "__dynamo_disable"


class _Deferred:
    __slots__ = ("fn", "recursive")

    def __init__(self, fn, recursive):
        self.fn, self.recursive = fn, recursive

    def __call__(self, *args, **kwargs):
        dynamo = sys.modules.get("torch._dynamo")
        disable = getattr(dynamo, "disable", None)
        if disable is None:  # not imported (or half-way through its own import): nothing can be tracing
            return self.fn(*args, **kwargs)
        real = disable(self.fn, self.recursive, wrapping=False)
        setattr(self.fn, _ATTR, real)  # what _disable_dynamo would have cached
        return real(*args, **kwargs)


def _inner_code():
    try:
        return torch._disable_dynamo(lambda: None).__code__
    except Exception:  # pragma: no cover
        return None


_INNER = _inner_code()


def _wrapped_by_disable(roots) -> dict:
    """{id: (fn, recursive)} of the functions ``torch._disable_dynamo`` wrapped: the decorators between a
    registered kernel and its wrapper are followed through ``__wrapped__`` and closure cells."""
    found, seen, stack = {}, set(), list(roots)
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        if isinstance(f, functools.partial):
            stack.append(f.func)
            continue
        if not isinstance(f, types.FunctionType):
            continue
        cells = [c.cell_contents for c in f.__closure__ or () if _filled(c)]
        if f.__code__ is _INNER:
            named = dict(zip(f.__code__.co_freevars, cells, strict=False))
            if "fn" in named:
                found[id(named["fn"])] = (named["fn"], named.get("recursive", True))
        stack += [c for c in cells if isinstance(c, (types.FunctionType, functools.partial))]
        wrapped = f.__dict__.get("__wrapped__")
        if wrapped is not None:
            stack.append(wrapped)
    return found


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
        return True
    except ValueError:  # an empty cell
        return False


def _roots():
    from torch._decomp import global_decomposition_table
    roots = [fn for table in global_decomposition_table.values() for fn in table.values()]
    for module in ("torch._refs", "torch._refs.nn.functional", "torch._refs.special", "torch._refs.linalg",
                   "torch._refs.fft", "torch._prims", "torch._decomp.decompositions"):
        mod = sys.modules.get(module)
        if mod is not None:
            roots += [v for v in vars(mod).values() if callable(v)]
    stack = list(TorchDispatchMode.__subclasses__())
    while stack:
        cls = stack.pop()
        stack += cls.__subclasses__()
        if "__torch_dispatch__" in cls.__dict__:
            roots.append(cls.__dict__["__torch_dispatch__"])
    return roots


@contextlib.contextmanager
def deferred_dynamo():
    """Run the block without importing torch._dynamo for ``torch._disable_dynamo``-wrapped functions (above)."""
    if _INNER is None or "torch._dynamo" in sys.modules:
        yield
        return
    installed = []
    for fn, recursive in _wrapped_by_disable(_roots()).values():
        if getattr(fn, _ATTR, None) is None:
            try:
                setattr(fn, _ATTR, _Deferred(fn, recursive))
            except (AttributeError, TypeError):  # a builtin: left as it is
                continue
            installed.append(fn)
    try:
        yield
    finally:
        for fn in installed:
            if isinstance(getattr(fn, _ATTR, None), _Deferred):
                with contextlib.suppress(AttributeError):
                    delattr(fn, _ATTR)
