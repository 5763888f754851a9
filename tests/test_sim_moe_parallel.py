"""Mixture-of-experts placement on several chips (``moe_parallel``), the expert GEMM dtype a stack runs
(``Stack.moe``), and each machine's grouped-GEMM row granularity as catalog data."""
from __future__ import annotations

import pytest

from common.chips import DTYPE_BYTES, get_chip
from common.chips.catalog.stacks import STACKS
from common.errors import DFAError
from common.models import get_config
from common.sim import simulate_llm
from common.sim.args import MOE_PARALLEL
from common.sim.serving import simulate_served

STEP = dict(batch=64, seq=512, chip="h100-sxm", chips=2)  # 64 tokens x k=2 touch all 8 experts


def _expert_gemms(r, layer="L0."):
    return [e for e in r.events if e.name.startswith(layer) and e.kind == "compute" and "aten.bmm" in e.detail["ops"]
            and "row_tile_efficiency" in e.detail]


@pytest.fixture(scope="module")
def runs():
    return {mode: simulate_llm("mixtral-8x7b", "gpu", moe_parallel=mode, **STEP) for mode in MOE_PARALLEL} | {
        "one": simulate_llm("mixtral-8x7b", "gpu", batch=64, seq=512, chip="h200", chips=1)}


def test_expert_parallel_moves_all_to_all_bytes_tensor_parallel_none(runs):
    cfg = get_config("mixtral-8x7b")
    ep = [e for e in runs["expert"].events if "all-to-all" in e.name]
    tp = runs["tensor"].events
    assert len(ep) == 2 * cfg.n_layers and all(e.bytes["link"] > 0 for e in ep)
    assert not [e for e in tp if "all-to-all" in e.name]
    moe_ar = [e for e in tp if e.name.endswith("allreduce(moe output)")]
    assert len(moe_ar) == cfg.n_layers  # one all-reduce of each layer's (N, C) output
    n, nbytes = 2, 64 * cfg.d_model * DTYPE_BYTES[runs["tensor"].dtype]
    assert moe_ar[0].bytes["link"] == pytest.approx(2 * (n - 1) / n * nbytes)  # the ring's wire bytes
    assert not [e for e in runs["expert"].events if e.name.endswith("allreduce(moe output)")]
    assert any("moe_parallel='tensor'" in n for n in runs["tensor"].notes)


def test_each_chip_reads_half_of_every_touched_experts_weights(runs):
    one, tp, ep = (_expert_gemms(runs[k]) for k in ("one", "tensor", "expert"))
    assert len(one) == len(tp) == len(ep) == 3  # w1, w3, w2
    for a, b, c in zip(one, tp, ep, strict=True):
        assert b.bytes["HBM"] == pytest.approx(a.bytes["HBM"] / 2)  # 1/n of each touched expert's weights
        assert c.bytes["HBM"] == pytest.approx(a.bytes["HBM"] / 2)
        assert b.flops == pytest.approx(a.flops / 2)


@pytest.mark.parametrize("bad", ["pipeline", "EP", 2])
def test_a_bad_choice_is_one_line_naming_the_choices(bad):
    with pytest.raises(DFAError) as err:
        simulate_llm("mixtral-8x7b", "gpu", moe_parallel=bad, **STEP)
    msg = str(err.value)
    assert "\n" not in msg and repr(bad) in msg and all(m in msg for m in MOE_PARALLEL)


def test_the_cli_and_the_explorer_take_the_choice(capsys):
    from common.cli import main
    from common.explore.whatif import Choices
    assert main(["simulate", "mixtral-8x7b", "--backend", "gpu", "--chips", "2", "--moe-parallel", "rows"]) == 2
    assert "expert, tensor" in capsys.readouterr().err
    with pytest.raises(DFAError, match="expert, tensor"):
        Choices(model="mixtral-8x7b", moe_parallel="rows").checked()


def test_trtllm_v09_runs_mixtral_experts_in_fp16_tensor_parallel():
    st = {s.name: s for s in STACKS}["trtllm-v0.9"]
    assert st.moe.expert_dtype == "fp16" and st.moe.parallel == "tensor"
    assert "releases/tag/v0.10.0" in st.moe.source and "issues/1229" in st.moe.source
    kw = dict(phase="decode", batch=64, seq=512, chip="h100-sxm", chips=2, dtype="fp8")
    served = simulate_served("mixtral-8x7b", "gpu", stack="trtllm-v0.9", **kw)
    fp8 = simulate_served("mixtral-8x7b", "gpu", stack="trtllm-v0.9", moe_expert_dtype="fp8", **kw)
    wide, narrow = _expert_gemms(served), _expert_gemms(fp8)
    cfg = get_config("mixtral-8x7b")
    weight = 8 * cfg.d_model * cfg.moe_ffn_dim / 2  # one of w1/w3/w2 over 8 experts, half per chip, 1 B each
    for w, n in zip(wide, narrow, strict=True):
        assert w.bytes["HBM"] - n.bytes["HBM"] == pytest.approx(weight)  # 2 B per expert weight, not 1
        assert w.duration > n.duration
    assert not [e for e in served.events if "all-to-all" in e.name]  # tensor-parallel experts
    assert served.time_s > fp8.time_s
    dense = simulate_served("llama-2-7b", "gpu", stack="trtllm-v0.9", phase="decode", batch=8, seq=512,
                            chip="h100-sxm", dtype="fp8")
    bare = simulate_llm("llama-2-7b", "gpu", batch=8, seq=512, chip="h100-sxm", dtype="fp8")
    assert dense.time_s == pytest.approx(bare.time_s, rel=0.2)  # no MoE layer: the term never applies


def test_an_expert_dtype_the_chip_lacks_is_one_line():
    with pytest.raises(DFAError) as err:
        simulate_llm("mixtral-8x7b", "gpu", moe_expert_dtype="fp8", chip="a100-80gb", chips=2, batch=8, seq=256)
    assert "\n" not in str(err.value) and "fp8" in str(err.value)


def test_row_granularity_is_catalog_data_with_a_source():
    for chip in ("t4", "a100-80gb", "h100-sxm", "h200"):
        c = get_chip(chip)
        assert c.fact("grouped_gemm_tile_m") > 0 and "cutlass" in c.sources["facts.grouped_gemm_tile_m"].lower()


@pytest.mark.parametrize("backend", ["gpu", "tpu", "spyre", "lpu", "wse"])
def test_every_machine_says_how_it_pads_each_experts_rows(backend):
    r = simulate_llm("mixtral-8x7b", backend, batch=4, seq=256)
    note = [n for n in r.notes if n.startswith("grouped expert GEMM")]
    assert len(note) == 1
    if backend in ("gpu", "tpu"):
        assert "padded onto" in note[0]
    else:
        assert "unpadded" in note[0]


def test_the_gpu_pads_onto_the_catalog_tile_not_a_constant(monkeypatch):
    from common.sim.machines.gpu import GPUPolicy
    base = _expert_gemms(simulate_llm("mixtral-8x7b", "gpu", batch=8, seq=256, chip="h200", chips=1))
    monkeypatch.setattr(GPUPolicy, "expert_row_tile", lambda self: (16, "planted"))
    small = _expert_gemms(simulate_llm("mixtral-8x7b", "gpu", batch=8, seq=256, chip="h200", chips=1))
    assert [e.detail["row_tile"] for e in small] == [16] * 3 and [e.detail["row_tile"] for e in base] == [128] * 3
    assert all(s.detail["row_tile_efficiency"] > b.detail["row_tile_efficiency"] for s, b in zip(small, base,
                                                                                              strict=True))
