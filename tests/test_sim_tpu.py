"""The TPU backend: MXU padding, the (8,128) layout, XLA-style fusion, static schedule, ICI tensor parallelism."""
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from common.errors import DFAError
from common.models import build_block
from common.sim import simulate, simulate_llm, simulate_op
from common.sim.machines.tpu import TPUPolicy, padded_shape
from common.sim.workload import graph_workload


def _tiling(report, i=0):
    return report.programs[0].kernels[i].tiling


# ---- tile: MXU padding and passes, by hand --------------------------------------------------------------
@pytest.mark.parametrize("chip, shape, padded, passes", [
    # 1000 is a multiple of 8 (M stays); K, N -> 1024 = 8 x 128 = 4 x 256
    ("tpu-v5e", (1000, 1000, 1000), (1000, 1024, 1024), 8 * 8),
    ("tpu-v6e", (1000, 1000, 1000), (1000, 1024, 1024), 4 * 4),
    # 129 -> 136 (M, to 8 sublanes); K, N -> 256 on both (2 x 128 or 1 x 256)
    ("tpu-v5e", (129, 129, 129), (136, 256, 256), 2 * 2),
    ("tpu-v6e", (129, 129, 129), (136, 256, 256), 1 * 1),
    # 257 -> 384 (3 x 128) on v5e but 512 (2 x 256) on v6e
    ("tpu-v5e", (257, 257, 257), (264, 384, 384), 3 * 3),
    ("tpu-v6e", (257, 257, 257), (264, 512, 512), 2 * 2),
    ("tpu-v5e", (100, 300, 70), (104, 384, 128), 3 * 1),
    ("tpu-v5e", (1, 4096, 4096), (8, 4096, 4096), 32 * 32),  # one decode token still fills 8 sublanes
])
def test_mxu_padding_and_passes_by_hand(chip, shape, padded, passes):
    r = simulate_op("matmul", shape, "tpu", chip=chip)
    k = r.programs[0].kernels[0]
    m, kk, n = shape
    assert (k.tiling["M"], k.tiling["K"], k.tiling["N"]) == shape
    assert (k.tiling["M_padded"], k.tiling["K_padded"], k.tiling["N_padded"]) == padded
    assert k.tiling["mxu_passes"] == passes
    assert k.padded_flops == 2 * padded[0] * padded[1] * padded[2]
    assert k.tiling["efficiency"] == pytest.approx(m * kk * n / (padded[0] * padded[1] * padded[2]))


def test_batched_matmuls_count_passes_per_batch():
    # sdpa (1, 8, 256, 64): QK^T is (b=8, M=256, K=64, N=256) -> 8 x 1 x 2 passes; PV is (8, 256, 256, 64)
    # -> 8 x 2 x 1 passes; flash attention runs both in one kernel.
    r = simulate_op("sdpa", (1, 8, 256, 64), "tpu", chip="tpu-v5e")
    att = [k for k in r.programs[0].kernels if k.kind == "attention"]
    assert len(att) == 1
    t = att[0].tiling
    assert (t["batch"], t["M"], t["K"], t["N"], t["K_padded"], t["N_padded"]) == (8, 256, 64, 256, 128, 256)
    assert t["matmuls"] == 2 and t["mxu_passes"] == 16 + 16


# ---- layout: the (8,128) tiles --------------------------------------------------------------------------
def test_8x128_layout_pads_the_two_minor_dims():
    p = TPUPolicy("tpu-v5e")
    stored, padded, nbytes = p.layout((4, 100, 300), 4 * 100 * 300 * 4)  # an fp32 array
    assert stored == (4, 100, 300) and padded == (4, 104, 384)
    assert nbytes == 4 * 104 * 384 * 4
    assert p.layout((300, 100), 1.0, transposed=True)[:2] == ((100, 300), (104, 384))  # stored order counts
    assert padded_shape((128, 1, 4096), 8, 128) == (128, 1, 4096)  # size-1 dims stay out of the tile
    assert padded_shape((2, 128, 1), 8, 128) == (8, 128, 1)
    assert padded_shape((65,), 8, 128) == (128,)
    assert padded_shape((), 8, 128) == ()
    # 8-bit arrays pack 4 rows per sublane: (32, 128) tiles
    assert TPUPolicy("tpu-v5e", dtype="int8").layout((100, 300), 1.0)[1] == (128, 384)


def test_hbm_traffic_counts_padded_bytes():
    # bf16 (100 x 300) @ (300 x 70): A -> (104, 384), B -> (304, 128), C (100, 70) -> (104, 128)
    r = simulate_op("matmul", (100, 300, 70), "tpu", chip="tpu-v5e")
    t = _tiling(r)
    useful = 2 * (100 * 300 + 300 * 70 + 100 * 70)
    padded = 2 * (104 * 384 + 304 * 128 + 104 * 128)
    assert t["hbm_bytes_unpadded"] == useful and t["hbm_bytes"] == padded
    assert t["hbm_padding_bytes"] == padded - useful
    assert t["layout_efficiency"] == pytest.approx(useful / padded)
    assert "args_1[100, 300]->[104, 384]" in t["padded_inputs"] and "[100, 70]->[104, 128]" in t["padded_outputs"]
    assert r.bytes["HBM"] == padded


