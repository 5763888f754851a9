"""common.measure.lab_device: the CUDA branches against a faked torch.cuda (no GPU needed), and the CPU branch as
it is."""
from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity

from common.errors import DFAError
from common.measure import bench
from common.measure import lab_device as ld

# name -> compute capability, as torch.cuda.get_device_capability reports it
GPUS = {"Tesla T4": (7, 5), "NVIDIA L4": (8, 9), "NVIDIA H100 80GB HBM3": (9, 0), "Tesla P100-PCIE-16GB": (6, 0)}


@pytest.fixture
def fake_gpu(monkeypatch):
    """torch sees two CUDA devices named ``name``; ``torch.cuda.synchronize`` logs the device it waits for."""
    log: list = []

    def install(name, triton=True):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: name)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: GPUS[name])
        monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: log.append(("sync", d)))
        monkeypatch.setattr(ld, "_has_triton", lambda: triton)
        return log
    return install


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: pytest.fail("synchronize on a CPU runtime"))


@pytest.mark.parametrize("name, half", [("Tesla T4", torch.float16), ("NVIDIA L4", torch.bfloat16),
                                        ("NVIDIA H100 80GB HBM3", torch.bfloat16)])
def test_a_gpu_is_chosen_and_named(fake_gpu, name, half):
    fake_gpu(name)
    here = ld.lab_device(inductor=True)
    assert here.device == torch.device("cuda:0") and here.is_cuda and here.why_cpu is None
    assert here.on == f"on the GPU ({name})" and here.half == half and here.inductor == "Triton kernels"
    assert here.activities == [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def test_sync_waits_for_the_chosen_gpu_and_measure_syncs_before_every_clock_read(fake_gpu):
    log = fake_gpu("NVIDIA L4")
    here = ld.lab_device("cuda:1")
    assert here.device == torch.device("cuda:1")
    here.sync()
    assert log == [("sync", torch.device("cuda:1"))]
    log.clear()
    t = [0.0]

    def work():
        log.append("call")
        t[0] += 2.0**-8

    def now():
        log.append("clock")
        return t[0]

    r = here.measure(work, warmup=1, timer=now, min_run_time=8 * 2.0**-8)
    assert r.device == "cuda:1" and r.median_s == 2.0**-8
    clocks = [i for i, e in enumerate(log) if e == "clock"]
    assert clocks and all(log[i - 1] == ("sync", torch.device("cuda:1")) for i in clocks)


def test_a_gpu_triton_cannot_compile_for_is_passed_over_for_the_cpu_and_said(fake_gpu):
    fake_gpu("Tesla P100-PCIE-16GB")
    here = ld.lab_device(inductor=True)
    assert here.device.type == "cpu" and here.activities == [ProfilerActivity.CPU]
    assert "Tesla P100-PCIE-16GB" in here.on and "6.0" in here.on and "7.0" in here.on
    assert here.on.startswith("on the CPU (")
    assert ld.lab_device().is_cuda  # without Inductor the old GPU still measures
    fake_gpu("NVIDIA L4", triton=False)
    here = ld.lab_device(inductor=True)
    assert here.device.type == "cpu" and "triton package" in here.on


def test_without_cuda_the_cpu_is_chosen_and_says_so(no_gpu):
    here = ld.lab_device(inductor=True)
    assert here.device == torch.device("cpu") and not here.is_cuda
    assert here.on == f"on the CPU ({bench.device_name('cpu')}; no GPU found)"
    assert here.half == torch.bfloat16 and here.inductor == "C++/OpenMP loops"
    assert here.activities == [ProfilerActivity.CPU]
    here.sync()  # a no-op: the fixture fails the test if it reaches torch.cuda.synchronize
    r = here.measure(lambda: None, warmup=0, min_run_time=0.01)
    assert r.device == "cpu" and r.median_s > 0
    asked = ld.lab_device("cpu", why="the draws differ")
    assert asked.on.endswith("; the draws differ)")


@pytest.mark.parametrize("device, fragment", [("tpu", "'tpu'"), ("not a device", "'not a device'"),
                                              ("cuda", "not available")])
def test_bad_devices_are_one_line_dfaerrors(no_gpu, device, fragment):
    with pytest.raises(DFAError) as exc:
        ld.lab_device(device)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)
