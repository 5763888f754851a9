"""DecoderLM against the transformers models it stands for.

* Numerics: ``decoder_from_hf`` copies a Qwen2 / Llama / Qwen3 model's weights into DecoderLM; the logits match
  in fp32 (prefill, and decode through DecoderLM's KVCache).
* Costs: the simulator's capture (``common.sim.workload.capture_step``: DecoderLM's prologue + one layer x L +
  epilogue) against the same step of the transformers class at real size on FakeTensors, both counted by
  ``common.graph.costs``. FLOPs agree within 1 % per layer and per step. Bytes: DecoderLM moves less, and in fp32 the
  gap is exactly HF eager's GQA and cache copies (repeat_kv's K/V copies read again by the attention matmuls,
  DynamicCache's torch.cat), within 1 %. In bf16 HF also computes RMSNorm and softmax in fp32 (upcast copies,
  twice the bytes per element): DecoderLM does not, so bf16 bytes are only bounded (DecoderLM <= HF).
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from common.errors import DFAError
from common.graph.capture import capture_aten, fake_mode_of
from common.graph.costs import annotate, op_name
from common.models import KVCache, config_to_hf, decoder_from_hf, get_config, load_llm
from common.sim.workload import TORCH_DTYPES, capture_step

transformers = pytest.importorskip("transformers")
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

TOL = {"rtol": 1e-5, "atol": 1e-5}  # fp32: observed max |diff| ~2e-6 on logits of std ~0.6


def _hf(config, *, seed: int = 0, **overrides):
    raw = {**config_to_hf(config), **overrides}
    raw.pop("_name_or_path")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_config(AutoConfig.for_model(**raw), attn_implementation="eager").eval()


def _tokens(vocab: int, b: int, t: int) -> torch.Tensor:
    return torch.randint(0, vocab, (b, t), generator=torch.Generator().manual_seed(t))


# ---------------------------------------------------------------- numerics


@pytest.fixture(scope="module")
def qwen():
    """The labs' LLM at full width, 2 of its 24 layers, random weights (offline)."""
    return load_llm("qwen2.5-0.5b-instruct", layers=2, offline=True).model


def test_qwen2_logits_match(qwen):
    model = decoder_from_hf(qwen, max_seq_len=64)
    assert model.config.qkv_bias and model.config.tie_embeddings and model.config.n_layers == 2
    assert model.lm_head.weight is model.embed_tokens.weight
    tokens = _tokens(151936, 2, 17)
    with torch.no_grad():
        expected = qwen(tokens).logits  # (B, T, vocab)
        torch.testing.assert_close(model(tokens), expected, **TOL)
        # decode: 16 tokens into DecoderLM's KVCache, then the 17th attends to them
        cache = KVCache.empty(model.config, 2, 32)
        model(tokens[:, :16], cache=cache, start_pos=0)
        torch.testing.assert_close(model(tokens[:, 16:], cache=cache, start_pos=16)[:, 0], expected[:, 16], **TOL)


@pytest.mark.parametrize("variant", ["llama", "qwen3", "mha-untied"])
def test_llama_and_qwen3_logits_match(variant):
    test = get_config("test")
    config = {
        "llama": test,  # GQA g=2, no biases, untied head
        "qwen3": dataclasses.replace(test, qk_norm=True, tie_embeddings=True),  # q/k RMSNorm before RoPE
        "mha-untied": dataclasses.replace(test, n_kv_heads=test.n_heads, head_dim=16),  # head_dim != C / H
    }[variant]
    hf = _hf(config, seed=1)
    assert type(hf).__name__ == ("Qwen3ForCausalLM" if config.qk_norm else "LlamaForCausalLM")
    model = decoder_from_hf(hf)
    assert dataclasses.replace(model.config, name=config.name, source=config.source) == config
    tokens = _tokens(config.vocab_size, 3, 11)
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), hf(tokens).logits, **TOL)


