"""Delta debugging: shrink a failing graph to a minimal reproducer that still fails *the same way*.

Two reductions, in this order:

1. **Nodes** — ``ddmin`` (Zeller & Hildebrandt, "Simplifying and isolating failure-inducing input", TSE 2002)
   over the graph's ``call_function`` nodes. A subset is turned into a graph by ``extract``: a kept node whose
   argument was removed reads that argument from a new input, fed with the value the CPU reference computed
   there (so the kept nodes see exactly what they saw in the full model).
2. **Shapes** — every dimension of every input is cut (``narrow`` from the start) to the smallest size that
   still fails the same way (``smallest_failing``: gallop up from 1, bisect, then step down while one less
   still fails); repeated until nothing changes. Graph nodes with baked-in sizes (views) simply stop failing
   when cut, so they keep their size.

"The same way" is a ``Failure``: the exception type a run raises, or the op of the first diverging node. A
predicate is any ``fails(gm, inputs) -> bool``; ``same_failure(compile_fn, failure)`` builds the usual one. The
result is *1-minimal*: removing any one node, or cutting any one dimension by one, makes the failure go away.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from common.debug.divergence import REFERENCE, first_divergence, flat_inputs, run_both
from common.errors import DFAError

Predicate = Callable[[fx.GraphModule, list], bool]


@dataclass(frozen=True)
class Failure:
    kind: str  # "raises" | "diverges"
    what: str  # exception type name, or the op of the first diverging node (e.g. "aten.clone")

    def __str__(self) -> str:
        return f"raises {self.what}" if self.kind == "raises" else f"first divergence at an {self.what} node"


def observe(compile_fn, gm: fx.GraphModule, inputs: list) -> Failure | None:
    """How ``gm`` fails when compiled by ``compile_fn(gm, inputs)`` and run (None: it does not fail).
    A graph that cannot even be traced with these inputs (cut to inconsistent shapes) does not count."""
    try:  # cheap first: a candidate whose shapes no longer fit together fails on the CPU already
        with torch.no_grad():
            gm(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    except (RuntimeError, ValueError, TypeError, IndexError):
        return None
    quiet = logging.getLogger("torch._subclasses.fake_tensor")  # it logs every failed shape check at ERROR
    level, quiet.level = quiet.level, logging.CRITICAL
    try:
        compiled = compile_fn(gm, inputs)
    except (RuntimeError, ValueError, TypeError, IndexError):
        return None
    finally:
        quiet.setLevel(level)
    d = first_divergence(None, inputs, compiled=compiled)
    if d.error is not None:
        return Failure("raises", type(d.error).__name__)
    return Failure("diverges", d.op) if d.node else None


def same_failure(compile_fn, failure: Failure) -> Predicate:
    return lambda gm, inputs: observe(compile_fn, gm, inputs) == failure


def ddmin(items: list, fails: Callable[[list], bool]) -> list:
    """A 1-minimal sublist of ``items`` on which ``fails`` still holds (``fails(items)`` must hold)."""
    cache: dict[tuple, bool] = {}

    def test(sub):
        key = tuple(sub)
        if key not in cache:
            cache[key] = bool(sub) and fails(list(sub))
        return cache[key]

    if not test(items):
        raise DFAError("ddmin needs a failing input: fails(items) is False")
    n = 2
    while len(items) >= 2:
        size = -(-len(items) // n)
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        for chunk in chunks:  # reduce to a subset
            if test(chunk):
                items, n = chunk, 2
                break
        else:
            for i in range(len(chunks)):  # reduce to a complement
                rest = [x for j, c in enumerate(chunks) if j != i for x in c]
                if test(rest):
                    items, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(items):
                    break
                n = min(len(items), 2 * n)  # finer granularity
    return items


def candidates(gm: fx.GraphModule) -> list[str]:
    """Node names ddmin works on: every call_function except getitem (which follows its producer)."""
    return [n.name for n in gm.graph.nodes if n.op == "call_function" and not _is_getitem(n)]


def _is_getitem(n: fx.Node) -> bool:
    return getattr(n.target, "__name__", "") == "getitem"


def extract(gm: fx.GraphModule, keep, values: dict) -> tuple[fx.GraphModule, list]:
    """The subgraph of the nodes named in ``keep`` (plus their getitems). An argument produced outside it
    becomes an input fed with ``values[name]``; outputs are the kept nodes nobody in the subgraph reads."""
    keep = set(keep)
    graph, env, inputs = fx.Graph(), {}, []

    def arg(a: fx.Node):
        if a.name not in env:
            env[a.name] = graph.placeholder(a.name)
            inputs.append(values[a.name])
        return env[a.name]

    kept = []
    for n in gm.graph.nodes:
        if n.op == "call_function" and (n.name in keep or (_is_getitem(n) and n.args[0].name in keep)):
            env[n.name] = graph.node_copy(n, arg)
            kept.append(n)
    if not kept:
        raise DFAError("extract needs at least one node to keep")
    names = {n.name for n in kept}
    outs = [env[n.name] for n in kept if not any(u.name in names for u in n.users)
            and not (any(_is_getitem(u) for u in n.users))]
    graph.output(outs)
    return fx.GraphModule(torch.nn.Module(), graph), inputs


@dataclass
class Reproducer:
    gm: fx.GraphModule
    inputs: list
    failure: Failure
    nodes: list[str] = field(default_factory=list)  # names in the original graph
    tests: int = 0  # predicate calls the reduction made

    @property
    def ops(self) -> list[str]:
        return [f"aten.{n.target.overloadpacket.__name__}" for n in self.gm.graph.nodes
                if n.op == "call_function" and hasattr(n.target, "overloadpacket")]

    @property
    def op(self) -> str:
        """The op of the reproducer: the last one (the one that fails) when several remain."""
        return self.ops[-1] if self.ops else ""

    @property
    def shapes(self) -> list[tuple]:
        return [tuple(x.shape) for x in self.inputs if isinstance(x, torch.Tensor)]

    @property
    def shape(self) -> tuple:
        return self.shapes[0] if self.shapes else ()

    def __str__(self) -> str:
        return (f"{len(self.nodes)} node(s) {self.ops} on inputs {self.shapes}: {self.failure} "
                f"({self.tests} tests)")


def node_values(compiled, args) -> dict:
    """Every value of the compiled aten graph on the CPU reference: node name -> tensor (inputs included)."""
    gm = compiled.aten
    try:
        run_both(compiled, args)
    except RuntimeError:  # the target raised: the reference values were recorded before it ran
        pass
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = {p.name: v for p, v in zip(placeholders, flat_inputs(compiled, args), strict=True)}
    values.update({n.name: n.meta[REFERENCE] for n in gm.graph.nodes if REFERENCE in n.meta})
    return values


def smallest_failing(n: int, fails_at: Callable[[int], bool]) -> int:
    """Smallest size m <= n with fails_at(m), given fails_at(n): gallop 1, 2, 4, ... to the first failing
    size, bisect below it, then step down while m - 1 still fails (so the answer is 1-minimal)."""
    lo, hi, m = 0, n, 1  # lo: largest size known to pass; hi: smallest known to fail
    while m < hi:
        if fails_at(m):
            hi = m
            break
        lo, m = m, 2 * m
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fails_at(mid) else (mid, hi)
    while hi > 1 and fails_at(hi - 1):
        hi -= 1
    return hi


def shrink_shapes(gm: fx.GraphModule, inputs: list, fails: Predicate) -> tuple[list, int]:
    """Cut each dimension of each input to the smallest size that still fails; returns (inputs, tests)."""
    inputs, tests, changed = list(inputs), [0], True

    def cut(i, d, m):
        return inputs[:i] + [inputs[i].narrow(d, 0, m).clone()] + inputs[i + 1:]

    def fails_at(i, d):
        seen: dict[int, bool] = {}

        def test(m):
            if m not in seen:
                tests[0] += 1
                seen[m] = fails(gm, cut(i, d, m))
            return seen[m]
        return test

    while changed:
        changed = False
        for i, x in enumerate(inputs):
            for d in range(x.dim() if isinstance(x, torch.Tensor) else 0):
                n, test = inputs[i].shape[d], fails_at(i, d)
                if n <= 1 or not test(n - 1):  # already 1-minimal in this dimension: one test
                    continue
                m = smallest_failing(n - 1, test)
                if m < n:
                    inputs, changed = cut(i, d, m), True
    return inputs, tests[0]


def reduce(compiled, args, compile_fn, *, failure: Failure | None = None, shapes: bool = True) -> Reproducer:
    """Shrink the failing ``compiled`` graph (run with ``args``) to a 1-minimal reproducer.

    ``compile_fn(gm, inputs)`` compiles a candidate exactly as the failing run did (same backend, options and
    fault rules); ``failure`` defaults to how the full graph fails."""
    gm = compiled.aten
    values = node_values(compiled, args)
    names = candidates(gm)
    failure = failure or observe(compile_fn, *extract(gm, names, values))  # the whole graph, flat inputs
    if failure is None:
        raise DFAError("the graph does not fail on the target: nothing to reduce")
    fails = same_failure(compile_fn, failure)
    count = [0]

    def fails_subset(sub):
        count[0] += 1
        return fails(*extract(gm, sub, values))

    if failure.kind == "diverges":  # nodes after the first divergence cannot cause it: start from those before
        first = first_divergence(None, args, compiled=compiled).node
        names = names[:names.index(first) + 1] if first in names else names
    keep = ddmin(names, fails_subset)
    small, inputs = extract(gm, keep, values)
    tests = count[0]
    if shapes:
        inputs, more = shrink_shapes(small, inputs, fails)
        tests += more
    return Reproducer(small, inputs, failure, list(keep), tests)


def is_one_minimal(repro: Reproducer, fails: Predicate, values: dict | None = None,
                   graph: fx.GraphModule | None = None) -> bool:
    """Does ``repro`` still fail, and stop failing when any one dimension is cut by one (and, given the
    original ``graph`` and its ``values``, when any one of its nodes is removed)?"""
    if not fails(repro.gm, repro.inputs):
        return False
    for i, x in enumerate(repro.inputs):
        for d in range(x.dim() if isinstance(x, torch.Tensor) else 0):
            if x.shape[d] > 1:
                trial = repro.inputs[:i] + [x.narrow(d, 0, x.shape[d] - 1).clone()] + repro.inputs[i + 1:]
                if fails(repro.gm, trial):
                    return False
    if graph is not None and values is not None and len(repro.nodes) > 1:
        for name in repro.nodes:
            if fails(*extract(graph, [k for k in repro.nodes if k != name], values)):
                return False
    return True
