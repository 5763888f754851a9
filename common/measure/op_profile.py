"""A real model's ops measured one by one on this machine, grouped, and set beside a simulated step.

``profile(fn, device=...)`` runs ``fn`` under a ``TorchDispatchMode`` that times every aten op it dispatches
(a CUDA device is synchronised before and after each op, so a GPU op's time is its kernel plus its launch) and
counts its work with the project's rules: FLOPs from ``torch.utils.flop_counter``'s formulas for matmuls and
attention, ``common.graph.op_kinds`` for the rest; bytes as ``common.graph.costs`` counts them (every distinct
tensor read once, every output written once; views and metadata move nothing, a creation op reads nothing, a
lookup reads the rows it returns, ``copy_`` does not read its destination). Each op also gets a **group** from
what it is and the module it ran in: ``matmul`` (projections, MLP, LM head), ``attention`` (SDPA, softmax and the score
matmuls), ``norm`` (everything inside a ``*Norm`` module), ``pointwise`` (RoPE, activations, residual adds) and
``other`` (views, copies, creation, lookups: no FLOPs, so no roofline point).

``llm_step(llm, phase, seq)`` is one prefill step (``seq`` prompt tokens, full logits, no cache, as
``common.sim.simulate_llm`` counts it) or one decode step (1 token after ``seq`` cached; the cache is cut back
after every call, so each repetition is the same step). ``groups(ops)`` sums a profile per group (intensity =
summed FLOPs / summed bytes, never the mean of ratios); ``sim_groups(report)`` does the same for a simulated
step's compute events, grouped by the aten ops each kernel fused.
"""
from __future__ import annotations

import inspect
import statistics
import time
from collections.abc import Callable, Sequence

import pandas as pd
import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from common.errors import DFAError, unknown
from common.graph.costs import VectorFlopMode, op_bytes
from common.graph.op_kinds import rule_for

__all__ = ["GROUPS", "PHASES", "group_of", "groups", "llm_step", "op_work", "points", "profile", "sim_groups"]

aten = torch.ops.aten
GROUPS = ("matmul", "attention", "norm", "pointwise", "other")
PHASES = ("prefill", "decode")
_ATTENTION = ("scaled_dot_product", "softmax", "flash_attention", "efficient_attention")
_MATMULS = {"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.matmul", "aten.linear"}
_NO_BYTES = ("view", "metadata")
COLUMNS = ["op", "group", "kind", "module", "flops", "bytes", "time_s"]


def group_of(ops: Sequence[str], modules: Sequence[str] = (), flops: float = 1.0) -> str:
    """The group of one op (or of a kernel that fused ``ops``), given the classes of the modules it ran in
    (outermost first) and whether it does FLOPs."""
    ops = [str(o) for o in ops]
    if any(a in o for o in ops for a in _ATTENTION):
        return "attention"
    if any(o in _MATMULS for o in ops):
        inner = modules[-1] if modules else ""
        in_attention = any("Attention" in m for m in modules)
        return "attention" if in_attention and inner != "Linear" else "matmul"
    if any("Norm" in m for m in modules) or "aten.rsqrt" in ops or any("_norm" in o for o in ops):
        return "norm"
    return "pointwise" if flops > 0 else "other"


def _name(func) -> str:
    packet = getattr(func, "overloadpacket", func)
    return f"{getattr(func, 'namespace', 'aten')}.{getattr(packet, '__name__', str(func))}"


def _tensors(tree) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def op_work(func, args, kwargs, out) -> tuple[str, float, float]:
    """(kind, FLOPs, bytes) of one dispatched aten op, by the rules of ``common.graph.costs`` and
    ``common.graph.op_kinds``."""
    rule = rule_for(func) if isinstance(func, torch._ops.OpOverload) else None
    if rule is None:
        kind, flops = "uncosted", 0.0
    elif rule.source == "flop_counter":
        kind, flops = "matmul", float(flop_registry[func.overloadpacket](*args, **kwargs, out_val=out))
    elif rule.source == "decomposition":
        inner = VectorFlopMode()
        kind = inner._decomposed(func, args, kwargs)
        flops = inner.flops
    else:
        kind, flops = rule.kind, rule.count(args, kwargs, out)
    if kind in _NO_BYTES:
        return kind, 0.0, 0.0
    read, written = op_bytes(func, _tensors((args, kwargs)), _tensors(out), kind)
    return kind, float(flops), float(read + written)


