"""First-divergence finder: run a graph on a simulated backend and on the CPU, node by node, and report the
first node whose output differs beyond tolerance.

Both runs interpret the *same* aten graph (the one the backend compiled, ``CompiledGraph.aten``), so node
names match one to one:

* the **target** run is the backend's own interpreter (its rounding rules and planted faults), subclassed
  to store each node's output in ``node.meta["dfa_target"]``;
* the **reference** run is a plain ``torch.fx.Interpreter`` in the inputs' dtype on the CPU, storing
  ``node.meta["dfa_reference"]`` (the ShapeProp pattern).

A node diverges when some element has ``|t - r| > atol + rtol * |r|`` with ``atol = rtol * max|r|`` over the
node (so fp16 rounding of small values is not flagged) and ``rtol`` the backend's tolerance against eager, or
when NaN/inf appear in one run and not the other. Nodes are visited in graph (topological) order, so the first
diverging node is where the error enters: everything after it only inherits it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

import common.sim as sim
from common.errors import DFAError
from common.sim.compile import CompiledGraph, TargetInterpreter

TARGET, REFERENCE = "dfa_target", "dfa_reference"


def compile_graph(model, args, backend: str = "spyre", **options) -> CompiledGraph:
    """What ``torch.compile(model, backend=f"dfa_{backend}", options=options)`` builds for a single-graph model:
    ``model`` (an ``nn.Module`` or ``GraphModule``) is traced with ``fx.symbolic_trace`` and compiled."""
    gm = model if isinstance(model, fx.GraphModule) else fx.symbolic_trace(model)
    return CompiledGraph(backend, gm, list(args), options)


def flat_inputs(compiled: CompiledGraph, args) -> list:
    """The aten graph's inputs in order: parameters, buffers, then the call's arguments (as CompiledGraph.__call__)."""
    state = dict(compiled.gm.named_parameters(remove_duplicate=False))
    state.update(compiled.gm.named_buffers(remove_duplicate=False))
    return pytree.tree_leaves((state, tuple(args), {}))


def _snapshot(value):
    return pytree.tree_map(lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, value)


class ReferenceInterpreter(fx.Interpreter):
    """Plain eager execution on the CPU; stores every node's output in ``node.meta["dfa_reference"]``."""

    def run_node(self, n):
        out = super().run_node(n)
        n.meta[REFERENCE] = _snapshot(out)
        return out


class TargetRecorder(TargetInterpreter):
    """The backend's interpreter (rounding + faults); stores every node's output in ``node.meta["dfa_target"]``."""

    def run_node(self, n):
        out = super().run_node(n)
        n.meta[TARGET] = _snapshot(out)
        return out


@dataclass
class Divergence:
    """The first diverging node (``node is None``: none diverged), its worst element, and the per-node table."""
    node: str | None
    op: str = ""
    shape: tuple = ()
    index: tuple = ()
    target_value: float = float("nan")
    reference_value: float = float("nan")
    abs_error: float = 0.0
    error: BaseException | None = None  # the runtime raised instead of returning (a timeout, a deadlock)
    table: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def diverged(self) -> bool:
        return self.node is not None or self.error is not None

    def __str__(self) -> str:
        if self.error is not None:
            return f"the target raised {type(self.error).__name__}: {self.error}"
        if self.node is None:
            return f"no divergence in {len(self.table)} nodes"
        return (f"first divergence at node {self.node!r} ({self.op}, shape {tuple(self.shape)}): element "
                f"{tuple(self.index)} target {self.target_value:.6g} vs reference {self.reference_value:.6g}")


def _op_name(node: fx.Node) -> str:
    t = node.target
    return f"aten.{t.overloadpacket.__name__}" if hasattr(t, "overloadpacket") else getattr(t, "__name__", str(t))


def compare(target, reference, rtol: float) -> dict | None:
    """Worst element of one node's output: None if it matches; else index, both values, absolute error."""
    pairs = [(t, r) for t, r in zip(pytree.tree_leaves(target), pytree.tree_leaves(reference), strict=False)
             if isinstance(t, torch.Tensor) and isinstance(r, torch.Tensor) and t.shape == r.shape and t.numel()]
    worst = None
    for t, r in pairs:
        if not r.is_floating_point():
            bad = t != r
            err = bad.to(torch.float64)
        else:
            t64, r64 = t.double(), r.double()
            finite_r = r64[torch.isfinite(r64)]
            scale = finite_r.abs().max().item() if finite_r.numel() else 0.0
            err = (t64 - r64).abs()
            bad = err > rtol * scale + rtol * r64.abs()
            bad |= torch.isfinite(t64) != torch.isfinite(r64)  # NaN/inf in one run only
            bad &= ~(torch.isnan(t64) & torch.isnan(r64))
            err = torch.where(torch.isfinite(err), err, torch.full_like(err, float("inf")))
        if bad.any():
            flat = torch.where(bad, err, torch.full_like(err, -1.0)).flatten()
            i = int(flat.argmax())
            idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), t.shape)) if t.dim() else ()
            cand = {"index": idx, "target": float(t.flatten()[i]), "reference": float(r.flatten()[i]),
                    "abs_error": float(flat[i]), "shape": tuple(t.shape), "bad": int(bad.sum())}
            if worst is None or cand["abs_error"] > worst["abs_error"]:
                worst = cand
    return worst


def run_both(compiled: CompiledGraph, args) -> fx.GraphModule:
    """Run the compiled aten graph on the target and on the reference; return it with both results in meta."""
    flat = flat_inputs(compiled, args)
    ReferenceInterpreter(compiled.aten).run(*[_snapshot(a) for a in flat])
    compiled.raise_runtime_faults()  # a planted timeout/deadlock raises here, as it does when the graph is called
    TargetRecorder(compiled).run(*[_snapshot(a) for a in flat])
    return compiled.aten


def first_divergence(model, args, backend: str = "spyre", *, rtol: float | None = None,
                     compiled: CompiledGraph | None = None, **options) -> Divergence:
    """Compile ``model`` for ``backend`` (or use ``compiled``), run both interpreters, report the first node whose
    output differs from the CPU reference beyond ``rtol`` (default: the backend's ``rtol_vs_eager``)."""
    compiled = compiled or compile_graph(model, args, backend, **options)
    rtol = sim.get_backend(compiled.policy.name).rtol_vs_eager if rtol is None else rtol
    try:
        gm = run_both(compiled, args)
    except (RuntimeError, DFAError) as exc:  # SimTimeoutError, DeadlockError are RuntimeErrors
        return Divergence(None, error=exc)
    rows, first = [], None
    for n in gm.graph.nodes:
        if n.op != "call_function" or TARGET not in n.meta:
            continue
        worst = compare(n.meta[TARGET], n.meta[REFERENCE], rtol)
        rows.append({"node": n.name, "op": _op_name(n), "diverged": worst is not None,
                     "bad_elements": worst["bad"] if worst else 0,
                     "max_abs_error": worst["abs_error"] if worst else 0.0})
        if worst is not None and first is None:
            first = Divergence(n.name, _op_name(n), worst["shape"], worst["index"], worst["target"],
                               worst["reference"], worst["abs_error"])
    table = pd.DataFrame(rows, columns=["node", "op", "diverged", "bad_elements", "max_abs_error"])
    out = first or Divergence(None)
    out.table = table
    return out
