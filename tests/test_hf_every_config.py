"""Every causal-LM config class of the installed transformers, built from its defaults, loads or is refused.

The classes come from transformers' own registry (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` -> ``CONFIG_MAPPING``),
not a hand list, so a transformers upgrade brings its new families in. Each default config is read by
``config_from_hf`` and either becomes a ``ModelConfig`` that ``simulate_llm`` answers on all five backends
(shapes only: no model, no weights), or is refused in ONE line that names the config field showing the
architecture the decoder cannot express. ``pytest -s`` prints the census (what loads, refusals by reason).
"""
from __future__ import annotations

import collections
import dataclasses
import re
import warnings

import pytest

from common.errors import DFAError
from common.models import ModelConfig, config_from_hf
from common.models.hf_fields import ACT_KEYS
from common.sim import simulate_llm
from common.sim.report import Report

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # noqa: E402

BACKENDS = ("gpu", "tpu", "wse", "lpu", "spyre")


def _defaults():
    """model_type -> its config class built with no arguments, or the exception transformers itself raised."""
    out = {}
    transformers.logging.set_verbosity_error()  # defaults whose token ids lie outside the vocabulary warn
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
            try:
                out[model_type] = CONFIG_MAPPING[model_type]()
            except Exception as exc:  # a class whose own defaults do not validate (transformers' business)
                out[model_type] = exc
    return out


def _keys(raw: dict) -> set[str]:
    """Every field name of a config dict, nested sub-configs included."""
    keys = {k for k in raw if isinstance(k, str)}
    for key, value in raw.items():
        if isinstance(value, dict) and key not in ("id2label", "label2id"):
            keys |= _keys(value)
    return keys


def _named_field(message: str, raw: dict) -> str | None:
    """The config field a refusal names: ``field=value``, ``field 'value'`` or ``field 'name'``."""
    for key in sorted(_keys(raw) | set(ACT_KEYS), key=len, reverse=True):
        if re.search(rf"(?<![\w]){re.escape(key)}(=| '|' )", message) or f"field {key!r}" in message:
            return key
    return None


@pytest.fixture(scope="module")
def census():
    loaded, refused, unbuildable = {}, {}, {}
    for model_type, cfg in _defaults().items():
        if isinstance(cfg, Exception):
            unbuildable[model_type] = type(cfg).__name__
            continue
        try:
            loaded[model_type] = (config_from_hf(cfg), cfg)
        except DFAError as exc:
            refused[model_type] = (str(exc), cfg)
    by_reason = collections.defaultdict(list)
    for model_type, (msg, cfg) in refused.items():
        by_reason[_named_field(msg, cfg.to_dict())].append(model_type)
    print(f"\ntransformers {transformers.__version__}: {len(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)} causal-LM "
          f"config classes, {len(loaded)} load, {len(refused)} refused, {len(unbuildable)} whose own defaults "
          f"do not build: {unbuildable}")
    for field, types in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        print(f"  refused by {field} ({len(types)}): {', '.join(sorted(types))}")
    return loaded, refused, unbuildable


def test_the_registry_is_read_not_a_hand_list(census):
    loaded, refused, unbuildable = census
    assert len(loaded) + len(refused) + len(unbuildable) == len(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    # the families the brief names load: Gemma's GeGLU, Llama 4's and Gemma 3's nested text_config
    for model_type in ("llama", "gemma", "gemma3", "llama4", "gpt2", "mixtral"):
        if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
            assert model_type in loaded, refused.get(model_type)
    assert loaded["gemma"][0].activation == "gelu_tanh" and loaded["gemma"][0].gated_mlp
    assert loaded["gpt2"][0].activation == "gelu_tanh" and not loaded["gpt2"][0].gated_mlp
    assert loaded["llama4"][0].is_moe  # read from text_config, not the wrapper's top level


def test_each_refusal_is_one_line_naming_a_field(census):
    _, refused, _ = census
    for model_type, (msg, cfg) in refused.items():
        assert "\n" not in msg, model_type
        assert _named_field(msg, cfg.to_dict()) is not None, f"{model_type}: {msg}"


def test_a_planted_architecture_is_refused_by_its_field():
    # a Llama with a latent-attention rank is not a Llama: the field is named, whatever the model_type says
    raw = {**CONFIG_MAPPING["llama"]().to_dict(), "kv_lora_rank": 512}
    with pytest.raises(DFAError, match="kv_lora_rank=512 means multi-head latent attention"):
        config_from_hf(raw)
    with pytest.raises(DFAError, match="state_size=16 means state-space"):
        config_from_hf({**CONFIG_MAPPING["llama"]().to_dict(), "state_size": 16})


def test_every_loaded_config_runs_on_every_backend(census):
    loaded, _, _ = census
    answered = collections.Counter()
    for model_type, (config, _cfg) in loaded.items():
        assert isinstance(config, ModelConfig)
        seq = min(16, config.max_seq_len - 1)
        for backend in BACKENDS:
            try:
                report = simulate_llm(config, backend, phase="decode", batch=1, seq=seq)
            except DFAError as exc:  # too big for the most chips a backend has, heads that do not split
                assert "\n" not in str(exc), (model_type, backend)
                continue
            assert isinstance(report, Report) and report.time_s > 0, (model_type, backend)
            answered[backend] += 1
        assert config.n_params > 0
    for backend in BACKENDS:  # most default configs are 1-10B: every backend answers most of them
        assert answered[backend] > len(loaded) // 2, (backend, answered)


def test_tied_embeddings_are_counted_once(census):
    loaded, _, _ = census
    tied = [c for c, _ in loaded.values() if c.tie_embeddings]
    assert tied
    for config in tied[:5]:
        untied = dataclasses.replace(config, tie_embeddings=False)
        assert untied.n_params - config.n_params == config.vocab_size * config.d_model
