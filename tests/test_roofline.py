"""Roofline: hand-computed ridge points and roofs, hierarchical levels, overhead ceiling, chip lookup, plots."""
from __future__ import annotations

import ast
import importlib.util
import math
import warnings
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from common import roofline
from common.chips import get_chip  # noqa: E402
from common.errors import DFAError  # noqa: E402
from common.measure import bench, devices  # noqa: E402
from common.measure.roofs import measure_roofline, roofline_for_this_machine  # noqa: E402
from common.roofline import (  # noqa: E402
    Ceiling,
    Roofline,
    add_overhead_ceiling,
    best_measured_roof,
    eng,
    plot_roofline,
    points_from_node_table,
    points_over_roof,
    roofline_for_chip,
    roofline_from_measured,
)

H100_BF16, H100_HBM = 989.4e12, 3.35e12
FIVE = ["h100-sxm", "tpu-v5e", "groq-lpu", "spyre", "wse-3"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def node_table() -> pd.DataFrame:
    """A small MLP's node table by hand: two GEMMs (64x1024 @ 1024x4096, bf16), a GELU, a view (no work)."""
    return pd.DataFrame({
        "node": ["fc1", "gelu", "view", "fc2"],
        "op": ["linear (fc1)", "gelu", "aten.view", "linear (fc2)"],
        "flops": [2 * 64 * 1024 * 4096, 8 * 64 * 4096, 0.0, 2 * 64 * 4096 * 1024],
        "bytes": [2 * (64 * 1024 + 1024 * 4096 + 64 * 4096), 2 * 2 * 64 * 4096, 0.0,
                  2 * (64 * 4096 + 4096 * 1024 + 64 * 1024)],
    }).assign(intensity=lambda d: (d["flops"] / d["bytes"]).fillna(0.0))


def fake_peaks(name="NVIDIA GeForce RTX 4090", device="cuda", flops=80e12, bw=900e9) -> bench.MeasuredPeaks:
    return bench.MeasuredPeaks(device=device, device_name=name, dtype="float32", flops_per_s=flops,
                               bytes_per_s=bw, gemm_n=8192, copy_bytes=1 << 30, gemm=None, copy=None)


# ------------------------------------------------------------------------------------------------ the model
def test_h100_ridge_and_roof_by_hand():
    rl = roofline_for_chip("h100-sxm", "bf16")
    assert rl.peak_flops == H100_BF16 and rl.bandwidth() == H100_HBM and rl.main_level == "HBM"
    assert rl.ridge_point() == pytest.approx(989.4e12 / 3.35e12)  # 295.3 FLOP/byte
    assert rl.ridge_point() == pytest.approx(get_chip("h100-sxm").ridge_point("bf16"))
    assert rl.attainable(1.0) == pytest.approx(H100_HBM)  # memory-bound: 1 FLOP/B x 3.35 TB/s
    assert rl.attainable(1e6) == H100_BF16  # far right of the ridge: the peak
    assert rl.attainable(rl.ridge_point()) == pytest.approx(H100_BF16)
    got = rl.attainable(np.array([0.5, 10.0, 1e4]))  # vectorised
    np.testing.assert_allclose(got, [0.5 * H100_HBM, 10 * H100_HBM, H100_BF16])
    assert isinstance(rl.attainable(2.0), float)
    assert rl.label == "h100-sxm · bf16 · datasheet" and rl.source == "catalog" and not rl.peak_is_estimate


def test_hierarchical_levels_one_ceiling_per_published_bandwidth():
    rl = roofline_for_chip("h100-sxm", "bf16", levels="all")
    assert rl.levels == ("SMEM", "HBM")  # L2 bandwidth is not published: no ceiling, said in the note
    assert "L2" in rl.note and rl.main_level == "HBM"
    smem = 128 * 132 * 1.83e9  # 128 B/clk/SM x 132 SMs x 1.83 GHz, as the catalog derives it
    assert rl.bandwidth("smem") == pytest.approx(smem)
    assert rl.ridge_point("SMEM") == pytest.approx(H100_BF16 / smem)
    # One op, one intensity per level; the lowest roof binds: min(peak, 10 x HBM, 100 x SMEM) = 10 x HBM.
    assert rl.attainable({"HBM": 10.0, "SMEM": 100.0}) == pytest.approx(10 * H100_HBM)
    assert rl.attainable({"HBM": 1e4, "SMEM": 1.0}) == pytest.approx(smem)
    tpu = roofline_for_chip("tpu-v5e", "bf16", levels="all")
    assert tpu.levels == ("HBM",) and "VMEM" in tpu.note  # software-managed VMEM: bandwidth unpublished
    assert roofline_for_chip("groq-lpu", "fp16").main_level == "SRAM"  # SRAM-only design
    with pytest.raises(DFAError, match="not published"):
        roofline_for_chip("tpu-v5e", "bf16", levels="VMEM")
    with pytest.raises(DFAError, match="valid: .*all"):
        roofline_for_chip("h100-sxm", "bf16", levels="everything")


def test_estimates_and_dtype_preferences_are_labelled():
    wse = roofline_for_chip("wse-3", ("bf16", "fp16"))
    assert wse.peak_is_estimate and wse.label == "wse-3 · bf16 · catalog estimate" and "estimate" in wse.note
    assert roofline_for_chip("groq-lpu", ("bf16", "fp16")).dtype == "fp16"  # Groq has no bf16 datapath
    assert roofline_for_chip("h100-sxm", torch.bfloat16).dtype == "bf16"
    with pytest.raises(DFAError, match="bf16"):
        roofline_for_chip("groq-lpu", "bf16")
    with pytest.raises(DFAError, match="none of"):
        roofline_for_chip("spyre", ("bf16", "fp32"))


def _lab6_answers():
    """Lab 6's grader-side answers module (source/lab6_roofline/answers.py), where the ridge table now lives."""
    path = Path(__file__).resolve().parents[1] / "course6_roofline/source/lab6_roofline/answers.py"
    spec = importlib.util.spec_from_file_location("lab6_answers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ridge_table_of_five_systems():
    answers = _lab6_answers()
    t = answers.ridge_table(FIVE, ("bf16", "fp16"))
    assert list(t.columns) == ["chip", "dtype", "peak_flops", "estimate", "level", "bandwidth", "ridge"]
    assert list(t["chip"]) == FIVE
    row = t.set_index("chip").loc["h100-sxm"]
    assert row["ridge"] == pytest.approx(989.4e12 / 3.35e12) and not row["estimate"]
    groq = t.set_index("chip").loc["groq-lpu"]
    assert groq["dtype"] == "fp16" and groq["ridge"] == pytest.approx(188e12 / 80e12)
    assert set(t.loc[t["estimate"], "chip"]) == {"spyre", "wse-3"}
    np.testing.assert_allclose(t["ridge"], t["peak_flops"] / t["bandwidth"])
    assert answers.system_ridges({"GPU": "h100-sxm"}) == {"GPU": pytest.approx(989.4e12 / 3.35e12)}


def test_overhead_ceiling_formula():
    rl = add_overhead_ceiling(roofline_for_chip("h100-sxm", "bf16"), 5e-6, flops=1e9)
    oh = rl.overhead
    assert oh.kind == "overhead" and oh.value == 5e-6 and oh.flops == 1e9 and "5 µs" in oh.name
    # Compute-bound op of 1 GFLOP: T = 5 us + 1e9 / 989.4e12 s = 6.0107 us -> 166.4 TFLOP/s.
    assert rl.attainable(1e4, flops=1e9) == pytest.approx(1e9 / (5e-6 + 1e9 / 989.4e12))
    assert rl.attainable(1e4, flops=1e9) == pytest.approx(166.37e12, rel=1e-4)
    # Memory-bound op: roof 10 x 3.35 TB/s; T = 5 us + 1e9 / 33.5e12 s.
    assert rl.attainable(10.0, flops=1e9) == pytest.approx(1e9 / (5e-6 + 1e9 / 33.5e12))
    # Tiny op: overhead-bound, ~ F / t0. Half-performance size F = t0 x roof gives exactly half the roof.
    assert rl.attainable(1e4, flops=1e3) == pytest.approx(1e3 / 5e-6, rel=1e-6)
    assert rl.attainable(1e4, flops=5e-6 * H100_BF16) == pytest.approx(H100_BF16 / 2)
    assert rl.attainable(1e4) == H100_BF16  # without an op size the classic roof
    np.testing.assert_allclose(rl.attainable(np.array([1e4, 1e4]), flops=np.array([1e3, 1e12])),
                               [1e3 / (5e-6 + 1e3 / H100_BF16), 1e12 / (5e-6 + 1e12 / H100_BF16)])
    again = add_overhead_ceiling(rl, 1e-6)  # replaces, never stacks
    assert [c.value for c in again.ceilings if c.kind == "overhead"] == [1e-6]


def test_extra_compute_ceiling():
    rl = roofline_for_chip("h100-sxm", "fp32").with_ceiling(Ceiling("fp32 GEMM at 70%", "compute", 0.7 * 66.9e12))
    assert rl.attainable(1e4, compute="fp32 GEMM at 70%") == pytest.approx(0.7 * 66.9e12)
    assert rl.attainable(1e4) == pytest.approx(66.9e12)
    with pytest.raises(DFAError, match="compute ceiling"):
        rl.attainable(1.0, compute="nope")


def test_bad_ceilings_and_rooflines():
    hbm = Ceiling("HBM", "bandwidth", 1e12, level="HBM")
    with pytest.raises(DFAError, match="ceiling kind"):
        Ceiling("x", "latency", 1.0)
    with pytest.raises(DFAError, match="> 0"):
        Ceiling("x", "bandwidth", -1.0, level="HBM")
    with pytest.raises(DFAError, match="memory level"):
        Ceiling("x", "bandwidth", 1e12)
    with pytest.raises(DFAError, match="bandwidth ceiling"):
        Roofline("x", 1e12, (Ceiling("c", "compute", 1e11),))
    with pytest.raises(DFAError, match="source"):
        Roofline("x", 1e12, (hbm,), source="guessed")
    with pytest.raises(DFAError, match="valid: HBM"):
        Roofline("x", 1e12, (hbm,)).bandwidth("L2")


# ------------------------------------------------------------------------------------- this machine's roofline
def test_roofline_from_measured_peaks():
    rl = roofline_from_measured(fake_peaks("AMD EPYC", "cpu", flops=50e9, bw=20e9))
    assert rl.source == "measured" and rl.dtype == "fp32" and rl.name == "AMD EPYC"
    assert rl.ridge_point() == pytest.approx(2.5) and rl.attainable(1.0) == pytest.approx(20e9)
    assert "measured on AMD EPYC" in rl.note and "measured" in rl.label


def test_measure_roofline_with_tiny_sizes():
    rl = measure_roofline("cpu", torch.float32, gemm_n=64, copy_bytes=1 << 16, min_run_time=0.01,
                                   warmup=0)
    assert rl.source == "measured" and rl.peak_flops > 0 and rl.bandwidth() > 0
    assert rl.ridge_point() == pytest.approx(rl.peak_flops / rl.bandwidth())
    assert rl.name == bench.device_name("cpu")


# name -> (compute capability, SMs, memory bytes) for torch.cuda.get_device_properties (memory: the nominal size)
_PROPERTIES = {"Tesla T4": ((7, 5), 40, 15 * 2**30), "NVIDIA GeForce RTX 4090": ((8, 9), 128, 24 * 2**30),
               "NVIDIA A100 80GB PCIe": ((8, 0), 108, 80 * 2**30)}


def _pretend_gpu(monkeypatch, name: str) -> list:
    calls = []
    (major, minor), sms, mem = _PROPERTIES[name]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: name)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a, **k: SimpleNamespace(
        major=major, minor=minor, multi_processor_count=sms, total_memory=mem))

    def measure_peaks(device, dtype, **kw):
        calls.append((str(device), dtype, kw))
        return fake_peaks(name)

    monkeypatch.setattr(bench, "measure_peaks", measure_peaks)
    return calls


