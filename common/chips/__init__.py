"""The hardware catalog: one frozen record per chip and per serving stack, every number with its source. The
lookup is here (``get_chip``, ``chips_of_kind``, ``chip_for_device_name``), the record types in ``types``, the
vendors' data in ``catalog/``.

This is the only package in the project that holds hardware numbers; simulators, roofline plots and labs read
them from here, e.g. ``get_chip("h100-sxm").peak("bf16")``. Conventions (see ``common.chips.types``):
dense peaks only - sparse marketing figures are recorded in ``sources`` but never used; ``None`` = not
published; a number a simulator needs but the vendor does not publish is an ``Estimate`` with its derivation.

Source keys: ``sources["peak_flops.bf16"]``, ``sources["memory.HBM"]``, ``sources["clock_hz"]`` and so on.

May import: no other package.
"""
from __future__ import annotations

import re
from dataclasses import fields
from types import MappingProxyType

from common.chips.catalog import cerebras, google, groq, ibm, nvidia
from common.chips.types import (  # noqa: F401  (re-exported: the catalog's public vocabulary)
    DTYPE_BYTES,
    DTYPES,
    GB,
    KB,
    MB,
    PB,
    TB,
    Chip,
    Estimate,
    GiB,
    KiB,
    MemoryLevel,
    MiB,
    P,
    T,
    canonical_dtype,
    make_chip,
)
from common.errors import unknown

CHIPS_LIST = (*nvidia.CHIPS, *google.CHIPS, *cerebras.CHIPS, *groq.CHIPS, *ibm.CHIPS)
CHIPS = MappingProxyType({c.name: c for c in CHIPS_LIST})
_ALIASES = {a.lower(): c.name for c in CHIPS_LIST for a in (c.name, *c.aliases)}


def chip_names() -> list[str]:
    return list(CHIPS)


def get_chip(name: str | Chip) -> Chip:
    """Look a chip up by name or alias (case-insensitive); unknown names list the valid ones."""
    if isinstance(name, Chip):
        return name
    key = str(name).lower().strip()
    if key in _ALIASES:
        return CHIPS[_ALIASES[key]]
    raise unknown("chip", name, CHIPS)


def chips_of_kind(kind: str) -> list[Chip]:
    return [c for c in CHIPS_LIST if c.kind == kind]
# torch.cuda.get_device_name() strings -> catalog names. Order matters: more specific patterns first.
_DEVICE_PATTERNS = (
    (r"\bH200\b", "h200"),
    (r"\bH100\b.*(SXM|HBM3)", "h100-sxm"),
    (r"\bA100\b.*80\s*GB", "a100-80gb"),
    (r"\bA100\b", "a100-40gb"),
    (r"\bTesla T4\b|\bT4\b", "t4"),
    (r"\bL4\b", "l4"),  # "NVIDIA L4"; \b keeps the L40 / L40S out
)


def chip_for_device_name(device_name: str) -> Chip | None:
    """Map a CUDA device name (``torch.cuda.get_device_name()``) to its record, or None when unknown.

    An H100 PCIe / NVL or an A100 of unclear memory size is *not* guessed: PCIe parts have lower clocks and
    bandwidth than the SXM records here. Callers fall back to measured peaks and say so.
    """
    for pattern, name in _DEVICE_PATTERNS:
        if re.search(pattern, device_name or "", flags=re.IGNORECASE):
            if name == "h100-sxm" or "PCIE" not in device_name.upper():
                return CHIPS[name]
    return None


def catalog_rows() -> list[dict]:
    """One flat dict per chip for tables (``dfa chips``, pandas)."""
    rows = []
    for c in CHIPS.values():
        row = {"chip": c.name, "vendor": c.vendor, "kind": c.kind}
        for d in DTYPES:
            row[f"{d}_tflops"] = c.peak_flops[d] / T if d in c.peak_flops else None
        row["units"] = f"{c.compute_units} {c.compute_unit_name}"
        row["matrix_unit"] = c.matrix_unit
        row["clock_ghz"] = c.clock_hz / 1e9 if c.clock_hz else None
        row["on_chip"] = "; ".join(f"{lv.name} {_fmt_bytes(lv.total_capacity)}" for lv in c.on_chip)
        mm = c.main_memory
        row["main_memory"] = f"{mm.name} {_fmt_bytes(mm.total_capacity)}"
        row["main_bw_tbs"] = mm.bandwidth / TB if mm.bandwidth else None
        row["link_gbs"] = c.link_bandwidth / GB if c.link_bandwidth else None
        row["power_w"] = c.power_w
        row["estimates"] = ", ".join(c.estimates) or ""
        rows.append(row)
    return rows


def _fmt_bytes(n: float) -> str:
    for unit, scale in (("TB", TB), ("GB", GB), ("MB", MB), ("KB", KB)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def numeric_fields_without_source(chip: Chip) -> list[str]:
    """Names of set numeric facts lacking a ``sources`` entry (used by the tests to keep the catalog honest)."""
    missing = []
    for f in fields(chip):
        value = getattr(chip, f.name)
        if f.name in ("sources", "estimates", "aliases") or value is None:
            continue
        if f.name == "facts":
            missing += [f"facts.{k}" for k in value if f"facts.{k}" not in chip.sources]
            continue
        if f.name == "peak_flops":
            missing += [f"peak_flops.{d}" for d in value if f"peak_flops.{d}" not in chip.sources]
        elif f.name in ("on_chip", "off_chip"):
            for lv in value if isinstance(value, tuple) else (value,):
                if f"memory.{lv.name}" not in chip.sources:
                    missing.append(f"memory.{lv.name}")
        elif isinstance(value, (int, float)) and f.name not in chip.sources:
            missing.append(f.name)
    return missing
