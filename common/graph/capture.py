"""Capture a model as an FX graph at three levels: torch (symbolic_trace), aten (make_fx), Dynamo.

* ``trace_torch(model)`` - ``torch.fx.symbolic_trace``: call_module / call_function nodes, readable, but
  it cannot follow data-dependent Python control flow.
* ``capture_aten(model, args)`` - ``make_fx`` over ``torch.func.functional_call``: every parameter and buffer
  becomes a placeholder (so its bytes are visible), every op is an aten op. With fake inputs (or
  ``fake=True``) nothing is allocated: a 70B model is captured in seconds.
* ``explain_dynamo(model, *args)`` - what TorchDynamo does with the model: graphs and graph breaks.

Each placeholder of an aten graph carries ``node.meta["kind"]`` = "param" | "buffer" | "input" and its
name in ``node.meta["source"]``; every node carries ``node.meta["val"]`` (a FakeTensor or a list of them).
"""
from __future__ import annotations

import contextlib
import functools
import warnings
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from common import torch_compat
from common.errors import DFAError

try:  # public since torch 2.0, but under "experimental": guard so the rest of the module still imports
    from torch.fx.experimental.proxy_tensor import make_fx
except ImportError:  # pragma: no cover
    make_fx = None

try:
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
except ImportError:  # pragma: no cover
    FakeTensor = FakeTensorMode = None


@functools.cache
def _rnn_decompositions() -> dict:
    """Recurrent layers as matmuls and pointwise ops, the way accelerator compilers lower them. Without this
    the CPU dispatcher turns ``aten.lstm`` into oneDNN's ``mkldnn_rnn_layer``: a CPU-library kernel with no
    FLOP count and no meaning on a simulated chip (the decomposition itself picks oneDNN unless it is off:
    ``capture_aten`` traces inside ``_without_onednn``). ``torch._decomp`` is private: guarded."""
    try:
        from torch._decomp import get_decompositions
        aten = torch.ops.aten
        return get_decompositions([aten.lstm.input, aten.lstm.data, aten.gru.input, aten.gru.data,
                                   aten.rnn_tanh.input, aten.rnn_relu.input])
    except (ImportError, AttributeError):  # pragma: no cover
        return {}


@contextlib.contextmanager
def _without_onednn():
    """``torch.backends.mkldnn.flags(enabled=False)``, without the UserWarning it raises on CPU builds (it also
    sets oneDNN's TF32 switch, which only Intel GPU builds have)."""
    flags = torch.backends.mkldnn.flags(enabled=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        flags.__enter__()
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            flags.__exit__(None, None, None)


def trace_torch(model: torch.nn.Module) -> fx.GraphModule:
    """``symbolic_trace`` with an error that says why it failed and what to use instead."""
    try:
        return fx.symbolic_trace(model)
    except Exception as exc:  # TraceError, TypeError from Proxy bool(), etc.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DFAError(
            f"symbolic_trace cannot trace {type(model).__name__}: {reason} (data-dependent Python control flow "
            "or a non-traceable call); use capture_aten(model, args) or explain_dynamo(model, *args) instead"
        ) from exc


def fake_mode_of(*trees) -> FakeTensorMode | None:
    """The FakeTensorMode the given tensors (anywhere in nested args) belong to, if any."""
    for leaf in pytree.tree_leaves(trees):
        if FakeTensor is not None and isinstance(leaf, FakeTensor):
            return leaf.fake_mode
    return None


