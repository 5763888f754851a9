"""Types of the hardware catalog (``common.chips`` holds the data): chips, memory levels, estimates, dtypes.

This is the only place in the project that holds hardware numbers. Simulators, roofline plots and labs read
them from here (``get_chip("h100-sxm").peak("bf16")``). Rules:

* Dense peaks only. Vendors often print 2:4-sparse figures (2x the dense one); those are never used as peaks.
* ``None`` means "not published" - never a guess. Where a simulator needs a number the vendor does not
  publish, the record carries an ``Estimate`` with its derivation, and everything that uses it says so.
* Every numeric field that is set has an entry in ``sources`` (``tests/test_chips.py`` enforces this).

Units: FLOP/s, bytes, bytes/s, Hz, watts. ``TB/s`` below means 1e12 bytes/s.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from common.errors import DFAError, unknown

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")
_DTYPE_ALIASES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
                  "float8": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "qint8": "int8"}
DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}

KiB, MiB, GiB = 1024, 1024**2, 1024**3
KB, MB, GB, TB, PB = 1e3, 1e6, 1e9, 1e12, 1e15
T, P = 1e12, 1e15  # tera / peta FLOP/s


def canonical_dtype(name: str) -> str:
    """'bfloat16' | 'torch.bfloat16' | 'bf16' -> 'bf16'; anything else is a DFAError listing the choices."""
    key = str(name).lower().replace("torch.", "")
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise unknown("dtype", name, DTYPES)
    return key


@dataclass(frozen=True)
class MemoryLevel:
    """One level of a memory hierarchy. ``count`` copies of ``capacity`` bytes (e.g. one per SM or core);
    ``bandwidth`` is the aggregate over all copies, in bytes/s (None where not published)."""

    name: str
    capacity: float
    bandwidth: float | None
    count: int = 1
    note: str = ""

    @property
    def total_capacity(self) -> float:
        return self.capacity * self.count


@dataclass(frozen=True)
class Estimate:
    """A number a simulator needs that the vendor does not publish: value, unit and how it was derived."""

    value: float
    unit: str
    derivation: str


@dataclass(frozen=True)
class Chip:
    """One accelerator chip (or card, for Spyre; or wafer, for Cerebras) as the vendor specifies it."""

    name: str
    vendor: str
    kind: str  # gpu | tpu | wse | lpu | spyre
    peak_flops: MappingProxyType  # dtype -> dense FLOP/s (or OP/s for int8); missing key = unsupported
    matrix_unit: str
    compute_units: int  # SMs / TensorCores / PEs / cores
    compute_unit_name: str
    clock_hz: float | None
    on_chip: tuple[MemoryLevel, ...]  # fastest first
    off_chip: MemoryLevel | None  # None for SRAM-only designs
    link_bandwidth: float | None  # chip-to-chip, bytes/s, total over all links and both directions
    link_name: str
    power_w: float | None
    sources: MappingProxyType  # field name -> source
    estimates: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    aliases: tuple[str, ...] = ()
    # Architecture facts a compiler needs (MXU edge, stick size, ...): name -> number, sourced as "facts.<name>".
    facts: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    def fact(self, key: str) -> float:
        if key not in self.facts:
            raise unknown(f"architecture fact of {self.name}", key, self.facts)
        return self.facts[key]

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``; a DFAError if the chip has no such datapath."""
        d = canonical_dtype(dtype)
        if d not in self.peak_flops:
            raise DFAError(f"chip {self.name!r} has no dense {d} peak; supported: {', '.join(self.peak_flops)}")
        return self.peak_flops[d]

    def supports(self, dtype: str) -> bool:
        return canonical_dtype(dtype) in self.peak_flops or self._estimated_peak(canonical_dtype(dtype)) is not None

    def _estimated_peak(self, d: str) -> Estimate | None:
        return self.estimates.get(f"dense_{d}_flops")

    def compute_peak(self, dtype: str) -> tuple[float, bool]:
        """(dense FLOP/s, is_estimate): the published peak, else the catalog's labelled estimate, else an error."""
        d = canonical_dtype(dtype)
        if d in self.peak_flops:
            return self.peak_flops[d], False
        est = self._estimated_peak(d)
        if est is None:
            supported = sorted(set(self.peak_flops) | {d for d in DTYPES if self._estimated_peak(d)})
            raise DFAError(f"chip {self.name!r} has no {d} datapath; supported: {', '.join(supported)}")
        return est.value, True

    @property
    def memory_levels(self) -> tuple[MemoryLevel, ...]:
        """All levels, fastest first, off-chip last."""
        return self.on_chip + ((self.off_chip,) if self.off_chip else ())

    def level(self, name: str) -> MemoryLevel:
        for lvl in self.memory_levels:
            if lvl.name.lower() == name.lower():
                return lvl
        raise unknown(f"memory level of {self.name}", name, [lv.name for lv in self.memory_levels])

    @property
    def main_memory(self) -> MemoryLevel:
        """Where the weights live: off-chip memory, or the largest on-chip SRAM for SRAM-only designs."""
        return self.off_chip or max(self.on_chip, key=lambda lv: lv.total_capacity)

    def ridge_point(self, dtype: str, level: str | None = None) -> float:
        """FLOP per byte where the roofline bends: peak(dtype) / bandwidth(level); level defaults to main memory."""
        lvl = self.level(level) if level else self.main_memory
        if not lvl.bandwidth:
            raise DFAError(f"{self.name}: bandwidth of {lvl.name} is not published")
        return self.peak(dtype) / lvl.bandwidth

    def estimate(self, key: str) -> float:
        if key not in self.estimates:
            raise unknown(f"estimate of {self.name}", key, self.estimates)
        return self.estimates[key].value


def make_chip(**kw) -> Chip:
    kw["peak_flops"] = MappingProxyType(kw["peak_flops"])
    kw["sources"] = MappingProxyType(kw["sources"])
    kw["estimates"] = MappingProxyType(kw.get("estimates", {}))
    kw["facts"] = MappingProxyType(kw.get("facts", {}))
    return Chip(**kw)
