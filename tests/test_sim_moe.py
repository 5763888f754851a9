"""Mixture-of-experts models: the config loader, parameter counts, the routed block, and the simulated step.

Published figures: Mixtral 46.7B total / 12.9B active (Jiang et al., arXiv:2401.04088); gpt-oss-120b 116.8B
total / 5.13B active without the embedding table (OpenAI model card); Qwen3-30B-A3B 30.5B / 3.3B (model card).
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from torch.nn import functional as F

from common.chips import DTYPE_BYTES, get_chip
from common.errors import DFAError
from common.models import (
    CONFIGS,
    ModelConfig,
    MoE,
    build_model,
    config_from_hf,
    config_to_hf,
    expected_experts,
    get_config,
)
from common.models.hf_configs import MOE_HF
from common.sim import BACKEND_NAMES, simulate_llm
from common.sim.moe import all_to_all_bytes
from common.sim.pipeline import decompose
from common.sim.run import make_policy
from common.sim.workload import llm_step

MOE_MODELS = tuple(MOE_HF)
MIXTRAL_HF = MOE_HF["mixtral-8x7b"][1]
# Small enough to run for real: 4 experts, top 2, biases (gpt-oss style) and a shared expert (DeepSeek style).
SMALL = ModelConfig(
    name="moe-test",
    vocab_size=64,
    d_model=32,
    n_layers=2,
    n_heads=4,
    n_kv_heads=2,
    ffn_dim=64,
    max_seq_len=32,
    n_experts=4,
    top_k=2,
    expert_ffn_dim=24,
    shared_ffn_dim=16,
    expert_bias=True,
    router_bias=True,
    qk_norm=True,
    source="unit tests",
)


# ---------------------------------------------------------------- the loader


def test_loader_refuses_an_unknown_field_naming_it():
    with pytest.raises(DFAError) as err:
        config_from_hf({**MIXTRAL_HF, "expert_capacity_factor": 1.25})
    msg = str(err.value)
    assert "unknown config.json field 'expert_capacity_factor'" in msg and "\n" not in msg
    assert "read: " in msg and "num_local_experts" in msg  # it lists the expert fields it reads


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"experts_per_token": 3}, "disagree"),
        ({"layer_types": ["linear_attention"] * 32}, "linear_attention"),
    ],
)
def test_loader_refuses_values_it_cannot_model(bad, field):
    with pytest.raises(DFAError, match=field.replace("[", r"\[").replace("]", r"\]")):
        config_from_hf({**MIXTRAL_HF, **bad})


@pytest.mark.parametrize(
    "mixed, dense",
    [({"decoder_sparse_step": 2}, tuple(range(0, 32, 2))), ({"mlp_only_layers": [0, 5]}, (0, 5)),
     ({"first_k_dense_replace": 3}, (0, 1, 2)), ({"moe_layers": list(range(4, 32))}, (0, 1, 2, 3)),
     ({"mlp_layer_types": ["dense"] + ["sparse"] * 31}, (0,))],
)
def test_dense_layers_in_a_mixture_are_read_from_every_spelling(mixed, dense):
    cfg = config_from_hf({**MIXTRAL_HF, **mixed})
    assert cfg.dense_layers == dense and cfg.n_moe_layers == 32 - len(dense)
    mixtral = config_from_hf(MIXTRAL_HF)  # each dense layer trades 8 experts + router for one MLP
    assert mixtral.n_params - cfg.n_params == len(dense) * (7 * mixtral.expert_params() + 4096 * 8)
    assert "mlp_bias" in " ".join(config_from_hf({**MIXTRAL_HF, "mlp_bias": True}).unmodelled)


def test_mixtral_loads_as_a_mixture_not_a_dense_7b():
    cfg = config_from_hf(MIXTRAL_HF)
    assert (cfg.n_experts, cfg.top_k, cfg.moe_ffn_dim) == (8, 2, 14336)
    dense = config_from_hf(
        {k: v for k, v in MIXTRAL_HF.items() if k not in ("num_local_experts", "num_experts_per_tok")}
    )
    assert dense.n_params == pytest.approx(7.24e9, rel=0.01)  # what it used to load as, silently
    assert cfg.n_params > 6 * dense.n_params


def test_noted_features_are_kept_not_dropped():
    oss = get_config("gpt-oss-120b")
    text = " ".join(oss.unmodelled)
    assert "18 sliding-window layers (window 128)" in text and "mxfp4" in text  # prefill's masked blocks
    assert oss.sliding_window == 128 and len(oss.sliding_layers) == 18  # decode and KV: modelled
    assert oss.expert_bias and oss.router_bias and oss.qkv_bias and not oss.qk_norm
    assert get_config("qwen3-30b-a3b").qk_norm and not get_config("mixtral-8x7b").unmodelled
    r = simulate_llm("gpt-oss-120b", "gpu", seq=256)
    assert any("sliding-window layers (window 128)" in n for n in r.notes)


def test_moe_configs_round_trip_and_shared_experts():
    for name in (*MOE_MODELS, "moe-small"):
        cfg = SMALL if name == "moe-small" else get_config(name)
        if name == "moe-small":  # qk_norm and expert biases together have no config.json spelling
            cfg = dataclasses.replace(cfg, qk_norm=False)
        back = config_from_hf(config_to_hf(cfg), name=cfg.name)
        assert dataclasses.replace(back, source=cfg.source) == cfg, name
    with pytest.raises(DFAError, match="no config.json spelling"):
        config_to_hf(SMALL)
    deepseek_style = {**MIXTRAL_HF, "n_shared_experts": 2, "moe_intermediate_size": 1408}
    assert config_from_hf(deepseek_style).shared_ffn_dim == 2 * 1408
    qwen2_style = {**MIXTRAL_HF, "shared_expert_intermediate_size": 5632}
    assert config_from_hf(qwen2_style).shared_ffn_dim == 5632


# ---------------------------------------------------------------- parameter counts


@pytest.mark.parametrize(
    "name, total, active, rel",
    [
        ("mixtral-8x7b", 46.7e9, 12.9e9, 0.005),
        ("qwen3-30b-a3b", 30.5e9, 3.3e9, 0.02),
    ],
)
def test_total_and_active_params_match_published(name, total, active, rel):
    cfg = get_config(name)
    assert cfg.n_params == pytest.approx(total, rel=rel)
    assert cfg.n_active_params == pytest.approx(active, rel=rel)


def test_gpt_oss_counts_match_the_model_card():
    cfg = get_config("gpt-oss-120b")
    assert cfg.n_params == pytest.approx(116.83e9, rel=0.002)
    # the model card's 5.13B active counts the unembedding but not the embedding lookup
    assert cfg.n_active_params - cfg.vocab_size * cfg.d_model == pytest.approx(5.13e9, rel=0.005)


def test_meta_build_counts_every_expert():
    for cfg in (SMALL, *(get_config(n) for n in MOE_MODELS)):
        model = build_model(cfg, device="meta")
        assert sum(p.numel() for p in model.parameters()) == cfg.n_params, cfg.name


# ---------------------------------------------------------------- the routed block


def _routed_reference(moe: MoE, x: torch.Tensor) -> torch.Tensor:
    """Token by token: its top-k experts' SwiGLU outputs weighted by softmax of their logits, + shared expert."""
    ex, out = moe.experts, []
    for row in x.reshape(-1, x.shape[-1]):
        logits = moe.router(row)
        val, idx = logits.topk(moe.top_k)
        y = torch.zeros_like(row)
        for w, e in zip(torch.softmax(val, -1), idx.tolist(), strict=True):
            h = F.silu(row @ ex.w1[e] + ex.b1[e]) * (row @ ex.w3[e] + ex.b3[e])
            y = y + w * (h @ ex.w2[e] + ex.b2[e])
        out.append(y + moe.shared_expert(row))
    return torch.stack(out).view_as(x)


