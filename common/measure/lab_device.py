"""Where a lab's measured cells run: the GPU when torch sees one that can run them, else the CPU, and the words
that say which.

    HERE = lab_device(inductor=True)          # once, in the lab's settings cell
    x = x.to(HERE.device)
    print(f"MEASURED {HERE.on}: ...")         # "on the GPU (NVIDIA L4)" / "on the CPU (AMD EPYC 7B12; no GPU found)"
    with torch.profiler.profile(activities=HERE.activities): ...   # + ProfilerActivity.CUDA on a GPU
    r = HERE.measure(fn, x)                   # common.measure.bench.measure, the device synced before each clock

``inductor=True`` is for cells that ``torch.compile`` with Inductor: on a GPU Inductor writes Triton kernels, and
Triton needs CUDA compute capability 7.0 or newer (PyTorch raises "too old to be supported by the triton GPU
compiler" below that) and the ``triton`` package, so such a GPU is passed over for the CPU, and ``on`` says why.
``half`` is the 16-bit float the device computes natively: bf16 on a CPU and from Ampere (8.0) on, fp16 before
(a T4's tensor cores and Triton have no bf16 there). Only public torch APIs: ``torch.cuda.is_available``,
``get_device_name``, ``get_device_capability``, ``synchronize``.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.profiler import ProfilerActivity

from common.errors import DFAError
from common.measure import bench

__all__ = ["LabDevice", "TRITON_MIN_CAPABILITY", "lab_device"]

TRITON_MIN_CAPABILITY = (7, 0)  # torch._inductor refuses older GPUs for Triton (its "too old" check)
_CHOICES = ("cpu", "cuda", "cuda:N")


@dataclass(frozen=True)
class LabDevice:
    """The device a lab measures on, its name, why it is the CPU (if it is), its 16-bit dtype, Inductor's output."""

    device: torch.device
    name: str  # CPU model or torch.cuda.get_device_name()
    why_cpu: str | None  # None on a GPU; else why the CPU runs the cells ("no GPU found", ...)
    half: torch.dtype  # bf16 or fp16: what the device computes natively
    inductor: str  # what torch.compile's Inductor generates here

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def on(self) -> str:
        """'on the GPU (NVIDIA L4)' or 'on the CPU (<model>; <why>)': the words a measured line or title needs."""
        if self.is_cuda:
            return f"on the GPU ({self.name})"
        return f"on the CPU ({self.name}; {self.why_cpu})" if self.why_cpu else f"on the CPU ({self.name})"

    @property
    def activities(self) -> list[ProfilerActivity]:
        """torch.profiler activities: the CPU, and the GPU's kernels (CUPTI) when the device is one."""
        return [ProfilerActivity.CPU, ProfilerActivity.CUDA] if self.is_cuda else [ProfilerActivity.CPU]

    def sync(self) -> None:
        """Wait for every queued kernel of this device (a no-op on the CPU): read a clock only after it."""
        if self.is_cuda:
            torch.cuda.synchronize(self.device)

    def measure(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> bench.BenchResult:
        """``common.measure.bench.measure`` on this device: warm-up, a sync before every clock read, the median."""
        return bench.measure(fn, *args, device=self.device, **kwargs)


def _has_triton() -> bool:
    return importlib.util.find_spec("triton") is not None


def _cpu(why: str | None) -> LabDevice:
    return LabDevice(torch.device("cpu"), bench.device_name("cpu"), why, torch.bfloat16, "C++/OpenMP loops")


def lab_device(device: str | torch.device | None = None, *, inductor: bool = False,
               why: str | None = None) -> LabDevice:
    """The GPU if torch sees one (and, with ``inductor``, Triton can compile for it), else the CPU.

    ``device`` asks for one ("cpu", "cuda", "cuda:1"); asking for an absent GPU is a DFAError. ``why`` says why a
    cell was asked to run on the CPU (printed by ``on``).
    """
    if device is not None:
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError):
            raise DFAError(f"unknown device {device!r}; valid: {', '.join(_CHOICES)}") from None
        if dev.type not in ("cpu", "cuda"):
            raise DFAError(f"unknown device {str(device)!r}; valid: {', '.join(_CHOICES)}")
        if dev.type == "cpu":
            return _cpu(why)
        bench.device_name(dev)  # an absent GPU or index is a DFAError, said in one line
    elif not torch.cuda.is_available():
        return _cpu("no GPU found")
    else:
        dev = torch.device("cuda", torch.cuda.current_device())
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    name = torch.cuda.get_device_name(dev)
    cc = tuple(torch.cuda.get_device_capability(dev))
    if inductor and cc < TRITON_MIN_CAPABILITY:
        return _cpu(f"the GPU {name} has compute capability {cc[0]}.{cc[1]}, and Triton, Inductor's GPU code "
                    f"generator, needs {TRITON_MIN_CAPABILITY[0]}.{TRITON_MIN_CAPABILITY[1]}")
    if inductor and not _has_triton():
        return _cpu(f"the GPU {name} is here, but the triton package, Inductor's GPU code generator, is not")
    return LabDevice(dev, name, None, torch.bfloat16 if cc >= (8, 0) else torch.float16, "Triton kernels")
