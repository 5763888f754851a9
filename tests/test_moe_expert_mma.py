"""Expert GEMMs of an older MMA instruction (``moe_expert_mma``): TensorRT-LLM v0.9's SM80 grouped GEMM on Hopper.

The option changes the compute ceiling of the expert GEMMs only, only on a part that records a rate for that
instruction (Hopper), and never below the FLOPs / datasheet-peak floor.
"""
from __future__ import annotations

import pytest

from common.chips import get_chip
from common.chips.catalog.stacks import STACKS
from common.errors import DFAError
from common.sim import simulate_llm
from common.sim.args import MOE_EXPERT_MMA
from common.sim.serving import simulate_served

PREFILL = dict(phase="prefill", batch=1, seq=512)


def _experts(report):
    """The compute events of grouped expert GEMMs (the only kernels the GPU policy row-tiles per expert)."""
    return [e for e in report.events if e.kind == "compute" and "row_tile_efficiency" in e.detail]


def _others(report):
    return [e for e in report.events if e.kind == "compute" and "matmul_efficiency" in e.detail
            and "row_tile_efficiency" not in e.detail]


@pytest.fixture(scope="module")
def mixtral():
    """Mixtral prefill on two H100s, native vs mma.sync expert kernels (everything else equal)."""
    kw = dict(chip="h100-sxm", chips=2, dtype="bf16", **PREFILL)
    return {m: simulate_llm("mixtral-8x7b", "gpu", moe_expert_mma=m, **kw) for m in MOE_EXPERT_MMA}


def test_only_expert_gemms_slow_down(mixtral):
    native, sync = mixtral["native"], mixtral["mma.sync"]
    chip = get_chip("h100-sxm")
    est = chip.estimates["mma_sync_matmul_efficiency_bf16"]
    ex_n, ex_s = _experts(native), _experts(sync)
    assert ex_n and len(ex_n) == len(ex_s)
    for a, b in zip(ex_n, ex_s, strict=True):
        assert b.detail["matmul_efficiency"] == pytest.approx(est.value)
        assert a.detail["matmul_efficiency"] == pytest.approx(chip.estimates["matmul_efficiency_bf16"].value)
        assert b.duration >= a.duration * (1 - 1e-12)
        assert b.duration >= b.floor * (1 - 1e-12)
        assert b.duration >= b.flops / chip.peak_flops["bf16"] * (1 - 1e-12)  # never faster than the datasheet
    assert sum(b.duration for b in ex_s) > sum(a.duration for a in ex_n) * 1.05  # prefill expert GEMMs: compute
    others_n, others_s = _others(native), _others(sync)
    assert others_n and [e.duration for e in others_n] == [e.duration for e in others_s]  # attention, router, ...
    assert sync.time_s > native.time_s
    assert any("mma.sync" in n and "0.579" in n for n in sync.notes)


def test_derived_rate_is_two_thirds_of_the_a100_ceiling():
    a100 = get_chip("a100-80gb").estimates["matmul_efficiency_bf16"].value
    for name in ("h100-sxm", "h200"):
        est = get_chip(name).estimates
        assert est["mma_sync_peak_fraction"].value == pytest.approx(2 / 3)
        assert "flashattention-3" in est["mma_sync_peak_fraction"].derivation.lower()
        for dt in ("bf16", "fp16"):
            assert est[f"mma_sync_matmul_efficiency_{dt}"].value == pytest.approx(2 / 3 * a100)
            assert est[f"mma_sync_matmul_efficiency_{dt}"].value < est[f"matmul_efficiency_{dt}"].value


def test_a_part_whose_native_instruction_it_is_is_unchanged():
    """On an A100 mma.sync is the native instruction: no rate is recorded, the option changes nothing."""
    assert "mma_sync_matmul_efficiency_bf16" not in get_chip("a100-80gb").estimates
    kw = dict(chip="a100-80gb", chips=2, dtype="bf16", **PREFILL)
    a = simulate_llm("mixtral-8x7b", "gpu", **kw)
    b = simulate_llm("mixtral-8x7b", "gpu", moe_expert_mma="mma.sync", **kw)
    assert a.time_s == b.time_s
    assert any("records no bf16 rate" in n for n in b.notes)


