"""Architecture numbers for the reference decoder LM, and where they come from.

A ``ModelConfig`` holds only what the ops and shapes depend on. Named configurations copy the public
Hugging Face ``config.json`` of each model; ``config_from_hf`` reads any Llama/Qwen2/Mistral-style one.
Not modelled (they change values, not ops or shapes): Llama 3.1's ``rope_scaling`` frequency remap and
Qwen2's sliding window (off in these checkpoints).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from common.errors import DFAError, unknown


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """A decoder-only LM: embedding, ``n_layers`` x [RMSNorm, GQA+RoPE attention, RMSNorm, SwiGLU], head."""

    name: str
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int | None = None  # None -> n_heads (plain multi-head attention)
    head_dim: int | None = None  # None -> d_model // n_heads
    ffn_dim: int
    max_seq_len: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    qkv_bias: bool = False  # biases on q/k/v projections only (Qwen2); o_proj and MLP never have one
    source: str = ""

    def __post_init__(self) -> None:
        # frozen: fill the defaults through object.__setattr__
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.d_model // max(self.n_heads, 1))
        for field in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim",
                      "max_seq_len"):
            value = getattr(self, field)
            if not isinstance(value, int) or value <= 0:
                raise DFAError(f"model {self.name!r}: {field} must be a positive int, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise DFAError(f"model {self.name!r}: n_heads={self.n_heads} is not a multiple of "
                           f"n_kv_heads={self.n_kv_heads}")
        if self.head_dim % 2:
            raise DFAError(f"model {self.name!r}: head_dim={self.head_dim} must be even for RoPE")

    @property
    def group(self) -> int:
        """Query heads per K/V head: g = n_heads / n_kv_heads."""
        return self.n_heads // self.n_kv_heads

    @property
    def n_params(self) -> int:
        """Exact parameter count of ``DecoderLM(self)`` (tied head counted once).

        V*C (embedding) + L*[C*H*hd + 2*C*KV*hd + H*hd*C (+ H*hd + 2*KV*hd biases) + 3*C*F + 2*C]
        + C (final norm) + V*C (head, unless tied).
        """
        c, q, kv = self.d_model, self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        attn = c * q + 2 * c * kv + q * c + ((q + 2 * kv) if self.qkv_bias else 0)
        layer = attn + 3 * c * self.ffn_dim + 2 * c
        head = 0 if self.tie_embeddings else self.vocab_size * c
        return self.vocab_size * c + self.n_layers * layer + c + head

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token adds: 2 (K and V) * n_layers * n_kv_heads * head_dim * dtype_bytes."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * dtype_bytes


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


CONFIGS: dict[str, ModelConfig] = {c.name: c for c in (
    ModelConfig(name="qwen2.5-0.5b", vocab_size=151936, d_model=896, n_layers=24, n_heads=14, n_kv_heads=2,
                ffn_dim=4864, max_seq_len=32768, rope_theta=1e6, norm_eps=1e-6, tie_embeddings=True,
                qkv_bias=True, source=_hf("Qwen/Qwen2.5-0.5B")),
    ModelConfig(name="llama-2-7b", vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32,
                ffn_dim=11008, max_seq_len=4096, rope_theta=1e4, norm_eps=1e-5,
                source=_hf("meta-llama/Llama-2-7b-hf")),
    ModelConfig(name="llama-2-70b", vocab_size=32000, d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                ffn_dim=28672, max_seq_len=4096, rope_theta=1e4, norm_eps=1e-5,
                source=_hf("meta-llama/Llama-2-70b-hf")),
    ModelConfig(name="llama-3.1-8b", vocab_size=128256, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                ffn_dim=14336, max_seq_len=131072, rope_theta=5e5, norm_eps=1e-5,
                source=_hf("meta-llama/Llama-3.1-8B") + " (rope_scaling not modelled)"),
    ModelConfig(name="llama-3.1-70b", vocab_size=128256, d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                ffn_dim=28672, max_seq_len=131072, rope_theta=5e5, norm_eps=1e-5,
                source=_hf("meta-llama/Llama-3.1-70B") + " (rope_scaling not modelled)"),
    # Small enough to run and print anything in a notebook; GQA with g=2 so grouping is visible.
    ModelConfig(name="tiny-block", vocab_size=256, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2,
                ffn_dim=256, max_seq_len=128, source="course toy: byte vocabulary, d_model 64, 2 layers"),
    # Smallest config that still exercises GQA (g=2), RoPE (hd=8) and more than one layer.
    ModelConfig(name="test", vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64,
                max_seq_len=32, source="unit tests"),
)}


def get_config(name: str) -> ModelConfig:
    """The named configuration; an unknown name is a DFAError listing the valid ones."""
    try:
        return CONFIGS[name]
    except (KeyError, TypeError):
        raise unknown("model", name, CONFIGS) from None


# HF key -> (ModelConfig field, default or _REQUIRED)
_REQUIRED = object()
_HF_KEYS: dict[str, tuple[str, Any]] = {
    "vocab_size": ("vocab_size", _REQUIRED),
    "hidden_size": ("d_model", _REQUIRED),
    "num_hidden_layers": ("n_layers", _REQUIRED),
    "num_attention_heads": ("n_heads", _REQUIRED),
    "num_key_value_heads": ("n_kv_heads", None),
    "head_dim": ("head_dim", None),
    "intermediate_size": ("ffn_dim", _REQUIRED),
    "max_position_embeddings": ("max_seq_len", _REQUIRED),
    "rope_theta": ("rope_theta", 10000.0),
    "rms_norm_eps": ("norm_eps", 1e-6),  # transformers' LlamaConfig default
    "tie_word_embeddings": ("tie_embeddings", False),
}


def config_from_hf(path_or_dict: str | os.PathLike | Mapping[str, Any],
                   name: str | None = None) -> ModelConfig:
    """Read a Llama/Qwen2/Mistral-style Hugging Face ``config.json`` (a file, its folder, or a parsed dict).

    q/k/v biases: ``attention_bias`` if present, else on for ``model_type == "qwen2"`` (Qwen2 always has
    them). Missing optional keys take transformers' defaults; a missing required one is a DFAError.
    """
    if isinstance(path_or_dict, Mapping):
        raw, where = dict(path_or_dict), "<dict>"
    else:
        where = os.fspath(path_or_dict)
        if os.path.isdir(where):
            where = os.path.join(where, "config.json")
        try:
            with open(where, encoding="utf-8") as f:
                raw = json.load(f)
        except OSError as exc:
            raise DFAError(f"cannot read Hugging Face config {where!r}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise DFAError(f"{where!r} is not valid JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise DFAError(f"{where!r} is not a JSON object")
    act = raw.get("hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise DFAError(f"{where}: hidden_act {act!r} is not supported; valid: silu, swish")
    fields: dict[str, Any] = {}
    for key, (field, default) in _HF_KEYS.items():
        value = raw.get(key, default)
        if value is _REQUIRED:
            raise DFAError(f"{where}: missing required field {key!r}")
        fields[field] = value
    fields["qkv_bias"] = bool(raw.get("attention_bias", raw.get("model_type") == "qwen2"))
    if name is None:
        name = raw.get("_name_or_path") or (os.path.basename(os.path.dirname(os.path.abspath(where)))
                                           if where != "<dict>" else "hf-config")
    return ModelConfig(name=name, source=f"Hugging Face config.json: {where}", **fields)


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """The Hugging Face ``config.json`` keys for ``config`` (Llama-style; what ``config_from_hf`` reads)."""
    out = {key: getattr(config, field) for key, (field, _) in _HF_KEYS.items()}
    out.update(model_type="llama", hidden_act="silu", attention_bias=config.qkv_bias,
               _name_or_path=config.name)
    return out


def resolve_config(name_or_path: str | os.PathLike | ModelConfig) -> ModelConfig:
    """A ModelConfig passes through; a known name is looked up; an existing .json file or folder is read."""
    if isinstance(name_or_path, ModelConfig):
        return name_or_path
    if isinstance(name_or_path, str) and name_or_path in CONFIGS:
        return CONFIGS[name_or_path]
    if isinstance(name_or_path, (str, os.PathLike)):
        path = os.fspath(name_or_path)
        if os.path.isfile(path) or os.path.isfile(os.path.join(path, "config.json")):
            return config_from_hf(path)
    raise unknown("model", name_or_path, CONFIGS) from None

