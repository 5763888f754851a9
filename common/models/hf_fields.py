"""The vocabulary ``common.models.hf.config_from_hf`` reads Hugging Face configs with (data only, torch-free).

transformers has some two hundred causal-LM config classes and each names its fields its own way (GPT-2's
``n_embd``, MPT's ``d_model``, Llama's ``hidden_size``). The reader looks each ModelConfig number up under every
spelling listed here (``ALIASES``), maps the activation names to the ones the simulator costs (``ACTIVATIONS``),
and refuses, by the field that shows it, every architecture the decoder cannot express (``ARCHITECTURES``).
Checked against every causal-LM config class of transformers 5.25 by tests/test_hf_every_config.py.
"""

from __future__ import annotations

# ModelConfig field -> the config.json spellings of it, first found wins (checked against the class defaults)
ALIASES: dict[str, tuple[str, ...]] = {
    "vocab_size": ("vocab_size", "padded_vocab_size", "n_vocab"),
    "d_model": ("hidden_size", "n_embd", "d_model", "emb_dim", "model_dim", "embed_dim", "dim"),
    "n_layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "decoder_layers"),
    "n_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads",
                "decoder_attention_heads"),
    "n_kv_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "kv_n_heads", "num_query_groups"),
    "head_dim": ("head_dim", "attention_head_dim", "dim_head", "d_head", "kv_channels"),
    "ffn_dim": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim", "decoder_ffn_dim", "d_ff",
                "dim_ff", "dff", "d_inner", "feed_forward_size"),
    "max_seq_len": ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "n_ctx",
                    "max_sequence_length", "context_length"),
    "norm_eps": ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps", "eps"),
    "rope_theta": ("rope_theta", "rotary_emb_base"),
}
# Mixture of experts: every spelling of each number (where several are present they must agree)
MOE_ALIASES: dict[str, tuple[str, ...]] = {
    "n_experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "top_k": ("num_experts_per_tok", "experts_per_token", "num_experts_per_token", "moe_topk", "moe_k",
              "moe_top_k", "top_k_experts"),
    "expert_ffn_dim": ("moe_intermediate_size", "expert_intermediate_size"),
}
SHARED_COUNT = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")  # x the expert width
SHARED_WIDTH = ("shared_expert_intermediate_size", "shared_intermediate_size", "shared_experts_intermediate_size")
# Fields that make some layers dense MLPs in a mixture-of-experts model (DeepSeek, GLM-4.5, Llama 4, Qwen-MoE)
DENSE_LAYER_KEYS = ("first_k_dense_replace", "num_dense_layers", "num_dense_blocks", "mlp_only_layers",
                    "moe_layers", "mlp_layer_types", "decoder_sparse_step", "moe_layer_freq",
                    "interleave_moe_layer_step", "moe_layer_start_index", "moe_layer_interval")
DENSE_WIDTH = ("intermediate_size_mlp", "first_dense_intermediate_size", "dense_intermediate_size",
               "prefix_dense_intermediate_size")  # the dense layers' MLP width where it differs from the experts'
SLIDING_KEYS = ("sliding_window", "sliding_window_size", "attention_window_size", "local_attention",
                "attention_chunk_size", "window_size")

# activation field spellings; transformers' ACT2FN name -> the op the simulator costs (common/models/ffn.py)
ACT_KEYS = ("hidden_act", "hidden_activation", "activation_function", "activation", "afn", "ff_activation")
ACTIVATIONS = {
    "silu": "silu", "swish": "silu",
    "gelu": "gelu", "gelu_python": "gelu", "gelu_10": "gelu",
    "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
    "gelu_accurate": "gelu_tanh",
    "relu": "relu", "relu2": "relu2",
}
# Families whose MLP is up -> activation -> down with no gate (transformers' modeling files: their MLP has
# fc1/fc2, c_fc/c_proj or dense_h_to_4h, not gate_proj). config.json has no field that says so; the reader also
# takes GPT-2-style field names (UNGATED_KEYS) as that layout. Every other family is gated (gate * up).
# Checked for transformers 5.25 against each loaded family's modeling file (gate_proj / gate_up_proj / a chunk(2)).
UNGATED_TYPES = frozenset({
    "gpt2", "gpt-sw3", "gpt_bigcode", "gpt_neo", "gptj", "codegen", "gpt_neox", "gpt_neox_japanese", "openai-gpt",
    "ctrl", "opt", "bloom", "falcon", "mpt", "phi", "persimmon", "fuyu", "starcoder2", "nemotron", "biogpt",
    "xglm", "git", "arcee", "nanochat", "jais2", "xlm", "cpmant", "reformer", "trocr", "bert-generation", "ergo",
})
UNGATED_KEYS = ("n_inner", "n_embd", "afn", "dff", "ffn_dim", "decoder_ffn_dim", "d_inner")

# Architectures DecoderLM cannot express: (field, test of its value, why). The first that matches refuses the
# config in one line naming the field; they are classes of architecture, not model names.
_TRUE = bool


def _any(v) -> bool:
    return v not in (None, False, 0, "", [], {})


