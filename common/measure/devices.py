"""This machine's device, the catalog chip that stands for it, and simulated ÷ measured tables.

``this_machine()`` says what runs the lab (CPU, or which CUDA GPU), which dtypes a matmul can use there, and
which catalog chip the simulator should model for it:

* **exact**: ``chips.chip_for_device_name`` knows the GPU ("Tesla T4" -> t4, "NVIDIA L4" -> l4).
* **nearest**: a GPU outside the catalog. Nearest means, in this order:
  1. same generation: the catalog parts with the GPU's CUDA compute capability (from the device, or from
     its name: "A10G" is Ampere 8.6), else the same major version, else the closest version;
     among those, the closest in SM count and memory size (sum of |log ratio|);
  2. with no generation known but published fp16 dense peak and memory bandwidth given: the part closest
     in both (sum of |log ratio|).
  The note says which part was chosen, why, and that its numbers are the catalog part's, not this GPU's.
* **none**: a CPU (the catalog holds accelerators), or a GPU about which nothing is known.

``sim_vs_measured`` puts simulated and measured times of the same ops side by side with their ratio.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import pandas as pd
import torch

from common.chips import Chip, chip_for_device_name, chips_of_kind
from common.errors import DFAError
from common.measure import bench

__all__ = ["Machine", "match_chip", "sim_vs_measured", "this_machine"]

MATCHES = ("exact", "nearest", "none")
_TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# Device names -> compute capability, for GPUs whose properties are not at hand (NVIDIA's CUDA GPUs list).
# Only the generation is read from a name, never a part: the part comes from the catalog.
_NAME_GENERATIONS = (
    (r"\bH100\b|\bH200\b|\bH800\b|\bGH200\b|\bH20\b", 9.0),
    (r"\bA100\b|\bA800\b|\bA30\b", 8.0),
    (r"\bL4\b|\bL40S?\b|\bL20\b|RTX \d+ Ada|RTX 40\d\d", 8.9),
    (r"\bA10G?\b|\bA40\b|\bA16\b|\bA2\b|RTX A\d+|RTX 30\d\d", 8.6),
    (r"\bT4\b|RTX 20\d\d|TITAN RTX|Quadro RTX", 7.5),
    (r"\bV100\b", 7.0),
)


@dataclass(frozen=True)
class Machine:
    """What runs this notebook, and the catalog chip the simulator models for it (``match``: exact/nearest/none)."""

    device: str  # "cpu" or "cuda:0"
    device_type: str  # "cpu" | "cuda"
    device_name: str  # CPU model or torch.cuda.get_device_name()
    torch_version: str
    cuda_version: str | None
    dtypes: tuple[str, ...]  # dtypes a matmul runs in on this device
    sixteen_bit: str | None  # the 16-bit dtype of its matmul peak (tensor cores on a GPU); None if none runs
    chip: Chip | None
    match: str
    note: str
    properties: Mapping = field(default_factory=lambda: MappingProxyType({}))

    @property
    def chip_name(self) -> str | None:
        return self.chip.name if self.chip else None

    def as_dict(self) -> dict:
        """Provenance for a table or a file: plain values only."""
        return {"device": self.device, "device_type": self.device_type, "device_name": self.device_name,
                "torch": self.torch_version, "cuda": self.cuda_version, "dtypes": list(self.dtypes),
                "sixteen_bit": self.sixteen_bit, "chip": self.chip_name, "match": self.match, "note": self.note,
                **dict(self.properties)}


def _cpu_dtypes() -> tuple[str, ...]:
    """The dtypes a tiny CPU matmul runs in here (bf16/fp16 matmul is missing on some CPU builds)."""
    ok = []
    for name, dt in _TORCH_DTYPES.items():
        try:
            torch.mm(torch.ones(2, 2, dtype=dt), torch.ones(2, 2, dtype=dt))
        except (RuntimeError, NotImplementedError):
            continue
        ok.append(name)
    return tuple(ok)


def this_machine(device: str | torch.device | None = None) -> Machine:
    """The device a lab runs on (default: the GPU if torch sees one, else the CPU) and its catalog chip."""
    dev = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
    name = bench.device_name(dev)  # also checks the device: unknown or absent ones are a DFAError
    if dev.type == "cpu":
        dtypes = _cpu_dtypes()
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        props = {"cores": os.cpu_count(), "threads": torch.get_num_threads(), "load_1min": load}
        note = ("a CPU: the catalog holds accelerators only, so no chip stands for it; measured CPU numbers are "
                "compared with a simulated GPU you name")
        return Machine("cpu", "cpu", name, torch.__version__, None, dtypes,
                       next((d for d in ("bf16", "fp16") if d in dtypes), None), None, "none", note,
                       MappingProxyType(props))
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    p = torch.cuda.get_device_properties(index)
    cc = float(f"{p.major}.{p.minor}")
    props = {"compute_capability": cc, "sms": p.multi_processor_count, "memory_bytes": p.total_memory}
    chip, match, note = match_chip(name, compute_capability=cc, sm_count=p.multi_processor_count,
                                   memory_bytes=p.total_memory)
    # bf16 runs natively from Ampere (8.0) on; newer torch reports it "supported" on a T4 through emulation
    dtypes = ("fp32", "fp16", "bf16") if cc >= 8.0 else ("fp32", "fp16")
    return Machine(f"cuda:{index}", "cuda", name, torch.__version__, torch.version.cuda, dtypes,
                   "bf16" if cc >= 8.0 else "fp16", chip, match, note, MappingProxyType(props))


def _generation(name: str) -> float | None:
    for pattern, cc in _NAME_GENERATIONS:
        if re.search(pattern, name or "", flags=re.IGNORECASE):
            return cc
    return None


def _log_gap(a: float | None, b: float | None) -> float:
    return abs(math.log(a / b)) if a and b else 0.0


def match_chip(device_name: str, *, compute_capability: float | None = None, sm_count: int | None = None,
               memory_bytes: float | None = None, fp16_flops: float | None = None,
               bandwidth: float | None = None) -> tuple[Chip | None, str, str]:
    """(chip, 'exact' | 'nearest' | 'none', note) for a CUDA device name and what is known about the device
    (module docstring: what "nearest" means). Never silent: every non-exact answer says why in the note."""
    gpus = chips_of_kind("gpu")
    exact = chip_for_device_name(device_name)
    if exact is not None:
        return exact, "exact", f"{device_name!r} is catalog record {exact.name!r}"
    head = f"GPU {device_name!r} is not in the catalog (GPUs: {', '.join(c.name for c in gpus)})"
    tail = ("; its peaks and bandwidth are the catalog part's, not this GPU's, so simulated/measured compares "
            "two different parts")
    cc = compute_capability if compute_capability is not None else _generation(device_name)
    if cc is not None:
        ccs = {c.name: c.fact("compute_capability") for c in gpus}
        same = [c for c in gpus if ccs[c.name] == cc] or [c for c in gpus if int(ccs[c.name]) == int(cc)]
        if same:
            why = f"same compute capability {cc:g}" if ccs[same[0].name] == cc else f"same major version {int(cc)}"
        else:
            closest = min(abs(v - cc) for v in ccs.values())
            same = [c for c in gpus if abs(ccs[c.name] - cc) == closest]
            why = f"no part of compute capability {cc:g}; closest generation {ccs[same[0].name]:g}"
        chip = min(same, key=lambda c: (_log_gap(sm_count, c.compute_units)
                                        + _log_gap(memory_bytes, c.main_memory.total_capacity), c.name))
        known = [f"{sm_count} SMs vs {chip.compute_units}" if sm_count else "",
                 f"{memory_bytes / 1e9:.0f} GB vs {chip.main_memory.total_capacity / 1e9:.0f} GB"
                 if memory_bytes else ""]
        detail = ", ".join(k for k in known if k)
        src = "" if compute_capability is not None else " (read from the name)"
        return chip, "nearest", f"{head}; nearest part {chip.name!r}: {why}{src}" + \
            (f", closest in SMs and memory ({detail})" if detail else "") + tail
    if fp16_flops and bandwidth:
        chip = min((c for c in gpus if "fp16" in c.peak_flops),
                   key=lambda c: _log_gap(fp16_flops, c.peak("fp16")) + _log_gap(bandwidth, c.main_memory.bandwidth))
        return chip, "nearest", (f"{head}; nearest part {chip.name!r} by fp16 dense peak and memory bandwidth "
                                 f"({fp16_flops / 1e12:.3g} vs {chip.peak('fp16') / 1e12:.3g} TFLOP/s, "
                                 f"{bandwidth / 1e9:.0f} vs {chip.main_memory.bandwidth / 1e9:.0f} GB/s)" + tail)
    return None, "none", (f"{head}, and neither its compute capability nor its fp16 peak and bandwidth are known: "
                          "no part is chosen")


def sim_vs_measured(measured: Mapping[str, float] | pd.Series, simulated: Mapping[str, float] | pd.Series, *,
                    chip: str | Chip, measured_on: str = "this machine", unit: str = "s") -> pd.DataFrame:
    """One row per op/model/batch (the keys, which must be the same on both sides): measured and simulated
    times and their ratio sim/measured (< 1: the simulator predicts faster than measured)."""
    meas, sim = pd.Series(measured, dtype=float), pd.Series(simulated, dtype=float)
    if set(meas.index) != set(sim.index):
        only_m, only_s = sorted(set(meas.index) - set(sim.index)), sorted(set(sim.index) - set(meas.index))
        raise DFAError(f"measured and simulated must name the same ops: only measured {only_m}, "
                       f"only simulated {only_s}")
    bad = [k for k, v in meas.items() if not (v > 0 and math.isfinite(v))]
    if bad:
        raise DFAError(f"measured times must be finite and > 0; bad: {bad}")
    name = chip.name if isinstance(chip, Chip) else str(chip)
    sim = sim[meas.index]
    out = pd.DataFrame({f"measured ({measured_on})": meas, f"simulated ({name})": sim, "sim/measured": sim / meas})
    out.index.name = "op"
    out.attrs.update(unit=unit, chip=name, measured_on=measured_on)
    return out
