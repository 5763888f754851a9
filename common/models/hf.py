"""Read and write Hugging Face ``config.json`` files: Llama / Qwen2 / Qwen3 / Mistral / Mixtral / gpt-oss style.

Every key of a config.json is in exactly one of these groups, or the file is refused with a one-line
DFAError naming the key (a field the loader silently dropped is how a Mixtral once loaded as a dense 7B):

* ``_HF_KEYS`` / ``_MOE_KEYS``  read into a ``ModelConfig`` field (several HF spellings for the MoE ones);
* ``_CHECKED``                  understood, and only some values are supported (others are a DFAError);
* ``_NOTED``                    understood, changes cost, not modelled: a sentence in ``ModelConfig.unmodelled``;
* ``_IRRELEVANT``               known not to change the simulated ops or shapes (the commented allow-list);
* ``rope_parameters``           transformers 5's home of ``rope_theta`` (read from there when the top level has none).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources
from typing import Any

from common.errors import DFAError
from common.models.hf_configs import LLM_HF, MOE_HF
from common.models.spec import ModelConfig

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
# ModelConfig field -> the HF spellings of it (if several are present they must agree)
_MOE_KEYS: dict[str, tuple[str, ...]] = {
    "n_experts": ("num_local_experts", "num_experts", "n_routed_experts"),  # Mixtral/gpt-oss, Qwen, DeepSeek
    "top_k": ("num_experts_per_tok", "experts_per_token"),  # transformers, gpt-oss's original name
    "expert_ffn_dim": ("moe_intermediate_size",),  # Qwen-MoE, DeepSeek; absent: intermediate_size
}
_SHARED_KEYS = ("n_shared_experts", "shared_expert_intermediate_size")  # DeepSeek (count), Qwen2-MoE (width)
# Read for defaults: q/k/v biases (qwen2), q/k RMSNorm (qwen3), expert and router biases (gpt_oss).
_QKV_BIAS_TYPES, _QK_NORM_TYPES, _BIASED_MOE_TYPES = ("qwen2", "qwen2_moe"), ("qwen3", "qwen3_moe"), ("gpt_oss",)
# Understood; a value other than the supported one is refused (the simulator would build the wrong layers).
_CHECKED = {
    "hidden_act": "SwiGLU with silu/swish",
    "attention_bias": "read as the q/k/v bias flag (gpt-oss's o_proj bias, C per layer, is not built)",
    "mlp_bias": "must be false: the SwiGLU MLP has no biases",
    "decoder_sparse_step": "must be 1: every layer is a mixture of experts",
    "mlp_only_layers": "must be empty: every layer is a mixture of experts",
    "first_k_dense_replace": "must be 0: every layer is a mixture of experts",
    "moe_layer_freq": "must be 1: every layer is a mixture of experts",
    "layer_types": "full_attention / sliding_attention per layer (see sliding_window)",
}
# transformers 5 writes rope_theta (and any rope_scaling remap) inside rope_parameters: read from there.
_ROPE_PARAMETERS = "rope_parameters"
# Understood, changes cost, not modelled: each adds a sentence to ModelConfig.unmodelled.
_NOTED = ("sliding_window", "use_sliding_window", "max_window_layers", "quantization_config")
_IRRELEVANT = frozenset(
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
KNOWN_FIELDS = frozenset(
    {*_HF_KEYS, *(k for ks in _MOE_KEYS.values() for k in ks), *_SHARED_KEYS, *_CHECKED, *_NOTED, *_IRRELEVANT,
     _ROPE_PARAMETERS}
)


def _read(path_or_dict) -> tuple[dict, str]:
    if isinstance(path_or_dict, Mapping):
        return dict(path_or_dict), "<dict>"
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
    return raw, where


def _one_of(raw: dict, keys: tuple[str, ...], where: str):
    values = {k: raw[k] for k in keys if raw.get(k) is not None}
    if len(set(map(repr, values.values()))) > 1:
        raise DFAError(f"{where}: {' and '.join(f'{k}={v!r}' for k, v in values.items())} disagree")
    return next(iter(values.values()), None)


def _moe_fields(raw: dict, where: str) -> dict[str, Any]:
    out = {f: _one_of(raw, keys, where) for f, keys in _MOE_KEYS.items()}
    out = {f: v for f, v in out.items() if v is not None}
    width = out.get("expert_ffn_dim") or raw.get("intermediate_size")
    if raw.get("shared_expert_intermediate_size"):
        out["shared_ffn_dim"] = raw["shared_expert_intermediate_size"]
    elif raw.get("n_shared_experts"):  # DeepSeek: n shared experts of the routed width, run as one MLP
        out["shared_ffn_dim"] = raw["n_shared_experts"] * width
    if out.get("n_experts"):
        for key, ok in (
            ("decoder_sparse_step", (None, 1)),
            ("first_k_dense_replace", (None, 0)),
            ("moe_layer_freq", (None, 1)),
            ("mlp_only_layers", (None, [])),
        ):
            if raw.get(key) not in ok:
                raise DFAError(
                    f"{where}: {key}={raw[key]!r} mixes dense and expert layers, which is not "
                    f"modelled; supported: {key}={ok[1]!r} ({_CHECKED[key]})"
                )
        if raw.get("model_type") in _BIASED_MOE_TYPES:
            out.update(expert_bias=True, router_bias=True)
    return out


def _unmodelled(raw: dict, n_layers: int, max_seq: int, where: str) -> tuple[str, ...]:
    notes = []
    types = raw.get("layer_types") or []
    bad = sorted({t for t in types if t not in ("full_attention", "sliding_attention")})
    if bad:
        raise DFAError(f"{where}: layer_types {bad[0]!r} is not modelled; valid: full_attention, sliding_attention")
    window = raw.get("sliding_window")
    if raw.get("use_sliding_window") is not False and window and window < max_seq:
        n = sum(t == "sliding_attention" for t in types) if types else n_layers
        notes.append(
            f"sliding-window attention (window {window}) on {n} of {n_layers} layers is simulated as "
            f"full attention: with more than {window} cached tokens their attention is over-counted"
        )
    q = raw.get("quantization_config")
    if q:
        method = q.get("quant_method", "?") if isinstance(q, Mapping) else q
        notes.append(
            f"the checkpoint's {method} quantization is not modelled: weights are simulated at the dtype asked for"
        )
    return tuple(notes)


def config_from_hf(
    path_or_dict: str | os.PathLike | Mapping[str, Any], name: str | None = None, source: str | None = None
) -> ModelConfig:
    """Read a Hugging Face ``config.json`` (a file, its folder, or a parsed dict) into a ``ModelConfig``.

    Dense Llama/Qwen2/Qwen3/Mistral-style and mixture-of-experts Mixtral/gpt-oss/Qwen-MoE-style configs.
    q/k/v biases: ``attention_bias`` if present, else on for Qwen2. Missing optional keys take transformers'
    defaults; a missing required one, or any key the loader does not know, is a DFAError naming it.
    """
    raw, where = _read(path_or_dict)
    for key in raw:
        if key not in KNOWN_FIELDS:
            raise DFAError(
                f"{where}: unknown config.json field {key!r} (neither read nor known to leave the "
                f"simulated ops unchanged); known: {', '.join(sorted(KNOWN_FIELDS))}"
            )
    act = raw.get("hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise DFAError(f"{where}: hidden_act {act!r} is not supported; valid: silu, swish")
    if raw.get("mlp_bias"):
        raise DFAError(f"{where}: mlp_bias={raw['mlp_bias']!r} is not modelled; supported: mlp_bias=false")
    fields: dict[str, Any] = {}
    for key, (field, default) in _HF_KEYS.items():
        value = raw.get(key, default)
        if value is _REQUIRED:
            raise DFAError(f"{where}: missing required field {key!r}")
        fields[field] = value
    rope = raw.get(_ROPE_PARAMETERS)
    if "rope_theta" not in raw and isinstance(rope, Mapping) and "rope_theta" in rope:
        fields["rope_theta"] = rope["rope_theta"]
    model_type = raw.get("model_type")
    fields["qkv_bias"] = bool(raw.get("attention_bias", model_type in _QKV_BIAS_TYPES))
    fields["qk_norm"] = model_type in _QK_NORM_TYPES
    fields.update(_moe_fields(raw, where))
    if name is None:
        name = raw.get("_name_or_path") or (
            os.path.basename(os.path.dirname(os.path.abspath(where))) if where != "<dict>" else "hf-config"
        )
    notes = _unmodelled(raw, fields["n_layers"], fields["max_seq_len"], where)
    return ModelConfig(name=name, source=source or f"Hugging Face config.json: {where}", unmodelled=notes, **fields)


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """The Hugging Face ``config.json`` keys for ``config`` (what ``config_from_hf`` reads back to it)."""
    out = {key: getattr(config, field) for key, (field, _) in _HF_KEYS.items()}
    if config.expert_bias != config.router_bias or (config.expert_bias and config.qk_norm):
        raise DFAError(
            f"model {config.name!r}: expert_bias={config.expert_bias}, router_bias={config.router_bias}, "
            f"qk_norm={config.qk_norm} has no config.json spelling; valid: expert and router biases together "
            f"without qk_norm (gpt_oss), or neither"
        )
    if config.expert_bias:
        model_type = "gpt_oss"
    elif config.qk_norm:
        model_type = "qwen3_moe" if config.is_moe else "qwen3"
    elif config.qkv_bias and not config.is_moe:  # Llama's attention_bias would bias o_proj too; Qwen2's does not
        model_type = "qwen2"
    else:
        model_type = "mixtral" if config.is_moe else "llama"
    out.update(model_type=model_type, hidden_act="silu", _name_or_path=config.name)
    if model_type != "qwen2":  # qwen2 has no such key: its q/k/v always carry biases
        out["attention_bias"] = config.qkv_bias
    if config.is_moe:
        out.update(num_local_experts=config.n_experts, num_experts_per_tok=config.top_k)
        if config.expert_ffn_dim:
            out["moe_intermediate_size"] = config.expert_ffn_dim
        if config.shared_ffn_dim:
            out["shared_expert_intermediate_size"] = config.shared_ffn_dim
    return out


MOE_CONFIGS: dict[str, ModelConfig] = {
    name: config_from_hf(raw, name=name, source=url) for name, (url, raw) in MOE_HF.items()
}


def bundled_config(name: str) -> dict[str, Any]:
    """The published config.json of a model ``common.models.load_llm`` knows (``LLM_HF``), as shipped."""
    if name not in LLM_HF:
        raise DFAError(f"unknown LLM {name!r}; valid: {', '.join(LLM_HF)}")
    text = resources.files("common.models").joinpath("configs", LLM_HF[name][2]).read_text("utf-8")
    return json.loads(text)


LLM_CONFIGS: dict[str, ModelConfig] = {
    name: config_from_hf(bundled_config(name), name=name,
                         source=f"https://huggingface.co/{hf_id}/blob/main/config.json")
    for name, (hf_id, _display, _file) in LLM_HF.items()
}
