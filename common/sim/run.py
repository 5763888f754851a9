"""Entry points: simulate a workload, a named LLM step, or one operator on one backend."""
from __future__ import annotations

import contextlib
import gc

import torch

from common.chips import canonical_dtype
from common.errors import DFAError
from common.sim import args as sim_args
from common.sim.moe import after_run
from common.sim.pipeline import compile_graph, host_fallbacks
from common.sim.report import Report
from common.sim.workload import TORCH_DTYPES, Workload, graph_workload, llm_step


def make_policy(backend: str, chip=None, chips: int | None = None, dtype: str | None = None, **options):
    from common.sim.machines import get_backend
    cls = get_backend(backend)
    return cls(chip, chips, dtype, explicit_chips=chips is not None, **options)


@contextlib.contextmanager
def gc_paused():
    """Python's cycle collector off while a step is costed. The cost model makes ~10^5 short-lived objects
    (events, dicts) with no reference cycles, which reference counting frees; each collection they trigger
    walks every tracked object, the captured graphs included: a third of a sweep's time. Back on after."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def simulate(workload: Workload, backend: str, *, chip=None, chips: int | None = None, dtype: str | None = None,
             **options) -> Report:
    """Compile every segment of ``workload`` for ``backend`` and run it on the cost model."""
    if not isinstance(workload, Workload):
        raise DFAError(f"workload must be a Workload (common.sim.workload), got {type(workload).__name__}; "
                       "for a named model use simulate_llm, for one operator simulate_op")
    backend, chips = sim_args.backend_name(backend), sim_args.chip_count(chips)
    sim_args.moe_parallel_name(options.get("moe_parallel"))  # a bad choice fails before anything is compiled
    policy = make_policy(backend, chip, chips, dtype or workload.dtype, **options)
    with gc_paused():
        policy.fit(workload)
        programs = [compile_graph(seg.gm, policy) for seg in workload.segments]
        events = host_fallbacks(policy, programs, policy.run(programs, workload))  # CPU fallbacks on the host
        events = after_run(policy, workload, programs, events)  # MoE all-to-alls, notes (common/sim/moe.py)
    notes = list(dict.fromkeys(n for p in programs for n in p.notes))
    labels = {p.dtype for p in programs}  # integer-only programs are labelled with the dtype they computed in
    dtype = labels.pop() if len(labels) == 1 else policy.dtype
    return Report(policy.name, policy.chip.name, policy.n_chips, dtype, events, programs,
                  policy.critical_engine, workload.name, workload.phase, workload.batch, workload.seq,
                  workload.tokens, policy.peak, policy.counters(events), notes)


def simulate_llm(model: str, backend: str, *, phase: str = "decode", batch: int = 1, seq: int = 1024,
                 chip=None, chips: int | None = None, dtype: str | None = None, **options) -> Report:
    """One prefill or decode step of a named (or config.json) LLM, captured on fake tensors."""
    config, phase, batch, seq = sim_args.llm_step(model, phase, batch, seq)
    backend, chips = sim_args.backend_name(backend), sim_args.chip_count(chips)
    sim_args.chip_for(backend, chip, dtype)
    dt = dtype or make_policy(backend, chip, None, None).dtype  # the chip's native 16-bit type
    workload = llm_step(model if isinstance(model, str) else config, phase, batch, seq, canonical_dtype(dt))
    return simulate(workload, backend, chip=chip, chips=chips, dtype=dt, **options)


OPS = sim_args.OPS


def op_workload(op: str, shape: tuple[int, ...], dtype: str = "fp16") -> Workload:
    """A one-operator workload: ``matmul`` (M,K,N), ``sdpa`` (B,H,S,D), others take the tensor shape."""
    shape = sim_args.op_shape(op, shape)
    td = TORCH_DTYPES[canonical_dtype(dtype)]
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():  # shapes only: a 4096^3 bf16 matmul is never computed
        args, fn = _op_args(op, shape, td)
    return graph_workload(_Fn(fn), args, name=f"{op}{tuple(shape)}", dtype=canonical_dtype(dtype))


def _op_args(op: str, shape: tuple, td: torch.dtype):
    if op == "matmul":
        m, k, n = shape
        args, fn = (torch.empty(m, k, dtype=td), torch.empty(k, n, dtype=td)), torch.mm
    elif op == "sdpa":
        q = torch.empty(*shape, dtype=td)
        args, fn = (q, q.clone(), q.clone()), _attention
    else:
        x = torch.empty(*shape, dtype=td)
        fn = {"softmax": lambda t: torch.softmax(t, -1), "gelu": torch.nn.functional.gelu,
              "layernorm": lambda t: torch.nn.functional.layer_norm(t, t.shape[-1:]),
              "add": lambda t: t + t, "clone": torch.clone}[op]
        args = (x,)
    return args, fn


def _attention(q, k, v):
    """Explicit attention so every backend sees bmm -> softmax -> bmm."""
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5  # (B, H, S, S)
    return torch.softmax(scores, dim=-1) @ v  # (B, H, S, D)


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def simulate_op(op: str, shape, backend: str, *, chip=None, dtype: str | None = None, **options) -> Report:
    """One operator (``OPS``) of ``shape`` on one chip of ``backend``."""
    shape, backend = sim_args.op_shape(op, shape), sim_args.backend_name(backend)
    sim_args.chip_for(backend, chip, dtype)
    dt = dtype or make_policy(backend, chip, None, None).dtype
    return simulate(op_workload(op, shape, dt), backend, chip=chip, chips=1, dtype=dt,
                    **options)