def test_a_dense_model_is_unchanged():
    kw = dict(chip="h100-sxm", chips=1, dtype="bf16", **PREFILL)
    a = simulate_llm("llama-3.1-8b", "gpu", **kw)
    b = simulate_llm("llama-3.1-8b", "gpu", moe_expert_mma="mma.sync", **kw)
    assert a.time_s == b.time_s and [e.duration for e in a.events] == [e.duration for e in b.events]


def test_only_the_stack_that_shipped_sm80_kernels_declares_it():
    declared = {s.name for s in STACKS if s.moe is not None and s.moe.expert_mma is not None}
    assert declared == {"trtllm-v0.9"}
    trt = next(s for s in STACKS if s.name == "trtllm-v0.9")
    assert trt.moe.expert_mma in MOE_EXPERT_MMA and "dispatchToArch" in trt.moe.source
    r = simulate_served("mixtral-8x7b", "gpu", stack="trtllm-v0.9", chip="h100-sxm", chips=2, **PREFILL)
    assert r.assumptions["moe"]["expert_mma"] == "mma.sync"
    assert any("expert GEMM kernels issue mma.sync" in n for n in r.notes)
    # a caller's own choice wins over the stack's
    n = simulate_served("mixtral-8x7b", "gpu", stack="trtllm-v0.9", chip="h100-sxm", chips=2,
                        moe_expert_mma="native", **PREFILL)
    assert n.time_s < r.time_s


def test_other_stacks_keep_native_expert_kernels():
    for stack in ("vllm-v0.6", "sglang-v0.3"):
        r = simulate_served("mixtral-8x7b", "gpu", stack=stack, chip="h100-sxm", chips=2, **PREFILL)
        assert not any("moe_expert_mma" in n for n in r.notes), stack


@pytest.mark.parametrize("bad", ["wgmma", "MMA.SYNC", 3, ""])
def test_bad_value_is_one_line_naming_the_choices(bad):
    with pytest.raises(DFAError) as e:
        simulate_llm("mixtral-8x7b", "gpu", chip="h100-sxm", chips=2, moe_expert_mma=bad, **PREFILL)
    msg = str(e.value)
    assert "\n" not in msg and "moe_expert_mma" in msg and all(c in msg for c in MOE_EXPERT_MMA)


def test_the_cli_and_the_explorer_take_the_choice(capsys):
    from common.cli import main
    from common.explore.whatif import Choices, machine_row
    args = ["simulate", "mixtral-8x7b", "--backend", "gpu", "--chip", "h100-sxm", "--chips", "2", "--phase", "prefill",
            "--seq", "512"]
    assert main(args + ["--moe-expert-mma", "wgmma"]) == 2
    assert "mma.sync, native" in capsys.readouterr().err
    with pytest.raises(DFAError, match="mma.sync, native"):
        Choices(model="mixtral-8x7b", moe_expert_mma="wgmma").checked()
    assert main(args + ["--moe-expert-mma", "mma.sync"]) == 0
    sync_out = capsys.readouterr().out
    assert main(args) == 0
    assert sync_out != capsys.readouterr().out  # the flag reached the simulation
    base = Choices(model="mixtral-8x7b", backends=("gpu",), phase="prefill", seq=512, chips={"gpu": "h100-sxm"},
                   chip_counts={"gpu": 2})
    native, sync = machine_row(base, "gpu"), machine_row(base.changed(moe_expert_mma="mma.sync"), "gpu")
    assert not native["problem"] and not sync["problem"]
    assert sync["time_s"] > native["time_s"]  # slower expert kernels, the same step otherwise