def test_unknown_gpu_says_so_and_uses_measured_peaks(monkeypatch):
    calls = _pretend_gpu(monkeypatch, "NVIDIA GeForce RTX 4090")
    with pytest.warns(UserWarning, match="RTX 4090.*not in the catalog.*measured"):
        rls = roofline_for_this_machine()
    assert len(rls) == 1 and rls[0].source == "measured" and calls and calls[0][0] == "cuda"
    assert "not in the catalog" in rls[0].note and "t4" not in rls[0].name.lower()
    assert rls[0].peak_flops == 80e12  # the measured number, not any catalog record's
    assert "nearest catalog part, for the simulator only: 'l4'" in rls[0].note  # Ada, 8.9


def test_an_unknown_gpus_note_names_the_part_the_simulator_models(monkeypatch):
    """The nearest part is chosen from the device's own properties, as ``devices.this_machine`` chooses it: an
    80 GB A100 PCIe is the 80 GB record (its name alone ties the two A100 records)."""
    _pretend_gpu(monkeypatch, "NVIDIA A100 80GB PCIe")
    with pytest.warns(UserWarning, match="for the simulator only: 'a100-80gb'"):
        rls = roofline_for_this_machine()
    assert devices.this_machine().chip_name == "a100-80gb" and "'a100-80gb'" in rls[0].note


