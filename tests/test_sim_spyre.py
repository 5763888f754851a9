"""The Spyre backend: stick layout, restickify, CPU fallback, LX planning, work division, counters, references."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from common.errors import DFAError
from common.sim import simulate, simulate_llm, simulate_op
from common.sim.machines.spyre import SpyrePolicy, stick_layout
from common.sim.workload import graph_workload

LPDDR_BW = 204.8e9 * 0.73  # catalog spec x achievable fraction: torch-spyre's one-directional 150 GB/s
TURNAROUND = 0.00574e-9  # s per byte of min(read, write): torch-spyre CostParams.rw_turnaround_ns_per_byte
DMA_LATENCY = 100e-9  # lpddr_dma_latency_s: paid once per op's LPDDR5 <-> LX transfer (common/chips/catalog/ibm.py)
FP16_PEAK = 1536e9 * 2 * 32  # torch-spyre's datasheet 1536 MAC/ns/core x 32 cores
SUSTAINED = 1140 / 1536  # CostParams.mac_peak_per_core_ns


def _workload(fn, *shape):
    class Fn(torch.nn.Module):
        def forward(self, x):
            return fn(x)
    with FakeTensorMode():
        x = torch.empty(*shape, dtype=torch.float16)
    return graph_workload(Fn(), (x,), dtype="fp16")


def _cores(report):
    return [e for e in report.events if e.engine == "cores" and e.kind == "compute"]


@pytest.mark.parametrize("n, sticks, padding", [(63, 1, 2), (64, 1, 0), (65, 2, 126), (128, 2, 0), (150, 3, 84)])
def test_stick_counts_and_padding_by_hand(n, sticks, padding):
    # 64 fp16 per 128-byte stick: 65 values take two sticks, 63 padding slots of 2 bytes.
    lay = stick_layout((n,))
    assert lay["sticks"] == sticks and lay["padding_bytes"] == padding
    assert lay["padded_shape"] == (64 * sticks,) and lay["device_bytes"] == 128 * sticks


def test_stick_layout_of_2d_tensors():
    lay = stick_layout((1024, 256))
    assert lay["device_shape"] == (4, 1024, 64) and lay["sticks"] == 4096 and lay["padding_bytes"] == 0
    lay = stick_layout((3, 100))  # each row of 100 fills 2 sticks: 28 padding slots x 3 rows x 2 bytes
    assert lay["padded_shape"] == (3, 128) and lay["device_shape"] == (2, 3, 64)
    assert lay["sticks"] == 6 and lay["padding_bytes"] == 168
    assert stick_layout((150,), "int8")["sticks"] == 2  # 128 int8 values per stick
    with pytest.raises(DFAError, match="unknown dtype"):
        stick_layout((4,), "fp64")


def test_restickify_for_transposed_activation_not_for_weights():
    r = simulate_op("sdpa", (1, 8, 256, 64), "spyre")
    k = r.programs[0].kernels[0]
    rs = [o for o in k.ops if o.op == "spyre.restickify"]
    assert len(rs) == 1 and rs[0].shape == (8, 64, 256)  # K^T: sticks move from D (64) to S (256)
    bmm = next(o for o in k.ops if o.op == "aten.bmm")
    assert rs[0].name in bmm.in_bytes and k.ops.index(rs[0]) < k.ops.index(bmm)
    ev = next(e for e in _cores(r) if e.detail["sdsc_kind"] == "restickify")
    assert ev.duration > 0 and ev.bytes["LX"] > 0 and r.counters["restickify_count"] == 1
    assert r.counters["restickify_bytes"] == 8 * 64 * 256 * 2
    # nn.Linear reads its weight through a transposed view, but weights are laid out at load time
    lin = torch.nn.Linear(256, 512).half()
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(16, 256, dtype=torch.float16)
    r = simulate(graph_workload(lin, (x,), dtype="fp16"), "spyre")
    mm = next(o for k in r.programs[0].kernels for o in k.ops if o.kind == "matmul")
    assert mm.op == "aten.addmm" and set(mm.transposed_inputs) & set(mm.param_inputs)  # W.t() is a param
    assert r.counters["restickify_count"] == 0
    assert all(o.op != "spyre.restickify" for k in r.programs[0].kernels for o in k.ops)


def test_fallback_is_a_host_round_trip_and_strict_mode_refuses_it():
    w = _workload(lambda x: torch.cumsum(x * 2, -1) + 1, 64, 1000)
    r = simulate(w, "spyre")
    kinds = [k.kind for k in r.programs[0].kernels]
    assert kinds == ["pointwise", "fallback", "pointwise"]  # the graph break splits the bundle in two
    names = [(e.kind, e.engine) for e in r.events if e.kernel == "k1"]
    assert names == [("sync", "host"), ("dma", "pcie"), ("host", "host"), ("dma", "pcie")]
    d2h = next(e for e in r.events if e.name == "d2h k1")
    # one PCIe hop's latency (1 us, NCCL's PCI figure: common/chips/catalog/links.py), then the bytes one way
    assert d2h.bytes["PCIe"] == 64 * 1000 * 2 and d2h.duration == pytest.approx(1e-6 + 128000 / 64e9)
    assert r.counters["fallback_count"] == 1 and r.counters["host_roundtrip_bytes"] == 2 * 128000
    assert r.counters["bundle_launches"] == 2
    with pytest.raises(DFAError, match=r"^aten.cumsum falls back to the CPU on spyre; nearest native: aten.sum$"):
        simulate(w, "spyre", strict=True)


def test_counters_add_up_to_the_events():
    r = simulate_llm("tiny-block", "spyre", phase="prefill", batch=1, seq=8)
    c = r.counters
    lpddr = sum(e.bytes.get("LPDDR5", 0.0) for e in r.events)
    assert lpddr == pytest.approx(c["lpddr_to_lx_bytes"] + c["lx_to_lpddr_bytes"]) and lpddr > 0
    assert r.bytes["LPDDR5"] == pytest.approx(lpddr)
    for e in _cores(r):  # per kernel: the traffic in the event is what its detail says it read and wrote
        assert e.bytes["LPDDR5"] == pytest.approx(e.detail["lpddr_read"] + e.detail["lpddr_write"])
    dma = sum(e.detail["lpddr_read"] + e.detail["lpddr_write"] for e in r.events if e.engine == "dma")
    assert dma == pytest.approx(lpddr)
    assert c["restickify_count"] == 2 and c["fallback_count"] == 1  # one K^T per layer; the mask's repeat


def test_lx_spill_when_the_per_core_slice_does_not_fit():
    chain = lambda x: torch.exp(x * 2 + 1)  # noqa: E731  two intermediates: mul, add
    big = simulate(_workload(chain, 4096, 16384), "spyre")  # 128 MB: 4 MB per core > 1.55 MB of LX
    k = big.programs[0].kernels[0]
    assert k.tiling["spill_bytes"] == 2 * 4096 * 16384 * 2
    assert k.tiling["lpddr_read"] == 3 * 4096 * 16384 * 2  # input + two spilled intermediates read back
    assert big.counters["lx_spill_bytes"] == k.tiling["spill_bytes"]
    small = simulate(_workload(chain, 64, 1024), "spyre")  # 4 KB per core
    k = small.programs[0].kernels[0]
    assert k.tiling["spill_bytes"] == 0 and [p["output_to"] for p in k.tiling["sdsc"]] == ["LX", "LX", "LPDDR5"]
    assert k.tiling["lpddr_read"] == k.tiling["lpddr_write"] == 64 * 1024 * 2
    # the budget is a compiler option: 1 MB per core (32 MB tensor) fits the default budget, not 0.5 MB
    mid = _workload(chain, 1024, 16384)
    assert simulate(mid, "spyre").programs[0].kernels[0].tiling["spill_bytes"] == 0
    tight = simulate(mid, "spyre", lx_budget_bytes=500_000).programs[0].kernels[0]
    assert tight.tiling["spill_bytes"] > 0 and tight.tiling["lx_budget_bytes"] == 500_000


def test_work_division_and_core_count():
    # equal sticks per core: 1000 rows -> 25 cores (the largest divisor of 1000 that is <= 32)
    plan = simulate_op("softmax", (1000, 64), "spyre").programs[0].kernels[0].tiling["sdsc"][0]
    assert plan["cores_used"] == 25 and plan["split"] == "d0/25"
    decode = simulate_op("matmul", (1, 4096, 4096), "spyre").programs[0].kernels[0].tiling["sdsc"][0]
    assert decode["split"] == "N/32"  # M = 1: the 64 column sticks are divided instead
    full = simulate_op("matmul", (4096, 4096, 4096), "spyre")
    eight = simulate_op("matmul", (4096, 4096, 4096), "spyre", cores=8)
    assert eight.programs[0].kernels[0].tiling["cores_used"] == 8
    t32, t8 = _cores(full)[0].duration, _cores(eight)[0].duration
    assert t32 == pytest.approx(2 * 4096**3 / (FP16_PEAK * SUSTAINED)) and t8 == pytest.approx(4 * t32)
    with pytest.raises(DFAError, match="cores must be an integer in 1..32, got 33"):
        simulate_op("add", (1024,), "spyre", cores=33)


def test_copy_kernels_record_their_range():
    plan = simulate_op("clone", (65,), "spyre").programs[0].kernels[0].tiling["sdsc"][0]
    assert plan["copy_range_elems"] == (0, 65) and plan["copy_range_sticks"] == (0, 2) and plan["copy_rows"] == 1
    assert plan["padding_bytes"] == 126 and plan["device_shape"] == (2, 64)
    plan = simulate_op("clone", (3, 100), "spyre").programs[0].kernels[0].tiling["sdsc"][0]
    assert plan["copy_range_elems"] == (0, 100) and plan["copy_range_sticks"] == (0, 2) and plan["copy_rows"] == 3


def test_spyre_is_fp16_and_int8_only():
    with pytest.raises(DFAError, match="spyre.*no bf16 datapath; supported: fp16, int8"):
        simulate_op("add", (1024,), "spyre", dtype="bf16")
    p = SpyrePolicy()
    assert p.dtype == "fp16" and p.storage_dtype == p.matmul_operand_dtype == "fp16" and p.max_chips == 48


def test_published_cost_model_reference_points():
    # torch-spyre's cost-model docs: softmax 4096x2048 fp16, 32 cores ~320 us (16.8 MB in + 16.8 MB out)
    r = simulate_op("softmax", (4096, 2048), "spyre")
    ev = _cores(r)[0]
    assert ev.bytes["LPDDR5"] == 2 * 4096 * 2048 * 2 and ev.bound == "memory"
    # 1 read + 1 write: 100 ns DMA latency + 33.6 MB / 150 GB/s + turnaround x 16.8 MB = 224 + 96 us (balanced:
    # ~105 GB/s)
    assert ev.duration == pytest.approx(DMA_LATENCY + ev.bytes["LPDDR5"] / LPDDR_BW +
                                        ev.bytes["LPDDR5"] / 2 * TURNAROUND)
    assert ev.duration == pytest.approx(320e-6, rel=0.05)
    # 4096x2048 @ 2048x1024 in 8 row tiles ~423 us, moving 58.7 MB (B re-read once per tile)
    r = simulate_op("matmul", (4096, 2048, 1024), "spyre", coarse_tiles=8)
    ev = _cores(r)[0]
    assert ev.bytes["LPDDR5"] == pytest.approx(58.7e6, rel=0.01) and ev.detail["m_tiles"] == 8
    assert 423e-6 / 2 < ev.duration < 423e-6 * 2
    # left to itself the compiler keeps each core's rows in LX and reads B once: 29.4 MB
    assert _cores(simulate_op("matmul", (4096, 2048, 1024), "spyre"))[0].bytes["LPDDR5"] == \
        pytest.approx(29.4e6, rel=0.01)


def test_llm_decode_streams_the_weights_and_70b_needs_two_cards():
    r = simulate_llm("llama-3.1-8b", "spyre", phase="decode", batch=1, seq=1024)
    assert r.bottleneck == "memory" and r.chips == 1
    # 16.06 GB of fp16 weights minus the 1.05 GB embedding table (only one row is gathered), plus ~0.13 GB KV
    assert r.bytes["LPDDR5"] == pytest.approx(15.15e9, rel=0.01)
    assert r.time_s == pytest.approx(r.bytes["LPDDR5"] / LPDDR_BW, rel=0.02)
    big = simulate_llm("llama-3.1-70b", "spyre", phase="decode", batch=1, seq=1024)
    assert big.chips == 2 and big.attribution["communication"] > 0
    assert any(e.kind == "comm" for e in big.events)


def test_softmax_row_tiling_keeps_its_intermediates_in_lx():
    # 4096 x 16384 fp16 = 128 MB: 4 MB of rows per core, more than the ~1.6 MB of LX. The decomposed softmax's
    # sub/exp intermediates used to spill (3x the traffic); torch-spyre tiles the rows instead.
    r = simulate_op("softmax", (4096, 16384), "spyre")
    k = r.programs[0].kernels[0]
    plan = k.tiling["sdsc"][0]
    assert plan["row_tiles"] > 1 and k.tiling["spill_bytes"] == 0
    assert k.tiling["lpddr_read"] == k.tiling["lpddr_write"] == 4096 * 16384 * 2
    assert plan["ws_bytes_per_core"] <= k.tiling["lx_budget_bytes"]


def test_default_layout_bmm_runs_at_torch_spyres_slow_rate():
    # attention's Q K^T is a bmm of two activations (batch 8 heads): the compiler-default tile order runs at
    # 160 of 1536 MAC/ns/core; a weight matmul at 1140
    attn = _cores(simulate_op("sdpa", (1, 8, 2048, 128), "spyre"))
    bmm = [e for e in attn if e.detail["op"] == "aten.bmm"]
    assert bmm and all(e.detail["compute_efficiency"] == pytest.approx(160 / 1536) for e in bmm)
    assert all(e.bound == "compute" for e in bmm)
    mm = _cores(simulate_op("matmul", (2048, 2048, 2048), "spyre"))[0]
    assert mm.detail["compute_efficiency"] == pytest.approx(SUSTAINED)
    # batch 2 (below bmm_default_min_batch = 4) keeps the plain sustained rate
    small = [e for e in _cores(simulate_op("sdpa", (1, 2, 2048, 128), "spyre")) if e.detail["op"] == "aten.bmm"]
    assert small and all(e.detail["compute_efficiency"] == pytest.approx(SUSTAINED) for e in small)
