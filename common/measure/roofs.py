"""This machine's measured rooflines: ``measure_roofline`` (one large GEMM and one large copy),
``roofline_for_this_machine`` (the datasheet roofline of the GPU in use beside the measured one), and rooflines in
more than one dtype: the model's dtype and the 16-bit matmul roof.

A GPU has two compute roofs: fp32 on its CUDA cores and fp16/bf16 on its tensor cores (a T4: 8 vs 65 TFLOP/s
on the datasheet), and both share one memory. ``measured_rooflines(device, dtype)`` times one GEMM and one copy
in ``dtype`` (``bench.measure_peaks``) and one GEMM per further dtype (``bench.measure_gemm_peaks``); each
dtype gets its own MEASURED ``Roofline`` with the same copy bandwidth. A dtype whose matmul does not run on this
device is left out with the reason, never guessed. ``other_dtypes(machine, dtype)`` names the dtypes worth a
roof: on a GPU every 16-bit type its tensor cores run (fp16; bf16 from Ampere on) and fp32; on a CPU the
16-bit type its matmul runs (``Machine.sixteen_bit``: bf16 where the CPU has it) or fp32.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace

import torch

from common.chips import canonical_dtype, chip_for_device_name, chips_of_kind
from common.errors import DFAError
from common.measure import bench
from common.roofline import Roofline, eng, roofline_for_chip, roofline_from_measured, with_measured_gemms

__all__ = ["measure_roofline", "measured_rooflines", "other_dtypes", "roofline_for_this_machine"]

_TORCH = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _tag(dtype) -> str:
    return canonical_dtype(str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else dtype)


def other_dtypes(machine, dtype) -> tuple[str, ...]:
    """The dtypes besides ``dtype`` (the model's) whose GEMM roof this machine (``common.measure.devices.Machine``)
    has."""
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


def measure_roofline(device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32, *,
                     extra_dtypes: Sequence[torch.dtype] = (), **kw) -> Roofline:
    """Measure this machine's roofline (large GEMM + large copy, ``bench.measure_peaks(device, dtype, **kw)``).

    ``extra_dtypes`` (e.g. ``(torch.float16,)`` next to fp32) time one more GEMM each
    (``bench.measure_gemm_peaks``): the fastest dtype is the roof, the others compute ceilings below it (a GPU:
    the 16-bit tensor-core roof over the fp32 CUDA-core ceiling). A dtype this device cannot multiply in is
    skipped, with a warning and a note that say so."""
    rl = roofline_from_measured(bench.measure_peaks(device, dtype, **kw))
    if not extra_dtypes:
        return rl
    gemm_kw = {k: v for k, v in kw.items() if k in ("gemm_n", "min_run_time", "warmup")}
    return with_measured_gemms(rl, bench.measure_gemm_peaks(device, extra_dtypes, **gemm_kw))


def roofline_for_this_machine(device: str | torch.device | None = None, dtype: torch.dtype = torch.float32, *,
                              measure: bool = True, **kw) -> list[Roofline]:
    """[datasheet roofline, measured roofline] for the GPU in use if the catalog knows it; otherwise (unknown GPU,
    or a CPU) only the measured one - with a warning and a note that say so. Never assumes a chip."""
    dev = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
    if dev.type != "cuda":
        return [measure_roofline(dev, dtype, **kw)]
    if not torch.cuda.is_available():
        raise DFAError(f"device {str(dev)!r} is not available: torch sees no CUDA device")
    gpu = torch.cuda.get_device_name(dev)
    chip, out = chip_for_device_name(gpu), []
    if chip is None:
        from common.measure.devices import this_machine  # devices imports roofs' neighbours, not roofs: no cycle

        known = ", ".join(c.name for c in chips_of_kind("gpu"))
        near = this_machine(dev).chip  # the part the simulator models: chosen with the device's own properties
        msg = f"GPU {gpu!r} is not in the catalog (known: {known}); no datasheet roofline, using measured peaks" + \
            (f" (nearest catalog part, for the simulator only: {near.name!r})" if near else "")
    else:
        try:
            out.append(roofline_for_chip(chip, dtype))
            msg = f"GPU {gpu!r} is catalog record {chip.name!r}"
        except DFAError as exc:
            msg = f"GPU {gpu!r} is catalog record {chip.name!r}, but {exc}; using measured peaks only"
    if not out:
        warnings.warn(msg, UserWarning, stacklevel=2)
    else:
        out[0] = replace(out[0], note="; ".join(s for s in (out[0].note, msg) if s))
    if measure or not out:
        m = measure_roofline(dev, dtype, **kw)
        out.append(replace(m, note=f"{m.note}; {msg}"))
    return out
