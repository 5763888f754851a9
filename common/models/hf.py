"""Read and write Hugging Face ``config.json`` files of decoder-only LMs, whatever family wrote them.

``config_from_hf`` takes a file, its folder, a parsed dict or a transformers ``PretrainedConfig`` and:

1. refuses, in one line naming the field, an architecture ``DecoderLM`` cannot express (encoder-decoder,
   BERT-family encoders, state-space / recurrent / linear-attention layers, latent attention: the table
   ``hf_fields.ARCHITECTURES``), first on the whole config and then on its text part;
2. reads the text decoder: a nested ``text_config`` (Llama 4, Gemma 3, Qwen3.5, any vision-language wrapper)
   or, inside, ``attn_config`` / ``ffn_config`` (DBRX, MPT); the encoders beside it are not simulated (noted);
3. looks every ModelConfig number up under each of its spellings (``hf_fields.ALIASES``): GPT-2's ``n_embd``,
   MPT's ``d_model``, Llama's ``hidden_size`` ...; the activation by transformers' ACT2FN name
   (``gelu_pytorch_tanh`` -> gelu_tanh, ``relu2``, ``silu``/``swish``) and whether the MLP is gated;
4. reads mixture-of-experts numbers under every spelling (several present must agree), tied embeddings
   (the weight counted once: ``ModelConfig.n_params``) and an explicit ``head_dim``;
5. reads the layer pattern (``hf_layers``): sliding-window layers (``layer_types``, ``sliding_window``) and
   the dense layers of a mixture of experts (``first_k_dense_replace``, ``moe_layers``, ...), both simulated;
6. keeps what changes cost but is not simulated as sentences in ``ModelConfig.unmodelled`` (printed with every
   report): the sliding layers' prefill blocks, chunked attention as a window, quantization, MLP biases, and
   the list of fields it did not read. A field naming experts that it does not read refuses the config instead: a
   dropped expert count is how a Mixtral once loaded as a dense 7B.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources
from typing import Any

from common.errors import DFAError
from common.models import hf_fields as hff
from common.models.hf_configs import LLM_HF, MOE_HF
from common.models.hf_layers import dense_layers, get, sliding
from common.models.spec import ModelConfig

_TEXT_PARTS = ("text_config", "language_config", "llm_config")  # the decoder of a multimodal wrapper
_INNER_PARTS = ("attn_config", "ffn_config")  # DBRX / MPT: attention and MLP numbers one level down
_NO_POSITION_LIMIT = 131072  # ALiBi / relative positions have no table; the simulator needs a bound for checks
_QKV_BIAS_TYPES, _QK_NORM_TYPES, _BIASED_MOE_TYPES = ("qwen2", "qwen2_moe"), ("qwen3", "qwen3_moe"), ("gpt_oss",)
_QK_NORM_KEYS = ("use_qk_norm", "qk_layernorm", "qk_norm")
# Llama 4's MoE block always adds a shared expert of intermediate_size (Llama4TextMoe.shared_expert); no field
_SHARED_EXPERT_TYPES = ("llama4_text",)
# Read, but their values only change numbers, not ops or shapes (or are read by hand below).
_READ_BY_HAND = ("is_moe", "hidden_act", "attention_bias", "mlp_bias", "tie_word_embeddings", "rope_parameters",
                 "quantization_config", "use_sliding_window", "max_window_layers", "layer_types", "gelu_activation",
                 "expansion_ratio", "ffn_act_fn", *_QK_NORM_KEYS)
# MoE fields known to change values only (routing weights, losses, kernel choice), never the layer's shapes
_MOE_VALUES = ("moe_renormalize", "moe_norm_min", "moe_normalize_expert_weights", "moe_routed_scaling_factor",
               "enable_moe_fp32_combine", "expert_swiglu_limit_list", "share_expert_swiglu_limit_list",
               "shared_expert_combination_strategy", "expert_selection_fn", "moe_layer_end_index",
               "enable_moe_block", "moe_jitter_eps", "moe_loss_weight", "num_expert_group", "norm_topk_prob",
               "router_aux_loss_coef", "output_router_logits", "use_expert_bias")


def _read(path_or_dict) -> tuple[dict, str]:
    if isinstance(path_or_dict, Mapping):
        return dict(path_or_dict), "<dict>"
    if hasattr(path_or_dict, "to_dict") and hasattr(path_or_dict, "model_type"):  # a transformers config
        return path_or_dict.to_dict(), f"<{type(path_or_dict).__name__}>"
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


def _refuse_architecture(raw: dict, where: str) -> None:
    for key, test, why in hff.ARCHITECTURES:
        if key in raw and test(raw[key]):
            raise DFAError(f"{where}: {key}={_short(raw[key])} means {why}, which the simulated decoder-only "
                           f"LM (attention + MLP layers) does not model")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _text_part(raw: dict, where: str) -> tuple[dict, list[str]]:
    """The decoder's own fields: a nested text config (with the wrapper's tie flag where it has none), DBRX/MPT
    inner configs merged in; and a note per sub-model left out (vision towers, audio encoders)."""
    notes, part = [], raw
    for key in _TEXT_PARTS:
        if isinstance(raw.get(key), Mapping):
            part = dict(raw[key])
            if "tie_word_embeddings" in raw:
                part.setdefault("tie_word_embeddings", raw["tie_word_embeddings"])
            _refuse_architecture(part, f"{where} {key}")
            break
    others = sorted(k for k, v in raw.items() if isinstance(v, Mapping) and k.endswith("config")
                    and k not in (*_TEXT_PARTS, *_INNER_PARTS, "quantization_config", "rope_parameters"))
    if others:
        notes.append(f"only the text decoder is simulated: {', '.join(others)} (its encoders) left out")
    for key in _INNER_PARTS:
        if isinstance(part.get(key), Mapping):
            inner = {k: v for k, v in part[key].items() if k not in hff.IRRELEVANT}
            part = {**inner, **{k: v for k, v in part.items() if k != key}}
    return part, notes


def _one_of(raw: dict, keys: tuple[str, ...], where: str, used: set[str]):
    values = {k: raw[k] for k in keys if raw.get(k) is not None}
    used.update(k for k in keys if k in raw)
    values = {k: (v[0] if isinstance(v, list) and v and len(set(v)) == 1 else v) for k, v in values.items()}
    if len(set(map(repr, values.values()))) > 1:
        raise DFAError(f"{where}: {' and '.join(f'{k}={v!r}' for k, v in values.items())} disagree")
    return next(iter(values.values()), None)


def _activation(raw: dict, where: str, used: set[str], gated: bool, notes: list[str]) -> str:
    name = get(raw, hff.ACT_KEYS, used)
    if isinstance(raw.get("ffn_act_fn"), Mapping):  # DBRX: {"name": "silu"}
        name = raw["ffn_act_fn"].get("name", name)
    if name is None and "gelu_activation" in raw:  # XLM: a flag
        name = "gelu" if raw["gelu_activation"] else "relu"
    if name is None:  # hard-coded in the family's modeling file: Llama's SiLU, GPT-2's GELU (an assumption)
        name = "silu" if gated else "gelu"
        notes.append(f"no activation field in the config: {name} assumed (gated: SiLU as Llama; ungated: GELU "
                     f"as GPT-2)")
    if name not in hff.ACTIVATIONS:
        key = next((k for k in hff.ACT_KEYS if k in raw), "hidden_act")
        raise DFAError(f"{where}: {key} {name!r} is not modelled; valid: {', '.join(hff.ACTIVATIONS)}")
    return hff.ACTIVATIONS[name]


def _moe_fields(raw: dict, where: str, used: set[str]) -> dict[str, Any]:
    out = {f: _one_of(raw, keys, where, used) for f, keys in hff.MOE_ALIASES.items()}
    out = {f: v for f, v in out.items() if v is not None}
    if not out.get("n_experts"):
        return {}
    width = out.get("expert_ffn_dim") or raw.get("intermediate_size")
    shared_width = get(raw, hff.SHARED_WIDTH, used)
    shared_count = get(raw, hff.SHARED_COUNT, used)
    if shared_width:
        out["shared_ffn_dim"] = shared_width * (shared_count or 1) if "shared_intermediate_size" not in raw \
            else shared_width
    elif shared_count:  # DeepSeek: n shared experts of the routed width, run as one MLP
        out["shared_ffn_dim"] = shared_count * width
    elif raw.get("model_type") in _SHARED_EXPERT_TYPES:
        out["shared_ffn_dim"] = raw["intermediate_size"]
    out.setdefault("top_k", 1)  # a router that names no k picks one expert (Switch)
    if raw.get("model_type") in _BIASED_MOE_TYPES:
        out.update(expert_bias=True, router_bias=True)
    return out


def _unread_note(raw: dict, used: set[str], where: str, moe: bool) -> list[str]:
    left = []
    for key, value in raw.items():
        if key in used or key in hff.IRRELEVANT or key in _READ_BY_HAND or key in _MOE_VALUES:
            continue
        if value in (None, False, [], {}, "") or isinstance(value, Mapping):
            continue  # a feature switched off; sub-configs are noted by _text_part
        low = key.lower()
        if any(p in low for p in hff.IRRELEVANT_PARTS) or low.endswith(hff.IRRELEVANT_ENDS) \
                or low.startswith(hff.IRRELEVANT_STARTS):
            continue
        if "expert" in low or "moe" in low:
            raise DFAError(f"{where}: unknown config.json field {key!r}={_short(value)}: a mixture-of-experts "
                           f"setting this loader does not read; read: {', '.join(sorted(_moe_keys()))}")
        left.append(key)
    if not left:
        return []
    return [f"config fields not read (their effect on cost, if any, is not simulated): {', '.join(sorted(left))}"]


def _moe_keys() -> set[str]:
    return {k for ks in hff.MOE_ALIASES.values() for k in ks} | set(hff.SHARED_COUNT) | set(hff.SHARED_WIDTH) \
        | set(hff.DENSE_LAYER_KEYS)


def config_from_hf(
    path_or_dict: str | os.PathLike | Mapping[str, Any], name: str | None = None, source: str | None = None
) -> ModelConfig:
    """Read a Hugging Face config (a ``config.json``, its folder, a dict or a ``PretrainedConfig``) into a
    ``ModelConfig``; an architecture it cannot express, a missing size or a bad value is a one-line DFAError.

    Defaults where a family's config has no field: n_kv_heads = n_heads, head_dim = d_model / n_heads,
    intermediate size = 4 d_model (GPT-2's ratio, noted), q/k/v biases from ``attention_bias`` (on for Qwen2).
    """
    top, where = _read(path_or_dict)
    _refuse_architecture(top, where)
    raw, notes = _text_part(top, where)
    used: set[str] = set()
    fields: dict[str, Any] = {}
    for field, keys in hff.ALIASES.items():
        fields[field] = get(raw, keys, used)
    for field, value in fields.items():  # a per-layer list (Gemma 3n's widths) is one number if all agree
        if isinstance(value, list):
            if len(set(value)) != 1:
                key = next(k for k in hff.ALIASES[field] if raw.get(k) is not None)
                raise DFAError(f"{where}: {key}={_short(value)} differs per layer, which is not modelled; "
                               f"valid: one {key} for every layer")
            fields[field] = value[0]
    for field in ("vocab_size", "d_model", "n_layers", "n_heads"):
        if fields[field] is None:
            raise DFAError(f"{where}: missing required field {hff.ALIASES[field][0]!r} "
                           f"(also read as {', '.join(hff.ALIASES[field][1:])})")
    if raw.get("multi_query") and fields["n_kv_heads"] is None:  # Falcon / StarCoder: one K/V head
        fields["n_kv_heads"] = 1
    used.update(k for k in ("multi_query", "new_decoder_architecture") if k in raw)
    if fields["ffn_dim"] is None:
        ratio = raw.get("expansion_ratio") or 4
        fields["ffn_dim"] = int(ratio * fields["d_model"])
        notes.append(f"no MLP width in the config: {ratio} x hidden_size = {fields['ffn_dim']} (the family's ratio)")
    if fields["max_seq_len"] is None:
        fields["max_seq_len"] = _NO_POSITION_LIMIT
        notes.append(f"no position limit in the config (ALiBi / relative positions): {_NO_POSITION_LIMIT} allowed")
    rope = raw.get("rope_parameters")
    if fields["rope_theta"] is None:
        fields["rope_theta"] = rope["rope_theta"] if isinstance(rope, Mapping) and "rope_theta" in rope else 1e4
    fields["norm_eps"] = 1e-6 if fields["norm_eps"] is None else fields["norm_eps"]  # LlamaConfig's default
    model_type = raw.get("model_type") or top.get("model_type")
    fields["tie_embeddings"] = bool(raw.get("tie_word_embeddings", False))
    fields["qkv_bias"] = bool(raw.get("attention_bias", raw.get("qkv_bias", model_type in _QKV_BIAS_TYPES)))
    used.update(k for k in ("attention_bias", "qkv_bias") if k in raw)
    fields["qk_norm"] = model_type in _QK_NORM_TYPES or any(bool(raw.get(k)) for k in _QK_NORM_KEYS)
    fields["gated_mlp"] = model_type not in hff.UNGATED_TYPES and not any(k in raw for k in hff.UNGATED_KEYS)
    fields["activation"] = _activation(raw, where, used, fields["gated_mlp"], notes)
    if raw.get("mlp_bias"):
        notes.append("MLP biases (mlp_bias) are not built: F + C parameters per MLP left out")
    if raw.get("block_auto_adjust_ff_dim"):  # LFM2: the MLP is 2/3 of intermediate_size, scaled and rounded up
        f = int(2 * fields["ffn_dim"] / 3)
        if raw.get("block_ffn_dim_multiplier") is not None:
            step = raw.get("block_multiple_of") or 1
            f = -(-int(raw["block_ffn_dim_multiplier"] * f) // step) * step
        fields["ffn_dim"] = f
    used.update(k for k in ("block_auto_adjust_ff_dim", "block_ffn_dim_multiplier", "block_multiple_of") if k in raw)
    moe = {} if raw.get("is_moe") is False else _moe_fields(raw, where, used)  # Doge: experts listed, switched off
    if raw.get("is_moe") is False:
        used.update(k for ks in hff.MOE_ALIASES.values() for k in ks if k in raw)
    fields.update(moe)
    if moe:
        fields["dense_layers"] = dense_layers(raw, fields["n_layers"], used)
        dense_width = get(raw, hff.DENSE_WIDTH, used)
        if dense_width:  # Llama 4, Ergo: intermediate_size is the experts' width, this one the dense layers'
            fields["expert_ffn_dim"] = fields.get("expert_ffn_dim") or fields["ffn_dim"]
            fields["ffn_dim"] = dense_width
    window, window_notes = sliding(raw, fields["n_layers"], fields["max_seq_len"], where, used)
    fields.update(window)
    notes += window_notes
    q = raw.get("quantization_config") or top.get("quantization_config")
    if q:
        method = q.get("quant_method", "?") if isinstance(q, Mapping) else q
        notes.append(f"the checkpoint's {method} quantization is not modelled: weights are simulated at the "
                     f"dtype asked for")
    notes += _unread_note(raw, used, where, bool(moe))
    if name is None:
        name = top.get("_name_or_path") or (
            os.path.basename(os.path.dirname(os.path.abspath(where))) if not where.startswith("<")
            else (model_type or "hf-config"))
    return ModelConfig(name=name, source=source or f"Hugging Face config.json: {where}", unmodelled=tuple(notes),
                       **fields)


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """The Hugging Face ``config.json`` keys for ``config`` (what ``config_from_hf`` reads back to it)."""
    out = {keys[0]: getattr(config, field) for field, keys in hff.ALIASES.items()}
    out["rms_norm_eps"], out["tie_word_embeddings"] = out.pop("rms_norm_eps"), config.tie_embeddings
    if not config.gated_mlp:
        raise DFAError(f"model {config.name!r}: an ungated MLP has no config.json spelling here; valid: "
                       f"gated_mlp=True (write a family's own config for GPT-2-style MLPs)")
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
    act = {v: k for k, v in hff.ACTIVATIONS.items() if k != "swish"}  # the first ACT2FN name of each
    act["gelu_tanh"] = "gelu_pytorch_tanh"
    out.update(model_type=model_type, hidden_act=act[config.activation], _name_or_path=config.name)
    if model_type != "qwen2":  # qwen2 has no such key: its q/k/v always carry biases
        out["attention_bias"] = config.qkv_bias
    if config.sliding_layers:
        out["sliding_window"] = config.sliding_window
        out["layer_types"] = ["sliding_attention" if config.is_sliding(i) else "full_attention"
                              for i in range(config.n_layers)]
    if config.dense_layers:
        out["mlp_only_layers"] = list(config.dense_layers)
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