def test_decoder_from_hf_refuses_what_it_cannot_reproduce():
    test = get_config("test")
    with pytest.raises(DFAError, match=r"rope_type 'llama3', which DecoderLM does not implement"):
        decoder_from_hf(_hf(test, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                "high_freq_factor": 4.0,
                                                "original_max_position_embeddings": 16}))
    moe = dataclasses.replace(test, n_experts=4, top_k=2)
    with pytest.raises(DFAError, match="dense models only; .* has 4 experts"):
        decoder_from_hf(_hf(moe))
    gemma = AutoConfig.for_model("gemma", vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=4, num_key_value_heads=2, head_dim=8)
    with pytest.raises(DFAError, match="reproduces the logits of llama, .*got model_type 'gemma'"):
        decoder_from_hf(AutoModelForCausalLM.from_config(gemma))
    with pytest.raises(DFAError, match="needs a transformers model with a .config, got Linear"):
        decoder_from_hf(torch.nn.Linear(2, 2))


# ---------------------------------------------------------------- FLOPs and bytes: the simulator's capture


def _costs(gm):
    return [(n, n.meta["cost"]) for n in gm.graph.nodes if "cost" in n.meta and not n.meta["cost"].is_view]


def _hf_step(config, n_layers: int, phase: str, seq: int, dtype: str):
    """One step of the transformers class (eager attention) with ``n_layers`` layers, captured on FakeTensors
    and annotated like the simulator's graphs: (flops, bytes, HF-only copy bytes)."""
    hc = AutoConfig.for_model(**{k: v for k, v in config_to_hf(dataclasses.replace(config, n_layers=n_layers))
                                 .items() if k != "_name_or_path"})
    kw = {"experts_implementation": "batched_mm"} if config.is_moe else {}
    with torch._subclasses.fake_tensor.FakeTensorMode():
        model = AutoModelForCausalLM.from_config(hc, attn_implementation="eager", dtype=TORCH_DTYPES[dtype], **kw)
        if phase == "prefill":
            tokens, cache, positions = torch.zeros(1, seq, dtype=torch.long), None, None
        else:  # one token after `seq` cached ones, in transformers' own DynamicCache
            tokens, positions = torch.zeros(1, 1, dtype=torch.long), torch.tensor([[seq]])
            cache = transformers.DynamicCache(config=hc)
            for i in range(n_layers):
                kv = torch.zeros(1, config.n_kv_heads, seq, config.head_dim, dtype=TORCH_DTYPES[dtype])
                cache.update(kv, kv.clone(), i)

    class Step(torch.nn.Module):  # the cache is a Python object, not a pytree: closed over
        def __init__(self):
            super().__init__()
            self.model = model.eval()

        def forward(self, tokens):
            if cache is None:
                return self.model(tokens, use_cache=False).logits
            return self.model(tokens, past_key_values=cache, position_ids=positions, use_cache=True).logits

    gm = capture_aten(Step(), (tokens,))
    with fake_mode_of(gm.meta["example_inputs"]):  # HF builds positions and masks with factory ops
        annotate(gm, *gm.meta["example_inputs"])
    flops = sum(c.flops for _, c in _costs(gm))
    total = sum(c.bytes for _, c in _costs(gm))
    # HF eager's GQA and cache copies: repeat_kv's (B, n_kv, g, S, hd) copies of K and V, DynamicCache's cat
    copies = sum(c.bytes for n, c in _costs(gm)
                 if (op_name(n) == "aten.clone" and len(c.shape) == 5 and c.shape[1:3] == (config.n_kv_heads,
                                                                                           config.group))
                 or (op_name(n) == "aten.cat" and len(c.shape) == 4 and c.shape[1] == config.n_kv_heads
                     and c.shape[2] >= seq))
    return flops, total, copies


