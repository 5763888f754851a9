"""What share of a program the simulated machine ran, and what ran outside it.

``torch.compile(f, backend="dfa_spyre")`` hands the backend only the graphs Dynamo captured. Code between them
(after a graph break, in a frame Dynamo skipped, in a ``torch.compiler.disable``'d function) runs eagerly on
the host, and ops the target cannot run inside a graph fall back to the CPU. A report of the graphs alone would
describe part of the program as if it were all of it. So:

* each compiled graph knows its own share: its ops on the machine vs its CPU fallbacks, and why it ended
  (Dynamo's graph-break reason, ``gm.compile_subgraph_reason``): ``Report.coverage_line()`` always says so;
* ``run_compiled(f, *args, backend=...)`` (or ``with measure_coverage() as cov:``) also counts, with a
  ``TorchDispatchMode`` and ``common.graph.costs``' rules, every op that ran eagerly outside the graphs, and each
  graph's runs; the ``Coverage`` is attached to the reports of the graphs that ran and to ``last_coverage()``.

FLOPs and bytes on both sides are counted by the same rules (``common.graph.costs``: unfused, each tensor an op reads
or writes streamed once), so the shares compare like with like.
"""
from __future__ import annotations

import contextlib
import math
from collections import defaultdict
from dataclasses import dataclass, field

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from common.errors import DFAError
from common.graph.costs import VectorFlopMode, _mutated_first_arg, _packet, touched_bytes
from common.graph.op_kinds import is_view_op

aten = torch.ops.aten
HOST_READS = {aten._local_scalar_dense, aten.is_nonzero, aten.item}  # a tensor value read by Python (if/while)
READ_NOTE = "Python read a tensor's value: if/while/.item()"
_TRACKERS: list[Coverage] = []
_INSIDE = [0]  # > 0 while a compiled graph runs (its ops are the machine's, not eager ones)
_LAST: list[Coverage] = []


# ---- one compiled graph --------------------------------------------------------------------------------
@dataclass
class Region:
    """One compiled graph: its work per run, on the machine and in CPU fallbacks, and why it ended."""

    name: str
    report: object = field(repr=False)
    flops: float
    bytes: float
    fallback_flops: float
    fallback_bytes: float
    fallbacks: tuple[str, ...]
    graph_break: str | None  # "data-dependent branch at f.py:3 `while x.sum() < 100:`", None if it returned
    runs: int = 0


def region_of(compiled, name: str) -> Region:
    """The ``Region`` of a ``CompiledGraph``: per-run work from its ops' costs, the break from Dynamo's gm."""
    on = [o for o in compiled.ops if o.coverage != "fallback"]
    off = [o for o in compiled.ops if o.coverage == "fallback"]
    def moved(ops):
        return sum(o.out_bytes + sum(o.in_bytes.values()) for o in ops)
    return Region(name, compiled.report, sum(o.flops for o in on), moved(on), sum(o.flops for o in off),
                  moved(off), tuple(o.op for o in off), graph_break(compiled.gm))


def graph_break(gm) -> str | None:
    """Why Dynamo ended this graph, if at a graph break: the reason's first line and the user's source line.
    Dynamo sets ``gm.compile_subgraph_reason`` on every graph it hands a backend (``torch._dynamo.explain``
    reads the same attribute); a graph that reached its frame's return carries ``graph_break=False``."""
    reason = getattr(gm, "compile_subgraph_reason", None)
    if reason is None or not getattr(reason, "graph_break", False):
        return None
    text = str(getattr(reason, "reason", "") or "").strip().splitlines()
    what = text[0] if text else "graph break"
    if what.startswith("generic_jump"):
        what = "data-dependent branch (Python if/while on a tensor value)"
    stack = getattr(reason, "user_stack", None) or []
    if stack:
        frame = stack[-1]
        code = (getattr(frame, "line", "") or "").strip()
        what += f" at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}" + (f" `{code}`" if code else "")
    return what


# ---- a whole run ---------------------------------------------------------------------------------------
@dataclass
class EagerOp:
    op: str
    runs: int = 0
    flops: float = 0.0
    bytes: float = 0.0
    costed: bool = True  # False: no cost rule covers it; its FLOPs are not counted (said in the line)


