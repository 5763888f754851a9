"""common.models.load_llm: the labs' transformers LLM, offline (random weights, bundled config) and real
(a checkpoint written by save_pretrained: from_pretrained on a folder needs no network)."""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from common.errors import DFAError
from common.models import CONFIGS, LLMS, config_from_hf, load_llm
from common.models import llm as llm_module
from common.models.hf import bundled_config

transformers = pytest.importorskip("transformers")

VOCAB = 280  # the model's vocabulary; the tokenizer below has fewer tokens (a byte-level BPE of ~275)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A 2-layer Qwen2 and a small byte-level BPE tokenizer, saved the way the Hub's files are laid out."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("tiny-qwen2")
    raw = {**bundled_config("qwen2.5-0.5b-instruct"), "hidden_size": 32, "intermediate_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": VOCAB,
           "max_position_embeddings": 64, "bos_token_id": 0, "eos_token_id": 0}
    for key in ("torch_dtype", "transformers_version"):
        raw.pop(key)
    torch.manual_seed(3)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(**raw)).save_pretrained(path)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["the cat sat on a mat", "the dog ran"] * 10, vocab_size=VOCAB, min_frequency=1,
                            special_tokens=["<|endoftext|>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>")
    assert len(tokenizer) <= VOCAB
    tokenizer.save_pretrained(path)
    return path


def _state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# ---------------------------------------------------------------- offline: random weights, bundled config


def test_bundled_config_is_the_published_one():
    raw = bundled_config("qwen2.5-0.5b-instruct")
    # the published architecture (model card: 24 layers, 14 Q / 2 KV heads, tied embeddings, 0.49B parameters)
    assert (raw["num_hidden_layers"], raw["num_attention_heads"], raw["num_key_value_heads"]) == (24, 14, 2)
    cfg = CONFIGS["qwen2.5-0.5b-instruct"]
    assert cfg.n_params == 494_032_768 and cfg.qkv_bias and cfg.tie_embeddings
    assert "huggingface.co/Qwen/Qwen2.5-0.5B-Instruct" in cfg.source
    # the same architecture as the base model's config the simulator already knew
    assert dataclasses.replace(CONFIGS["qwen2.5-0.5b"], name=cfg.name, source=cfg.source) == cfg
    assert set(LLMS) <= set(CONFIGS)


@pytest.fixture(scope="module")
def offline():
    """The labs' LLM as CI builds it: 2 of 24 layers, random weights (seed 0)."""
    before = torch.random.get_rng_state()
    llm = load_llm("qwen2.5-0.5b-instruct", layers=2, offline=True)
    assert torch.equal(torch.random.get_rng_state(), before)  # seeded privately: the global RNG is left alone
    return llm


def test_offline_builds_the_transformers_class_with_random_weights(offline):
    llm = offline
    assert type(llm.model).__name__ == "Qwen2ForCausalLM"
    assert llm.model.config.num_hidden_layers == 2 and len(llm.model.model.layers) == 2
    assert (llm.weights, llm.layers, llm.total_layers) == ("random", 2, 24)
    assert llm.label == "Qwen2.5-0.5B-Instruct (2 of 24 layers, random weights)"
    # the project's ModelConfig describes exactly what was built: simulate the same model
    assert llm.config.n_layers == 2
    assert sum(p.numel() for p in llm.model.parameters()) == llm.config.n_params
    assert not llm.has_tokenizer and not llm.model.training


def test_offline_seed_decides_the_weights(offline):
    ours = _state(offline.model)
    other = _state(load_llm(layers=1, offline=True, seed=1).model)
    key = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(ours[key], other[key])
    # the same seed: the same draw (rounded to bf16 here); the first layers are the same for any layer count
    half = load_llm(layers=2, offline=True, seed=0, dtype=torch.bfloat16)
    assert half.model.dtype == torch.bfloat16
    for name, value in _state(half.model).items():
        assert torch.equal(value, ours[name].to(torch.bfloat16)), name
    one = _state(load_llm(layers=1, offline=True, seed=0).model)
    assert one.keys() < ours.keys() and all(torch.equal(one[k], ours[k]) for k in one)


