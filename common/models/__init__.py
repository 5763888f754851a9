"""Reference models built locally from architecture numbers: no downloads, seeded random weights.

- ``TinyTransformerBlock``: one GPT-style block (LayerNorm, MHA, GELU MLP) that ``symbolic_trace`` accepts.
- ``DecoderLM``: Llama/Qwen2-style LM (RMSNorm, GQA + RoPE, SwiGLU) with a preallocated ``KVCache``.
- ``MoE``: its mixture-of-experts MLP (router, top-k ``Experts``, shared expert), ``ExpectedLoad`` and
  ``expected_experts`` (how many experts a batch touches).
- ``ModelConfig`` / ``CONFIGS`` / ``get_config``: named architectures from public Hugging Face config.json.
- ``build_model`` (real, meta or fake), ``build_block``, ``step_inputs`` (prefill / decode arguments).
"""
from common.models.block import TinyTransformerBlock
from common.models.build import PHASES, build_block, build_model, fake_mode_of, step_inputs
from common.models.config import (
    CONFIGS,
    ModelConfig,
    config_from_hf,
    config_to_hf,
    get_config,
    resolve_config,
)
from common.models.decoder import (
    Attention,
    DecoderLayer,
    DecoderLM,
    KVCache,
    RMSNorm,
    SwiGLU,
    apply_rope,
    rope_tables,
)
from common.models.moe import ExpectedLoad, Experts, MoE, expected_experts

__all__ = [
    "CONFIGS", "PHASES", "Attention", "DecoderLM", "DecoderLayer", "ExpectedLoad", "Experts", "KVCache", "MoE",
    "ModelConfig", "RMSNorm", "SwiGLU", "TinyTransformerBlock", "apply_rope", "build_block", "build_model",
    "config_from_hf", "config_to_hf", "expected_experts", "fake_mode_of", "get_config", "resolve_config",
    "rope_tables", "step_inputs",
]
