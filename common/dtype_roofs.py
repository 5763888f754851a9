"""This machine's measured rooflines in more than one dtype: the model's dtype and the 16-bit matmul roof.

A GPU has two compute roofs: fp32 on its CUDA cores and fp16/bf16 on its tensor cores (a T4: 8 vs 65 TFLOP/s
on the datasheet), and both share one memory. ``measured_rooflines(device, dtype)`` times one GEMM and one copy
in ``dtype`` (``bench.measure_peaks``) and one GEMM per further dtype (``bench.measure_gemm_peaks``); each
dtype gets its own MEASURED ``Roofline`` with the same copy bandwidth. A dtype whose matmul does not run on this
device is left out with the reason, never guessed. ``other_dtypes(machine, dtype)`` names the dtypes worth a
roof: on a GPU every 16-bit type its tensor cores run (fp16; bf16 from Ampere on) and fp32; on a CPU the
16-bit type its matmul runs (``Machine.sixteen_bit``: bf16 where the CPU has it) or fp32.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from common import bench
from common.chips import canonical_dtype
from common.errors import DFAError
from common.roofline import Roofline, eng, roofline_from_measured

__all__ = ["measured_rooflines", "other_dtypes"]

_TORCH = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _tag(dtype) -> str:
    return canonical_dtype(str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else dtype)


def other_dtypes(machine, dtype) -> tuple[str, ...]:
    """The dtypes besides ``dtype`` (the model's) whose GEMM roof this machine (``common.devices.Machine``) has."""
    tag = _tag(dtype)
    if machine.device_type == "cuda":
        want = [d for d in ("fp16", "bf16", "fp32") if d in machine.dtypes]
    else:
        want = [machine.sixteen_bit, "fp32"] if machine.sixteen_bit else ["fp32"]
    return tuple(d for d in dict.fromkeys(want) if d and d != tag)


def measured_rooflines(device: str | torch.device, dtype=torch.float32, others=(), *, gemm_n: int | None = None,
                       copy_bytes: int | None = None, min_run_time: float = 0.5,
                       warmup: int = 2) -> tuple[list[Roofline], list[str]]:
    """([roofline in ``dtype``, one per measured dtype of ``others``], [why a dtype was left out]). Each is
    MEASURED on ``device``: its own GEMM as the compute roof, the one copy as the bandwidth ceiling."""
    tags = [_tag(d) for d in others]
    bad = [t for t in tags if t not in _TORCH]
    if bad:
        raise DFAError(f"no GEMM roof for dtype {bad[0]!r}; valid: {', '.join(_TORCH)}")
    main_tag = _tag(dtype)
    if main_tag not in _TORCH:
        raise DFAError(f"no GEMM roof for dtype {main_tag!r}; valid: {', '.join(_TORCH)}")
    peaks = bench.measure_peaks(device, _TORCH[main_tag], gemm_n=gemm_n, copy_bytes=copy_bytes,
                                min_run_time=min_run_time, warmup=warmup)
    main = roofline_from_measured(peaks)  # named after the device; its label adds the dtype
    out, skipped = [main], []
    gemms = bench.measure_gemm_peaks(device, [_TORCH[t] for t in tags if t != main_tag], gemm_n=peaks.gemm_n,
                                     min_run_time=min_run_time, warmup=warmup)
    for name, res in gemms.items():
        tag = _tag(name)
        if isinstance(res, str):
            skipped.append(f"{tag}: {res}")
            continue
        note = f"measured on {peaks.device_name} ({peaks.device}): {tag} GEMM N={peaks.gemm_n} " \
               f"{eng(res.flops_per_s, 'FLOP/s')}; the same copy as {main_tag}"
        out.append(replace(main, peak_flops=res.flops_per_s, dtype=tag, note=note))
    return out, skipped