def test_tesla_t4_maps_to_the_t4_record(monkeypatch):
    _pretend_gpu(monkeypatch, "Tesla T4")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        catalog, measured = roofline_for_this_machine(dtype=torch.float16)
    assert catalog.name == "t4" and catalog.source == "catalog" and catalog.peak_flops == pytest.approx(65e12)
    assert catalog.bandwidth() == pytest.approx(320e9) and "Tesla T4" in catalog.note
    assert measured.source == "measured"
    only = roofline_for_this_machine(dtype=torch.float16, measure=False)
    assert [r.source for r in only] == ["catalog"]
    with pytest.warns(UserWarning, match="no bf16"):  # Turing has no bf16 tensor cores: measured only
        assert [r.source for r in roofline_for_this_machine(dtype=torch.bfloat16)] == ["measured"]


def test_cpu_machine_is_measured(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(bench, "measure_peaks", lambda device, dtype, **kw: fake_peaks("AMD EPYC", str(device)))
    rls = roofline_for_this_machine()
    assert len(rls) == 1 and rls[0].source == "measured" and rls[0].name == "AMD EPYC"
    with pytest.raises(DFAError, match="no CUDA device"):
        roofline_for_this_machine("cuda")


def test_catalog_roofline_with_an_fp32_ceiling_under_the_tensor_core_roof():
    rl = roofline_for_chip("t4", "fp16", extra_dtypes=("fp32", "bf16", "fp16"))
    assert rl.peak_flops == pytest.approx(65e12)
    (fp32,) = [c for c in rl.ceilings if c.kind == "compute"]
    assert fp32.value == pytest.approx(8.1e12) and fp32.name.startswith("fp32 peak")
    assert "no bf16 ceiling" in rl.note  # Turing has no bf16 datapath: said, not drawn
    assert rl.attainable(1e4, compute=fp32.name) == pytest.approx(8.1e12)


def _measured_rl(peak=22.7e9, bw=10e9) -> Roofline:
    return roofline_from_measured(fake_peaks("Busy CPU", "cpu", flops=peak, bw=bw))


def _cpu_ops() -> pd.DataFrame:
    """A 2048 GEMM that beat the 1024 probe (the issue's 33.3 vs 22.7 GFLOP/s) and a softmax that beat the copy."""
    n = 2048
    return pd.DataFrame({"label": ["GEMM 2048", "softmax"], "flops": [2.0 * n**3, 5.0 * 4096 * 1024],
                         "bytes": [3.0 * n * n * 4, 2.0 * 4096 * 1024 * 4],
                         "time_s": [2.0 * n**3 / 33.3e9, 2.0 * 4096 * 1024 * 4 / 14e9]})


def test_a_measured_op_above_the_probe_raises_the_measured_roof():
    rl, ops = _measured_rl(), _cpu_ops()
    assert len(points_over_roof(ops, rl)) == 2  # both above the probes: a probe is not the best a machine can do
    best = best_measured_roof(rl, ops)
    assert best.peak_flops == pytest.approx(33.3e9) and best.bandwidth() == pytest.approx(14e9)
    assert points_over_roof(ops, best).empty  # nothing above the roof any more
    assert "'GEMM 2048'" in best.note and "'softmax'" in best.note and "probe" in best.note
    (probe,) = [c for c in best.ceilings if c.kind == "compute"]
    assert probe.value == pytest.approx(22.7e9)  # the probe stays visible as a ceiling below the roof
    assert best.source == "measured" and best.ridge_point() == pytest.approx(33.3e9 / 14e9)
    # records of a harness (bench.BenchResult or alike) work the same way
    recs = [SimpleNamespace(label=r.label, flops=r.flops, bytes=r.bytes, median_s=r.time_s)
            for r in ops.itertuples()]
    assert best_measured_roof(rl, recs).peak_flops == pytest.approx(33.3e9)
    # nothing above the roof: the same roofline back
    slow = ops.assign(time_s=ops["time_s"] * 10)
    assert best_measured_roof(rl, slow) is rl and best_measured_roof(rl, []) is rl


def test_a_datasheet_roof_is_not_raised_by_measurements():
    with pytest.raises(DFAError, match="measured roofline.*catalog"):
        best_measured_roof(roofline_for_chip("t4", "fp16"), _cpu_ops())


def test_plot_draws_a_measured_roof_at_or_above_every_measured_point():
    ax = plot_roofline(_measured_rl(), _cpu_ops(), kind="measured")
    (roof,) = [ln for ln in ax.get_lines() if ln.get_label() == "Busy CPU · fp32 · measured"]
    assert max(roof.get_ydata()) == pytest.approx(33.3e9)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("GEMM probe" in t for t in legend) and not any("above the roof" in t for t in legend)


def test_plot_rings_points_above_a_datasheet_roof():
    ops = _cpu_ops().assign(time_s=lambda d: d["time_s"] / 1e4)  # impossible on a T4: 333 TFLOP/s
    ax = plot_roofline(roofline_for_chip("t4", "fp16"), ops, kind="measured")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("2 above the roof") for t in legend)


