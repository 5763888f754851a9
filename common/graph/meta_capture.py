"""``capture_meta``: the aten graph ``capture_aten`` (``make_fx`` on FakeTensors) gives, traced on ``meta`` tensors.

Why: on torch 2.13 ``make_fx`` and ``FakeTensorMode`` import ``torch._dynamo`` (about a second, as long as
``import torch``), most of what a cold ``dfa simulate`` spent above importing torch. This tracer does what
``make_fx`` does with ``tracing_mode="fake"``, without Dynamo: fx's ``Tracer`` makes the placeholders (one per
pytree leaf of ``(state, args, kwargs)``, named ``state_1``, ``args_1``, ...) and the output; a
``TorchDispatchMode`` records every aten op that reaches it as a ``call_function`` node named after the op, with
``meta["tensor_meta"]``; a tensor no recorded op produced becomes a ``_tensor_constant<i>`` attribute read by a
``get_attr`` node at each use; a list output gets one ``getitem`` node per element. Values are meta tensors with
the FakeTensors' metadata: FakeTensorMode computes the strides of ``view`` in Python (``torch._refs``), which
differ from the C++ kernel's in length-1 dimensions, so ``FakeViews`` gives views those strides. Capture inside
``common.graph.lazy_dynamo.deferred_dynamo()``: torch's Python meta kernels would import Dynamo otherwise.

Only what the simulator's steps need is handled: a data-dependent or random op, a tensor subclass or symbolic
sizes raise ``Unsupported``, an op without a meta kernel whatever torch raises, and ``common.sim.workload`` then
uses ``capture_aten``. ``tests/test_meta_capture.py`` checks node-for-node equality with ``capture_aten`` on every
named model configuration and phase.
"""
from __future__ import annotations

import functools

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakTensorKeyDictionary

from common.graph.capture import _drop_dead_detach, _label_placeholders, _rnn_decompositions, _without_onednn

try:  # the tracer make_fx builds its graphs with (its create_arg names tensor constants): guarded, private
    from torch.fx.experimental.proxy_tensor import PythonKeyTracer
    from torch.fx.passes.shape_prop import _extract_tensor_metadata
except ImportError:  # pragma: no cover
    PythonKeyTracer = _extract_tensor_metadata = None


_PLAIN = (torch.Tensor, torch.nn.Parameter)


class Unsupported(Exception):
    """The meta tracer cannot follow this model: capture it with ``capture_aten`` instead."""


def available() -> bool:
    return PythonKeyTracer is not None and _extract_tensor_metadata is not None


def _contiguous(shape, stride) -> bool:
    expected = 1
    for size, st in reversed(tuple(zip(shape, stride, strict=True))):
        if size != 1:
            if st != expected:
                return False
            expected *= size
    return True


def fake_view_strides(shape: tuple, stride: tuple, new_shape: tuple) -> tuple:
    """Strides of ``view(new_shape)`` as FakeTensorMode computes them (``torch._refs._reshape_view_helper``, static
    sizes), which differ from the C++ kernel's in length-1 dimensions; raises Unsupported if no view exists."""
    shape, stride, new_shape = list(shape), list(stride), list(new_shape)
    numel = 1
    for size in shape:
        numel *= size
    if numel == 0:  # restrided as contiguous
        out, acc = [], 1
        for size in reversed(new_shape):
            out.append(acc)
            acc *= max(size, 1)
        return tuple(reversed(out))
    if not shape or not new_shape:
        raise Unsupported("view from or to a 0-dim tensor")
    if _contiguous(shape, stride):
        if len(new_shape) == 1 and len(shape) > 1:
            return (1,)
        if len(new_shape) == 2 and len(shape) == 1:
            return (new_shape[1], 1)
    s, st, idx = shape, stride, 0
    for length in new_shape:
        if idx >= len(s):  # tail unsqueeze: prims.split_dim(last, its length)
            last = len(s) - 1
            s, st = s[:last] + [s[last], 1] + s[last + 1:], st[:last] + [st[last], st[last]] + st[last + 1:]
            idx += 1
            continue
        if length == s[idx]:
            idx += 1
            continue
        accum, end = s[idx], idx
        while accum % length != 0:
            end += 1
            accum *= s[end]
        if end != idx:  # prims.collapse_view(idx, end)
            if not all(s[i] == 1 or s[i + 1] == 1 or st[i] == st[i + 1] * s[i + 1] for i in range(idx, end)):
                raise Unsupported(f"no view of shape {tuple(shape)} as {tuple(new_shape)}")
            merged = min([st[end]] + [st[i] for i in range(idx, end) if s[i] != 1])
            s, st = s[:idx] + [accum] + s[end + 1:], st[:idx] + [merged] + st[end + 1:]
        if accum != length:  # prims.split_dim(idx, length)
            inner = s[idx] // length
            s, st = s[:idx] + [length, inner] + s[idx + 1:], st[:idx] + [st[idx] * inner, st[idx]] + st[idx + 1:]
        idx += 1
    while idx < len(s):  # squeeze the tail
        if s[idx] != 1:
            raise Unsupported(f"no view of shape {tuple(shape)} as {tuple(new_shape)}")
        s, st = s[:idx] + s[idx + 1:], st[:idx] + st[idx + 1:]
    return tuple(st)


_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)  # FakeTensor's own view kernel


