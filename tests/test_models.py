"""Reference models: tracing, KV cache, GQA against a naive reference, configs, fake/meta builds."""
from __future__ import annotations

import dataclasses
import gc
import json
import math
import operator
import os

import pytest
import torch
from torch.nn import functional as F

from common.errors import DFAError
from common.models import (
    CONFIGS,
    DecoderLM,
    KVCache,
    ModelConfig,
    TinyTransformerBlock,
    build_block,
    build_model,
    config_from_hf,
    config_to_hf,
    fake_mode_of,
    get_config,
    resolve_config,
    step_inputs,
)

TEST = get_config("test")
# GQA (g=2), grouped + q/k/v bias + tied head, MQA (one K/V head), plain MHA: the grouping edge cases.
VARIANTS = {
    "gqa": TEST,
    "bias-tied": dataclasses.replace(TEST, qkv_bias=True, tie_embeddings=True),
    "mqa": dataclasses.replace(TEST, n_kv_heads=1),
    "mha": dataclasses.replace(TEST, n_kv_heads=4),
}


def _tokens(cfg: ModelConfig, b: int, t: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, cfg.vocab_size, (b, t), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- TinyTransformerBlock


def test_block_symbolic_trace_matches_eager():
    block = build_block("test")
    gm = torch.fx.symbolic_trace(block)
    targets = {n.target for n in gm.graph.nodes}
    assert {torch.softmax, operator.matmul, "masked_fill", "o_proj", "fc2"} <= targets  # the ops, spelled out
    for t in (1, 5, 9):  # the traced graph is not specialised to the length it was traced with
        x = torch.randn(2, t, 32, generator=torch.Generator().manual_seed(t))
        torch.testing.assert_close(gm(x), block(x), rtol=0, atol=0)
        assert block(x).shape == (2, t, 32)


def test_block_causality_and_defaults():
    block = TinyTransformerBlock(64, 4)
    assert block.ffn_dim == 256 and block.head_dim == 16
    x = torch.randn(1, 6, 64)
    y = x.clone()
    y[:, -1] = torch.randn(64)  # (not a constant shift: LayerNorm would erase it)
    torch.testing.assert_close(block(x)[:, :-1], block(y)[:, :-1])  # causal: the past ignores the future
    bidir = TinyTransformerBlock(64, 4, causal=False)
    assert not torch.allclose(bidir(x)[:, :-1], bidir(y)[:, :-1])
    with pytest.raises(DFAError, match="n_heads=5"):
        TinyTransformerBlock(64, 5)


# ---------------------------------------------------------------- DecoderLM vs a naive reference


def _naive_forward(model: DecoderLM, tokens: torch.Tensor) -> torch.Tensor:
    """Textbook decoder: K/V repeated per query head, one head at a time, complex-free RoPE from scratch."""
    cfg = model.config
    sd = model.state_dict()
    t, hd, h = tokens.shape[1], cfg.head_dim, cfg.n_heads
    inv = [cfg.rope_theta ** (-2 * i / hd) for i in range(hd // 2)]
    ang = torch.tensor([[p * f for f in inv] for p in range(t)], dtype=torch.float32)  # (T, hd/2)
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)  # (T, hd)

    def rope(z):  # z: (T, hd); rotate_half(z) = [-z2, z1]
        z1, z2 = z[:, : hd // 2], z[:, hd // 2:]
        return z * cos + torch.cat([-z2, z1], -1) * sin

    def rms(z, w):
        return z / torch.sqrt((z * z).mean(-1, keepdim=True) + cfg.norm_eps) * w

    def lin(z, name):
        out = z @ sd[name + ".weight"].T
        return out + sd[name + ".bias"] if name + ".bias" in sd else out

    x = sd["embed_tokens.weight"][tokens]  # (B, T, C)
    allowed = torch.tril(torch.ones(t, t, dtype=torch.bool))
    for i in range(cfg.n_layers):
        p = f"layers.{i}."
        a = rms(x, sd[p + "input_layernorm.weight"])
        q = lin(a, p + "self_attn.q_proj").view(*a.shape[:2], h, hd)
        k = lin(a, p + "self_attn.k_proj").view(*a.shape[:2], cfg.n_kv_heads, hd)
        v = lin(a, p + "self_attn.v_proj").view(*a.shape[:2], cfg.n_kv_heads, hd)
        k = k.repeat_interleave(cfg.group, dim=2)  # materialised: (B, T, H, hd)
        v = v.repeat_interleave(cfg.group, dim=2)
        heads = []
        for b in range(x.shape[0]):
            per_head = []
            for j in range(h):
                s = rope(q[b, :, j]) @ rope(k[b, :, j]).T / math.sqrt(hd)
                s = torch.where(allowed, s, torch.tensor(float("-inf")))
                per_head.append(torch.softmax(s, -1) @ v[b, :, j])
            heads.append(torch.cat(per_head, -1))
        x = x + lin(torch.stack(heads), p + "self_attn.o_proj")
        m = rms(x, sd[p + "post_attention_layernorm.weight"])
        x = x + lin(F.silu(lin(m, p + "mlp.gate_proj")) * lin(m, p + "mlp.up_proj"), p + "mlp.down_proj")
    head = sd["embed_tokens.weight"] if cfg.tie_embeddings else sd["lm_head.weight"]
    return rms(x, sd["norm.weight"]) @ head.T


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_gqa_matches_naive_repeated_kv_reference(variant):
    model = build_model(VARIANTS[variant], seed=1)
    tokens = _tokens(model.config, 2, 7)
    torch.testing.assert_close(model(tokens), _naive_forward(model, tokens), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_prefill_then_decode_equals_full_forward(variant):
    model = build_model(VARIANTS[variant], seed=2)
    tokens = _tokens(model.config, 2, 12, seed=3)
    full = model(tokens)
    cache = KVCache.empty(model.config, 2, 16)
    steps = [model(tokens[:, :5], cache=cache, start_pos=0),  # prefill
             model(tokens[:, 5:8], cache=cache, start_pos=5)]  # a chunk: T>1 rows after cached ones
    steps += [model(tokens[:, i:i + 1], cache=cache, start_pos=i) for i in range(8, 12)]  # decode
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    assert cache.k[0][:, :, 12:].abs().sum() == 0 and cache.k[0][:, :, :12].abs().sum() > 0


def test_decoder_symbolic_trace_without_cache():
    model = build_model("test")
    gm = torch.fx.symbolic_trace(model, concrete_args={"cache": None, "start_pos": 0})
    for t in (3, 8):
        tokens = _tokens(model.config, 2, t)
        torch.testing.assert_close(gm(tokens), model(tokens), rtol=0, atol=0)
    targets = {n.target for n in gm.graph.nodes}
    assert {operator.matmul, torch.softmax, "masked_fill"} <= targets
    assert not any("scaled_dot" in str(x) for x in targets)


def _aten_graph(model, phase, batch, seq):
    from torch.fx.experimental.proxy_tensor import make_fx

    args, kwargs = step_inputs(model, phase, batch, seq)
    return make_fx(lambda tokens: model(tokens, **kwargs))(*args)


def test_kv_cache_is_a_pytree_input_of_an_aten_capture():
    from torch.fx.experimental.proxy_tensor import make_fx

    model = build_model("test")
    args, kwargs = step_inputs(model, "decode", 2, 5)
    # the cache travels as an argument: its 2 * n_layers tensors become placeholders, not constants
    gm = make_fx(lambda tokens, cache: model(tokens, cache=cache, start_pos=5))(args[0], kwargs["cache"])
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 1 + 2 * TEST.n_layers
    assert tuple(placeholders[1].meta["val"].shape) == (2, TEST.n_kv_heads, 6, TEST.head_dim)


def test_cache_write_is_a_t_token_slice_copy():
    gm = _aten_graph(build_model("test"), "decode", 2, 5)
    copies = [n for n in gm.graph.nodes if n.target is torch.ops.aten.copy_.default]
    assert len(copies) == 2 * TEST.n_layers  # one K and one V write per layer, nothing else copied
    for n in copies:
        assert tuple(n.meta["val"].shape) == (2, TEST.n_kv_heads, 1, TEST.head_dim)


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_gqa_never_materialises_per_query_head_kv(phase):
    gm = _aten_graph(build_model("test"), phase, 2, 6)
    vals = [n.meta.get("val") for n in gm.graph.nodes]
    shapes = [tuple(v.shape) for v in vals if isinstance(v, torch.Tensor)]
    # no (B, n_heads, ., .) tensor anywhere: K/V stay at n_kv heads, queries are grouped to (B, n_kv, g*T, hd)
    assert not [s for s in shapes if len(s) == 4 and s[1] == TEST.n_heads]
    assert (2, TEST.n_kv_heads, TEST.group * (6 if phase == "prefill" else 1), TEST.head_dim) in shapes


def test_forward_errors():
    model = build_model("test")
    with pytest.raises(DFAError, match="max_seq_len=32"):
        model(_tokens(TEST, 1, 4), start_pos=30)
    with pytest.raises(DFAError, match="start_pos must be >= 0, got -1"):
        model(_tokens(TEST, 1, 4), start_pos=-1)
    with pytest.raises(DFAError, match="batch 2 != tokens batch 1"):
        model(_tokens(TEST, 1, 4), cache=KVCache.empty(TEST, 2, 8))
    with pytest.raises(DFAError, match="holds 8 positions; need 10"):
        model(_tokens(TEST, 2, 4), cache=KVCache.empty(TEST, 2, 8), start_pos=6)


# ---------------------------------------------------------------- configs and parameter counts


def test_n_params_formula_equals_counted():
    for cfg in VARIANTS.values():
        model = build_model(cfg)
        assert sum(p.numel() for p in model.parameters()) == cfg.n_params
    for name in CONFIGS:  # the real architectures, on the meta device (no storage)
        model = build_model(name, device="meta")
        assert sum(p.numel() for p in model.parameters()) == CONFIGS[name].n_params, name


@pytest.mark.parametrize("name, published", [
    ("qwen2.5-0.5b", 4.94e8), ("llama-2-7b", 6.74e9), ("llama-2-13b", 1.302e10), ("llama-2-70b", 6.9e10),
    ("llama-3.1-8b", 8.03e9), ("llama-3.1-70b", 7.06e10),
])
def test_n_params_match_published_totals(name, published):
    assert get_config(name).n_params == pytest.approx(published, rel=0.01)


def test_config_derived_values_and_validation():
    c = get_config("llama-3.1-8b")
    assert (c.head_dim, c.group) == (128, 4)
    assert c.kv_bytes_per_token(2) == 2 * 32 * 8 * 128 * 2  # 128 KiB per token in bf16
    assert get_config("llama-2-7b").kv_bytes_per_token(2) == 512 * 1024
    assert get_config("qwen2.5-0.5b").qkv_bias and get_config("qwen2.5-0.5b").tie_embeddings
    for cfg in CONFIGS.values():
        assert cfg.source
    with pytest.raises(DFAError, match="not a multiple of n_kv_heads=3"):
        dataclasses.replace(TEST, n_kv_heads=3)
    with pytest.raises(DFAError, match="head_dim=7"):
        dataclasses.replace(TEST, head_dim=7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        TEST.d_model = 8  # type: ignore[misc]


def test_unknown_name_lists_valid_names():
    with pytest.raises(DFAError) as err:
        get_config("gpt-5")
    msg = str(err.value)
    assert "unknown model 'gpt-5'" in msg and "\n" not in msg
    assert all(name in msg for name in CONFIGS)
    with pytest.raises(DFAError, match="valid: .*llama-3.1-8b"):
        build_model("no-such-model")


# ---------------------------------------------------------------- Hugging Face config.json


def test_hf_config_round_trip(tmp_path):
    for name in ("qwen2.5-0.5b", "llama-3.1-70b", "test"):
        cfg = get_config(name)
        (tmp_path / name).mkdir()
        path = tmp_path / name / "config.json"
        path.write_text(json.dumps(config_to_hf(cfg)))
        for loaded in (config_from_hf(path), config_from_hf(tmp_path / name), resolve_config(str(path))):
            assert dataclasses.replace(loaded, source=cfg.source) == cfg
            assert str(path) in loaded.source


def test_hf_config_published_style_keys():
    llama31 = {  # the published meta-llama/Llama-3.1-8B config.json, abridged to the keys that matter + noise
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "hidden_act": "silu",
        "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072,
        "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": False, "vocab_size": 128256,
        "rope_scaling": {"factor": 8.0, "rope_type": "llama3"}, "torch_dtype": "bfloat16",
    }
    got = config_from_hf(llama31, name="llama-3.1-8b")
    assert dataclasses.replace(got, source="") == dataclasses.replace(get_config("llama-3.1-8b"), source="")
    qwen = {  # Qwen2 has q/k/v biases without an attention_bias key
        "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
        "max_position_embeddings": 32768, "num_attention_heads": 14, "num_hidden_layers": 24,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0, "tie_word_embeddings": True, "vocab_size": 151936,
    }
    got = config_from_hf(qwen, name="qwen2.5-0.5b")
    assert dataclasses.replace(got, source="") == dataclasses.replace(get_config("qwen2.5-0.5b"), source="")
    minimal = {k: v for k, v in llama31.items() if k not in ("num_key_value_heads", "rope_theta")}
    got = config_from_hf(minimal)
    assert got.n_kv_heads == 32 and got.rope_theta == 10000.0


def test_hf_config_spells_each_bias_layout_as_its_model_type():
    # q/k/v biases only: Qwen2 (Llama's attention_bias would put a bias on o_proj too)
    qwen = config_to_hf(get_config("qwen2.5-0.5b"))
    assert qwen["model_type"] == "qwen2" and "attention_bias" not in qwen
    llama = config_to_hf(get_config("llama-3.1-8b"))
    assert llama["model_type"] == "llama" and llama["attention_bias"] is False
    mixtral = config_to_hf(get_config("mixtral-8x7b"))
    assert mixtral["model_type"] == "mixtral"


def test_hf_config_reads_transformers5_rope_parameters():
    # transformers 5's save_pretrained writes rope_theta inside rope_parameters (and layer_types per layer)
    raw = {k: v for k, v in config_to_hf(TEST).items() if k != "rope_theta"}
    raw.update(rope_parameters={"rope_theta": 123456.0, "rope_type": "default"},
               layer_types=["full_attention"] * TEST.n_layers, dtype="float32")
    assert config_from_hf(raw).rope_theta == 123456.0
    raw["rope_theta"] = 5.0  # a top-level rope_theta wins: a published (transformers 4) file has only that one
    assert config_from_hf(raw).rope_theta == 5.0


def test_hf_config_errors(tmp_path):
    path = tmp_path / "config.json"
    raw = config_to_hf(TEST)
    del raw["hidden_size"]
    path.write_text(json.dumps(raw))
    with pytest.raises(DFAError, match=r"config\.json: missing required field 'hidden_size'") as err:
        config_from_hf(path)
    assert str(path) in str(err.value)
    path.write_text("{not json")
    with pytest.raises(DFAError, match="not valid JSON"):
        config_from_hf(path)
    with pytest.raises(DFAError, match="cannot read"):
        config_from_hf(tmp_path / "missing.json")
    with pytest.raises(DFAError, match="hidden_act 'xielu' is not modelled; valid: silu") as err:
        config_from_hf({**config_to_hf(TEST), "hidden_act": "xielu"})
    assert "\n" not in str(err.value)
    gemma = config_from_hf({**config_to_hf(TEST), "model_type": "gemma", "hidden_act": "gelu_pytorch_tanh"})
    assert (gemma.activation, gemma.gated_mlp) == ("gelu_tanh", True)  # GeGLU: gate and up, tanh GELU
    gpt2 = config_from_hf({**config_to_hf(TEST), "model_type": "gpt2", "hidden_act": "gelu_new"})
    assert (gpt2.activation, gpt2.gated_mlp) == ("gelu_tanh", False)  # up -> GELU -> down
    assert gpt2.n_params == TEST.n_params - TEST.n_layers * TEST.d_model * TEST.ffn_dim  # no gate matrix


# ---------------------------------------------------------------- builds: seed, dtype, fake, meta


def test_seed_determinism_and_private_rng():
    before = torch.random.get_rng_state()
    a, b, c = build_model("test", seed=0), build_model("test", seed=0), build_model("test", seed=1)
    assert torch.equal(torch.random.get_rng_state(), before)  # the global RNG is left alone
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name
        if name.endswith("proj.weight"):
            assert not torch.equal(sa[name], sc[name]), name
    assert torch.equal(build_block("test", seed=4).q_proj.weight, build_block("test", seed=4).q_proj.weight)
    assert torch.equal(a.lm_head.weight, b.lm_head.weight)
    tied = build_model(VARIANTS["bias-tied"])
    assert tied.lm_head.weight is tied.embed_tokens.weight


def test_dtype_build_is_the_fp32_weights_rounded():
    fp32, bf16 = build_model("test"), build_model("test", dtype=torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in bf16.parameters()) and bf16.rope_cos.dtype == torch.bfloat16
    assert torch.equal(bf16.lm_head.weight, fp32.lm_head.weight.to(torch.bfloat16))
    assert bf16(_tokens(TEST, 1, 4)).dtype == torch.bfloat16


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS read from /proc (Linux)")
def test_fake_70b_build_allocates_nothing_and_runs():
    gc.collect()
    rss0 = _rss_bytes()
    model = build_model("llama-3.1-70b", fake=True, dtype=torch.bfloat16)
    assert _rss_bytes() - rss0 < 300 * 2**20  # the real weights would be 141 GB
    mode = fake_mode_of(model)
    p = model.layers[79].mlp.down_proj.weight
    assert mode is not None and p.fake_mode is mode and tuple(p.shape) == (8192, 28672)
    assert sum(q.numel() for q in model.parameters()) == get_config("llama-3.1-70b").n_params
    args, kwargs = step_inputs(model, "decode", 2, 100)
    assert kwargs["cache"].k[0].fake_mode is mode and kwargs["start_pos"] == 100
    with mode:
        out = model(*args, **kwargs)
    assert tuple(out.shape) == (2, 1, 128256) and out.dtype == torch.bfloat16
    args, _ = step_inputs(model, "prefill", 1, 3)
    assert args[0].fake_mode is mode and tuple(args[0].shape) == (1, 3)
    assert _rss_bytes() - rss0 < 300 * 2**20


def test_meta_build():
    model = build_model("llama-2-70b", device="meta")
    assert all(p.is_meta for p in model.parameters())
    args, kwargs = step_inputs(model, "decode", 1, 8)
    assert kwargs["cache"].k[0].is_meta
    assert model(*args, **kwargs).shape == (1, 1, 32000)


# ---------------------------------------------------------------- step_inputs


def test_step_inputs_shapes():
    model = build_model("test")
    args, kwargs = step_inputs(model, "prefill", 3, 10)
    assert args[0].shape == (3, 10) and args[0].dtype == torch.long and kwargs == {}
    assert model(*args, **kwargs).shape == (3, 10, TEST.vocab_size)
    args, kwargs = step_inputs("test", "prefill", 2, 6, with_cache=True)
    assert kwargs["start_pos"] == 0 and kwargs["cache"].max_seq == 6
    args, kwargs = step_inputs(TEST, "decode", 2, 6, dtype=torch.float16)
    cache = kwargs["cache"]
    assert args[0].shape == (2, 1) and kwargs["start_pos"] == 6
    assert (cache.batch, cache.max_seq, len(cache)) == (2, 7, TEST.n_layers)
    assert cache.k[1].shape == (2, TEST.n_kv_heads, 7, TEST.head_dim) and cache.v[0].dtype == torch.float16
    assert cache.nbytes == 7 * 2 * TEST.kv_bytes_per_token(2)
    assert not cache.k[0].any()
    args, kwargs = step_inputs(TEST, "decode", 2, TEST.max_seq_len - 1)  # the last position still fits
    assert model(*args, **kwargs).shape == (2, 1, TEST.vocab_size)


def test_step_inputs_in_given_fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    args, kwargs = step_inputs("llama-3.1-8b", "decode", 4, 4096, fake_mode=mode, dtype=torch.bfloat16)
    assert args[0].fake_mode is mode and kwargs["cache"].v[31].fake_mode is mode
    assert kwargs["cache"].nbytes == 4 * 4097 * get_config("llama-3.1-8b").kv_bytes_per_token(2)


def test_step_inputs_errors():
    with pytest.raises(DFAError, match="unknown phase 'train'; valid: prefill, decode"):
        step_inputs(TEST, "train", 1, 4)
    with pytest.raises(DFAError, match="batch must be a positive int, got 0"):
        step_inputs(TEST, "prefill", 0, 4)
    with pytest.raises(DFAError, match="seq must be a positive int, got -1"):
        step_inputs(TEST, "decode", 1, -1)
    with pytest.raises(DFAError, match="seq=33 needs 33 positions.*max_seq_len=32"):
        step_inputs(TEST, "prefill", 1, 33)
    with pytest.raises(DFAError, match="seq=32 needs 33 positions"):
        step_inputs(TEST, "decode", 1, 32)
    with pytest.raises(DFAError, match="TinyTransformerBlock"):
        step_inputs(build_block("test"), "prefill", 1, 4)
