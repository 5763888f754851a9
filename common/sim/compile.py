"""``torch.compile`` backends ``dfa_gpu``, ``dfa_tpu``, ``dfa_wse``, ``dfa_lpu``, ``dfa_spyre``.

Dynamo hands a backend each captured graph with example inputs. We trace it to aten (``make_fx``), compile it
through the shared pipeline for the target (``common.sim.pipeline``), simulate its cost, and return a
callable that really runs the aten graph on the CPU with the target's numerics:

* matmul operands rounded to ``policy.matmul_operand_dtype`` (e.g. bf16 on a TPU), accumulated in
  ``policy.accumulation_dtype`` (fp32); each rule's source is in ``policy.precision_sources``;
* every intermediate rounded to ``policy.storage_dtype`` (fp16 on Spyre); a rounding that makes inf, 0 or
  NaN is counted and warned about (``common.sim.numerics``: ``report.counters["overflow"]``, ...);
* ops the target cannot run natively execute on the host (a counted CPU fallback, a host round trip in the
  timeline); with ``options={"strict": True}`` such an op is a compile error instead;
* planted ``faults`` (``common.sim.faults``) change values or raise the runtime's errors.

Options (``torch.compile(m, backend="dfa_spyre", options={...})``): chip, strict, faults, plus any policy
option. The simulated ``Report`` of every compiled graph is kept: ``last_report("spyre")``, ``reports()``.
A graph is part of a program: ``common.sim.run_compiled`` (``common.sim.coverage``) also counts what ran outside
the graphs, and ``report.coverage_line()`` says what share of the program's work the machine ran.
"""
from __future__ import annotations

import sys

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from common.errors import DFAError
from common.graph.capture import capture_aten
from common.graph.costs import annotate
from common.sim import coverage as C
from common.sim import faults as F
from common.sim import numerics as N
from common.sim.fallback import check_int32_range
from common.sim.pipeline import decompose, op_kind
from common.sim.run import make_policy, simulate
from common.sim.workload import Segment, Workload

_TORCH = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
_REPORTS: list = []


def reports(backend: str | None = None) -> list:
    """Reports of every graph compiled so far (optionally one backend's), oldest first."""
    return [r for r in _REPORTS if backend is None or r.backend == backend.removeprefix("dfa_")]


def last_report(backend: str | None = None):
    """The report of the graph compiled last (``report.coverage_line()``: what ran on the machine and outside)."""
    found = reports(backend)
    if not found:
        try:
            measured = C.last_coverage().line()
        except DFAError:
            measured = ""
        raise DFAError(f"no graph has been compiled for {backend or 'any backend'} yet"
                       + (f"; the last measured run: {measured}" if measured else ""))
    return found[-1]


def clear_reports() -> None:
    _REPORTS.clear()