def _per_layer_and_step(config, phase, seq, dtype):
    """(layer, step) x (flops, bytes, copies) of the HF class: a layer is the 2-layer minus the 1-layer step."""
    one, two = _hf_step(config, 1, phase, seq, dtype), _hf_step(config, 2, phase, seq, dtype)
    layer = [b - a for a, b in zip(one, two, strict=True)]
    return layer, [a + (config.n_layers - 1) * x for a, x in zip(one, layer, strict=True)]


def _decoder(config, phase, seq, dtype):
    workload = capture_step(config, phase, 1, seq, dtype)
    seg = {s.name: (sum(c.flops for _, c in _costs(s.gm)), sum(c.bytes for _, c in _costs(s.gm)))
           for s in workload.segments}
    step = [sum(seg[s.name][i] * s.repeat for s in workload.segments) for i in (0, 1)]
    return seg["layer"], step


# (model, phase, dtype); seq 128 for prefill, 1024 cached tokens for decode
CASES = [
    ("qwen2.5-0.5b-instruct", "prefill", "fp32"), ("qwen2.5-0.5b-instruct", "decode", "fp32"),
    ("qwen2.5-0.5b-instruct", "decode", "bf16"),
    ("llama-3.1-8b", "prefill", "fp32"), ("llama-3.1-8b", "decode", "fp32"), ("llama-3.1-8b", "prefill", "bf16"),
    ("llama-3.1-70b", "decode", "bf16"),
]


# transformers 5 renames past_key_values (the spelling 4.57 knows) to cache: still accepted
@pytest.mark.filterwarnings("ignore:.*past_key_values.*:FutureWarning")
@pytest.mark.parametrize(("name", "phase", "dtype"), CASES)
def test_captured_decoder_has_the_hf_class_flops_and_bytes(name, phase, dtype):
    config = get_config(name)
    seq = 128 if phase == "prefill" else 1024
    hf_layer, hf_step = _per_layer_and_step(config, phase, seq, dtype)
    dl_layer, dl_step = _decoder(config, phase, seq, dtype)
    for ours, theirs in ((dl_layer, hf_layer), (dl_step, hf_step)):
        assert ours[0] == pytest.approx(theirs[0], rel=0.01)  # FLOPs
        assert ours[1] <= theirs[1]  # bytes: DecoderLM never moves more than HF eager
        if dtype == "fp32":  # the gap: HF's GQA and cache copies, and re-reading K/V at H heads
            gqa_over_read = _gqa_over_read(config, phase, seq) * (1 if ours is dl_layer else config.n_layers)
            explained = theirs[1] - theirs[2] - gqa_over_read
            assert ours[1] == pytest.approx(explained, rel=0.01)


def _gqa_over_read(config, phase, seq) -> float:
    """fp32 bytes HF's attention matmuls read beyond DecoderLM's: K and V at H heads instead of n_kv."""
    s = seq + (1 if phase == "decode" else 0)
    return 2 * (config.n_heads - config.n_kv_heads) * s * config.head_dim * 4


@pytest.mark.filterwarnings("ignore:.*past_key_values.*:FutureWarning")
def test_captured_moe_layer_has_the_hf_class_flops():
    """Mixtral-8x7B decode, batch 1: the simulator's expected-load capture (2 of 8 experts, one row each)
    against transformers' batched_mm experts (each token's top-2 experts): the same FLOPs. (HF gathers each
    token's expert weights into a copy first, so its bytes are not comparable.)"""
    config = get_config("mixtral-8x7b")
    if not hasattr(transformers, "MixtralForCausalLM"):
        pytest.skip("this transformers has no Mixtral")
    try:
        hf_layer, hf_step = _per_layer_and_step(config, "decode", 256, "bf16")
    except (TypeError, ValueError) as exc:  # transformers < 5: no experts_implementation
        pytest.skip(f"transformers {transformers.__version__} cannot pick batched_mm experts: {exc}")
    dl_layer, dl_step = _decoder(config, "decode", 256, "bf16")
    assert dl_layer[0] == pytest.approx(hf_layer[0], rel=0.01)
    assert dl_step[0] == pytest.approx(hf_step[0], rel=0.01)