# ---- fuse: XLA fusion rules -----------------------------------------------------------------------------
def _ops(report):
    return [k.op_names for p in report.programs for k in p.kernels]


def test_linear_gelu_is_one_output_fusion_and_two_matmuls_never_fuse():
    x = torch.randn(4, 256, dtype=torch.bfloat16)
    one = nn.Sequential(nn.Linear(256, 512), nn.GELU()).to(torch.bfloat16)
    assert _ops(simulate(graph_workload(one, (x,)), "tpu")) == [["aten.addmm", "aten.gelu"]]
    two = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)).to(torch.bfloat16)
    assert _ops(simulate(graph_workload(two, (x,)), "tpu")) == [["aten.addmm", "aten.gelu"], ["aten.addmm"]]


def test_attention_chain_fuses_only_with_flash_attention():
    fused = _ops(simulate_op("sdpa", (1, 8, 128, 64), "tpu"))
    assert any(ops.count("aten.bmm") == 2 and "aten._softmax" in ops for ops in fused)
    split = _ops(simulate_op("sdpa", (1, 8, 128, 64), "tpu", flash_attention=False))
    assert all(ops.count("aten.bmm") <= 1 for ops in split)
    assert ["aten.bmm", "aten.mul"] in split  # the scale is still an epilogue of the first bmm


def test_decoder_layer_fusions():
    r = simulate_llm("test", "tpu", phase="prefill", batch=1, seq=8)
    layer = [k.op_names for k in r.programs[1].kernels]
    for ops in layer:  # no fusion holds two matmuls outside the attention kernel
        assert sum(o in ("aten.mm", "aten.addmm") for o in ops) <= 1
    # residual add joins the o_proj / down_proj matmul; the RMSNorm (pow -> mean ...) is a fusion of its own
    assert layer.count(["aten.mm", "aten.add"]) == 2
    assert ["aten.mm", "aten.silu"] in layer and ["aten.mm", "aten.mul"] in layer  # SwiGLU epilogues
    assert not any(ops[0] == "aten.mm" and "aten.pow" in ops for ops in layer)


# ---- costs and schedule ---------------------------------------------------------------------------------
def test_floor_holds_and_counts_only_useful_bytes():
    r = simulate_op("matmul", (100, 300, 70), "tpu", chip="tpu-v5e")
    ev = next(e for e in r.events if e.kind == "compute")
    t = _tiling(r)
    assert ev.floor == pytest.approx(max(ev.flops / 197e12, t["hbm_bytes_unpadded"] / 819e9))
    assert ev.duration == pytest.approx(t["hbm_bytes"] / 819e9)  # padded bytes set the time: memory-bound
    assert ev.bound == "memory" and ev.duration > ev.floor


def test_static_schedule_with_mxu_fill_drain_where_the_clock_is_published():
    r = simulate_op("matmul", (4096, 4096, 4096), "tpu", chip="tpu-v5e")
    assert r.critical_engine == "tensorcore" and {e.engine for e in r.events} == {"tensorcore"}
    fill, mm = r.events
    assert fill.kind == "sync" and fill.bound == "scheduling"
    assert fill.duration == pytest.approx(2 * 128 / 1.5e9) and fill.detail["cycles"] == 256  # at 1.5 GHz
    assert mm.start == pytest.approx(fill.end) and mm.bound == "compute"
    assert mm.duration == pytest.approx(2 * 4096**3 / 197e12)  # 4096 fills the MXU exactly
    v6e = simulate_op("matmul", (4096, 4096, 4096), "tpu", chip="tpu-v6e")
    assert [e.kind for e in v6e.events] == ["compute"]  # v6e clock is not published: no fill time
    assert any("clock is not published" in n for n in v6e.notes)


def test_embedding_reads_only_the_rows_it_gathers():
    r = simulate_llm("tiny-block", "tpu", phase="decode", batch=2, seq=16)
    emb = next(k for k in r.programs[0].kernels if "aten.embedding" in k.op_names)
    table = 256 * 64 * 2  # vocab x d_model bf16
    assert emb.tiling["hbm_bytes_unpadded"] < table / 10


def test_decode_on_v6e_is_hbm_bound():
    # llama-3.1-8b bf16 fits one 32 GB v6e: ~15.2 GB per token (weights less the unread embedding table, plus KV)
    r = simulate_llm("llama-3.1-8b", "tpu", chip="tpu-v6e", phase="decode", batch=1, seq=1024)
    assert r.chips == 1 and r.bottleneck == "memory"
    assert r.bytes["HBM"] == pytest.approx(15.16e9, rel=0.02)
    assert r.time_s == pytest.approx(r.bytes["HBM"] / 1638e9, rel=1e-6)  # every fusion streams at HBM speed


