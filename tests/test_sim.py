"""The simulated backends' shared contract, parametrised over every backend built so far."""
import json

import pytest

from common.errors import DFAError
from common.sim import BACKEND_NAMES, get_backend, simulate_llm, simulate_op


def _available():
    out = []
    for name in BACKEND_NAMES:
        try:
            get_backend(name)
            out.append(name)
        except ModuleNotFoundError:
            pass
    return out


BACKENDS = _available()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op, shape", [
    ("matmul", (1, 4096, 4096)), ("matmul", (512, 512, 512)), ("matmul", (4096, 4096, 4096)),
    ("matmul", (100, 300, 70)), ("softmax", (64, 1000)), ("add", (1 << 20,)), ("gelu", (32, 4096)),
    ("layernorm", (128, 768)), ("clone", (65,)), ("sdpa", (1, 8, 256, 64)),
])
def test_no_event_beats_its_roofline_floor(backend, op, shape):
    report = simulate_op(op, shape, backend)
    for e in report.events:
        assert e.duration >= e.floor * (1 - 1e-9), (e.name, e.duration, e.floor)
    compute = [e for e in report.events if e.kind == "compute"]
    assert compute and report.time_s > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribution_adds_up_and_is_deterministic(backend):
    a = simulate_llm("tiny-block", backend, phase="decode", batch=1, seq=16)
    b = simulate_llm("tiny-block", backend, phase="decode", batch=1, seq=16)
    assert a.summary_row() == b.summary_row()
    assert sum(a.attribution.values()) == pytest.approx(a.time_s)
    assert a.bottleneck in ("compute", "memory", "scheduling", "communication")


@pytest.mark.parametrize("backend", BACKENDS)
def test_chrome_trace_is_perfetto_json(backend, tmp_path):
    report = simulate_llm("tiny-block", backend, phase="prefill", batch=1, seq=8)
    path = tmp_path / "trace.json"
    report.chrome_trace(str(path))
    doc = json.loads(path.read_text())
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(report.events)
    assert all(e["dur"] > 0 and e["ts"] >= 0 for e in spans)


def test_gpu_decode_is_bound_by_hbm_at_batch_one():
    # llama-3.1-8b bf16 on an A100-40GB: every weight but the embedding table (a lookup reads one row) is read
    # once per token, plus the KV cache, over 1555 GB/s x 0.846 achievable (the A100's own copy measurement).
    from common.models import get_config
    cfg = get_config("llama-3.1-8b")
    weights = 2 * (cfg.n_params - cfg.vocab_size * cfg.d_model)
    kv = cfg.kv_bytes_per_token(2) * 1025
    r = simulate_llm("llama-3.1-8b", "gpu", chip="a100-40gb", phase="decode", batch=1, seq=1024)
    assert r.bottleneck == "memory"
    assert r.bytes["HBM"] == pytest.approx(weights + kv, rel=0.01)
    floor = (weights + kv) / 1555e9
    assert floor / 0.846 < r.time_s < 1.2 * floor / 0.846


def test_gpu_tensor_parallel_counts_all_chips_and_communicates():
    r = simulate_llm("llama-3.1-70b", "gpu", chip="h100-sxm", phase="decode", batch=1, seq=1024)
    assert r.chips == 2  # 141 GB of bf16 weights need two 80 GB H100s
    assert r.bytes["HBM"] == pytest.approx(141.1e9, rel=0.03)
    assert r.attribution["communication"] > 0


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_no_kernel_is_shorter_than_one_cycle_of_its_engine(backend):
    # a 1-element add moves 4-12 bytes: bandwidth alone would give picoseconds
    from common.sim.run import make_policy
    cycle = make_policy(backend).cycle_s()
    report = simulate_op("add", (1,), backend)
    kernels = [e for e in report.events if e.kind == "compute"]
    assert cycle > 0 and kernels
    assert all(e.duration >= cycle and e.floor >= cycle * (1 - 1e-12) for e in kernels)


@pytest.mark.parametrize(("model", "bad", "good"), [("llama-3.1-70b", 3, 4), ("llama-3.1-8b", 6, 8)])
def test_tensor_parallelism_refuses_a_degree_that_does_not_split_the_heads(model, bad, good):
    # 64 (70B) or 32 (8B) query heads and 8 K/V heads: 3 and 6 split neither evenly
    with pytest.raises(DFAError, match=rf"--chips {bad}: .* 8 K/V heads {bad} ways; valid for gpu: 1, 2, 4, 8"):
        simulate_llm(model, "gpu", phase="decode", batch=1, seq=128, chips=bad)
    assert simulate_llm(model, "gpu", phase="decode", batch=1, seq=128, chips=good).chips == good