class _OpTimer(TorchDispatchMode):
    """Times and counts every aten op; the module stack (forward hooks) names where it ran."""

    def __init__(self, device: torch.device, stack: list, count: bool):
        super().__init__()
        self.device, self.stack, self.count, self.rows = device, stack, count, []

    def _sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self._sync()
        t0 = time.perf_counter()
        out = func(*args, **kwargs)
        self._sync()
        dt = time.perf_counter() - t0
        row = {"op": _name(func), "time_s": dt}
        if self.count:
            kind, flops, nbytes = op_work(func, args, kwargs, out)
            names = [n for n, _ in self.stack]
            row.update(kind=kind, flops=flops, bytes=nbytes, module=names[-1] if names else "",
                       group="other" if kind in _NO_BYTES else group_of([row["op"]], [c for _, c in self.stack],
                                                                         flops))
        self.rows.append(row)
        return out


def _hooks(model: torch.nn.Module | None, stack: list) -> list:
    if model is None:
        return []
    def leave(_m, _a, _o):  # returns None: a forward hook's return value would replace the module's output
        if stack:
            stack.pop()

    handles = []
    for name, mod in model.named_modules():
        entry = (name, type(mod).__name__)
        handles.append(mod.register_forward_pre_hook(lambda _m, _a, e=entry: stack.append(e)))
        handles.append(mod.register_forward_hook(leave))
    return handles


