"""Sliding-window layers and dense layers in a mixture of experts: built, cached and simulated as configured.

A sliding-window layer attends to the last W positions and caches W (a rolling buffer); the simulator captures
one layer of each kind and repeats it as often as the model has it, so KV bytes and decode attention follow
the window. Dense layers of a mixture of experts are dense MLPs, counted and captured as such.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from common.errors import DFAError
from common.models import KVCache, ModelConfig, build_model, config_from_hf, config_to_hf, get_config
from common.sim import simulate_llm
from common.sim.workload import capture_step

BASE = ModelConfig(name="slide-test", vocab_size=64, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2, ffn_dim=64,
                   max_seq_len=64, source="unit tests")
SLIDE = dataclasses.replace(BASE, sliding_window=4, sliding_layers=(0, 2))


def _tokens(n: int) -> torch.Tensor:
    return (torch.arange(n) * 7 % BASE.vocab_size).view(1, n)


def test_window_wider_than_the_text_changes_nothing():
    wide = dataclasses.replace(BASE, sliding_window=32, sliding_layers=(0, 1, 2))
    a, b = build_model(BASE), build_model(wide)  # same seed: same weights
    x = _tokens(12)
    torch.testing.assert_close(a(x), b(x))
    assert not torch.allclose(a(x), build_model(SLIDE)(x))  # a window of 4 does change the logits


@pytest.mark.parametrize("prompt", [3, 6, 10])  # shorter than the window, longer, longer than 2 W (blocks)
def test_rolling_cache_decode_equals_the_masked_full_forward(prompt):
    model, n = build_model(SLIDE).eval(), 11
    x = _tokens(n)
    full = model(x)  # no cache: every layer sees its band of the causal mask
    cache = KVCache.empty(SLIDE, 1, n)
    assert [c.shape[2] for c in cache.k] == [4, n, 4]  # sliding layers hold the window only
    steps = [model(x[:, :prompt], cache=cache, start_pos=0)]
    steps += [model(x[:, p:p + 1], cache=cache, start_pos=p) for p in range(prompt, n)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    with pytest.raises(DFAError, match="one token per step once its cache is full"):
        model(x[:, :2], cache=cache, start_pos=n - 2)


def test_kv_bytes_and_decode_attention_follow_the_window():
    w, full = SLIDE.sliding_window, BASE.n_layers - len(SLIDE.sliding_layers)
    per = 2 * SLIDE.n_kv_heads * SLIDE.head_dim * 2
    assert SLIDE.kv_bytes(40) == per * (full * 40 + 2 * w)
    assert BASE.kv_bytes(40) == BASE.kv_bytes_per_token(2) * 40
    flops = {}
    for seq in (16, 48):
        wl = capture_step(SLIDE, "decode", 1, seq, "bf16")
        layers = [s for s in wl.segments if s.name == "layer"]
        assert [s.repeat for s in layers] == [2, 1] and sum(s.repeat for s in layers) == SLIDE.n_layers
        assert wl.kv_bytes == SLIDE.kv_bytes(seq + 1) * 1
        flops[seq] = [sum(n.meta["cost"].flops for n in s.gm.graph.nodes if "cost" in n.meta) for s in layers]
    assert flops[16][0] == flops[48][0]  # the sliding layer reads W keys whatever the context
    pre = capture_step(SLIDE, "prefill", 1, 48, "bf16")
    sliding, full = [s for s in pre.segments if s.name == "layer"]
    bmm = {name: sum(n.meta["cost"].flops for n in seg.gm.graph.nodes if "cost" in n.meta
                     and ("bmm" in str(n.target) or "matmul" in str(n.target)) and "proj" not in str(n.args))
           for name, seg in (("sliding", sliding), ("full", full))}
    assert 0 < bmm["sliding"] < bmm["full"]  # prompt blocks: T x 2W scores, not T x T
    assert flops[48][1] > flops[16][1]  # the full-attention layer reads them all
    for backend in ("gpu", "tpu", "wse", "lpu", "spyre"):
        r = simulate_llm(SLIDE, backend, seq=48)
        assert r.time_s > 0 and len({e.name for e in r.events if e.name.startswith("L2.")}) > 0


def test_hf_layer_types_become_sliding_layers_and_round_trip():
    raw = {**config_to_hf(BASE), "sliding_window": 4,
           "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}
    cfg = config_from_hf(raw)
    assert (cfg.sliding_window, cfg.sliding_layers) == (4, (0, 2))
    assert dataclasses.replace(config_from_hf(config_to_hf(cfg)), source="", name="") == \
        dataclasses.replace(cfg, source="", name="")
    assert not config_from_hf({**raw, "use_sliding_window": False}).sliding_layers
    oss = get_config("gpt-oss-120b")
    assert oss.sliding_window == 128 and oss.sliding_layers == tuple(range(0, 36, 2))


def test_dense_layers_of_a_mixture_are_dense():
    moe = dataclasses.replace(BASE, n_experts=4, top_k=2, expert_ffn_dim=16, dense_layers=(0,))
    model = build_model(moe)
    assert type(model.layers[0].mlp).__name__ == "SwiGLU" and type(model.layers[1].mlp).__name__ == "MoE"
    assert moe.n_params == sum(p.numel() for p in model.parameters())
    wl = capture_step(moe, "decode", 2, 8, "bf16")
    assert [s.repeat for s in wl.segments if s.name == "layer"] == [1, 2]
    assert wl.meta["moe"]["resident_expert_bytes"] == 2 * 4 * moe.expert_params() * 2  # 2 expert layers
    cut = dataclasses.replace(SLIDE, n_layers=1)  # a cut keeps the first layers' kinds
    assert cut.sliding_layers == (0,)
    with pytest.raises(DFAError, match="dense_layers needs n_experts > 0"):
        dataclasses.replace(BASE, dense_layers=(0,))
