"""Reference models built locally from architecture numbers: no downloads, seeded random weights.

- ``TinyTransformerBlock``: one GPT-style block (LayerNorm, MHA, GELU MLP) that ``symbolic_trace`` accepts.
- ``DecoderLM``: Llama/Qwen2-style LM (RMSNorm, GQA + RoPE, SwiGLU) with a preallocated ``KVCache``.
- ``MoE``: its mixture-of-experts MLP (router, top-k ``Experts``, shared expert), ``ExpectedLoad`` and
  ``expected_experts`` (how many experts a batch touches).
- ``ModelConfig`` / ``CONFIGS`` / ``get_config``: named architectures from public Hugging Face config.json.
- ``config_from_hf``: any transformers decoder config (a config.json, a dict or a ``PretrainedConfig``) as a
  ``ModelConfig``, or a one-line refusal naming the field of an architecture it cannot express.
- ``build_model`` (real, meta or fake), ``build_block``, ``step_inputs`` (prefill / decode arguments).
- ``load_llm`` / ``LLM`` / ``LLMS``: the labs' transformers LLM (Qwen2.5-0.5B-Instruct): the published weights
  from the Hub or, offline, seeded random weights on its published config.json (its name is in ``CONFIGS``).

The configurations (``common.models.config``) import no torch, so that ``dfa simulate`` can check a model
name at once; the torch modules load on first use of one of their names (PEP 562 ``__getattr__``).

May import: no other package.
"""
import importlib

from common.models.config import (
    CONFIGS,
    ModelConfig,
    config_from_hf,
    config_to_hf,
    get_config,
    resolve_config,
)

# name -> the module that defines it (imported, with torch, on first access)
_LAZY = {
    "TinyTransformerBlock": "block",
    "PHASES": "build", "build_block": "build", "build_model": "build", "decoder_from_hf": "build",
    "fake_mode_of": "build",
    "step_inputs": "build",
    "Attention": "decoder", "DecoderLayer": "decoder", "DecoderLM": "decoder", "KVCache": "decoder",
    "RMSNorm": "decoder", "SwiGLU": "decoder", "apply_rope": "decoder", "rope_tables": "decoder",
    "ExpectedLoad": "moe", "Experts": "moe", "MoE": "moe", "expected_experts": "moe",
    "LLM": "llm", "LLMS": "llm", "TokenIdsOnly": "llm", "load_llm": "llm",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "CONFIGS", "LLM", "LLMS", "PHASES", "Attention", "DecoderLM", "DecoderLayer", "ExpectedLoad", "Experts",
    "KVCache", "MoE", "ModelConfig", "RMSNorm", "SwiGLU", "TinyTransformerBlock", "TokenIdsOnly", "apply_rope",
    "build_block", "build_model", "config_from_hf", "config_to_hf", "decoder_from_hf", "expected_experts",
    "fake_mode_of", "get_config", "load_llm", "resolve_config", "rope_tables", "step_inputs"
]
