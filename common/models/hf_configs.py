"""Published Hugging Face ``config.json`` files of mixture-of-experts models, as data (every key kept).

Each entry is (the config.json URL, its keys and values). They are read by ``common.models.hf.config_from_hf``
like any downloaded file, so a key the loader does not know fails the import instead of being dropped.
Values checked 2026-12-03 against independent copies of the same files found with the search tool (the
transformers-style test fixtures of TensorRT-LLM, llm-engine and others quote them verbatim):

* Mixtral-8x7B-v0.1: 8 experts, top 2, expert width 14336 (= intermediate_size); 46.7B total, 12.9B active
  (Jiang et al., "Mixtral of Experts", arXiv:2401.04088).
* gpt-oss-120b: 128 experts, top 4, width 2880; 36 layers alternating sliding (128) / full attention; MoE
  weights shipped in MXFP4; 116.8B total, 5.1B active (OpenAI gpt-oss model card, Aug 2025).
* Qwen3-30B-A3B: 128 experts, top 8, moe_intermediate_size 768, no shared expert, q/k RMSNorm;
  30.5B total, 3.3B active (Qwen3 model card).
"""

from __future__ import annotations


def _url(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


MOE_HF: dict[str, tuple[str, dict]] = {
    "mixtral-8x7b": (
        _url("mistralai/Mixtral-8x7B-v0.1"),
        {
            "architectures": ["MixtralForCausalLM"],
            "attention_dropout": 0.0,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "hidden_act": "silu",
            "hidden_size": 4096,
            "initializer_range": 0.02,
            "intermediate_size": 14336,
            "max_position_embeddings": 32768,
            "model_type": "mixtral",
            "num_attention_heads": 32,
            "num_experts_per_tok": 2,
            "num_hidden_layers": 32,
            "num_key_value_heads": 8,
            "num_local_experts": 8,
            "output_router_logits": False,
            "rms_norm_eps": 1e-05,
            "rope_theta": 1000000.0,
            "router_aux_loss_coef": 0.02,
            "sliding_window": None,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.36.0.dev0",
            "use_cache": True,
            "vocab_size": 32000,
        },
    ),
    "gpt-oss-120b": (
        _url("openai/gpt-oss-120b"),
        {
            "architectures": ["GptOssForCausalLM"],
            "attention_bias": True,
            "attention_dropout": 0.0,
            "eos_token_id": 200002,
            "experts_per_token": 4,
            "head_dim": 64,
            "hidden_act": "silu",
            "hidden_size": 2880,
            "initial_context_length": 4096,
            "initializer_range": 0.02,
            "intermediate_size": 2880,
            "layer_types": ["sliding_attention", "full_attention"] * 18,
            "max_position_embeddings": 131072,
            "model_type": "gpt_oss",
            "num_attention_heads": 64,
            "num_experts_per_tok": 4,
            "num_hidden_layers": 36,
            "num_key_value_heads": 8,
            "num_local_experts": 128,
            "output_router_logits": False,
            "pad_token_id": 199999,
            "quantization_config": {
                "modules_to_not_convert": [
                    "model.layers.*.self_attn",
                    "model.layers.*.mlp.router",
                    "model.embed_tokens",
                    "lm_head",
                ],
                "quant_method": "mxfp4",
            },
            "rms_norm_eps": 1e-05,
            "rope_scaling": {
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "factor": 32.0,
                "original_max_position_embeddings": 4096,
                "rope_type": "yarn",
                "truncate": False,
            },
            "rope_theta": 150000,
            "router_aux_loss_coef": 0.9,
            "sliding_window": 128,
            "swiglu_limit": 7.0,
            "tie_word_embeddings": False,
            "transformers_version": "4.55.0.dev0",
            "use_cache": True,
            "vocab_size": 201088,
        },
    ),
    "qwen3-30b-a3b": (
        _url("Qwen/Qwen3-30B-A3B"),
        {
            "architectures": ["Qwen3MoeForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": 151643,
            "decoder_sparse_step": 1,
            "eos_token_id": 151645,
            "head_dim": 128,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "initializer_range": 0.02,
            "intermediate_size": 6144,
            "max_position_embeddings": 40960,
            "max_window_layers": 48,
            "mlp_only_layers": [],
            "model_type": "qwen3_moe",
            "moe_intermediate_size": 768,
            "norm_topk_prob": True,
            "num_attention_heads": 32,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "num_hidden_layers": 48,
            "num_key_value_heads": 4,
            "output_router_logits": False,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 1000000.0,
            "router_aux_loss_coef": 0.001,
            "sliding_window": None,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.51.0",
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": 151936,
        },
    ),
}


# The models ``common.models.load_llm`` knows by name: (Hugging Face id, display name, the published config.json
# shipped in common/models/configs/, byte for byte, so that an offline machine builds the same architecture).
# qwen2.5-0.5b-instruct: checked 2026-12-05 against two independent verbatim copies found with the search tool
# (a fork's README quoting the file before editing it, and a checker pinning every key of the checkpoint);
# 494,032,768 parameters (tied head), the model card's 0.49B.
LLM_HF: dict[str, tuple[str, str, str]] = {
    "qwen2.5-0.5b-instruct": ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen2.5-0.5B-Instruct", "qwen2.5-0.5b-instruct.json"),
}
