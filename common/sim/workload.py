"""What gets simulated: a model step cut into captured segments, each compiled once and run ``repeat`` times.

Real compilers for big models compile one decoder layer and run it N times (XLA scans over layers, Cerebras
and Groq place a layer kernel per region or chip). We do the same: an LLM step is
``prologue`` (embedding, RoPE tables, mask) + ``layer`` x n_layers + ``epilogue`` (norm, LM head), each an
aten graph captured on shapes only (meta tensors, ``common.graph.meta_capture``: the graph ``make_fx`` gives on
FakeTensors, without importing Dynamo) and annotated with costs. Cost is linear in the number of layers and a
70B step is captured in about 0.1 s. Any other model is one segment (``make_fx`` on FakeTensors).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache

import torch
import torch.fx as fx
from torch import nn
from torch.utils import _pytree as pytree

from common.chips import DTYPE_BYTES, canonical_dtype
from common.errors import DFAError
from common.graph.capture import capture_aten
from common.graph.costs import annotate
from common.graph.lazy_dynamo import deferred_dynamo
from common.graph.meta_capture import FakeViews, NoInit, capture_meta
from common.models import ModelConfig, build_model, resolve_config, step_inputs
from common.sim import args as sim_args
from common.sim.moe import plan_layer

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
                "fp8": torch.bfloat16, "int8": torch.bfloat16}  # 8-bit: shapes traced in 16 bit, bytes rescaled


@dataclass
class Segment:
    name: str
    gm: fx.GraphModule
    repeat: int = 1
    kv_bytes: float | None = None  # one repeat's KV cache where layers differ (sliding windows); None: the mean


@dataclass
class Workload:
    name: str
    segments: list[Segment]
    phase: str = "forward"
    batch: int = 1
    seq: int = 1
    dtype: str = "fp32"
    tokens: int = 0  # tokens produced (decode) or processed (prefill) by one step
    weight_bytes: float = 0.0
    kv_bytes: float = 0.0
    config: ModelConfig | None = None
    meta: dict = field(default_factory=dict)

    @property
    def resident_bytes(self) -> float:
        """Bytes that must live in device memory for the whole run: weights plus KV cache."""
        return self.weight_bytes + self.kv_bytes


class _Prologue(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.embed_tokens, self.model = model.embed_tokens, [model]  # list: keep the rest out of the state

    def forward(self, tokens, start_pos: int = 0):
        m, t = self.model[0], tokens.shape[1]
        cos = m.rope_cos.narrow(0, start_pos, t)  # (T, hd/2)
        sin = m.rope_sin.narrow(0, start_pos, t)  # (T, hd/2)
        x = self.embed_tokens(tokens)  # (B, T, C)
        if not m.config.sliding_layers:
            return x, cos, sin, m.causal_mask(t, start_pos)
        band = m.causal_mask(t, start_pos, m.config.sliding_window)  # what the sliding-window layers see
        return x, cos, sin, m.causal_mask(t, start_pos), band


class _Epilogue(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.norm, self.lm_head = model.norm, model.lm_head

    def forward(self, x):
        return self.lm_head(self.norm(x))  # (B, T, vocab)


def _annotated(module, args, kwargs=None, meta: bool = False) -> fx.GraphModule:
    if not meta:
        gm = capture_aten(module, args, kwargs or {})
        return annotate(gm, *gm.meta["example_inputs"])
    gm = capture_meta(module, args, kwargs or {})
    with FakeViews():  # CostProp's meta values are the FakeTensors' (the strides of views)
        return annotate(gm, *gm.meta["example_inputs"])


@lru_cache(maxsize=32)
def llm_step(model: str, phase: str, batch: int, seq: int, dtype: str = "bf16") -> Workload:
    """Capture one prefill (``seq`` prompt tokens) or decode step (1 new token after ``seq`` cached).

    The traced graph carries shapes and byte counts only, so dtypes of equal width share one capture (the
    costly part of a step): fp16 reuses the bf16 trace, int8 the fp8 one. The
    workload's ``dtype`` is the one asked for; every byte count is ``DTYPE_BYTES[dtype]`` either way.
    """
    sim_args.llm_step(model, phase, batch, seq)  # one DFAError line naming a bad argument, before any capture
    dtype = canonical_dtype(dtype)
    shared = _captured_step(model, phase, int(batch), int(seq), _TRACE_AS.get(dtype, dtype))
    return shared if shared.dtype == dtype else dataclasses.replace(shared, dtype=dtype)


_TRACE_AS = {"fp16": "bf16", "int8": "fp8"}  # same DTYPE_BYTES, same trace dtype (TORCH_DTYPES)


@lru_cache(maxsize=32)
def _captured_step(model: str, phase: str, batch: int, seq: int, dtype: str) -> Workload:
    """Read from the on-disk capture cache (``common.sim.capture_cache``) or captured and stored there."""
    config = resolve_config(model)
    if batch <= 0 or seq <= 0:
        raise DFAError(f"batch and seq must be positive, got batch={batch}, seq={seq}")
    from common.sim import capture_cache
    return capture_cache.cached(("llm_step", config, phase, batch, seq, dtype),
                                lambda: capture_step(config, phase, batch, seq, dtype))


TRACERS = ("auto", "meta", "fake")


def capture_step(config: ModelConfig, phase: str, batch: int, seq: int, dtype: str, *,
                 tracer: str = "auto") -> Workload:
    """Capture one step (no cache): prologue, one decoder layer of each kind, epilogue, annotated with costs.

    Kinds (``ModelConfig.layer_kinds``): full or sliding-window attention, dense or expert MLP; each is captured
    once and repeated as often as the model has it (a dense model has one kind, the segments of old).

    ``tracer``: "fake" is ``make_fx`` on FakeTensors (``capture_aten``); "meta" the same graph traced on meta
    tensors by ``common.graph.meta_capture`` without importing ``torch._dynamo`` (a second of a cold ``dfa
    simulate``); "auto" is "meta", or "fake" for a model the meta tracer cannot follow.
    """
    if tracer not in TRACERS:
        raise DFAError(f"unknown tracer {tracer!r}; valid: {', '.join(TRACERS)}")
    if tracer != "fake":
        try:
            with deferred_dynamo():
                return _capture_step(config, phase, batch, seq, dtype, meta=True)
        except Exception:  # Unsupported, an op with no meta kernel: make_fx gives the graph (or the same error)
            if tracer == "meta":
                raise
    return _capture_step(config, phase, batch, seq, dtype, meta=False)


def _capture_step(config: ModelConfig, phase: str, batch: int, seq: int, dtype: str, meta: bool) -> Workload:
    kinds = config.layer_kinds()
    # one layer of each kind, in the order they first appear: layer j of the small model is kind j
    small = dataclasses.replace(config, n_layers=len(kinds),
                                sliding_layers=tuple(j for j, ((sl, _), _) in enumerate(kinds) if sl),
                                dense_layers=tuple(j for j, ((_, moe), _) in enumerate(kinds)
                                                   if config.is_moe and not moe))
    if meta:
        with NoInit():  # meta parameters: nothing to initialise
            m = build_model(small, device="meta", dtype=TORCH_DTYPES[dtype])
    else:
        m = build_model(small, fake=True, dtype=TORCH_DTYPES[dtype])
    args, kwargs = step_inputs(m, phase, batch, seq)
    tokens, cache, start = args[0], kwargs.get("cache"), kwargs.get("start_pos", 0)
    pro = _annotated(_Prologue(m), (tokens,), {"start_pos": start}, meta)
    out = next(n for n in pro.graph.nodes if n.op == "output")
    x, cos, sin, mask, *band = [v for v in pytree.tree_leaves(out.meta["val"]) if isinstance(v, torch.Tensor)]
    positions = seq + (1 if phase == "decode" else 0)
    layers, moe_meta = [], {}
    for j, (_kind, count) in enumerate(kinds):
        kv = None if cache is None else (cache.k[j], cache.v[j])
        # ---- mixture of experts (common/sim/moe.py): capture the layer at the expected routing load ----
        moe_meta = plan_layer(m.layers[j], config, batch * tokens.shape[1], dtype) or moe_meta
        # ----
        layer_mask = band[0] if small.is_sliding(j) else mask
        gm = _annotated(m.layers[j], (x, cos, sin, layer_mask, kv, start), None, meta)
        per_layer = 2 * config.n_kv_heads * config.head_dim * DTYPE_BYTES[dtype] * batch \
            * small.kv_positions(j, positions)
        layers.append(Segment("layer", gm, count, per_layer if len(kinds) > 1 else None))
    epi = _annotated(_Epilogue(m), (x,), None, meta)
    scale = DTYPE_BYTES[dtype] / torch.empty((), dtype=TORCH_DTYPES[dtype]).element_size()
    if scale != 1.0:  # 8-bit weights and KV: traced in 16 bit, every byte count halved
        for gm in (pro, *(seg.gm for seg in layers), epi):
            _scale_bytes(gm, scale)
    t = tokens.shape[1]
    return Workload(
        name=config.name, segments=[Segment("prologue", pro), *layers, Segment("epilogue", epi)],
        phase=phase, batch=batch, seq=seq, dtype=dtype, tokens=batch * t,
        weight_bytes=config.n_params * DTYPE_BYTES[dtype],
        kv_bytes=config.kv_bytes_per_token(DTYPE_BYTES[dtype]) * batch * positions if not config.sliding_layers
        else config.kv_bytes(positions, DTYPE_BYTES[dtype]) * batch,
        config=config, meta={"moe": moe_meta} if moe_meta else {})


def _scale_bytes(gm: fx.GraphModule, scale: float) -> None:
    gm.meta["byte_scale"] = scale
    for n in gm.graph.nodes:
        c = n.meta.get("cost")
        if c is not None:
            n.meta["cost"] = dataclasses.replace(c, bytes_read=c.bytes_read * scale,
                                                 bytes_written=c.bytes_written * scale)


def graph_workload(model: nn.Module, args: tuple, kwargs: dict | None = None, *, name: str | None = None,
                   dtype: str | None = None) -> Workload:
    """Any module and example inputs as a one-segment workload (captured on fake tensors)."""
    gm = _annotated(model, tuple(args), kwargs)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    d = dtype or (canonical_dtype(str(first.dtype)) if first is not None and first.is_floating_point() else "fp32")
    return Workload(name or type(model).__name__, [Segment("graph", gm)], dtype=d, weight_bytes=weights,
                    batch=int(first.shape[0]) if first is not None and first.dim() else 1)
