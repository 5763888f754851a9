"""common.measure.op_profile (a real model's ops timed and counted, grouped, beside a simulated step) and
common.measure.roofs (measured roofs per dtype); the CUDA branches run against a faked torch.cuda."""
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from common.errors import DFAError
from common.measure import op_profile
from common.measure import roofs as dtype_roofs
from common.sim import simulate_llm

transformers = pytest.importorskip("transformers")


def _tiny_llm(layers=2):
    """A 2-layer Qwen2 of width 32 (the real model's class, random weights): what load_llm returns, in small."""
    cfg = transformers.Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(cfg).eval()
    return SimpleNamespace(model=model, config=SimpleNamespace(vocab_size=64))


@pytest.fixture(scope="module")
def tiny():
    return _tiny_llm()


def test_an_op_is_counted_by_the_project_rules():
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    prof = op_profile.profile(lambda: torch.mm(a, b), repeats=2, warmup=0)
    mm = prof[prof["op"] == "aten.mm"].iloc[0]
    assert (mm["group"], mm["kind"]) == ("matmul", "matmul")
    assert mm["flops"] == 2 * 8 * 16 * 4 and mm["bytes"] == (8 * 16 + 16 * 4 + 8 * 4) * 4
    dst, src, table = torch.zeros(100), torch.ones(100), torch.randn(1000, 8)
    ids = torch.tensor([1, 2, 3])

    def work():
        dst.copy_(src)  # writes dst without reading it
        src.view(10, 10)  # a view moves nothing
        torch.nn.functional.embedding(ids, table)  # reads 3 rows, not the table
    rows = op_profile.profile(work, repeats=1, warmup=0).set_index("op")
    assert rows.loc["aten.copy_", "bytes"] == 2 * 400
    assert rows.loc["aten.view", "bytes"] == 0 and rows.loc["aten.view", "group"] == "other"
    assert rows.loc["aten.embedding", "bytes"] == 3 * 8 * 4 * 2 + ids.numel() * 8


def test_profile_takes_the_median_and_refuses_a_changing_step():
    x = torch.randn(64)
    prof = op_profile.profile(lambda: x * 2, repeats=3, warmup=1)
    assert list(prof.columns) == op_profile.COLUMNS and prof.attrs["source"] == "measured"
    assert (prof["time_s"] > 0).all() and prof.attrs["repeats"] == 3
    calls = []

    def changing():
        calls.append(1)
        return x * 2 if len(calls) % 2 else x + 1
    with pytest.raises(DFAError, match="different ops"):
        op_profile.profile(changing, repeats=2, warmup=0)
    with pytest.raises(DFAError, match="repeats"):
        op_profile.profile(lambda: x, repeats=0)
    with pytest.raises(DFAError, match="device type"):
        op_profile.profile(lambda: x, device="meta")


def test_group_of_names_the_kernel_by_what_it_fused():
    g = op_profile.group_of
    assert g(["aten.bmm", "aten._softmax", "aten.bmm"]) == "attention"
    assert g(["aten._scaled_dot_product_flash_attention_for_cpu"]) == "attention"
    assert g(["aten.mm", "aten.silu"]) == "matmul"
    assert g(["aten.bmm"], ["Qwen2Model", "Qwen2Attention"]) == "attention"  # eager attention's score matmul
    assert g(["aten.mm"], ["Qwen2Attention", "Linear"]) == "matmul"  # a projection inside attention
    assert g(["aten.pow", "aten.mean", "aten.rsqrt", "aten.mul"]) == "norm"
    assert g(["aten.mul"], ["Qwen2RMSNorm"]) == "norm"
    assert g(["aten.mul", "aten.sub"]) == "pointwise"
    assert g(["aten.embedding"], flops=0) == "other"


@pytest.mark.parametrize("phase", op_profile.PHASES)
def test_a_real_model_step_is_profiled_per_group(tiny, phase):
    step = op_profile.llm_step(tiny, phase, 8)
    out = step()
    assert out.shape == ((1, 8, 64) if phase == "prefill" else (1, 1, 64))
    prof = op_profile.profile(step, model=tiny.model, repeats=2)
    groups = op_profile.groups(prof)
    assert {"matmul", "attention", "norm", "pointwise"} <= set(groups.index)
    assert set(prof.loc[prof["module"].str.endswith("norm"), "group"]) == {"norm"}  # RMSNorm's ops, from hooks
    # each group: summed FLOPs / summed bytes (never a mean of ratios); summed time
    for grp, row in groups.iterrows():
        part = prof[prof["group"] == grp]
        assert row["flops"] == part["flops"].sum() and row["time_s"] == pytest.approx(part["time_s"].sum())
        if row["bytes"] > 0:
            assert row["intensity"] == pytest.approx(part["flops"].sum() / part["bytes"].sum())
    assert groups["share_of_time"].sum() == pytest.approx(1.0)
    # prefill: every projection and the LM head multiply all 8 tokens, 2 FLOPs per weight each
    if phase == "prefill":
        lin = sum(m.weight.numel() for m in tiny.model.modules() if isinstance(m, torch.nn.Linear))
        assert groups.loc["matmul", "flops"] == pytest.approx(2 * 8 * lin, rel=0.01)
    pts = op_profile.points(groups, phase)
    assert set(pts["label"]) <= set(groups.index) - {"other"} and set(pts["source"]) == {"measured"}
    assert pts.attrs["label"] == phase