def test_wave_quantisation_on_gpu():
    # 132 SMs: 133 tiles of 128x128 need two waves, so the second wave runs 1 tile on 132 SMs.
    r = simulate_op("matmul", (128 * 7, 4096, 128 * 19), "gpu", chip="h100-sxm")
    tiling = r.programs[0].kernels[0].tiling
    assert tiling["tiles"] == 133 and tiling["waves"] == 2
    assert tiling["wave_efficiency"] == pytest.approx(133 / 264)
    # K = 4096 in 64-deep slabs through a 3-stage pipeline: 64 slabs of work cost 66 slab times
    assert tiling["k_loop_efficiency"] == pytest.approx(64 / 66)
    assert tiling["efficiency"] == pytest.approx(133 / 264 * 64 / 66)


@pytest.mark.parametrize(("chip", "dtype"), [("a100-40gb", "bf16"), ("h100-sxm", "bf16"), ("h100-sxm", "fp8"),
                                             ("h200", "fp8"), ("t4", "fp16")])
def test_big_gemm_runs_at_the_measured_matmul_ceiling_not_the_datasheet(chip, dtype):
    # 132 x 128 rows and 16384 columns fill whole waves on 132 SMs; K = 16384 makes the pipeline fill ~0.1 %
    from common.chips import get_chip
    c = get_chip(chip)
    sms = c.compute_units
    r = simulate_op("matmul", (128 * sms, 16384, 128 * sms), "gpu", chip=chip, dtype=dtype)
    kernel = next(e for e in r.events if e.kind == "compute")
    mamf = c.estimates[f"matmul_efficiency_{dtype}"].value
    assert 0.3 < mamf < 0.9
    assert kernel.flops / kernel.duration == pytest.approx(mamf * c.peak(dtype), rel=0.01)
    assert kernel.floor == pytest.approx(kernel.flops / c.peak(dtype))


def test_fp8_is_its_own_measurement_not_twice_bf16():
    from common.chips import get_chip
    h100 = get_chip("h100-sxm")
    shape = (128 * 132, 8192, 128 * 132)
    bf16 = simulate_op("matmul", shape, "gpu", chip="h100-sxm", dtype="bf16").achieved_flops
    fp8 = simulate_op("matmul", shape, "gpu", chip="h100-sxm", dtype="fp8").achieved_flops
    ratio = h100.estimate("matmul_efficiency_fp8") / h100.estimate("matmul_efficiency_bf16") * 2
    assert 1.5 < fp8 / bf16 < 1.9 and fp8 / bf16 == pytest.approx(ratio, rel=0.02)


def test_each_gpu_has_its_own_bandwidth_fraction():
    from common.chips import get_chip
    fractions = {n: get_chip(n).estimates["achievable_bandwidth_fraction"] for n in ("t4", "a100-40gb", "h100-sxm")}
    assert len({f.value for f in fractions.values()}) == 3
    assert all("H100" not in f.derivation for n, f in fractions.items() if n != "h100-sxm")
    # a T4 decode step is bound by GDDR6 at its own measured fraction
    r = simulate_llm("qwen2.5-0.5b", "gpu", chip="t4", dtype="fp16", phase="decode", batch=1, seq=128)
    hbm = [e for e in r.events if e.kind == "compute" and e.bound == "memory"]
    assert hbm and all(e.duration >= e.bytes["GDDR6"] / (320e9 * 0.36) * (1 - 1e-9) for e in hbm)


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(DFAError, match="unknown backend 'xpu'; valid: gpu, lpu, spyre, tpu, wse"):
        get_backend("xpu")
    with pytest.raises(DFAError, match=r"^batch must be a positive int, got 0 \(int\)$"):
        simulate_llm("tiny-block", "gpu", batch=0)
    with pytest.raises(DFAError, match="simulates gpu chips; 'tpu-v5e' is a tpu"):
        simulate_llm("tiny-block", "gpu", chip="tpu-v5e", seq=16)
    with pytest.raises(DFAError, match="needs .* GB for weights"):
        simulate_llm("llama-3.1-70b", "gpu", chip="t4", dtype="fp16")