class CompiledGraph:
    """One Dynamo graph compiled for a simulated target: ``program``/``report`` to read, ``__call__`` to run."""

    def __init__(self, backend: str, gm: fx.GraphModule, example_inputs, options: dict | None = None):
        options = dict(options or {})
        self.faults: list[F.Fault] = list(options.pop("faults", []))
        self.strict = bool(options.pop("strict", False))
        chip = options.pop("chip", None)
        dtype = options.pop("dtype", None) or _eager_float_dtype(backend, chip, example_inputs)
        self.policy = make_policy(backend, chip, None, dtype, **options)
        self.gm = gm
        self.aten = capture_aten(gm, _fresh_fakes(example_inputs), fake=True)
        _label_lifted_parameters(self.aten, gm, example_inputs)
        annotate(self.aten, *self.aten.meta["example_inputs"])
        _refuse_unknown_callables(self.aten, backend)
        self.ops = decompose(self.aten, self.policy)
        fallbacks = [o for o in self.ops if o.coverage == "fallback"]
        if self.strict and fallbacks:
            o = fallbacks[0]
            hint = getattr(self.policy, "nearest_native", lambda op: None)(o.op)
            raise DFAError(f"{o.op} falls back to the CPU on {self.policy.name} (strict mode)"
                           + (f": {o.fallback_reason}" if o.fallback_reason.startswith(("dtype", "no cost")) else "")
                           + (f"; nearest native: {hint}" if hint else ""))
        self._place_faults()
        workload = Workload(type(gm).__name__, [Segment("graph", self.aten)], dtype=self.policy.dtype)
        self.report = simulate(workload, backend, chip=self.policy.chip, chips=1, dtype=self.policy.dtype,
                               **options)
        self.report.counters["fallback_ops"] = len(fallbacks)
        self.report.notes.extend(f"fault planted: {f.kind} at {n}" for f, n in self.planted)
        self.program = self.report.programs[0]
        _REPORTS.append(self.report)
        self.name = f"graph #{len(_REPORTS)}"  # its place in reports(): how the coverage line names it
        self.report.coverage = C.graph_coverage(self, self.name)  # replaced by a measured run's (run_compiled)
        self.numerics = N.NumericsMonitor(self.report, self.policy, self.name)

    def plant(self, faults) -> list[tuple[F.Fault, str]]:
        """Replace the planted faults of this compiled graph (a debugging exercise re-plants without
        recompiling); returns (fault, fx node) pairs and updates the report's notes."""
        self.faults = list(faults)
        self._place_faults()
        self.report.notes[:] = [n for n in self.report.notes if not n.startswith("fault planted: ")]
        self.report.notes.extend(f"fault planted: {f.kind} at {n}" for f, n in self.planted)
        return self.planted

    def _place_faults(self) -> None:
        self.planted: list[tuple[F.Fault, str]] = []  # (fault, fx node it was planted on)
        for fault in self.faults:
            found = F.candidates(fault, self.ops)
            hits = found if fault.params.get("every") else [fault.pick(found)] if found else []
            if not hits:
                raise DFAError(f"fault {fault.kind!r} has nowhere to go in this graph (no candidate op"
                               + (f" matching {fault.target!r}" if fault.target else "") + ")")
            self.planted.extend((fault, hit.name) for hit in hits)

    # ---- running ---------------------------------------------------------------------------------------
    def __call__(self, *args):
        state = dict(self.gm.named_parameters(remove_duplicate=False))
        state.update(self.gm.named_buffers(remove_duplicate=False))
        flat = pytree.tree_leaves((state, tuple(args), {}))
        self.raise_runtime_faults()
        C.graph_ran(lambda: C.region_of(self, self.name), self)
        with C.inside_graph():
            out = TargetInterpreter(self).run(*flat)
        self.numerics.finish_run()
        check_int32_range(self.policy, {"input": args, "output": out})  # int64 narrowed to int32 must fit
        return out

    def raise_runtime_faults(self) -> None:
        for fault, node in self.planted:
            if fault.kind == "dma_timeout":
                kernel = next(k for k in self.program.kernels if any(o.name == node for o in k.ops))
                nbytes = sum(kernel.inputs.values())
                timeout = fault.params.get("timeout_s", 1.0)
                raise F.SimTimeoutError(
                    f"{self.policy.name}: DMA into kernel {kernel.name} ({'+'.join(kernel.op_names)}, "
                    f"{nbytes:.0f} bytes) did not complete within {timeout} s; the runtime watchdog aborted")
            if fault.kind == "deadlock":
                ks = self.program.kernels
                i = next(i for i, k in enumerate(ks) if any(o.name == node for o in k.ops))
                later = ks[-1] if i < len(ks) - 1 else ks[0]
                F.check_schedule(ks, [(ks[i].name, later.name)])


def _label_lifted_parameters(aten: fx.GraphModule, gm: fx.GraphModule, example_inputs) -> None:
    """Dynamo lifts a module's weights to graph inputs (the real ``nn.Parameter`` objects arrive in
    ``example_inputs``). Label those placeholders as parameters, as ``capture_aten`` does for a module's own
    state, so a target lays weights out at load time instead of treating them as activations."""
    inputs = [n for n in aten.graph.nodes if n.op == "placeholder" and n.meta.get("kind") == "input"]
    dynamo_names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    for node, value, name in zip(inputs, example_inputs, dynamo_names, strict=False):
        if isinstance(value, torch.nn.Parameter):
            node.meta["kind"] = "param"
            node.meta["source"] = name


def _eager_float_dtype(backend: str, chip, example_inputs) -> str | None:
    """A target that computes floats in the model's own dtype (no operand or storage rounding: the GPU, with
    eager CUDA semantics) is timed in that dtype too - an fp32 model at the fp32 peak - so the report never names
    a dtype the values were not computed in. None (the chip's native 16-bit type) for every other target."""
    from common.chips import DTYPES, get_chip
    from common.sim.machines import get_backend
    cls = get_backend(backend)
    if cls.storage_dtype is not None or cls.matmul_operand_dtype is not None:
        return None
    counts: dict[str, int] = {}
    for t in example_inputs:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            name = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(t.dtype)
            if name:
                counts[name] = counts.get(name, 0) + t.numel()
    dtype = max(counts, key=counts.get) if counts else None
    return dtype if dtype in DTYPES and get_chip(chip or cls.default_chip).supports(dtype) else None