# ---- tensor parallelism over ICI ------------------------------------------------------------------------
def test_tensor_parallel_v5e_8_splits_matmuls_and_all_reduces_over_ici():
    # llama-2-7b: 32 heads split 8 ways (qwen2.5-0.5b's 14 heads would not: that degree is refused)
    one = simulate_llm("llama-2-7b", "tpu", chip="tpu-v5e", chips=1, phase="decode", batch=8, seq=256)
    eight = simulate_llm("llama-2-7b", "tpu", chip="tpu-v5e", chips=8, phase="decode", batch=8, seq=256)
    assert one.chips == 1 and eight.chips == 8

    def matmul_bytes(r):
        return {e.name: e.bytes["HBM"] for e in r.events if e.kind == "compute" and "aten.mm" in e.detail["ops"]}

    b1, b8 = matmul_bytes(one), matmul_bytes(eight)
    assert b1.keys() == b8.keys() and b1
    assert all(b8[k] == pytest.approx(b1[k] / 8) for k in b1)  # per chip
    assert one.attribution["communication"] == 0 < eight.attribution["communication"]
    comm = [e for e in eight.events if e.kind == "comm"]
    assert len(comm) == 2 * 32  # o_proj and down_proj in each of 32 layers
    # ring all-reduce of the (8, 4096) bf16 output: 2 x 7/8 x bytes over 2 links x 50 GB/s one way
    wire = 2 * 7 / 8 * 8 * 4096 * 2
    assert comm[0].bytes["link"] == pytest.approx(wire)
    assert comm[0].detail["wire_s"] == pytest.approx(wire / (2 * 400e9 / 8))
    assert comm[0].floor == pytest.approx(1e-6 + comm[0].detail["wire_s"])  # at least one hop, then the bytes
    # a bidirectional ring all-reduce makes 8 hops of ~1 us (scaling book), each before its bytes: 57 kB is
    # latency bound
    assert comm[0].duration == pytest.approx(8 * 1e-6 + wire / (2 * 400e9 / 8))
    for e in eight.events:
        assert e.duration >= e.floor * (1 - 1e-9)
    # two chips share one link: 2 x 1/2 x bytes at 50 GB/s one way
    pair = simulate_llm("qwen2.5-0.5b", "tpu", chip="tpu-v5e", chips=2, phase="decode", batch=8, seq=256)
    c2 = next(e for e in pair.events if e.kind == "comm")
    assert c2.floor == pytest.approx(1e-6 + 8 * 896 * 2 / 50e9) and c2.detail["links_used"] == 1
    assert c2.duration == pytest.approx(2e-6 + 8 * 896 * 2 / 50e9)  # 2 hops of 1 us, then the bytes
    # a large all-reduce is bandwidth bound: prefill of 512 tokens moves 4 MB per all-reduce, the 8 hops' 8 us
    # a small part of it
    big = simulate_llm("llama-2-7b", "tpu", chip="tpu-v5e", chips=8, phase="prefill", batch=1, seq=512)
    cb = next(e for e in big.events if e.kind == "comm")
    assert cb.duration == pytest.approx(8e-6 + cb.detail["wire_s"]) and cb.detail["wire_s"] > 8 * 8e-6


def test_v4_has_its_ici_and_simulates_a_v4_8():
    # v4-8 = 4 chips; its ICI: 6 links x 4.5e10 B/s each way (scaling book), so tensor parallelism runs
    r = simulate_llm("llama-2-7b", "tpu", chip="tpu-v4", chips=4, phase="decode", batch=1, seq=256)
    assert r.chips == 4 and r.attribution["communication"] > 0


def test_tpu_max_chips_is_a_v5e_pod():
    with pytest.raises(DFAError, match="exceeds the tpu maximum of 256"):
        simulate_llm("tiny-block", "tpu", chips=512, seq=16)


# ---- dtypes and numerics --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_dtypes_without_a_tpu_datapath_are_clear_errors(dtype):
    with pytest.raises(DFAError, match=rf"chip 'tpu-v5e' has no {dtype} datapath; supported: bf16, int8"):
        simulate_op("matmul", (128, 128, 128), "tpu", dtype=dtype)
    with pytest.raises(DFAError, match="simulates tpu chips; 'h100-sxm' is a gpu"):
        simulate_op("matmul", (128, 128, 128), "tpu", chip="h100-sxm")
    assert simulate_op("matmul", (128, 128, 128), "tpu", chip="tpu-v6e", dtype="fp8").dtype == "fp8"


class _Bf16MatmulOperands(TorchDispatchMode):
    """XLA's default precision: f32 matmul operands rounded to bf16, products accumulated in f32."""

    MM = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in self.MM:
            args = tuple(a.to(torch.bfloat16).float() if isinstance(a, torch.Tensor) else a for a in args)
        return func(*args, **(kwargs or {}))


def test_documented_tolerance_covers_bf16_matmul_operands():
    assert TPUPolicy.matmul_operand_dtype == "bf16" and TPUPolicy.storage_dtype is None
    block = build_block("tiny-block", seed=0)
    x = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        eager = block(x)
        with _Bf16MatmulOperands():
            rounded = block(x)
    err = ((rounded - eager).abs().max() / eager.abs().max()).item()
    assert 1e-5 < err <= TPUPolicy.rtol_vs_eager  # rounding happened, and stays inside the documented bound