def test_measure_roofline_with_a_16_bit_roof(monkeypatch):
    monkeypatch.setattr(bench, "measure_peaks", lambda device, dtype, **kw: fake_peaks("T4", "cuda", 7e12, 250e9))
    fp16 = SimpleNamespace(flops_per_s=40e12, sub_label="gemm N=8192")
    monkeypatch.setattr(bench, "measure_gemm_peaks",
                        lambda device, dtypes, **kw: {"float16": fp16, "bfloat16": "skipped: no bf16 here"})
    with pytest.warns(UserWarning, match="bf16: skipped"):
        rl = measure_roofline("cuda", torch.float32, extra_dtypes=(torch.float16, torch.bfloat16))
    assert rl.dtype == "fp16" and rl.peak_flops == 40e12  # the fastest measured dtype is the roof
    (fp32,) = [c for c in rl.ceilings if c.kind == "compute"]
    assert fp32.value == 7e12 and fp32.name.startswith("fp32 GEMM")
    assert "bf16 skipped: no bf16 here" in rl.note and "roof = the fastest measured dtype, fp16" in rl.note


def test_measure_roofline_16_bit_on_this_cpu():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a CPU build without bf16 matmul skips it, with a warning
        rl = measure_roofline("cpu", torch.float32, extra_dtypes=(torch.bfloat16,), gemm_n=32,
                                       copy_bytes=1 << 16, min_run_time=0.01, warmup=0)
    names = [c.name for c in rl.ceilings if c.kind == "compute"]
    assert ("bf16 skipped" in rl.note) != (len(names) == 1)  # measured as a ceiling or roof, or said skipped
    assert rl.peak_flops > 0 and all(c.value <= rl.peak_flops for c in rl.ceilings if c.kind == "compute")