@dataclass
class Coverage:
    """Where a program's work ran: compiled regions (on the machine, minus their CPU fallbacks) and eager ops.
    ``measured_outside`` is False for a graph's own view (nothing outside it was watched)."""

    backend: str
    regions: list[Region] = field(default_factory=list)
    eager: dict[str, EagerOp] = field(default_factory=dict)
    measured_outside: bool = True

    @property
    def machine_flops(self) -> float:
        return sum(r.flops * r.runs for r in self.regions)

    @property
    def machine_bytes(self) -> float:
        return sum(r.bytes * r.runs for r in self.regions)

    @property
    def outside_flops(self) -> float:
        return sum(r.fallback_flops * r.runs for r in self.regions) + sum(e.flops for e in self.eager.values())

    @property
    def outside_bytes(self) -> float:
        return sum(r.fallback_bytes * r.runs for r in self.regions) + sum(e.bytes for e in self.eager.values())

    @property
    def flop_share(self) -> float:
        total = self.machine_flops + self.outside_flops
        return self.machine_flops / total if total else 1.0

    @property
    def byte_share(self) -> float:
        total = self.machine_bytes + self.outside_bytes
        return self.machine_bytes / total if total else 1.0

    @property
    def graph_breaks(self) -> list[str]:
        """Distinct graph breaks (by reason and place) at the end of the regions that ran."""
        return list(dict.fromkeys(r.graph_break for r in self.regions if r.graph_break and r.runs))

    @property
    def fallbacks(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self.regions:
            for op in r.fallbacks:
                out[op] += r.runs
        return dict(out)

    def line(self) -> str:
        """'dfa_spyre ran 62% of FLOPs, 40% of bytes; outside: 1 graph break (...), 3 eager ops (...), ...'."""
        name = f"dfa_{self.backend}"
        share = f"{_pct(self.flop_share)} of FLOPs, {_pct(self.byte_share)} of bytes"
        fallbacks = self.fallbacks
        parts = [_count(len(self.graph_breaks), "graph break") + _listed(self.graph_breaks)]
        if self.measured_outside:
            eager = sorted(self.eager.values(), key=lambda e: -e.runs)
            parts.append(_count(sum(e.runs for e in eager), "eager op")
                         + _listed([f"{e.op} x{e.runs}" + _note(e) for e in eager]))
        parts.append(_count(sum(fallbacks.values()), "CPU fallback") + _listed([f"{op} x{n}" for op, n in
                                                                              fallbacks.items()]))
        runs = sum(r.runs for r in self.regions)
        if self.measured_outside:
            head = (f"{name} ran {share}" if self.regions else f"{name} ran nothing: no graph was compiled")
            tail = f"; {_count(len([r for r in self.regions if r.runs]), 'compiled graph')} ran {runs} time(s)"
        else:
            region = self.regions[0]
            head = f"{name} {region.name} (this graph only; eager code outside it is not measured: run the " \
                   f"program through common.sim.run_compiled): ran {share} of this graph"
            tail = ("; the code after the graph break ran outside this graph" if region.graph_break else "")
        return f"{head}; outside: {', '.join(parts)}{tail}"

    def details(self) -> str:
        """The line, then one row per compiled graph and per eager op."""
        rows = [self.line()]
        for r in self.regions:
            rows.append(f"  {r.name}: ran {r.runs}x, {r.flops:.4g} FLOPs and {r.bytes:.4g} bytes per run on the "
                        f"machine" + (f", CPU fallbacks {', '.join(r.fallbacks)} ({r.fallback_flops:.4g} FLOPs)"
                                      if r.fallbacks else "")
                        + (f"; ends at a graph break: {r.graph_break}" if r.graph_break else ""))
        for e in self.eager.values():
            rows.append(f"  eager {e.op}: {e.runs}x, {e.flops:.4g} FLOPs, {e.bytes:.4g} bytes{_note(e)}")
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.details()


def _pct(share: float) -> str:
    """To 0.1 %, rounded down: work that ran outside never shows as '100%'."""
    tenths = math.floor(share * 1000 + 1e-6)  # 0.6 * 1000 may come out as 599.99...
    return f"{(min(tenths, 999) if share < 1 else tenths) / 10:g}%"


def _note(e: EagerOp) -> str:
    if e.op.removeprefix("aten.") in {p.__name__ for p in HOST_READS}:
        return f" ({READ_NOTE})"
    return "" if e.costed else " (no cost rule: its FLOPs are not counted)"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _listed(items: list[str], limit: int = 4) -> str:
    if not items:
        return ""
    more = f", +{len(items) - limit} more" if len(items) > limit else ""
    return f" ({'; '.join(items[:limit])}{more})"


def graph_coverage(compiled, name: str) -> Coverage:
    """A compiled graph's own view: its ops on the machine vs its CPU fallbacks, and why it ended."""
    region = region_of(compiled, name)
    region.runs = 1
    return Coverage(compiled.policy.name, [region], measured_outside=False)


# ---- counting what runs outside the graphs ---------------------------------------------------------------
class _EagerCounter(TorchDispatchMode):
    """Counts the ops that run eagerly (not inside a compiled graph) with common.graph.costs' FLOP and byte rules."""

    def __init__(self, coverage: Coverage):
        super().__init__()
        self.coverage = coverage

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        # Without this Dynamo refuses to compile while a dispatch mode is active (everything would run eagerly);
        # with it, Dynamo compiles as usual and the mode still sees the ops the compiled graphs run, which
        # ``_INSIDE`` tells apart.
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = _packet(func)
        leaves = pytree.tree_leaves((args, kwargs))
        if _INSIDE[0] or is_view_op(func) or any(_is_fake(t) for t in leaves):
            return func(*args, **kwargs)
        if packet in HOST_READS:
            out = func(*args, **kwargs)
            self._count(func, 0.0, sum(t.element_size() for t in leaves if isinstance(t, torch.Tensor)), True)
            return out
        # the op under the same two counters common.graph.costs.CostProp runs a graph node under
        matmuls, vector = FlopCounterMode(display=False), VectorFlopMode()
        with matmuls, vector:
            out = func(*args, **kwargs)
        if any(isinstance(t, torch.Tensor) for t in pytree.tree_leaves(out)):  # else a metadata query
            self._count(func, float(matmuls.get_total_flops() + vector.flops), _bytes(func, args, out),
                        not vector.uncosted)
        return out

    def _count(self, func, flops: float, nbytes: float, costed: bool) -> None:
        packet = _packet(func)
        name = f"aten.{packet.__name__}" if hasattr(packet, "__name__") else str(packet)
        rec = self.coverage.eager.setdefault(name, EagerOp(name, costed=costed))
        rec.runs += 1
        rec.flops += flops
        rec.bytes += nbytes


def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor
    return isinstance(t, FakeTensor)


def _bytes(func, args, out) -> float:
    """Bytes an eager op moves, as common.graph.costs counts a node: distinct inputs read, outputs written."""
    ins = [t for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor)]
    outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    written = sum(t.numel() * t.element_size() for t in outs)
    if _mutated_first_arg(func) and ins:
        written = ins[0].numel() * ins[0].element_size()
        if _packet(func) is aten.copy_:  # overwrites its destination without reading it
            ins = ins[1:]
    read = sum(touched_bytes(t) for t in {id(t): t for t in ins}.values())
    return float(read + written)