def _fresh_fakes(example_inputs) -> tuple:
    """Static-shape copies of Dynamo's example inputs in a FakeTensorMode of our own, so tracing here never
    adds symbols to Dynamo's shape environment."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode(allow_non_fake_inputs=True)  # the graph's own buffers (e.g. a mask) stay real
    with mode:
        return tuple(torch.empty_strided(tuple(int(s) for s in t.shape), tuple(int(s) for s in t.stride()),
                                         dtype=t.dtype) if isinstance(t, torch.Tensor) else t
                     for t in example_inputs)


class TargetInterpreter(fx.Interpreter):
    """Runs the aten graph with the target's rounding rules and planted faults."""

    def __init__(self, compiled: CompiledGraph):
        super().__init__(compiled.aten)
        p = compiled.policy
        self.operand = _TORCH.get(p.matmul_operand_dtype) if p.matmul_operand_dtype else None
        self.storage = _TORCH.get(p.storage_dtype) if p.storage_dtype else None
        self.accumulate = _TORCH[getattr(p, "accumulation_dtype", "fp32")]
        self.faults = {node: f for f, node in compiled.planted}
        stick = p.chip.facts.get("stick_bytes", F.STICK_BYTES_DEFAULT)
        self.stick_bytes = int(stick)
        self.monitor = compiled.numerics  # overflow / underflow / NaN the rounding rules cause (numerics.py)
        self.monitor.start_run()  # one interpreter, one run (common.debug's recorder subclasses it)
        self._inputs_checked: set[str] = set()

    def _round(self, t):
        if self.storage is not None and isinstance(t, torch.Tensor) and t.is_floating_point():
            return t.to(self.storage).to(t.dtype)
        return t

    def _store(self, node: str, op: str, t):
        """Round an op's output to the storage dtype, noting values that became inf or 0 on the way."""
        if self.storage is None or not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return t
        stored = t.to(self.storage).to(t.dtype)
        self.monitor.rounded(node, op, "storage_dtype", t, stored)
        return stored

    def _check_inputs(self, consumer: str) -> None:
        """The graph's inputs are rounded where read (below); check each one's rounding once per run."""
        for n in self._current.all_input_nodes:
            if n.op in ("placeholder", "get_attr") and n.name not in self._inputs_checked:
                self._inputs_checked.add(n.name)
                value = self.env[n]
                if isinstance(value, torch.Tensor) and value.is_floating_point():
                    self.monitor.rounded(n.name, f"input read by {consumer}", "storage_dtype", value,
                                         self._round(value))

    def placeholder(self, target, args, kwargs):
        value = super().placeholder(target, args, kwargs)
        return value  # inputs are rounded where they are read, so in-place updates still reach the caller

    def call_function(self, target, args, kwargs):
        name = f"aten.{getattr(target, 'overloadpacket', target).__name__}" if hasattr(target, "overloadpacket") \
            else getattr(target, "__name__", str(target))
        node = self._current.name
        fault = self.faults.get(node)
        aliases = _returns_alias(target)  # views and in-place ops: rounding would copy and break the aliasing
        if self.storage is not None and not aliases:
            self._check_inputs(node)
            args = pytree.tree_map(self._round, args)
        if fault is not None and fault.kind == "fp16_overflow":
            return softmax_fault(args)
        if fault is not None and fault.kind == "layout_mismatch":
            args = _misread_transposed(args)
        if self.operand is not None and op_kind(name) == "matmul":
            def check(exact, stored):
                self.monitor.rounded(node, name, "matmul_operand_dtype", exact, stored)
            out = _matmul_in(target, args, kwargs, self.operand, self.accumulate, check)
        else:
            out = target(*args, **kwargs)
        if fault is not None and fault.kind == "stick_copy" and isinstance(out, torch.Tensor):
            src = next(a for a in pytree.tree_leaves(args) if isinstance(a, torch.Tensor))
            bad = F.apply_stick_copy(src, out, self.stick_bytes)
            if name == "aten.copy_":
                out.copy_(bad)
                return out
            return bad
        if aliases:
            return out
        out = self._store(node, name, out)
        if fault is None:
            inputs = self._current.all_input_nodes
            self.monitor.produced(node, name, out, [n.name for n in inputs], pytree.tree_leaves(args))  # as read
        return out

    def run_node(self, n):
        self._current = n
        return super().run_node(n)


