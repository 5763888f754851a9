"""Costs the simulators charge beyond the roofline (issue #16): causal attention, per-step serving costs, stacks."""
import pytest

from common.costs import causal_fraction
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
