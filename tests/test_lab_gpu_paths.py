"""The labs' measured cells choose the GPU when torch sees one and say which device ran them.

Lab 5's Part 3 cells run here, for real, with CUDA faked unavailable (they must say "on the CPU"), and with a GPU
faked present (its name and Inductor's Triton in the settings line; DropBlock passed to the CPU, and said, where
the GPU's dropout draws differ between fp32 and fp64). Lab 2 measures nothing on this machine: checked too.
"""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import jupytext
import pytest
import torch

import common.debug.stack as stack
from common.measure import bench
from common.measure import lab_device as ld

ROOT = Path(__file__).resolve().parents[1]
LAB5 = ROOT / "course5_debug/source/lab5_debug/lab5_debug.py"
LAB2 = ROOT / "course2_dataflow/source/lab2_dataflow/lab2_dataflow.py"


def _code_cells(path):
    return [c for c in jupytext.read(path).cells if c.cell_type == "code"]


def _lab5_cells(*, chain: bool = True, drop: bool = True):
    """The parameters and settings cells, the two Part 3 stubs (solved in the source), the measured cells."""
    def wanted(c):
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        return ("parameters" in c.metadata.get("tags", []) or gid in ("settings", "classify_divergence", "bisect_stack")
                or (chain and "x_chain = " in c.source) or (drop and "class DropBlock" in c.source))
    return [c.source for c in _code_cells(LAB5) if wanted(c)]


def _run(sources, ns=None) -> str:
    ns, out = {"torch": torch} if ns is None else ns, io.StringIO()  # torch: what the setup cell leaves behind
    with contextlib.redirect_stdout(out):
        for src in sources:
            exec(compile(src.replace("FAST = bool(", "FAST = True or bool("), str(LAB5), "exec"), ns)  # noqa: S102
    return out.getvalue()


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def fake_l4(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA L4")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (8, 9))
    monkeypatch.setattr(ld, "_has_triton", lambda: True)


def test_lab5_measured_cells_run_on_the_cpu_and_say_so(no_gpu):
    out = _run(_lab5_cells())
    cpu = f"on the CPU ({bench.device_name('cpu')}; no GPU found)"
    assert f"Part 3's measured cells run {cpu}; torch.compile's Inductor writes C++/OpenMP loops there" in out
    chain = re.search(r"MEASURED (.*), bfloat16 \(256, 64\), Inductor writing C\+\+/OpenMP loops: (\d+) of 16384", out)
    assert chain and chain.group(1) == cpu, out
    assert f"DropBlock, fp32, MEASURED {cpu}: {{'eager': 'match', 'aot_eager': 'match', 'inductor': 'bug'}}" in out
    assert "DropBlock with fallback_random=True: {'inductor': 'match'}" in out


def test_lab5_on_a_faked_gpu_names_it_and_sends_dropblock_to_the_cpu_where_fp64_is_no_truth(fake_l4, monkeypatch):
    """torch.compile cannot run against a faked GPU, so the bisection is a stand-in that records where its inputs
    are; the device choice and the printed lines are the lab's own."""
    asked, ran_on = [], []

    def draws_differ(device, shape, p=0.5, seed=0):
        asked.append((torch.device(device), tuple(shape), p))
        return False

    def bisect_stack(model, args, backends=stack.STACK, seed=0):
        ran_on.append({t.device.type for t in (*args, *model.parameters())})
        return {stack.backend_label(b): "stand-in" for b in backends}

    monkeypatch.setattr(stack, "fp64_draws_alike", draws_differ)
    settings, drop = _lab5_cells(chain=False)[:2], _lab5_cells(chain=False)[-1]
    ns = {"torch": torch}
    out = _run(settings, ns)
    assert "Part 3's measured cells run on the GPU (NVIDIA L4); torch.compile's Inductor writes Triton kernels" in out
    assert ns["HERE"].device == torch.device("cuda:0") and ns["HERE"].half == torch.bfloat16
    ns["bisect_stack"] = bisect_stack
    out = _run([drop], ns)
    assert asked == [(torch.device("cuda:0"), (128, 64), 0.2)]
    assert ran_on == [{"cpu"}, {"cpu"}]
    assert (f"DropBlock, fp32, MEASURED on the CPU ({bench.device_name('cpu')}; on NVIDIA L4 fp32 and fp64 dropout "
            "drop different elements, so fp64 is no truth there): {'eager': 'stand-in'") in out


def test_lab5_every_measured_line_names_its_device():
    cells = [c.source for c in _code_cells(LAB5)]
    measured = [s for s in cells if 'f"MEASURED' in s or "MEASURED {" in s]
    assert len(measured) == 2 and all(re.search(r"MEASURED \{(HERE|DROP_ON)\.on\}", s) for s in measured)
    assert not any("this CPU" in s for s in cells)
    chain = next(s for s in cells if "x_chain = " in s)
    assert ".to(HERE.device, HERE.half)" in chain


def test_fp64_draws_alike_on_the_cpu_and_leaves_the_rng_alone():
    torch.manual_seed(7)
    before = torch.get_rng_state()
    assert stack.fp64_draws_alike("cpu", (128, 64), 0.2) and stack.fp64_draws_alike("cpu", (3, 5))
    assert torch.equal(torch.get_rng_state(), before)


def test_lab2_measures_nothing_on_this_machine_so_it_needs_no_gpu_path():
    """Lab 2's numbers are counted (FLOPs, bytes), catalog rooflines or SIMULATED schedules; the block runs on the
    CPU only to check numerics. No cell times, profiles or compiles with a real backend."""
    code = "\n".join(re.sub(r"#.*", "", c.source) for c in _code_cells(LAB2))
    for api in ("bench.", "profile(", "perf_counter", "timeit", "torch.compile(", "MEASURED", ".cuda", "synchronize"):
        assert api not in code, api