def _refuse_unknown_callables(gm: fx.GraphModule, backend: str) -> None:
    """An aten op no cost rule covers runs on the host (a CPU fallback, timed by its bytes: common.sim.pipeline).
    A callable that is not an aten op and dispatched ops no rule covers cannot even be placed: one line, naming it."""
    for node in gm.graph.nodes:
        ops = node.meta.get("uncosted")
        if ops and not isinstance(node.target, torch._ops.OpOverload):
            raise DFAError(f"dfa_{backend} cannot run {getattr(node.target, '__name__', node.target)} (node "
                           f"{node.name}): it is not an aten op and {', '.join(ops)} has no rule in "
                           "common.graph.op_kinds")


def _returns_alias(target) -> bool:
    schema = getattr(target, "_schema", None)
    return bool(schema is not None and schema.returns and schema.returns[0].alias_info is not None)


def softmax_fault(args):
    x, dim = args[0], args[1]
    return F.softmax_without_max(x, dim)


def _misread_transposed(args):
    """Read a transposed operand in its stored layout: same shape, elements in the wrong places."""
    out = list(args)
    for i, a in enumerate(out):
        if isinstance(a, torch.Tensor) and a.dim() >= 2 and a.stride()[-1] != 1:
            out[i] = a.transpose(-1, -2).contiguous().reshape(a.shape)
            break
    return tuple(out)


def _matmul_in(target, args, kwargs, operand_dtype, accumulate=torch.float32, check=None):
    """Round float operands to the target's matmul input dtype (``check(exact, rounded)`` sees each one),
    multiply-accumulate in ``accumulate`` (fp32 on every target here), cast back."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    out_dtype = tensors[0].dtype if tensors else torch.float32
    cast = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            rounded = a.to(operand_dtype).to(accumulate)
            if check is not None:
                check(a, rounded)
            a = rounded
        cast.append(a)
    # attention kernels return a tuple (output, log-sum-exp, ...): cast each float tensor, keep the rest
    return pytree.tree_map(lambda t: t.to(out_dtype) if isinstance(t, torch.Tensor) and t.is_floating_point()
                           else t, target(*cast, **kwargs))


def make_backend(name: str):
    def backend(gm: fx.GraphModule, example_inputs, options: dict | None = None):
        with C.inside_graph():  # compiling runs ops too (on fakes, mostly): none of them is the program's
            return CompiledGraph(name, gm, example_inputs, options)
    backend.__name__ = f"dfa_{name}"
    backend.__doc__ = f"torch.compile backend: the simulated {name} (see common.sim.compile)."
    return backend


dfa_gpu, dfa_tpu, dfa_wse, dfa_lpu, dfa_spyre = (make_backend(n) for n in ("gpu", "tpu", "wse", "lpu", "spyre"))


def register() -> None:
    """Make ``torch.compile(m, backend="dfa_gpu")`` work by name, without importing Dynamo when it can be helped.

    An installed package declares the backends as ``torch_dynamo_backends`` entry points (pyproject.toml), which
    Dynamo reads itself when it first looks a name up: then nothing is done here (importing ``torch._dynamo``
    costs ~1.5 s, most of a cold ``dfa simulate``). Otherwise (a checkout on ``sys.path``, not installed), or if
    Dynamo is already imported (cheap then), the backends are registered with ``register_backend``."""
    if "torch._dynamo" not in sys.modules and _declared_as_entry_points():
        return
    try:
        from torch._dynamo import list_backends, register_backend
    except ImportError:  # pragma: no cover
        return
    known = set(list_backends(exclude_tags=()))
    for fn in (dfa_gpu, dfa_tpu, dfa_wse, dfa_lpu, dfa_spyre):
        if fn.__name__ not in known:
            register_backend(fn, name=fn.__name__)


def _declared_as_entry_points() -> bool:
    """Whether the installed distribution's entry points name all five backends, pointing at this module."""
    from importlib import metadata
    try:
        eps = metadata.distribution("dataflow-labs").entry_points
    except metadata.PackageNotFoundError:
        return False
    ours = {e.name: e.value for e in eps if e.group == "torch_dynamo_backends"}
    return all(ours.get(f"dfa_{n}") == f"{__name__}:dfa_{n}" for n in ("gpu", "tpu", "wse", "lpu", "spyre"))