# ------------------------------------------------------------------------------------------------- points
def test_analytical_points_sit_on_the_roof_and_views_are_dropped():
    rl = roofline_for_chip("h100-sxm", "bf16")
    pts = points_from_node_table(node_table(), rl)
    assert list(pts["label"]) == ["linear (fc1)", "gelu", "linear (fc2)"] and pts.attrs["dropped"] == 1
    assert set(pts["source"]) == {"analytical"} and pts.attrs["roof"] == "h100-sxm roof"
    np.testing.assert_allclose(pts["flops_per_s"], np.minimum(H100_BF16, pts["intensity"] * H100_HBM))
    assert list(pts["bound"]) == ["memory (HBM)"] * 3  # intensity ~ 57 and 2 FLOP/B, both left of 295
    big = pd.DataFrame({"op": ["gemm"], "flops": [2 * 8192**3], "bytes": [3 * 8192**2 * 2]})
    assert points_from_node_table(big, rl)["bound"].tolist() == ["compute"]  # 2731 FLOP/B


def test_analytical_points_pay_the_overhead_ceiling():
    rl = add_overhead_ceiling(roofline_for_chip("h100-sxm", "bf16"), 5e-6)
    pts = points_from_node_table(node_table(), rl)
    gelu = pts.set_index("label").loc["gelu"]
    assert pts.attrs["roof"] == "h100-sxm roof + 5 µs/op"
    f = 8 * 64 * 4096
    assert gelu["flops_per_s"] == pytest.approx(f / (5e-6 + f / (2.0 * H100_HBM)))
    assert gelu["bound"] == "overhead"  # 5 us >> its 0.31 us of memory time


