"""Architecture numbers for the reference decoder LM, and where they come from.

A ``ModelConfig`` holds only what the ops and shapes depend on. Named dense configurations copy the public
Hugging Face ``config.json`` of each model field by field; the mixture-of-experts ones (Mixtral-8x7B,
gpt-oss-120b, Qwen3-30B-A3B) are kept as their config.json dicts (``common.models.hf_configs``) and read by
``config_from_hf`` (``common.models.hf``), which refuses any field it does not know.
Not modelled (they change values, not ops or shapes): Llama 3.1's ``rope_scaling`` frequency remap.
Sliding-window layers (gpt-oss) are built and simulated (``ModelConfig.sliding_layers``); features that do
change cost but are not modelled (their prefill's masked blocks, MXFP4 weights) are listed in
``ModelConfig.unmodelled`` and printed with every report.
"""
from __future__ import annotations

import os

from common.errors import unknown
from common.models.hf import LLM_CONFIGS, MOE_CONFIGS, config_from_hf, config_to_hf
from common.models.spec import ModelConfig


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


CONFIGS: dict[str, ModelConfig] = {c.name: c for c in (
    ModelConfig(name="qwen2.5-0.5b", vocab_size=151936, d_model=896, n_layers=24, n_heads=14, n_kv_heads=2,
                ffn_dim=4864, max_seq_len=32768, rope_theta=1e6, norm_eps=1e-6, tie_embeddings=True,
                qkv_bias=True, source=_hf("Qwen/Qwen2.5-0.5B")),
    ModelConfig(name="llama-2-7b", vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32,
                ffn_dim=11008, max_seq_len=4096, rope_theta=1e4, norm_eps=1e-5,
                source=_hf("meta-llama/Llama-2-7b-hf")),
    ModelConfig(name="llama-2-13b", vocab_size=32000, d_model=5120, n_layers=40, n_heads=40, n_kv_heads=40,
                ffn_dim=13824, max_seq_len=4096, rope_theta=1e4, norm_eps=1e-5,
                source=_hf("meta-llama/Llama-2-13b-hf")),
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


CONFIGS.update(MOE_CONFIGS)
CONFIGS.update(LLM_CONFIGS)  # the labs' LLM (common.models.load_llm), by the same name
__all__ = ["CONFIGS", "ModelConfig", "config_from_hf", "config_to_hf", "get_config", "resolve_config"]