def test_offline_init_follows_transformers_rules(offline):
    """N(0, initializer_range) weights, zero biases, unit norms, lm_head tied to the embedding."""
    model, std = offline.model, offline.model.config.initializer_range
    emb = model.model.embed_tokens.weight
    assert model.lm_head.weight is emb and abs(emb.std().item() - std) < 1e-3 * std * 10
    layer = model.model.layers[0]
    assert torch.count_nonzero(layer.self_attn.q_proj.bias) == 0
    assert torch.equal(layer.input_layernorm.weight, torch.ones_like(layer.input_layernorm.weight))
    assert torch.isfinite(model.model.rotary_emb.inv_freq).all()  # buffers are built, not left uninitialised


def test_offline_takes_token_ids_and_refuses_text(offline):
    llm = offline
    out = llm.generate([3, 1, 4], max_new_tokens=2)
    assert out.shape == (1, 5) and out[0, :3].tolist() == [3, 1, 4]
    logits = llm.model(llm.input_ids(torch.tensor([[5, 9]]))).logits
    assert logits.shape == (1, 2, 151936) and torch.isfinite(logits).all()
    with pytest.raises(DFAError, match=r"no tokenizer here \(random weights, offline\): pass token ids") as err:
        llm.generate("hello")
    assert "\n" not in str(err.value)
    with pytest.raises(DFAError, match=r"token ids must lie in \[0, 151936\)"):
        llm.input_ids([151936])


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(DFAError, match=r"unknown LLM 'qwen9'; valid: qwen2.5-0.5b-instruct"):
        load_llm("qwen9", offline=True)
    for bad in (0, 25, 2.0, True):
        with pytest.raises(DFAError, match=r"layers must be an int from 1 to 24 .* got"):
            load_llm(layers=bad, offline=True)
    with pytest.raises(DFAError, match="offline must be None, True or False"):
        load_llm(offline="yes")


# ---------------------------------------------------------------- when to go offline


def test_offline_env_reads_the_cache_and_falls_back_to_random(monkeypatch, capsys):
    calls = []

    def nothing_cached(source, layers, dtype, device, local_only):
        calls.append((source, local_only))
        raise OSError("not in the cache")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(llm_module, "_pretrained", nothing_cached)
    llm = load_llm(layers=1)
    assert calls == [("Qwen/Qwen2.5-0.5B-Instruct", True)]  # the cache only: no network
    assert llm.weights == "random"
    out = capsys.readouterr().out.strip().splitlines()  # one line says so
    assert out == ["load_llm: Qwen2.5-0.5B-Instruct has RANDOM weights (seed 0; HF_HUB_OFFLINE is set, and nothing "
                   "cached): outputs are meaningless, shapes and costs are the real model's; pass token ids, "
                   "not text"]


def test_unreachable_hub_falls_back_after_one_short_request(monkeypatch, capsys):
    import huggingface_hub

    asked = []

    def no_network(repo_id, timeout=None, **_):
        asked.append((repo_id, timeout))
        raise ConnectionError("Name or service not known")

    for var in llm_module._OFFLINE_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(huggingface_hub, "model_info", no_network)
    monkeypatch.setattr(llm_module, "_pretrained", lambda *a, **k: (_ for _ in ()).throw(OSError("no files")))
    llm = load_llm(layers=1)
    assert asked == [("Qwen/Qwen2.5-0.5B-Instruct", llm_module.HUB_TIMEOUT_S)] and llm_module.HUB_TIMEOUT_S <= 10
    assert llm.weights == "random"
    assert "the Hugging Face Hub did not answer (ConnectionError)" in capsys.readouterr().out
    with pytest.raises(DFAError, match=r"cannot load the weights of Qwen2.5-0.5B-Instruct .*no files"):
        load_llm(layers=1, offline=False)