class FakeViews(TorchDispatchMode):
    """Meta tensors that view as FakeTensors do: ``view`` / ``_unsafe_view`` outputs get ``fake_view_strides``.
    Active under the tracer and while ``CostProp`` runs the captured graph, so every value matches make_fx's."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # nothing here runs under Dynamo: don't wrap (and import) it
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in _VIEWS and isinstance(args[0], torch.Tensor) and args[0].is_meta:
            stride = fake_view_strides(args[0].shape, args[0].stride(), out.shape)
            if stride != out.stride():
                out = out.as_strided(out.shape, stride, out.storage_offset())
        return out


class NoInit(TorchDispatchMode):
    """Building a model on ``meta``: random initialisers (``normal_``, ``uniform_``: values a meta tensor does not
    have) return their tensor untouched. Their meta kernels are Python references wrapped in
    ``torch._disable_dynamo``, whose first call imports Dynamo."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if (torch.Tag.nondeterministic_seeded in func.tags and func._schema.name.endswith("_") and args
                and isinstance(args[0], torch.Tensor) and args[0].is_meta):
            return args[0]
        return func(*args, **(kwargs or {}))


class _Recorder(TorchDispatchMode):
    """Records each aten op as an fx node (``make_fx``'s ``proxy_call`` for static shapes, no constants)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # nothing here runs under Dynamo: don't wrap (and import) it
        return False

    def __init__(self, tracer, decompositions: dict):
        super().__init__()
        self.tracer, self.decompositions = tracer, decompositions
        # weak, as make_fx's: a second reference to an op's output makes the autograd layer detach it
        self.proxies = WeakTensorKeyDictionary()

    def track(self, t: torch.Tensor, proxy: fx.Proxy) -> None:
        self.proxies[t] = proxy
        proxy.node.meta["val"] = None  # make_fx's key order; CostProp sets every node's value
        proxy.node.meta["tensor_meta"] = _extract_tensor_metadata(t)

    def proxy_of(self, t: torch.Tensor):
        return self.proxies.get(t, t)  # untracked: a constant (fx's create_arg makes it a get_attr)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.decompositions:
            with self:
                out = self.decompositions[func](*args, **kwargs)
            if out is not NotImplemented:
                return out
        if torch.Tag.data_dependent_output in func.tags or torch.Tag.nondeterministic_seeded in func.tags:
            raise Unsupported(f"{func} reads tensor values")
        flat = pytree.tree_leaves((args, kwargs))
        if any(type(t) not in _PLAIN or not t.is_meta for t in flat if isinstance(t, torch.Tensor)):
            raise Unsupported(f"{func} on a tensor that is not a plain meta tensor")
        if any(isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)) for x in flat):
            raise Unsupported(f"{func} with symbolic sizes")
        if func is torch.ops.aten.lift_fresh.default:
            raise Unsupported("torch.tensor(...) inside forward")
        p_args, p_kwargs = pytree.tree_map_only(torch.Tensor, self.proxy_of, (args, kwargs))
        proxy = self.tracer.create_proxy("call_function", func, p_args, p_kwargs,
                                         name=self.tracer.graph._target_to_str(func.overloadpacket.__name__))
        out = func(*args, **kwargs)  # through FakeViews, below this mode
        self._track_tree(out, proxy)
        return out

    def _track_tree(self, out, proxy) -> None:
        if isinstance(out, torch.Tensor):
            self.track(out, proxy)
        elif isinstance(out, (tuple, list)):
            proxy.node.meta["val"] = None
            for i, o in enumerate(out):
                self._track_tree(o, proxy[i])
        elif out is not None and not isinstance(out, (int, float, bool, str, torch.dtype)):
            raise Unsupported(f"an op returned {type(out).__name__}")


class _Tracer(PythonKeyTracer if PythonKeyTracer is not None else fx.Tracer):
    """make_fx's tracer, less the FakeTensor it makes for each ``get_attr`` (a FakeTensorMode imports Dynamo):
    CostProp sets every node's value."""

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        node = fx.Tracer.create_node(self, kind, target, args, kwargs, name, type_expr)
        if kind in ("placeholder", "output"):
            node.meta.pop("stack_trace", None)
        elif kind == "get_attr":
            node.meta["val"] = None
        return node


def capture_meta(model: torch.nn.Module, args: tuple = (), kwargs: dict | None = None) -> fx.GraphModule:
    """``capture_aten(model, args, kwargs)`` for a model whose parameters, buffers and inputs are meta tensors."""
    if not available():
        raise Unsupported("this torch lacks torch.fx.experimental.proxy_tensor.PythonKeyTracer")
    kwargs = dict(kwargs or {})
    params = dict(model.named_parameters(remove_duplicate=False))
    buffers = dict(model.named_buffers(remove_duplicate=False))
    state = {**params, **buffers}
    flat = pytree.tree_leaves((state, args, kwargs))
    if any(isinstance(t, torch.Tensor) and (type(t) not in _PLAIN or not t.is_meta) for t in flat):
        raise Unsupported("capture_meta needs plain meta tensors")

    def step(state, args, kwargs):
        return torch.func.functional_call(model, state, args, kwargs)

    tracer = _Tracer()
    recorder = _Recorder(tracer, _rnn_decompositions())

    @functools.wraps(step)  # fx reads the placeholder names (state, args, kwargs) from step's signature
    def wrapped(*proxies):  # make_fx's wrap_key: bind each placeholder to its tensor, run on the tensors
        for t, p in zip(flat, pytree.tree_leaves(proxies), strict=True):
            if isinstance(t, torch.Tensor):
                recorder.track(t, p)
        with recorder:
            out = step(state, args, kwargs)
        return pytree.tree_map_only(torch.Tensor, recorder.proxy_of, out)

    phs = pytree.tree_map(lambda _: fx._symbolic_trace.PH, (state, args, kwargs))
    with torch.no_grad(), _without_onednn(), FakeViews():
        graph = tracer.trace(wrapped, concrete_args=phs)
    gm = fx.GraphModule(tracer.root, graph, "step")
    _label_placeholders(gm, state, params, args, kwargs)
    gm.meta["example_inputs"] = flat
    _drop_dead_detach(gm)
    return gm

