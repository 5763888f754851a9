"""Cerebras wafer-scale engines: WSE-2, WSE-3 (no published dense peak: estimated, labelled)."""
from __future__ import annotations

from common.chips.catalog.host import HOST
from common.chips.types import GB, KB, PB, Estimate, MemoryLevel, make_chip

CEREBRAS = "Cerebras WSE-3 / CS-3 launch material (2024) and Argonne ALCF AI-testbed documentation"
# CS-2 / CS-3 system specification 'System I/O 1.2 Tb/s' = 12 x 100 GbE ports (ALCF AI-testbed tutorial: "each WSE
# is housed within a CS system, which provides 1.2 Tbps I/O to and from the chip"). Ethernet is full duplex, so
# the catalog's total over both directions is 2 x 150 GB/s. MemoryX, SwarmX and other CS systems all sit behind it.
SYSTEM_IO = "Cerebras CS-2 / CS-3 system specification: System I/O 1.2 Tb/s (12 x 100 GbE), full duplex"


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
        off_chip=None, link_bandwidth=2 * 150 * GB,
        link_name="12x 100 GbE system I/O (to MemoryX, SwarmX and other CS systems; total of both directions)",
        power_w=power,
        sources={"compute_units": src, "memory.SRAM": src, "power_w": src, "sparse_peak": sparse,
                 "link_bandwidth": SYSTEM_IO},
        estimates={
            **HOST,  # the host a CPU fallback runs on (common/chips/catalog/host.py), reached over the system I/O
            "dense_fp16_flops": dense16,
            "dense_bf16_flops": dense16,  # cb16 / bf16 share the 16-bit datapath
            "fabric_bytes_per_cycle_per_link": Estimate(
                4, "B/cycle", f"32-bit wavelet per cycle per PE-to-PE link (Cerebras SDK); fabric total {fabric}"),
            "clock_hz": Estimate(1.1e9, "Hz", "~1.1 GHz, Cerebras Hot Chips talks; not on a datasheet"),
            "fabric_hop_cycles": Estimate(
                1, "cycle", "a wavelet advances one PE-to-PE hop per cycle through the routers (Cerebras SDK "
                "description of the fabric); not a datasheet figure, and queueing at a busy router is ignored"),
        },
        aliases=aliases,
    )


CHIPS = (
    # ---- Cerebras wafer-scale engines. The published 125 PF (WSE-3) is a sparse figure: not used. ----
    _wse("wse-3", cores=900_000, sram_bw=21 * PB, power=23_000, src=CEREBRAS, sparse="125 PF 'AI compute' (sparse)",
         fabric="214 Pb/s", aliases=("cerebras-wse3", "cs-3")),
    _wse("wse-2", cores=850_000, sram_bw=20 * PB, power=23_000, src="Cerebras WSE-2 / CS-2 product material (2021)",
         sparse="not published", fabric="220 Pb/s", aliases=("cerebras-wse2", "cs-2")),
)
