"""Device detection and chip choice, the CUDA branches run against a faked torch.cuda (no GPU needed)."""
from types import SimpleNamespace

import pytest
import torch

from common.chips import get_chip
from common.errors import DFAError
from common.measure import devices

# name -> (compute capability, SMs, memory bytes) as torch.cuda.get_device_properties reports them
GPUS = {
    "Tesla T4": ((7, 5), 40, 15_828_320_256),
    "NVIDIA L4": ((8, 9), 58, 23_580_639_232),
    "NVIDIA A100-SXM4-40GB": ((8, 0), 108, 42_314_694_656),
    "NVIDIA A100-SXM4-80GB": ((8, 0), 108, 85_097_971_712),
    "NVIDIA H100 80GB HBM3": ((9, 0), 132, 85_045_870_592),
    "NVIDIA H100 PCIe": ((9, 0), 114, 85_045_870_592),
    "NVIDIA A10G": ((8, 6), 80, 23_836_098_560),
    "NVIDIA RTX 9999": ((12, 0), 200, 200e9),
    "Tesla V100-SXM2-16GB": ((7, 0), 80, 16 * 2**30),  # 16 GiB: the memory size, near what torch reports
}


@pytest.fixture
def fake_gpu(monkeypatch):
    """Make torch see one CUDA device with the given name (and properties)."""
    def install(name):
        (major, minor), sms, mem = GPUS[name]
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: name)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d=None: SimpleNamespace(
            name=name, major=major, minor=minor, multi_processor_count=sms, total_memory=mem))
        monkeypatch.setattr(torch.version, "cuda", "12.4")
    return install


@pytest.mark.parametrize("name, chip, match", [
    ("Tesla T4", "t4", "exact"),
    ("NVIDIA L4", "l4", "exact"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb", "exact"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb", "exact"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm", "exact"),
    ("NVIDIA H100 PCIe", "h100-sxm", "nearest"),  # Hopper, 80 GB: the SXM record, said to be another part
    ("NVIDIA A10G", "l4", "nearest"),  # 8.6: no Ampere-8.6 part; same major 8, closest in SMs and memory
    ("NVIDIA RTX 9999", "h200", "nearest"),  # unknown generation 12.0: the newest catalog generation
])
def test_this_machine_on_a_faked_gpu(fake_gpu, name, chip, match):
    fake_gpu(name)
    m = devices.this_machine()
    assert (m.device, m.device_type, m.device_name, m.cuda_version) == ("cuda:0", "cuda", name, "12.4")
    assert (m.chip_name, m.match) == (chip, match)
    assert m.properties["sms"] == GPUS[name][1]
    if match == "nearest":
        assert "not in the catalog" in m.note and repr(chip) in m.note and "different parts" in m.note
    major = GPUS[name][0][0]
    assert m.sixteen_bit == ("bf16" if major >= 8 else "fp16")  # a T4's tensor cores are fp16 only
    assert ("bf16" in m.dtypes) == (major >= 8) and {"fp32", "fp16"} <= set(m.dtypes)
    assert m.as_dict()["chip"] == chip


def test_nearest_by_generation_read_from_the_name():
    chip, match, note = devices.match_chip("NVIDIA A100 80GB PCIe")  # PCIe: never mapped exactly
    assert match == "nearest" and chip.name in ("a100-40gb", "a100-80gb") and "read from the name" in note
    chip, _, _ = devices.match_chip("NVIDIA A100 80GB PCIe", compute_capability=8.0, memory_bytes=80e9)
    assert chip.name == "a100-80gb"  # the memory size picks the part


def test_nearest_by_published_peak_and_bandwidth_when_no_generation_is_known():
    l4 = get_chip("l4")
    chip, match, note = devices.match_chip("Some Accelerator", fp16_flops=l4.peak("fp16") * 1.1,
                                           bandwidth=l4.main_memory.bandwidth * 0.9)
    assert (chip.name, match) == ("l4", "nearest") and "fp16 dense peak and memory bandwidth" in note


def test_nothing_known_chooses_nothing_and_says_so():
    chip, match, note = devices.match_chip("Mystery GPU")
    assert chip is None and match == "none" and "no part is chosen" in note


def test_cpu_machine_has_no_chip_and_real_dtypes():
    m = devices.this_machine("cpu")
    assert (m.device, m.chip, m.match) == ("cpu", None, "none")
    assert "fp32" in m.dtypes and m.torch_version == torch.__version__
    assert m.sixteen_bit in (None, *m.dtypes)
    assert m.properties["threads"] >= 1


def test_cuda_asked_without_cuda_is_a_dfaerror(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DFAError, match="not available"):
        devices.this_machine("cuda")


def test_sim_vs_measured_table():
    t = devices.sim_vs_measured({"GEMM 2048": 2e-3, "softmax": 4e-4}, {"softmax": 2e-4, "GEMM 2048": 3e-3},
                                chip="t4")
    assert list(t.columns) == ["measured (this machine)", "simulated (t4)", "sim/measured"]
    assert list(t.index) == ["GEMM 2048", "softmax"]
    assert t.loc["GEMM 2048", "sim/measured"] == pytest.approx(1.5)
    assert t.loc["softmax", "simulated (t4)"] == pytest.approx(2e-4)
    assert t.attrs["chip"] == "t4"
    t = devices.sim_vs_measured({"a": 1.0}, {"a": 2.0}, chip=get_chip("l4"), measured_on="Tesla T4, reference")
    assert list(t.columns)[:2] == ["measured (Tesla T4, reference)", "simulated (l4)"]


def test_sim_vs_measured_refuses_different_ops_and_bad_times():
    with pytest.raises(DFAError, match=r"only measured \['b'\].*only simulated \['c'\]"):
        devices.sim_vs_measured({"a": 1.0, "b": 1.0}, {"a": 1.0, "c": 1.0}, chip="t4")
    with pytest.raises(DFAError, match="finite and > 0"):
        devices.sim_vs_measured({"a": 0.0}, {"a": 1.0}, chip="t4")


# ---- more of the CUDA path, faked: a second device, Colab's other GPUs, the ratio cell ---
def test_a_named_cuda_index_reads_that_device(monkeypatch):
    """``this_machine("cuda:1")`` describes device 1 (name and properties), not the current device 0."""
    names = {0: "Tesla T4", 1: "NVIDIA A100-SXM4-40GB"}

    def index(d):  # as torch.cuda reads a device argument: None or "cuda" is the current device
        d = d if d is None or isinstance(d, int) else torch.device(d).index
        return 0 if d is None else d

    def props(d=None):
        (major, minor), sms, mem = GPUS[names[index(d)]]
        return SimpleNamespace(major=major, minor=minor, multi_processor_count=sms, total_memory=mem)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: names[index(d)])
    monkeypatch.setattr(torch.cuda, "get_device_properties", props)
    m = devices.this_machine("cuda:1")
    assert (m.device, m.device_name, m.chip_name, m.match) == ("cuda:1", "NVIDIA A100-SXM4-40GB", "a100-40gb", "exact")
    assert m.properties["sms"] == 108 and m.sixteen_bit == "bf16"
    assert devices.this_machine().chip_name == "t4"  # no index: the current device
    with pytest.raises(DFAError, match=r"'cuda:2' is not available: 2 CUDA device"):
        devices.this_machine("cuda:2")


