"""Costs the simulators charge beyond the roofline: causal attention, per-step serving costs, stacks."""
import pytest

from common.graph.costs import causal_fraction
from common.sim import simulate_llm


def test_causal_fraction_by_hand():
    # 4 queries from 0 over 4 keys keep 1 + 2 + 3 + 4 = 10 of 16 pairs
    assert causal_fraction(0, 4) == pytest.approx(10 / 16)
    assert causal_fraction(1023, 1) == 1.0  # a decode token sees every cached key
    # 256 queries in 128-wide tiles: the lower-left 3 of 4 tiles hold kept pairs
    assert causal_fraction(0, 256, 128) == pytest.approx(3 / 4)
    assert causal_fraction(0, 131072) == pytest.approx(0.5, abs=1e-5)
    assert causal_fraction(0, 131072) <= causal_fraction(0, 131072, 128) < 0.501


def _attention(report):
    return [k for p in report.programs for k in p.kernels if k.kind == "attention"]


@pytest.mark.parametrize("backend", ["gpu", "tpu"])
def test_prefill_flash_attention_counts_half_of_s_squared(backend):
    seq = 8192
    r = simulate_llm("llama-3.1-8b", backend, phase="prefill", batch=1, seq=seq)
    (attn,) = _attention(r)
    from common.models import get_config
    c = get_config("llama-3.1-8b")
    dense = 4 * c.n_heads * seq * seq * c.head_dim  # QK^T and PV, 2 FLOPs per MAC
    matmul = sum(o.flops for o in attn.ops if o.op == "aten.bmm")
    assert matmul == pytest.approx(dense * (seq + 1) / (2 * seq), rel=1e-6)
    assert attn.tiling["causal_fraction"] < attn.tiling["causal_tile_fraction"] < 0.51
    assert attn.padded_flops >= attn.flops
    ev = [e for e in r.events if e.kind == "compute" and e.kernel == attn.name]
    assert ev and all(e.duration >= e.floor for e in ev)


def test_decode_attention_is_not_halved_and_unfused_backends_stay_dense():
    d = simulate_llm("llama-3.1-8b", "gpu", phase="decode", batch=1, seq=4096)
    assert all("causal_fraction" not in k.tiling for k in _attention(d))
    # Spyre runs Q K^T as a plain bmm over the full S x S: no tile is skipped
    s = simulate_llm("llama-3.1-8b", "spyre", phase="prefill", batch=1, seq=1024)
    from common.models import get_config
    c = get_config("llama-3.1-8b")
    bmm = sum(o.flops for p in s.programs for k in p.kernels for o in k.ops if o.op == "aten.bmm")
    assert bmm == pytest.approx(4 * c.n_heads * 1024 * 1024 * c.head_dim, rel=1e-6)


# ---- serving stacks (software generations) ---------------------------------------------------------------
def test_unknown_or_misplaced_stack_is_a_one_line_error():
    from common.errors import DFAError
    from common.sim.serving import simulate_served

    with pytest.raises(DFAError, match=r"^unknown stack 'cerebras-2025'; valid: .*cerebras-2024-08, cerebras-2024-10"):
        simulate_served("tiny-block", "wse", stack="cerebras-2025")
    with pytest.raises(DFAError, match="stack 'cerebras-2024-10' serves on the wse backend, not gpu; valid for gpu: "
                                       "vllm-2023-08"):
        simulate_served("tiny-block", "gpu", stack="cerebras-2024-10")


def test_host_fraction_and_fixed_host_time_are_named_events():
    from common.chips.catalog.stacks import STACKS
    from common.sim.serving import simulate_served

    by = {s.name: s for s in STACKS}
    bare = simulate_llm("llama-3.1-8b", "gpu", chip="a100-40gb", phase="decode", batch=1, seq=1024)
    served = simulate_served("llama-3.1-8b", "gpu", chip="a100-40gb", stack="vllm-2023-08")
    (host,) = [e for e in served.events if e.kind == "host"]
    assert host.duration == pytest.approx(by["vllm-2023-08"].step_host_fraction.value * bare.time_s)
    assert served.time_s == pytest.approx(bare.time_s + host.duration) and host.bound == "scheduling"
    assert served.stack == "vllm-2023-08" and any(n.startswith("stack: vllm-2023-08") for n in served.notes)
    tpu = simulate_served("qwen2.5-0.5b", "tpu", stack="jetstream-2024-07")
    (host,) = [e for e in tpu.events if e.kind == "host"]
    assert host.duration == by["jetstream-2024-07"].step_host_s.value
    hw = simulate_served("qwen2.5-0.5b", "tpu")
    assert hw.stack is None and "stack: none (hardware only; no serving-stack costs)" in hw.notes