def capture_aten(model: torch.nn.Module, args: tuple = (), kwargs: dict | None = None, *,
                 fake: bool = True) -> fx.GraphModule:
    """Trace ``model(*args, **kwargs)`` to an aten-level GraphModule whose inputs are (params, buffers, args).

    ``fake=True`` traces on FakeTensors (shapes and dtypes only). If the model or the inputs are already fake,
    their FakeTensorMode is reused. The returned graph's ``meta["val"]`` carries every node's fake output.
    """
    if make_fx is None:  # pragma: no cover
        raise DFAError("this torch has no torch.fx.experimental.proxy_tensor.make_fx; "
                       f"install {torch_compat.requirement()}")
    kwargs = dict(kwargs or {})
    params = dict(model.named_parameters(remove_duplicate=False))
    buffers = dict(model.named_buffers(remove_duplicate=False))
    state = {**params, **buffers}

    def step(state, args, kwargs):
        return torch.func.functional_call(model, state, args, kwargs)

    existing = fake_mode_of(state, args, kwargs)
    mode = "fake" if (fake or existing is not None) else "real"
    with torch.no_grad(), _without_onednn(), (existing if existing is not None else contextlib.nullcontext()):
        try:
            gm = make_fx(step, decomposition_table=_rnn_decompositions(), tracing_mode=mode,
                         _allow_non_fake_inputs=existing is not None)(state, args, kwargs)
        except TypeError:  # older make_fx without _allow_non_fake_inputs
            gm = make_fx(step, decomposition_table=_rnn_decompositions(), tracing_mode=mode)(state, args, kwargs)
    _label_placeholders(gm, state, params, args, kwargs)
    # The flat inputs the graph was traced with (fake where tracing was fake): what CostProp runs on.
    gm.meta["example_inputs"] = pytree.tree_leaves((state, args, kwargs))
    _drop_dead_detach(gm)
    return gm


def _label_placeholders(gm, state, params, args, kwargs) -> None:
    """Placeholders come in pytree order of (state, args, kwargs): name them by parameter / buffer / input."""
    names = [f"state.{k}" for k in state] + [f"arg{i}" for i in range(len(pytree.tree_leaves(args)))]
    names += [f"kwarg.{k}" for k in _flat_keys(kwargs)]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    state_keys = list(state)
    for i, node in enumerate(placeholders):
        if i < len(state_keys):
            key = state_keys[i]
            node.meta["kind"] = "param" if key in params else "buffer"
            node.meta["source"] = key
        else:
            node.meta["kind"] = "input"
            node.meta["source"] = names[i] if i < len(names) else node.name


def _flat_keys(kwargs: dict) -> list[str]:
    keys = []
    for k, v in kwargs.items():
        n = len(pytree.tree_leaves(v))
        keys += [k] if n == 1 else [f"{k}[{j}]" for j in range(n)]
    return keys


def _drop_dead_detach(gm: fx.GraphModule) -> None:
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is torch.ops.aten.detach.default and not node.users:
            gm.graph.erase_node(node)
    gm.recompile()


@dataclass
class DynamoReport:
    """What TorchDynamo made of a model: how many graphs, and why it broke between them."""

    graph_count: int
    graph_break_count: int
    break_reasons: list[str] = field(default_factory=list)
    op_count: int = 0
    graphs: list[fx.GraphModule] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"{self.graph_count} graph(s), {self.graph_break_count} graph break(s), {self.op_count} ops"]
        lines += [f"  break {i + 1}: {r}" for i, r in enumerate(self.break_reasons)]
        return "\n".join(lines)


def explain_dynamo(model, *args, **kwargs) -> DynamoReport:
    """Run ``torch._dynamo.explain`` (a private but documented API; guarded) and summarise its breaks."""
    try:
        import torch._dynamo as dynamo
        explain = dynamo.explain
    except (ImportError, AttributeError) as exc:  # pragma: no cover
        raise DFAError(f"this torch has no torch._dynamo.explain; install {torch_compat.requirement()}") from exc
    dynamo.reset()
    out = explain(model)(*args, **kwargs)
    reasons = []
    for br in getattr(out, "break_reasons", []):
        reason = getattr(br, "reason", str(br))
        stack = getattr(br, "user_stack", None) or []
        where = f" ({stack[-1].filename.rsplit('/', 1)[-1]}:{stack[-1].lineno})" if stack else ""
        reasons.append(f"{reason.strip().splitlines()[0]}{where}")
    return DynamoReport(graph_count=out.graph_count, graph_break_count=out.graph_break_count,
                        break_reasons=reasons, op_count=getattr(out, "op_count", 0),
                        graphs=list(getattr(out, "graphs", [])))