def test_measured_and_simulated_points_need_their_kind():
    t = node_table().assign(time_s=[2e-6, 1e-6, 1e-6, 2e-6])
    with pytest.raises(DFAError, match="measured.*simulated"):
        points_from_node_table(t, None)
    pts = points_from_node_table(t, None, kind="measured")
    assert set(pts["source"]) == {"measured"}
    assert pts["flops_per_s"].iloc[0] == pytest.approx(2 * 64 * 1024 * 4096 / 2e-6)
    timeline = pd.DataFrame({"name": ["mm"], "flops": [1e9], "bytes": [1e7], "start_s": [1.0], "end_s": [1.001]})
    sim = points_from_node_table(timeline, kind="simulated")
    assert sim["label"].tolist() == ["mm"] and sim["flops_per_s"].iloc[0] == pytest.approx(1e12)
    assert sim["intensity"].iloc[0] == pytest.approx(100.0)
    with pytest.raises(DFAError, match="needs achieved performance"):
        points_from_node_table(node_table(), roofline_for_chip("t4", "fp16"), kind="measured")
    on_roof = points_from_node_table(t, roofline_for_chip("t4", "fp16"), kind="analytical")
    assert set(on_roof["source"]) == {"analytical"} and on_roof.attrs["roof"] == "t4 roof"
    with pytest.raises(DFAError, match="intensity column, or flops and bytes"):
        points_from_node_table(pd.DataFrame({"op": ["x"], "time_s": [1.0]}), kind="measured")
    with pytest.raises(DFAError, match="point kind"):
        points_from_node_table(timeline.assign(source="guessed"), None)