def test_pre_xqa_tensorrt_llm_reads_each_kv_head_once_per_query_head():
    from common.chips import DTYPE_BYTES
    from common.models import resolve_config
    from common.sim.serving import simulate_served

    kw = dict(chip="h100-sxm", chips=2, dtype="fp8", phase="decode", batch=64, seq=3072)
    bare = simulate_served("llama-2-70b", "gpu", **kw)
    trt = simulate_served("llama-2-70b", "gpu", stack="trtllm-v0.6", **kw)
    (reread,) = [e for e in trt.events if e.name == "kv re-read (trtllm-v0.6)"]
    config = resolve_config("llama-2-70b")
    group = config.n_heads // config.n_kv_heads  # 64 query heads share 8 KV heads
    kv_per_chip = config.kv_bytes_per_token(DTYPE_BYTES["fp8"]) * 64 * 3073 / 2
    assert group == 8 and sum(reread.bytes.values()) == pytest.approx((group - 1) * kv_per_chip)
    assert reread.start == pytest.approx(bare.time_s) and trt.time_s == pytest.approx(bare.time_s + reread.duration)
    assert reread.duration >= reread.floor > 0 and reread.bound == "memory"
    # multi-head attention (one KV head per query head) pays nothing; neither does prefill
    mha = simulate_served("llama-2-7b", "gpu", stack="trtllm-v0.6", chip="h100-sxm", phase="decode", batch=8)
    assert not any(e.name.startswith("kv re-read") for e in mha.events)
    assert any("KV re-reads: none" in n for n in mha.notes)
    pre = simulate_served("llama-2-70b", "gpu", stack="trtllm-v0.6", **{**kw, "phase": "prefill", "seq": 128})
    assert not any(e.name.startswith("kv re-read") for e in pre.events)


def test_cerebras_generations_differ_by_speculative_decoding():
    from common.chips.catalog.stacks import STACKS
    from common.sim.serving import simulate_served

    spec = {s.name: s for s in STACKS}["cerebras-2024-10"].speculative
    aug = simulate_served("llama-3.1-70b", "wse", stack="cerebras-2024-08")
    octo = simulate_served("llama-3.1-70b", "wse", stack="cerebras-2024-10")
    assert not any(e.name.startswith("draft") for e in aug.events)
    draft = simulate_llm(spec.draft_model, "wse", phase="decode", batch=1, seq=1024)
    verify = simulate_llm("llama-3.1-70b", "wse", phase="decode", batch=spec.draft_tokens + 1, seq=1024)
    k, a = spec.draft_tokens, spec.acceptance
    assert octo.time_s == pytest.approx(k * draft.time_s + verify.time_s, rel=1e-9)
    assert octo.tokens_per_s_per_user == pytest.approx((1 + a * k) / (k * draft.time_s + verify.time_s))
    assert octo.tokens_per_s_per_user > 1.5 * aug.tokens_per_s_per_user
    assert any("speculative decoding: 8 draft steps" in n for n in octo.notes)
    assert any("not published" in n for n in aug.notes)


def test_cli_stack_option(capsys):
    from common.cli import main

    argv = ["simulate", "tiny-block", "--backend", "tpu", "--seq", "16", "--stack", "jetstream-2024-07", "--json"]
    assert main(argv) == 0
    (row,) = __import__("json").loads(capsys.readouterr().out)
    assert row["stack"] == "jetstream-2024-07"
    assert main(["simulate", "tiny-block", "--backend", "wse", "--seq", "16", "--stack", "bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown stack 'bogus'; valid:" in err and "cerebras-2024-10" in err and "\n" not in err
    assert main(["simulate", "tiny-block", "--seq", "16", "--stack", "groq-2024"]) == 2
    assert "needs one --backend" in capsys.readouterr().err
