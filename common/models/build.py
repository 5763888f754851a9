"""Build a reference model (real, meta or fake) and the inputs of one prefill or decode step.

Real builds initialise on the CPU under a private RNG seeded with ``seed`` and then move, so a seed gives
the same weights on every device and leaves the global RNG alone. ``fake=True`` builds inside a
``FakeTensorMode``: parameters are FakeTensors (shape, dtype, device, no storage), enough to trace or
cost a 70B model on a laptop. ``device="meta"`` is the storage-free variant without a fake mode.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch
from torch import nn

from common.errors import DFAError
from common.models.block import TinyTransformerBlock
from common.models.config import ModelConfig, config_from_hf, resolve_config
from common.models.decoder import DecoderLM, KVCache, rope_tables

PHASES = ("prefill", "decode")
# transformers families whose weights DecoderLM runs to the same logits (same norms, scaling and MLP)
_REPRODUCED = ("llama", "mistral", "qwen2", "qwen3")


def _fake_tensor_mode_cls():
    try:  # private module, public in all but name since torch 2.0; guard it anyway
        from torch._subclasses.fake_tensor import FakeTensorMode
    except ImportError as exc:  # pragma: no cover - depends on the torch build
        raise DFAError(f"fake=True needs torch._subclasses.fake_tensor.FakeTensorMode, which torch "
                       f"{torch.__version__} does not provide ({exc}); use device='meta' instead") from None
    return FakeTensorMode


def fake_mode_of(model: nn.Module):
    """The FakeTensorMode that owns ``model``'s parameters, or None for a real/meta model.

    Run a fake model inside it: ``with fake_mode_of(m): m(*args, **kwargs)``.
    """
    for p in model.parameters():
        mode = getattr(p, "fake_mode", None)
        if mode is not None:
            return mode
    return None


def build_model(name_or_config: str | ModelConfig, *, seed: int = 0, dtype: torch.dtype = torch.float32,
                device: torch.device | str = "cpu", fake: bool = False) -> DecoderLM:
    """A ``DecoderLM`` for a config name, a ``config.json`` path, or a ``ModelConfig``."""
    config = resolve_config(name_or_config)
    if fake:  # built in dtype: Module.to() cannot swap FakeTensor parameters
        with _fake_tensor_mode_cls()(), torch.device(device):
            return DecoderLM(config, dtype=dtype)
    if torch.device(device).type == "meta":
        with torch.device("meta"):
            return DecoderLM(config, dtype=dtype)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DecoderLM(config)
    return model.to(device=device, dtype=dtype)


def decoder_from_hf(hf_model: nn.Module, *, max_seq_len: int | None = None) -> DecoderLM:
    """A ``DecoderLM`` holding the weights of a transformers Llama / Qwen2 / Qwen3 / Mistral-style causal LM
    (``load_llm(...).model``): the readable model, with the same logits (tests/test_decoder_vs_hf.py).

    Same module names once HF's ``model.`` prefix is dropped; dtype and device follow the HF model.
    ``max_seq_len`` (default: the config's) bounds the RoPE tables and the causal mask's positions.
    """
    hf_config = getattr(hf_model, "config", None)
    if hf_config is None or not hasattr(hf_config, "to_dict"):
        raise DFAError(f"decoder_from_hf needs a transformers model with a .config, got {type(hf_model).__name__}")
    raw = hf_config.to_dict()
    # a frequency remap (Llama 3.1's llama3, YaRN) changes the rotary angles DecoderLM computes: logits differ
    rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
    if rope_type != "default":
        raise DFAError(f"{type(hf_model).__name__} uses rope_type {rope_type!r}, which DecoderLM does not "
                       f"implement; valid: default")
    config = config_from_hf(raw, name=raw.get("_name_or_path") or type(hf_model).__name__)
    if config.is_moe:
        raise DFAError(f"decoder_from_hf loads dense models only; {config.name!r} has {config.n_experts} experts")
    if raw.get("model_type") not in _REPRODUCED:  # Gemma's GeGLU loads for the simulator, not with HF's logits
        raise DFAError(f"decoder_from_hf reproduces the logits of {', '.join(_REPRODUCED)} models "
                       f"(tests/test_decoder_vs_hf.py); got model_type {raw.get('model_type')!r}")
    if max_seq_len is not None:
        config = dataclasses.replace(config, max_seq_len=max_seq_len)
    param = next(hf_model.parameters())
    with torch.device("meta"):
        model = DecoderLM(config, dtype=param.dtype)
    state = {k.removeprefix("model."): v for k, v in hf_model.state_dict().items()}
    if config.tie_embeddings:
        state.setdefault("lm_head.weight", state["embed_tokens.weight"])
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if missing or unexpected:
        raise DFAError(f"{config.name!r}: weights DecoderLM lacks {unexpected[:3]} / needs {missing[:3]}")
    if config.tie_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    cos, sin = rope_tables(config.head_dim, config.max_seq_len, config.rope_theta)  # the meta buffers, rebuilt
    model.rope_cos, model.rope_sin = cos.to(param.dtype), sin.to(param.dtype)
    model.positions = torch.arange(config.max_seq_len)
    return model.to(param.device).eval()


def build_block(name_or_config: str | ModelConfig = "tiny-block", *, causal: bool = True, seed: int = 0,
                dtype: torch.dtype = torch.float32,
                device: torch.device | str = "cpu") -> TinyTransformerBlock:
    """``TinyTransformerBlock(d_model, n_heads, ffn_dim, causal)`` sized by a config; PyTorch default init.

    A separate builder because a block is not a language model: input (B, T, d_model), no tokens or cache.
    """
    config = resolve_config(name_or_config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        block = TinyTransformerBlock(config.d_model, config.n_heads, config.ffn_dim, causal=causal)
    return block.to(device=device, dtype=dtype)


def _positive_int(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise DFAError(f"{what} must be a positive int, got {value!r}")
    return value


def step_inputs(model_or_config: nn.Module | str | ModelConfig, phase: str, batch: int, seq: int, *,
                fake_mode=None, dtype: torch.dtype | None = None,
                with_cache: bool = False) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` for one ``model(*args, **kwargs)`` step.

    prefill: tokens (batch, seq); no cache, or with ``with_cache`` a fresh KVCache(max_seq=seq), start_pos 0.
    decode:  tokens (batch, 1), a zero KVCache(max_seq=seq+1) standing for ``seq`` cached tokens,
             start_pos=seq.
    Device and cache dtype follow a given model (dtype overrides); a fake model's own mode is used unless
    ``fake_mode`` is given. With a fake mode every tensor is created inside it.
    """
    if isinstance(model_or_config, DecoderLM):
        config = model_or_config.config
        param = next(model_or_config.parameters())
        device, dtype = param.device, dtype or param.dtype
        fake_mode = fake_mode if fake_mode is not None else fake_mode_of(model_or_config)
    elif isinstance(model_or_config, nn.Module):
        raise DFAError(f"step_inputs needs a DecoderLM or a model config, "
                       f"got {type(model_or_config).__name__}")
    else:
        config, device, dtype = resolve_config(model_or_config), "cpu", dtype or torch.float32
    if phase not in PHASES:
        raise DFAError(f"unknown phase {phase!r}; valid: {', '.join(PHASES)}")
    _positive_int("batch", batch)
    _positive_int("seq", seq)
    positions = seq + 1 if phase == "decode" else seq
    if positions > config.max_seq_len:
        raise DFAError(f"{phase} with seq={seq} needs {positions} positions; model {config.name!r} has "
                       f"max_seq_len={config.max_seq_len}")
    with fake_mode if fake_mode is not None else contextlib.nullcontext():
        t = 1 if phase == "decode" else seq
        tokens = (torch.arange(batch * t, device=device) % config.vocab_size).view(batch, t)  # (B, T)
        if phase == "decode":
            return (tokens,), {"cache": KVCache.empty(config, batch, seq + 1, dtype=dtype, device=device),
                               "start_pos": seq}
        if with_cache:
            return (tokens,), {"cache": KVCache.empty(config, batch, seq, dtype=dtype, device=device),
                               "start_pos": 0}
        return (tokens,), {}