def test_simulator_tables_plot_as_simulated():
    """A sim report's roofline_points() carries source='simulated'; a raw timeline's 'kind' is its event kind."""
    sim_points = pd.DataFrame({"name": ["mm", "add"], "kernel": ["gemm", "ew"], "flops": [1e9, 1e6],
                               "bytes": [1e7, 3e6], "intensity": [100.0, 1e6 / 3e6], "flops_per_s": [5e14, 2e11],
                               "duration_s": [2e-6, 5e-6], "bound": ["compute", "memory"], "source": "simulated"})
    ax = plot_roofline(roofline_for_chip("h100-sxm", "bf16"), sim_points)
    assert any("ops (simulated, n=2)" in t.get_text() for t in ax.get_legend().get_texts())
    timeline = pd.DataFrame({"name": ["mm", "dma"], "kind": ["compute", "copy"], "flops": [1e9, 0.0],
                             "bytes": [1e7, 1e6], "start_s": [0.0, 1e-6], "end_s": [1e-6, 2e-6]})
    pts = points_from_node_table(timeline, kind="simulated")
    assert pts["label"].tolist() == ["mm"] and pts.attrs["dropped"] == 1


def test_hierarchical_points_one_per_level_same_performance():
    rl = roofline_for_chip("h100-sxm", "bf16", levels="all")
    df = node_table().assign(smem_bytes=lambda d: d["bytes"] / 8)
    pts = points_from_node_table(df, rl, level_bytes={"HBM": "bytes", "SMEM": "smem_bytes"})
    assert len(pts) == 6 and pts.groupby("op_id")["flops_per_s"].nunique().eq(1).all()
    hbm, smem = pts[pts["level"] == "HBM"], pts[pts["level"] == "SMEM"]
    np.testing.assert_allclose(smem["intensity"].to_numpy(), 8 * hbm["intensity"].to_numpy())
    np.testing.assert_allclose(hbm["flops_per_s"], np.minimum(H100_BF16, hbm["intensity"] * H100_HBM))
    assert set(pts["bound"]) == {"memory (HBM)"}  # HBM binds: 8x less traffic at SMEM, 9x more bandwidth
    starved = points_from_node_table(df.assign(smem_bytes=lambda d: d["bytes"] * 20), rl,
                                     level_bytes={"HBM": "bytes", "SMEM": "smem_bytes"})
    assert set(starved["bound"]) == {"memory (SMEM)"}  # 20x re-reads from SMEM: now SMEM binds


def test_software_managed_level_with_an_assumed_bandwidth():
    """The catalog publishes no VMEM bandwidth; a lab adds one as a labelled assumption and gets two ceilings."""
    tpu = roofline_for_chip("tpu-v5e", "bf16").with_ceiling(
        Ceiling("VMEM (assumed)", "bandwidth", 10 * 819e9, level="VMEM", note="assumption for the exercise"))
    assert tpu.levels == ("HBM", "VMEM") and tpu.main_level == "HBM"  # the slowest level stays the default
    assert tpu.ridge_point("VMEM") == pytest.approx(197e12 / 8.19e12)
    ax = plot_roofline(tpu)
    assert {"ridge 241 FLOP/B", "ridge 24.1 FLOP/B", "VMEM (assumed)"} <= set(_texts(ax))


# --------------------------------------------------------------------------------------------------- plots
def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_plot_single_roofline_with_points(tmp_path):
    rl = add_overhead_ceiling(roofline_for_chip("h100-sxm", "bf16", levels="all"), 5e-6, flops=1e9)
    ax = plot_roofline(rl, node_table())
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "FLOP/byte" in ax.get_xlabel() and "FLOP/s" in ax.get_ylabel()
    assert len(ax.get_lines()) == 3 + 2  # SMEM, HBM, overhead ceiling + one marker per ridge point
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[1] == "h100-sxm · bf16 · datasheet · HBM 3.35 TB/s" and "time-based ceiling" in legend[2]
    assert any("analytical" in s and "1 without FLOPs" in s for s in legend)
    texts = _texts(ax)
    assert {"ridge 295 FLOP/B", "ridge 32 FLOP/B", "bf16 peak 989 TFLOP/s", "HBM 3.35 TB/s"} <= set(texts)
    assert "linear (fc1) ×2" in texts  # both GEMMs sit on the same spot: one label
    path = tmp_path / "roofline.png"
    ax.figure.savefig(path, dpi=80)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert "1 PFLOP/s" in ticks and "100 TFLOP/s" in ticks