def test_decode_steps_repeat_the_same_step(tiny):
    step = op_profile.llm_step(tiny, "decode", 6)
    first = step()
    for _ in range(3):  # the cache is cut back to 6 tokens after every call: same inputs, same logits
        torch.testing.assert_close(step(), first)
    with pytest.raises(DFAError, match="phase"):
        op_profile.llm_step(tiny, "train", 6)
    with pytest.raises(DFAError, match="seq"):
        op_profile.llm_step(tiny, "decode", 0)


def test_simulated_groups_cover_every_compute_event():
    r = simulate_llm("test", "gpu", phase="decode", batch=1, seq=16)
    g = op_profile.sim_groups(r)
    compute = [e for e in r.events if e.kind == "compute"]
    assert g["time_s"].sum() == pytest.approx(sum(e.duration for e in compute))
    assert g["flops"].sum() == pytest.approx(sum(e.flops for e in compute))
    assert {"matmul", "attention", "norm"} <= set(g.index) and g.attrs["source"] == "simulated"
    assert g.attrs["level"] == "HBM" and g.attrs["step_s"] == r.time_s
    assert set(op_profile.points(g, "decode")["source"]) == {"simulated"}
    with pytest.raises(DFAError, match="missing"):
        op_profile.groups(pd.DataFrame({"flops": [1.0]}))


# ---- the CUDA branches, against a faked torch.cuda ----

@pytest.fixture
def fake_cuda(monkeypatch):
    log = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: log.append(d))
    return log


def test_on_cuda_every_op_is_synchronised_before_and_after(fake_cuda):
    a = torch.randn(4, 4)
    prof = op_profile.profile(lambda: (a @ a).relu(), device="cuda:0", repeats=2, warmup=0)
    assert list(prof["op"]) == ["aten.mm", "aten.relu"] and prof.attrs["device"] == "cuda:0"
    assert fake_cuda == [torch.device("cuda:0")] * (2 * 2 * 2)  # 2 ops x 2 runs, one sync before and one after


def test_cuda_without_a_gpu_is_a_dfaerror(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DFAError, match="no CUDA device"):
        op_profile.profile(lambda: None, device="cuda")


def _machine(device_type, dtypes, sixteen_bit):
    return SimpleNamespace(device_type=device_type, dtypes=dtypes, sixteen_bit=sixteen_bit)


@pytest.mark.parametrize("machine, dtype, want", [
    (_machine("cuda", ("fp32", "fp16"), "fp16"), "fp16", ("fp32",)),  # a T4: fp16 tensor cores only
    (_machine("cuda", ("fp32", "fp16"), "fp16"), "fp32", ("fp16",)),
    (_machine("cuda", ("fp32", "fp16", "bf16"), "bf16"), "fp16", ("bf16", "fp32")),  # Ampere and later
    (_machine("cpu", ("fp32", "bf16", "fp16"), "bf16"), "fp32", ("bf16",)),
    (_machine("cpu", ("fp32",), None), "fp32", ()),  # a CPU build whose 16-bit matmul does not run
])
def test_other_dtypes_name_the_roofs_worth_measuring(machine, dtype, want):
    assert dtype_roofs.other_dtypes(machine, dtype) == want
    assert dtype_roofs.other_dtypes(machine, getattr(torch, {"fp16": "float16", "fp32": "float32"}[dtype])) == want


def test_measured_rooflines_one_per_dtype_sharing_the_copy(monkeypatch):
    from common.measure import bench

    def peaks(device, dtype, **kw):
        return bench.MeasuredPeaks(str(device), "Fake GPU", str(dtype).removeprefix("torch."), 8e12, 3e11, 512,
                                   1 << 20, gemm=None, copy=None)

    def gemms(device, dtypes, **kw):
        assert kw["gemm_n"] == 512  # the same GEMM size as the first roof
        return {"float16": SimpleNamespace(flops_per_s=6.5e13), "bfloat16": "skipped: bf16 is emulated here"}
    monkeypatch.setattr(bench, "measure_peaks", peaks)
    monkeypatch.setattr(bench, "measure_gemm_peaks", gemms)
    rls, skipped = dtype_roofs.measured_rooflines("cuda:0", torch.float32, ("fp16", "bf16"))
    assert [(r.dtype, r.peak_flops, r.bandwidth(), r.source) for r in rls] == [
        ("fp32", 8e12, 3e11, "measured"), ("fp16", 6.5e13, 3e11, "measured")]
    assert rls[1].label == "Fake GPU · fp16 · measured" and "fp16 GEMM N=512" in rls[1].note
    assert skipped == ["bf16: skipped: bf16 is emulated here"]
    with pytest.raises(DFAError, match="int8"):
        dtype_roofs.measured_rooflines("cpu", torch.float32, ("int8",))


def test_measured_rooflines_on_this_cpu_in_fp32_and_bf16():
    rls, skipped = dtype_roofs.measured_rooflines("cpu", torch.float32, ("bf16",), gemm_n=64, copy_bytes=1 << 20,
                                                  min_run_time=0.01, warmup=1)
    assert rls[0].dtype == "fp32" and all(r.source == "measured" for r in rls)
    assert len(rls) + len(skipped) == 2  # bf16 measured, or left out with the reason: never guessed
    assert len({r.bandwidth() for r in rls}) == 1