def profile(fn: Callable[[], object], *, device: str | torch.device = "cpu", model: torch.nn.Module | None = None,
            repeats: int = 3, warmup: int = 1) -> pd.DataFrame:
    """One row per aten op ``fn()`` dispatches: op, group, kind, module, flops, bytes and time_s, the median
    of ``repeats`` runs (after ``warmup`` untimed ones). ``model``: the module whose submodules name each op's
    place (its norms and attention). MEASURED on ``device``; on CUDA every op is synchronised."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise DFAError(f"device {str(device)!r} is not available: torch sees no CUDA device")
    if dev.type not in ("cpu", "cuda"):
        raise unknown("device type", dev.type, ("cpu", "cuda"))
    if repeats < 1 or warmup < 0:
        raise DFAError(f"repeats must be >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    for _ in range(warmup):
        fn()
    stack: list = []
    handles = _hooks(model, stack)
    runs = []
    try:
        with torch.no_grad():
            for k in range(repeats):
                stack.clear()
                timer = _OpTimer(dev, stack, count=k == 0)
                with timer:
                    fn()
                runs.append(timer.rows)
    finally:
        for h in handles:
            h.remove()
    first = runs[0]
    if any([r["op"] for r in run] != [r["op"] for r in first] for run in runs[1:]):
        raise DFAError("the profiled function dispatched different ops on different runs: profile one fixed step")
    for i, row in enumerate(first):
        row["time_s"] = statistics.median(run[i]["time_s"] for run in runs)
    df = pd.DataFrame(first, columns=COLUMNS)
    df.attrs.update(device=str(dev), source="measured", repeats=repeats)
    return df


def llm_step(llm, phase: str, seq: int, *, batch: int = 1, device: str | torch.device | None = None,
             seed: int = 0) -> Callable[[], torch.Tensor]:
    """A function that runs one step of ``llm`` (``common.models.LLM``) on the device its weights are on:
    ``prefill`` of ``seq`` tokens (full logits, no cache) or one ``decode`` token after ``seq`` cached."""
    if phase not in PHASES:
        raise unknown("phase", phase, PHASES)
    if seq < 1 or batch < 1:
        raise DFAError(f"seq and batch must be >= 1, got seq={seq}, batch={batch}")
    dev = torch.device(device) if device is not None else next(llm.model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(llm.config.vocab_size, (batch, seq + 1), generator=gen).to(dev)  # (batch, seq + 1)
    model = llm.model
    if phase == "prefill":
        prompt = ids[:, :seq]  # (batch, seq)

        def step():
            with torch.no_grad():
                return model(prompt, use_cache=False).logits  # (batch, seq, vocab)
        return step
    # transformers 5 names the cache argument `cache`, 4.x `past_key_values`: the one this version's forward takes
    cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.no_grad():
        out = model(ids[:, :seq], use_cache=True)
    cache = getattr(out, "cache", None) if cache_kw == "cache" else out.past_key_values  # seq tokens cached
    new = ids[:, seq:]  # (batch, 1)

    def step():
        with torch.no_grad():
            logits = model(new, use_cache=True, **{cache_kw: cache}).logits  # (batch, 1, vocab)
        extra = cache.get_seq_length() - seq
        if extra > 0:
            cache.crop(-extra)  # back to seq cached tokens (slices: views): every call is the same step
        return logits
    return step


def _summed(df: pd.DataFrame, key: str) -> pd.DataFrame:
    g = df.groupby(key, sort=False).agg(flops=("flops", "sum"), bytes=("bytes", "sum"), time_s=("time_s", "sum"),
                                        ops=("flops", "size"))
    g = g.reindex([x for x in GROUPS if x in g.index])
    g["intensity"] = g["flops"] / g["bytes"].where(g["bytes"] > 0)
    g["flops_per_s"] = g["flops"] / g["time_s"].where(g["time_s"] > 0)
    g["share_of_time"] = g["time_s"] / g["time_s"].sum()
    g.index.name = "group"
    return g


def groups(ops: pd.DataFrame) -> pd.DataFrame:
    """A profile (``profile``) summed per group: flops, bytes, time_s, ops, intensity (summed FLOPs / summed
    bytes), flops_per_s (summed FLOPs / summed time) and share_of_time. MEASURED, like the profile."""
    missing = {"group", "flops", "bytes", "time_s"} - set(ops.columns)
    if missing:
        raise DFAError(f"groups needs a profile with columns group, flops, bytes, time_s; missing {sorted(missing)}")
    out = _summed(ops, "group")
    out.attrs.update(ops.attrs)
    return out


def sim_groups(report) -> pd.DataFrame:
    """A simulated step's compute events summed per group (kernels grouped by the aten ops they fused; bytes at
    the chip's main memory). SIMULATED: the same columns as ``groups``."""
    main = next((lv for lv in ("HBM", "GDDR6", "LPDDR5", "SRAM") if any(lv in e.bytes for e in report.events)),
                None)
    rows = [{"group": group_of(e.detail.get("ops", ()), (), e.flops), "flops": e.flops,
             "bytes": e.bytes.get(main, 0.0), "time_s": e.duration}
            for e in report.events if e.kind == "compute"]
    out = _summed(pd.DataFrame(rows, columns=["group", "flops", "bytes", "time_s"]), "group")
    out.attrs.update(source="simulated", chip=report.chip, chips=report.chips, level=main, dtype=report.dtype,
                     step_s=report.time_s)
    return out


def points(table: pd.DataFrame, label: str) -> pd.DataFrame:
    """A ``groups`` / ``sim_groups`` table as roofline points (``common.roofline.plot_roofline``): the groups
    with FLOPs and bytes; ``attrs['label']`` names the set."""
    pts = table[(table["flops"] > 0) & (table["bytes"] > 0) & (table["time_s"] > 0)].reset_index()
    pts = pts.rename(columns={"group": "label"})[["label", "flops", "bytes", "intensity", "flops_per_s"]]
    pts["source"] = table.attrs.get("source", "measured")
    pts.attrs["label"] = label
    return pts