def test_moe_block_matches_per_token_routing():
    model = build_model(SMALL, seed=3)
    moe = model.layers[0].mlp
    x = torch.randn(2, 5, SMALL.d_model, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(moe(x), _routed_reference(moe, x), rtol=1e-5, atol=1e-6)
    tokens = torch.randint(0, SMALL.vocab_size, (2, 5), generator=torch.Generator().manual_seed(1))
    assert model(tokens).shape == (2, 5, SMALL.vocab_size)


def test_expected_experts_formula():
    assert expected_experts(8, 2, 1) == 2.0  # one token touches exactly k
    assert expected_experts(8, 2, 2) == pytest.approx(8 * (1 - 0.75**2))  # 3.5
    seen = [expected_experts(128, 4, n) for n in (1, 2, 8, 64, 4096)]
    assert seen == sorted(seen) and seen[-1] == pytest.approx(128, rel=1e-6)
    with pytest.raises(DFAError, match="top_k=9"):
        expected_experts(8, 9, 1)


def _expert_bytes_read(workload) -> float:
    ops = decompose(workload.segments[1].gm, make_policy("gpu"))
    return sum(
        b for o in ops for p, b in o.in_bytes.items() if p in o.param_inputs and any(".experts." in q for q in o.params)
    )


def test_decode_weight_traffic_grows_with_batch_per_formula():
    cfg = get_config("mixtral-8x7b")
    per_expert = cfg.expert_params() * DTYPE_BYTES["bf16"]
    read = {}
    for b in (1, 2, 4, 8, 16):
        w = llm_step("mixtral-8x7b", "decode", b, 256, "bf16")
        read[b] = _expert_bytes_read(w)
        assert read[b] / per_expert == math.floor(expected_experts(8, 2, b) + 0.5)  # 2, 4, 5, 7, 8
        assert w.meta["moe"]["expected_experts"] == pytest.approx(expected_experts(8, 2, b))
        assert w.weight_bytes == cfg.n_params * 2  # the footprint holds all 8 experts at every batch
    assert read[1] == 2 * per_expert and read[16] == 8 * per_expert
    assert [read[b] for b in sorted(read)] == sorted(read.values())
    # end to end on one H200 (141 GB holds all of Mixtral): HBM bytes of the whole step
    one, eight = (simulate_llm("mixtral-8x7b", "gpu", chip="h200", chips=1, batch=b, seq=256) for b in (1, 8))
    weights_read = (cfg.n_active_params - cfg.vocab_size * cfg.d_model) * 2  # the lookup reads one row
    assert one.bytes["HBM"] == pytest.approx(weights_read, rel=0.01)
    more_experts = cfg.n_layers * (read[8] - read[1])  # 5 more experts per layer at batch 8
    assert eight.bytes["HBM"] - one.bytes["HBM"] == pytest.approx(more_experts, rel=0.02)


# ---------------------------------------------------------------- the simulated step on every backend


@pytest.mark.parametrize("model", MOE_MODELS)
def test_all_five_backends_simulate(model):
    cfg = get_config(model)
    for backend in BACKEND_NAMES:
        r = simulate_llm(model, backend, batch=1, seq=256)
        assert r.time_s > 0 and r.tokens == 1 and r.flops > 0, backend
        # the active work, not all experts': ~2 FLOPs per active weight (the embedding lookup does none)
        matmul_weights = cfg.n_active_params - cfg.vocab_size * cfg.d_model
        assert 2 * matmul_weights < r.flops < 1.2 * 2 * matmul_weights, (backend, r.flops)


@pytest.mark.parametrize("backend", ["lpu", "wse"])
@pytest.mark.parametrize("model", ["mixtral-8x7b", "gpt-oss-120b"])
def test_sram_machines_get_the_chips_that_hold_every_expert(model, backend):
    cfg = get_config(model)
    r = simulate_llm(model, backend, batch=1, seq=256)
    capacity = get_chip(r.chip).main_memory.total_capacity
    b = DTYPE_BYTES[r.dtype]
    resident = cfg.n_params * b + cfg.kv_bytes_per_token(b) * 257  # every expert + the KV cache of 257 tokens
    assert cfg.n_params > 3 * cfg.n_active_params  # so sizing by the active ones would be far too few
    assert r.chips * capacity >= resident
    if backend == "lpu":  # the fewest that hold it
        assert r.chips == math.ceil(resident / capacity)
    else:  # whole layers per wafer: at least the fewest
        assert r.chips >= math.ceil(resident / capacity)


def test_expert_parallel_all_to_all_over_the_links():
    cfg, chip = get_config("mixtral-8x7b"), get_chip("h100-sxm")
    r = simulate_llm("mixtral-8x7b", "gpu", batch=8, seq=256)
    assert r.chips == 2  # 93 GB of bf16 weights
    a2a = [e for e in r.events if "all-to-all" in e.name]
    assert len(a2a) == 2 * cfg.n_layers
    sent = math.ceil(8 / 2) * 2 * cfg.d_model * 2 * (2 - 1) / 2  # rows/chip x k x C x bf16 x (ep-1)/ep
    assert all_to_all_bytes(8, 2, cfg.d_model, 2, 2, 8) == sent
    for e in a2a:
        # one NVLink hop's latency (0.47 us, NCCL's figure: common/chips/catalog/links.py), then the bytes one way
        assert e.bytes["link"] == sent and e.duration == pytest.approx(0.47e-6 + sent / (chip.link_bandwidth / 2))
        assert e.kind == "comm" and e.bound == "communication" and e.engine == r.critical_engine
    stream = sorted((e for e in r.events if e.engine == r.critical_engine), key=lambda e: e.start)
    assert all(b.start >= a.end - 1e-12 for a, b in zip(stream, stream[1:], strict=False))  # nothing overlaps
    assert r.attribution["communication"] >= sum(e.duration for e in a2a) * (1 - 1e-9)
    one = simulate_llm("mixtral-8x7b", "gpu", chip="h200", chips=1, batch=8, seq=256)
    assert not [e for e in one.events if "all-to-all" in e.name]  # one chip holds every expert: nothing to send


def test_dense_models_are_unchanged():
    w = llm_step("llama-3.1-8b", "decode", 1, 256, "bf16")
    assert "moe" not in w.meta
    r = simulate_llm("llama-3.1-8b", "tpu", batch=1, seq=256)
    assert r.chips > 1 and not [e for e in r.events if "all-to-all" in e.name]


def test_cli_help_lists_the_models_and_simulates_all_backends(capsys):
    from common.cli import main
    from common.cli import simulate as sim_cli

    assert sim_cli.MODEL_NAMES == tuple(CONFIGS)
    assert main(["simulate", "mixtral-8x7b", "--backend", "all", "--seq", "256", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["backend"] for r in rows] == list(BACKEND_NAMES) and all(r["time_s"] > 0 for r in rows)
    assert any("expert parallel" in n for r in rows for n in r["notes"])


def test_slowest_expert_sets_the_batched_gemm_rows():
    """The batched expert GEMM's M is the most loaded expert's rows: m/D + sqrt(2 (m/D) ln D), m = N k, capped at N."""
    from common.models.moe import ExpectedLoad, max_load_rows

    assert max_load_rows(64, 2, 8) == math.ceil(16 + math.sqrt(2 * 16 * math.log(8)))  # 25 of a mean 16
    assert max_load_rows(4, 2, 5) == 4  # capped: a token picks distinct experts
    assert ExpectedLoad.of(8, 2, 1).rows == 1  # one token: each of its k experts gets exactly it
    loads = [ExpectedLoad.of(8, 2, n) for n in (16, 64, 512, 4096)]
    assert all(a.imbalance > b.imbalance > 1.0 for a, b in zip(loads, loads[1:], strict=False))  # evens out
    w = llm_step("mixtral-8x7b", "decode", 64, 256, "bf16")
    bmm = [o for o in decompose(w.segments[1].gm, make_policy("gpu")) if o.mnk and o.mnk[0] == 8]
    assert bmm and all(o.mnk[1] == 25 for o in bmm)  # (experts, rows, K, N): rows of the slowest expert
    assert w.meta["moe"]["mean_rows_per_expert"] == 16 and w.meta["moe"]["imbalance"] == pytest.approx(25 / 16)