@contextlib.contextmanager
def inside_graph():
    """Marks ops as run by a compiled graph (on the simulated machine) rather than eagerly."""
    _INSIDE[0] += 1
    try:
        yield
    finally:
        _INSIDE[0] -= 1


def graph_ran(region_factory, compiled) -> None:
    """Called by each run of a compiled graph: counts the run in every active measurement."""
    for cov in _TRACKERS:
        region = next((r for r in cov.regions if r.report is compiled.report), None)
        if region is None:
            region = region_factory()
            cov.regions.append(region)
        region.runs += 1


@contextlib.contextmanager
def measure_coverage(backend: str | None = None):
    """``with measure_coverage() as cov: compiled(x)``: counts the compiled graphs' runs and the eager ops in
    between; on exit the ``Coverage`` is attached to the reports of the graphs that ran (``report.coverage``)."""
    cov = Coverage(str(backend or "?").removeprefix("dfa_"))
    _TRACKERS.append(cov)
    try:
        with _EagerCounter(cov):
            yield cov
    finally:
        _TRACKERS.remove(cov)
        if cov.regions:
            cov.backend = cov.regions[0].report.backend
        for region in cov.regions:
            region.report.coverage = cov
        _LAST[:] = [cov]


def run_compiled(fn, *args, backend: str = "dfa_spyre", options: dict | None = None, **kwargs):
    """Run ``torch.compile(fn, backend=backend, options=options)(*args, **kwargs)`` and measure its coverage;
    returns the output. ``fn`` already compiled (``torch.compile``'d) runs as it is. Read the result with
    ``last_coverage()`` or ``common.sim.last_report(backend).coverage_line()``."""
    from common.sim.args import BACKEND_NAMES
    key = str(backend).removeprefix("dfa_")
    if key not in BACKEND_NAMES:
        raise DFAError(f"unknown backend {backend!r}; valid: {', '.join('dfa_' + b for b in BACKEND_NAMES)}")
    compiled = fn if hasattr(fn, "_torchdynamo_orig_callable") or hasattr(fn, "_orig_mod") else \
        torch.compile(fn, backend=f"dfa_{key}", options=options)
    with measure_coverage(key):
        return compiled(*args, **kwargs)


def last_coverage() -> Coverage:
    """The ``Coverage`` of the latest ``run_compiled`` / ``measure_coverage`` block."""
    if not _LAST:
        raise DFAError("no coverage measured yet: run the program with common.sim.run_compiled(fn, *args, "
                       "backend=...) or inside `with common.sim.measure_coverage():`")
    return _LAST[0]