def test_plot_five_systems_and_mixed_point_kinds(tmp_path):
    rls = [roofline_for_chip(c, ("bf16", "fp16")) for c in FIVE]
    measured = node_table().assign(time_s=1e-5)
    simulated = node_table().assign(time_s=2e-5)
    with pytest.raises(DFAError, match="measured.*simulated"):
        plot_roofline(rls, measured)
    measured.attrs["label"] = "CPU"
    ax = plot_roofline(rls, [points_from_node_table(measured, kind="measured"),
                             points_from_node_table(simulated, kind="simulated")], label_points=False)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(legend) == 5 + 2 and legend[0] == "h100-sxm · bf16 · datasheet · ridge 295"
    assert "wse-3 · bf16 · catalog estimate · ridge 0.377" in legend
    assert any(s.startswith("CPU: ops (measured") for s in legend) and any("simulated" in s for s in legend)
    roofs = [ln for ln in ax.get_lines() if ln.get_label() in legend]
    assert len({ln.get_color() for ln in roofs}) == 5  # one colour per system
    # each roof's ridge is labelled with its own catalog value (Spyre's moved with torch-spyre's constants)
    assert {f"{rl.ridge_point():.3g} FLOP/B" for rl in rls} <= set(_texts(ax))
    assert "295 FLOP/B" in set(_texts(ax))
    assert "5 systems" in ax.get_title() and ax.get_title().endswith("ops: measured, simulated")
    ax.figure.savefig(tmp_path / "five.png", dpi=60)


def test_plot_hierarchical_points_connects_each_op(tmp_path):
    rl = roofline_for_chip("h100-sxm", "bf16", levels="all")
    df = node_table().assign(smem_bytes=lambda d: d["bytes"] / 8)
    pts = points_from_node_table(df, rl, level_bytes={"HBM": "bytes", "SMEM": "smem_bytes"})
    ax = plot_roofline(rl, pts)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("ops @ HBM" in s for s in legend) and any("ops @ SMEM" in s for s in legend)
    connectors = [ln for ln in ax.get_lines() if ln.get_label().startswith("_") and len(ln.get_xdata()) == 2]
    assert len(connectors) == 3  # one per op with work (the view was dropped)
    ax.figure.canvas.draw()  # slope labels take their angle after layout: a slope-1 line in display space
    (slope,) = [t for t in ax.texts if t.get_text() == "HBM 3.35 TB/s"]
    assert 15 < slope.get_rotation() < 75
    ax.figure.savefig(tmp_path / "hier.png", dpi=60)


def test_plot_into_given_axes_and_bad_input():
    fig, (a, b) = plt.subplots(1, 2)
    assert plot_roofline(roofline_for_chip("t4", "fp16"), ax=b, title="T4") is b and b.get_title() == "T4"
    with pytest.raises(DFAError, match="Roofline"):
        plot_roofline([])


# ------------------------------------------------------------------------------------------------- misc
def test_engineering_format():
    assert eng(1e12, "FLOP/s") == "1 TFLOP/s" and eng(989.4e12, "FLOP/s") == "989 TFLOP/s"
    assert eng(3.35e12, "B/s") == "3.35 TB/s" and eng(5e-6, "s") == "5 µs"
    assert eng(999.99e9, "FLOP/s") == "1 TFLOP/s"


def test_module_holds_no_hardware_numbers():
    trees = [ast.parse(p.read_text(encoding="utf-8")) for p in Path(roofline.__file__).parent.glob("*.py")]
    numbers = [n.value for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Constant)
               and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)]
    assert max(abs(v) for v in numbers if math.isfinite(v)) < 1e3  # only prefixes as powers, no 1e12-ish peaks