def test_an_exact_match_names_its_catalog_record(fake_gpu):
    fake_gpu("NVIDIA L4")
    m = devices.this_machine()
    assert m.note == "'NVIDIA L4' is catalog record 'l4'" and "not in the catalog" not in m.note


def test_a_gpu_of_an_older_generation_than_the_catalog_gets_the_nearest_part_and_a_note(fake_gpu):
    """A V100 (Volta, 7.0; Colab used to hand them out): no catalog part of 7.0, the same major version is the
    T4's Turing 7.5, so the T4 is modelled, and the note says it is another part."""
    fake_gpu("Tesla V100-SXM2-16GB")
    m = devices.this_machine()
    assert (m.chip_name, m.match) == ("t4", "nearest")
    assert "same major version 7" in m.note and "'t4'" in m.note and "80 SMs vs 40" in m.note
    assert m.sixteen_bit == "fp16" and "bf16" not in m.dtypes


def test_the_ratio_cell_on_a_faked_t4_simulates_the_detected_chip(fake_gpu, monkeypatch):
    """Labs 1 and 6's cell: the chip simulated is the one detected, the measured time is a synced CUDA measure
    (a fake clock here: each call takes 1 ms), and the ratio is simulated / measured for the same op."""
    from common.measure import bench
    from common.sim import simulate_op

    fake_gpu("Tesla T4")
    synced = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: synced.append(d))
    clock = {"t": 0.0}

    def gemm():
        clock["t"] += 1e-3

    here = devices.this_machine()
    measured = bench.measure(gemm, device=here.device, timer=lambda: clock["t"], warmup=1, min_run_time=0.01)
    assert measured.device == "cuda:0" and measured.median_s == pytest.approx(1e-3) and synced
    sim = simulate_op("matmul", (1024, 1024, 1024), "gpu", chip=here.chip_name, dtype=here.sixteen_bit)
    table = devices.sim_vs_measured({"GEMM 1024": measured.median_s}, {"GEMM 1024": sim.time_s},
                                    chip=here.chip, measured_on=here.device_name)
    assert list(table.columns) == ["measured (Tesla T4)", "simulated (t4)", "sim/measured"]
    assert table.loc["GEMM 1024", "sim/measured"] == pytest.approx(sim.time_s / measured.median_s)
    # physics floor: the simulated GEMM is never faster than its FLOPs at the T4's fp16 peak
    assert sim.time_s >= 2 * 1024**3 / here.chip.peak("fp16")