# ---------------------------------------------------------------- real weights (a local checkpoint)


def test_local_checkpoint_loads_real_weights_and_tokenizer(checkpoint, capsys):
    from transformers import AutoModelForCausalLM

    saved = _state(AutoModelForCausalLM.from_pretrained(checkpoint))
    llm = load_llm(checkpoint)
    assert "RANDOM" not in capsys.readouterr().out
    assert (llm.weights, llm.layers, llm.total_layers) == ("real", 2, 2)
    assert llm.label == f"{checkpoint.name} (2 layers, real weights)"
    got = _state(llm.model)
    assert all(torch.equal(got[k], saved[k]) for k in saved)
    ids = llm.input_ids("the cat sat")  # (1, T) through the checkpoint's own tokenizer
    assert llm.has_tokenizer and ids.shape[0] == 1 and llm.tokenizer.decode(ids[0]) == "the cat sat"
    text = llm.generate("the cat", max_new_tokens=3)
    assert isinstance(text, str)
    expected = llm.model.generate(llm.input_ids("the cat"), max_new_tokens=3, do_sample=False)
    assert text == llm.tokenizer.decode(expected[0, ids.shape[1] - 1:], skip_special_tokens=True)
    # the project's reading of the same config.json (transformers 5 writes rope_theta in rope_parameters)
    assert llm.config == config_from_hf(checkpoint, name=checkpoint.name)
    assert llm.config.rope_theta == json.loads((checkpoint / "config.json").read_text()).get(
        "rope_theta", 1e6)


def test_layers_keep_the_first_layers_weights(checkpoint):
    full = _state(load_llm(checkpoint).model)
    one = load_llm(checkpoint, layers=1)
    assert one.label == f"{checkpoint.name} (1 of 2 layers, real weights)"
    assert one.model.config.num_hidden_layers == 1 and one.config.n_layers == 1
    got = _state(one.model)
    assert not any(k.startswith("model.layers.1.") for k in got)
    assert all(torch.equal(got[k], full[k]) for k in got)  # layer 0, embeddings, final norm, head: as saved


def test_checkpoint_without_tokenizer_takes_token_ids(checkpoint, tmp_path):
    for f in checkpoint.iterdir():  # the weights and config only
        if not f.name.startswith(("tokenizer", "vocab", "merges", "special_tokens")):
            (tmp_path / f.name).write_bytes(f.read_bytes())
    llm = load_llm(tmp_path)
    assert llm.weights == "real" and not llm.has_tokenizer
    with pytest.raises(DFAError, match=r"no tokenizer here \(no tokenizer files in the checkpoint\)"):
        llm.input_ids("the cat")
    assert llm.generate([3, 4], max_new_tokens=2).shape == (1, 4)


def test_hub_name_goes_through_from_pretrained(checkpoint, monkeypatch):
    """The online path by name: the Hub id handed to from_pretrained (redirected to the local checkpoint)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    seen = []
    for cls in (AutoConfig, AutoModelForCausalLM, AutoTokenizer):
        real = cls.from_pretrained

        def redirected(source, *args, _real=real, _cls=cls.__name__, **kwargs):
            if source == "Qwen/Qwen2.5-0.5B-Instruct":
                seen.append((_cls, kwargs.get("local_files_only")))
                source = checkpoint
            return _real(source, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", redirected)
    monkeypatch.setattr(llm_module, "_hub_unreachable", lambda hf_id: "")
    llm = load_llm("qwen2.5-0.5b-instruct", layers=1)
    # config, weights, tokenizer by the Hub id, network allowed
    assert seen == [("AutoConfig", False), ("AutoModelForCausalLM", False), ("AutoTokenizer", False)]
    assert llm.weights == "real" and llm.label == "Qwen2.5-0.5B-Instruct (1 of 2 layers, real weights)"
    assert llm.has_tokenizer
