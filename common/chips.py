"""The hardware catalog: one frozen record per chip, every number with its source (data only).

This is the only module in the project that holds hardware numbers; simulators, roofline plots and labs read
them from here, e.g. ``get_chip("h100-sxm").peak("bf16")``. Conventions (see ``common.chip_types``):
dense peaks only - sparse marketing figures are recorded in ``sources`` but never used; ``None`` = not
published; a number a simulator needs but the vendor does not publish is an ``Estimate`` with its derivation.

Source keys: ``sources["peak_flops.bf16"]``, ``sources["memory.HBM"]``, ``sources["clock_hz"]`` and so on.
"""
from __future__ import annotations

import re
from dataclasses import fields
from types import MappingProxyType

from common.chip_types import (  # noqa: F401  (re-exported: the catalog's public vocabulary)
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

# --- shared source strings -------------------------------------------------------------------------------
REF = "shared/reference/accelerators.md"
CUDA_SMEM = ("CUDA C++ Programming Guide, 'Shared Memory': 32 banks x 4 B per clock per SM = 128 B/clk/SM; "
             "aggregate = 128 B x SMs x boost clock (derived)")
T4_SRC = "NVIDIA T4 datasheet (2019); T4 deviceQuery (gist Terminus-IMRC/5e4b7782c27106dec287050b323cd059)"
A100_SRC = "NVIDIA A100 datasheet (2021) and 'NVIDIA A100 Tensor Core GPU Architecture' whitepaper (2020)"
H100_SRC = "NVIDIA H100 datasheet and 'NVIDIA H100 Tensor Core GPU Architecture' whitepaper (2022)"
H200_SRC = "NVIDIA H200 datasheet (2024): 141 GB HBM3e at 4.8 TB/s; compute as H100 SXM"
JAX_TPU = "jax-ml/jax jax/_src/pallas/mosaic/tpu_info.py (per-TensorCore VMEM, MXU size and count)"
GCLOUD = "cloud.google.com/tpu/docs/{}"
GROQ = ("Groq GroqChip product brief; Abts et al., 'Think Fast: A Tensor Streaming Processor', ISCA 2020; "
        "TechPowerUp / Linley Group coverage")
CEREBRAS = "Cerebras WSE-3 / CS-3 launch material (2024) and Argonne ALCF AI-testbed documentation"
SPYRE = ("torch-spyre docs (docs/source/architecture/spyre_accelerator.md) and IBM Research blog "
         "'Lifting the cover on the IBM Spyre accelerator'")


def _gpu_estimates(copy_fraction: float, how: str) -> dict:
    """Launch costs and achievable DRAM bandwidth: what the GPU simulator needs beyond the datasheet."""
    return {
        "achievable_bandwidth_fraction": Estimate(copy_fraction, "fraction of spec DRAM bandwidth", how),
        "kernel_launch_s": Estimate(4e-6, "s", "host-side cost of one eager kernel launch through PyTorch "
                                    "(cudaLaunchKernel plus dispatcher): a few microseconds in Nsight traces; "
                                    "order of magnitude, not a vendor figure"),
        "kernel_gap_s": Estimate(1e-6, "s", "device-side gap between dependent kernels replayed from a CUDA "
                                 "graph (grid drain + next grid start), ~1 us; order of magnitude"),
    }


H100_COPY = f"{REF}: H100 device-to-device copy measured at ~2.9 TB/s = 0.87 of 3.35 TB/s"
ASSUMED_COPY = f"assumed equal to the H100 measurement ({REF}); no measurement for this part"


def _gpu(name, src, *, peaks, tc, sms, clock, smem_per_sm, l2, dram, dram_bw, dram_name, link, link_name, power,
         aliases=(), extra_sources=None, copy=(0.87, ASSUMED_COPY)):
    """A GPU record: register file excluded; smem bandwidth derived from the CUDA bank structure."""
    return make_chip(
        estimates=_gpu_estimates(*copy),
        name=name, vendor="NVIDIA", kind="gpu", peak_flops=peaks,
        matrix_unit=tc, compute_units=sms, compute_unit_name="SMs", clock_hz=clock,
        on_chip=(MemoryLevel("SMEM", smem_per_sm, 128 * sms * clock, count=sms, note="shared memory / L1 per SM"),
                 MemoryLevel("L2", l2, None, note="bandwidth not published by NVIDIA")),
        off_chip=MemoryLevel(dram_name, dram, dram_bw),
        link_bandwidth=link, link_name=link_name, power_w=power, aliases=aliases,
        sources={**{f"peak_flops.{d}": src for d in peaks}, "compute_units": src, "clock_hz": src,
                 "memory.SMEM": f"capacity: {src}; bandwidth: {CUDA_SMEM}", "memory.L2": src,
                 f"memory.{dram_name}": src, "link_bandwidth": src, "power_w": src, **(extra_sources or {})},
    )


def _tpu(version, *, bf16, int8, fp8=None, tcs, mxus, mxu, clock, vmem, hbm, hbm_bw, ici, power=None,
         cmem=None, doc):
    src = GCLOUD.format(doc)
    peaks = {"bf16": bf16, "int8": int8, **({"fp8": fp8} if fp8 else {})}
    levels = [MemoryLevel("VMEM", vmem, None, count=tcs, note="vector memory per TensorCore (software-managed)")]
    if cmem:
        levels.append(MemoryLevel("CMEM", cmem, None, note="common memory shared by the TensorCores"))
    sources = {**{f"peak_flops.{d}": src for d in peaks}, "compute_units": f"{src}; {JAX_TPU}",
               "memory.VMEM": JAX_TPU, "memory.CMEM": JAX_TPU, "memory.HBM": src, "link_bandwidth": src}
    if clock:
        sources["clock_hz"] = clock[1]
    return make_chip(
        name=f"tpu-{version}", vendor="Google", kind="tpu", peak_flops=peaks,
        matrix_unit=f"{mxus} MXU x {mxu}x{mxu} systolic per TensorCore, bf16 in / fp32 accumulate",
        compute_units=tcs, compute_unit_name="TensorCores", clock_hz=clock[0] if clock else None,
        on_chip=tuple(levels), off_chip=MemoryLevel("HBM", hbm, hbm_bw),
        link_bandwidth=ici, link_name="ICI (bidirectional, per chip)", power_w=power,
        sources=sources, aliases=(f"v{version[1:]}" if version.startswith("v") else version, f"tpu{version}"),
    )


def _wse(name, *, cores, sram_bw, power, src, sparse, fabric, aliases):
    """A wafer: PEs each with 48 KB SRAM and a 2-D mesh fabric; no published dense peak, so it is estimated."""
    # Not a vendor figure. Needed so that compute-bound work has a floor on the simulated wafer.
    dense16 = Estimate(cores * 8 * 1.1e9, "FLOP/s",
                       "PEs x 4-wide fp16 FMA SIMD (8 FLOP/cycle) x ~1.1 GHz; SIMD width and clock from Cerebras "
                       "SDK / Hot Chips descriptions of the PE, not a published dense peak")
    return make_chip(
        name=name, vendor="Cerebras", kind="wse", peak_flops={},
        matrix_unit="no matrix unit: each PE has a SIMD fp16 FMAC datapath fed from its own SRAM",
        compute_units=cores, compute_unit_name="PEs", clock_hz=None,
        on_chip=(MemoryLevel("SRAM", 48 * KB, sram_bw, count=cores, note="48 KB private SRAM per PE"),),
        off_chip=None, link_bandwidth=None, link_name="SwarmX / MemoryX (weight streaming; not published)",
        power_w=power,
        sources={"compute_units": src, "memory.SRAM": src, "power_w": src, "sparse_peak": sparse},
        estimates={
            "dense_fp16_flops": dense16,
            "dense_bf16_flops": dense16,  # cb16 / bf16 share the 16-bit datapath
            "fabric_bytes_per_cycle_per_link": Estimate(
                4, "B/cycle", f"32-bit wavelet per cycle per PE-to-PE link (Cerebras SDK); fabric total {fabric}"),
            "clock_hz": Estimate(1.1e9, "Hz", "~1.1 GHz, Cerebras Hot Chips talks; not on a datasheet"),
        },
        aliases=aliases,
    )


CHIPS_LIST = (
    # ---- NVIDIA GPUs. Dense tensor-core peaks; fp32 is the CUDA-core (non-tensor) rate. ----
    _gpu("t4", T4_SRC,
         peaks={"fp32": 8.1 * T, "fp16": 65 * T, "int8": 130 * T},  # Turing: no tf32/bf16 tensor cores
         tc="320 tensor cores (Turing), 4x4x4 fp16 FMA per clock each", sms=40, clock=1.59e9,
         smem_per_sm=64 * KiB, l2=4 * MiB, dram=16 * GB, dram_bw=320 * GB, dram_name="GDDR6",
         link=2 * 15.75 * GB, link_name="PCIe 3.0 x16 (both directions)", power=70, aliases=("tesla-t4",)),
    _gpu("a100-40gb", A100_SRC,
         peaks={"fp32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T, "fp16": 312 * T, "int8": 624 * T},
         tc="432 3rd-gen tensor cores, 256 fp16 FMA per clock each", sms=108, clock=1.41e9,
         smem_per_sm=164 * KiB, l2=40 * MB, dram=40 * GB, dram_bw=1555 * GB, dram_name="HBM",
         link=600 * GB, link_name="NVLink 3 (12 links, both directions)", power=400, aliases=("a100",)),
    _gpu("a100-80gb", A100_SRC,
         peaks={"fp32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T, "fp16": 312 * T, "int8": 624 * T},
         tc="432 3rd-gen tensor cores, 256 fp16 FMA per clock each", sms=108, clock=1.41e9,
         smem_per_sm=164 * KiB, l2=40 * MB, dram=80 * GB, dram_bw=2039 * GB, dram_name="HBM",
         link=600 * GB, link_name="NVLink 3 (12 links, both directions)", power=400),
    _gpu("h100-sxm", H100_SRC,
         # 2:4-sparse figures (2x these) appear on the datasheet and are not used.
         peaks={"fp32": 66.9 * T, "tf32": 494.7 * T, "bf16": 989.4 * T, "fp16": 989.4 * T,
                "fp8": 1978.9 * T, "int8": 1978.9 * T},
         tc="528 4th-gen tensor cores, 512 fp16 FMA per clock each", sms=132, clock=1.83e9,
         smem_per_sm=228 * KiB, l2=50 * MB, dram=80 * GB, dram_bw=3.35 * TB, dram_name="HBM",
         link=900 * GB, link_name="NVLink 4 (18 links, both directions)", power=700, aliases=("h100",),
         copy=(0.87, H100_COPY),
         extra_sources={"clock_hz": f"{REF}: ~1.83 GHz, consistent with 528 TC x 512 FMA x 2 x f = 989.4 TF"}),
    _gpu("h200", H200_SRC,
         peaks={"fp32": 66.9 * T, "tf32": 494.7 * T, "bf16": 989.4 * T, "fp16": 989.4 * T,
                "fp8": 1978.9 * T, "int8": 1978.9 * T},
         tc="528 4th-gen tensor cores, 512 fp16 FMA per clock each", sms=132, clock=1.83e9,
         smem_per_sm=228 * KiB, l2=50 * MB, dram=141 * GB, dram_bw=4.8 * TB, dram_name="HBM",
         link=900 * GB, link_name="NVLink 4 (18 links, both directions)", power=700, aliases=("h200-sxm",),
         copy=(0.896, f"{REF}: H200 device copy measured through PyTorch at ~4.3 TB/s = 0.896 of 4.8 TB/s")),

    # ---- Google TPUs, per chip. ----
    _tpu("v4", bf16=275 * T, int8=275 * T, tcs=2, mxus=4, mxu=128,
         clock=(1.05e9, "Jouppi et al., 'TPU v4', ISCA 2023 (1050 MHz); = 275 TF / (8 MXU x 128^2 x 2)"),
         vmem=16 * MiB, cmem=128 * MiB, hbm=32 * GiB, hbm_bw=1200 * GB, ici=None, doc="v4"),
    _tpu("v5e", bf16=197 * T, int8=393 * T, tcs=1, mxus=4, mxu=128,
         clock=(1.5e9, "jax-ml/scaling-book 'tpus.md' (~1.5 GHz); = 197 TF / (4 MXU x 128^2 x 2)"),
         vmem=128 * MiB, hbm=16 * GB, hbm_bw=819 * GB, ici=400 * GB, doc="v5e"),
    _tpu("v5p", bf16=459 * T, int8=918 * T, tcs=2, mxus=4, mxu=128, clock=None,
         vmem=64 * MiB, hbm=95 * GB, hbm_bw=2765 * GB, ici=4800e9 / 8, doc="v5p-training"),
    _tpu("v6e", bf16=918 * T, int8=1836 * T, fp8=918 * T, tcs=1, mxus=2, mxu=256, clock=None,
         vmem=128 * MiB, hbm=32 * GB, hbm_bw=1638 * GB, ici=800 * GB, doc="v6e"),

    # ---- Cerebras wafer-scale engines. The published 125 PF (WSE-3) is a sparse figure: not used. ----
    _wse("wse-3", cores=900_000, sram_bw=21 * PB, power=23_000, src=CEREBRAS, sparse="125 PF 'AI compute' (sparse)",
         fabric="214 Pb/s", aliases=("cerebras-wse3", "cs-3")),
    _wse("wse-2", cores=850_000, sram_bw=20 * PB, power=23_000, src="Cerebras WSE-2 / CS-2 product material (2021)",
         sparse="not published", fabric="220 Pb/s", aliases=("cerebras-wse2", "cs-2")),

    # ---- Groq LPU (GroqChip 1): SRAM only, deterministic, one big matrix unit. ----
    make_chip(
        name="groq-lpu", vendor="Groq", kind="lpu", peak_flops={"fp16": 188 * T, "int8": 750 * T},
        matrix_unit="320x320 MXM (fp16 / int8), 5,120 vector ALUs, 20 superlanes",
        compute_units=1, compute_unit_name="TSP core", clock_hz=0.9e9,
        on_chip=(MemoryLevel("SRAM", 230 * MB, 80 * TB, note="220 MiB-class global SRAM, no caches"),),
        off_chip=None, link_bandwidth=480 * GB, link_name="16 chip-to-chip links (total)", power_w=None,
        sources={"peak_flops.fp16": GROQ, "peak_flops.int8": GROQ, "compute_units": GROQ,
                 "clock_hz": GROQ + " (900 MHz nominal)", "memory.SRAM": GROQ, "link_bandwidth": GROQ},
        aliases=("lpu", "groq", "groqchip"),
    ),

    # ---- IBM Spyre (one PCIe card). Only the int8 figure is published; its dtype is not stated. ----
    make_chip(
        name="spyre", vendor="IBM", kind="spyre", peak_flops={"int8": 300 * T},
        matrix_unit="per core 2 corelets, each an 8x8 systolic PE array + 1-D SFU; sticks of 128 B",
        compute_units=32, compute_unit_name="cores", clock_hz=None,
        on_chip=(MemoryLevel("LX", 2 * MB, None, count=32, note="2 MB scratchpad per core, no hardware cache"),),
        off_chip=MemoryLevel("LPDDR5", 128 * GB, 204.8 * GB),
        link_bandwidth=2 * 64 * GB, link_name="PCIe Gen5 x16 to the host (both directions)", power_w=75,
        sources={"peak_flops.int8": SPYRE + " ('more than 300 TOPS'; precision not stated, assumed int8)",
                 "compute_units": SPYRE, "memory.LX": SPYRE,
                 "memory.LPDDR5": f"capacity: {SPYRE}; bandwidth: {REF} (~200 GB/s), = LPDDR5-6400 x 256 bit",
                 "link_bandwidth": SPYRE + " (PCIe gen5 x16: 64 GB/s per direction)", "power_w": SPYRE},
        estimates={
            "dense_fp16_flops": Estimate(150 * T, "FLOP/s", "half the published 300 TOPS (int8 assumed): fp16 "
                                         "runs at half the int8 rate on the RaPiD-derived PE arrays "
                                         "(Venkataramani et al., ISCA 2021); not a published figure"),
            "clock_hz": Estimate(1.0e9, "Hz", "order of magnitude only; IBM publishes no Spyre clock"),
            "lx_bytes_per_cycle_per_core": Estimate(128, "B/cycle", "one 128-byte stick per cycle per core "
                                                    "(the stick is the LX access granule, torch-spyre docs)"),
            "ring_bytes_per_cycle": Estimate(2 * 128, "B/cycle", "bidirectional ring, 128 B/cycle per direction "
                                             "(torch-spyre docs)"),
        },
        aliases=("ibm-spyre", "aiu"),
    ),
)

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
        if f.name == "peak_flops":
            missing += [f"peak_flops.{d}" for d in value if f"peak_flops.{d}" not in chip.sources]
        elif f.name in ("on_chip", "off_chip"):
            for lv in value if isinstance(value, tuple) else (value,):
                if f"memory.{lv.name}" not in chip.sources:
                    missing.append(f"memory.{lv.name}")
        elif isinstance(value, (int, float)) and f.name not in chip.sources:
            missing.append(f.name)
    return missing