ARCHITECTURES: tuple[tuple[str, object, str], ...] = (
    ("is_encoder_decoder", _TRUE, "an encoder-decoder model (cross-attention to an encoder's output)"),
    ("type_vocab_size", _any, "a BERT-family encoder (token-type embeddings, bidirectional post-norm layers)"),
    ("is_encoder", _TRUE, "a bidirectional encoder"),
    ("encoder_config", _any, "a separate encoder model (byte-latent / patching transformer)"),
    ("mem_len", _any, "segment-recurrence memory (Transformer-XL / XLNet permutation attention)"),
    ("attn_layers", _any, "LSH / chunked local attention layers (Reformer)"),
    ("cross_attention_layers", _any, "cross-attention layers to an image encoder"),
    ("depth_decoder_config", _any, "a second (depth) decoder over audio codebooks"),
    ("kv_lora_rank", _any, "multi-head latent attention (a compressed KV cache of kv_lora_rank per token)"),
    ("q_lora_rank", _any, "multi-head latent attention (low-rank query projection)"),
    ("lru_width", _any, "recurrent (RG-LRU) blocks"),
    ("rescale_every", _any, "RWKV time-mixing recurrence instead of attention"),
    ("chunkwise_kernel", _any, "xLSTM matrix-memory recurrent cells instead of attention"),
    ("n_recurrent_layers", _any, "looped recurrent layers"),
    ("loop_num_passes", _any, "layers run several times in a loop"),
    ("H_cycles", _any, "hierarchical recurrent layer cycles"),
    ("state_size", _any, "state-space (Mamba) layers"),
    ("ssm_state_size", _any, "state-space (Mamba) layers"),
    ("mamba_d_state", _any, "state-space (Mamba) layers in a hybrid stack"),
    ("mamba_n_heads", _any, "state-space (Mamba-2) layers in a hybrid stack"),
    ("layers_block_type", _any, "a hybrid stack of attention and state-space layers"),
    ("hybrid_override_pattern", _any, "a hybrid stack of attention and state-space layers"),
    ("attn_layer_period", _any, "a hybrid stack of attention and state-space layers"),
    ("linear_conv_kernel_dim", _any, "linear-attention (gated delta-net) layers"),
    ("linear_num_key_heads", _any, "linear-attention layers"),
)
LAYER_TYPES_OK = ("full_attention", "sliding_attention", "chunked_attention")

IRRELEVANT = frozenset(
    {
        # identity and bookkeeping: which class, which library wrote it, the stored dtype (--dtype chooses ours)
        "architectures",
        "model_type",
        "_name_or_path",
        "transformers_version",
        "torch_dtype",
        "dtype",
        # token ids: the tokenizer's business
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "sep_token_id",
        "decoder_start_token_id",
        # training only: init, dropout, auxiliary router losses, Llama 2's tensor-parallel pretraining split;
        # use_cache: a forward-call default (decode always uses the KV cache here)
        "initializer_range",
        "attention_dropout",
        "router_aux_loss_coef",
        "output_router_logits",
        "router_jitter_noise",
        "aux_loss_alpha",
        "seq_aux",
        "pretraining_tp",
        "use_cache",
        # values, not ops or shapes: RoPE frequency remaps (Llama 3.1, gpt-oss YaRN and its base length),
        # gpt-oss's clamp of the SwiGLU inputs, re-normalising / scaling the top-k routing weights
        "rope_scaling",
        "initial_context_length",
        "swiglu_limit",
        "norm_topk_prob",
        "routed_scaling_factor",
        # generic PretrainedConfig fields a full to_dict() dump carries: task heads and generation defaults
        # (top_k here is the sampling parameter, not the experts per token)
        "return_dict",
        "output_hidden_states",
        "output_attentions",
        "torchscript",
        "pruned_heads",
        "chunk_size_feed_forward",
        "is_encoder_decoder",
        "is_decoder",
        "cross_attention_hidden_size",
        "add_cross_attention",
        "tie_encoder_decoder",
        "finetuning_task",
        "id2label",
        "label2id",
        "task_specific_params",
        "problem_type",
        "tokenizer_class",
        "prefix",
        "max_length",
        "min_length",
        "do_sample",
        "early_stopping",
        "num_beams",
        "num_beam_groups",
        "diversity_penalty",
        "temperature",
        "top_k",
        "top_p",
        "typical_p",
        "repetition_penalty",
        "length_penalty",
        "no_repeat_ngram_size",
        "encoder_no_repeat_ngram_size",
        "bad_words_ids",
        "num_return_sequences",
        "output_scores",
        "return_dict_in_generate",
        "forced_bos_token_id",
        "forced_eos_token_id",
        "remove_invalid_values",
        "exponential_decay_length_penalty",
        "suppress_tokens",
        "begin_suppress_tokens",
        "tf_legacy_loss",
        "use_bfloat16",
    }
)
# Name patterns of fields that never change the simulated ops or shapes: dropout, init, token ids, losses, the
# sequence-classification / generation heads (a substring anywhere in the name, or a name's end)
IRRELEVANT_PARTS = ("dropout", "pdrop", "initializer", "init_std", "_init", "loss", "layerdrop", "jitter")
IRRELEVANT_ENDS = ("_token_id", "_token_index", "_token_ids", "_id", "_index", "_eps", "epsilon")
IRRELEVANT_STARTS = ("summary_", "classifier_", "output_", "use_cache", "num_labels")
