"""IBM Spyre (one PCIe card): 32 cores with 2 MB LX scratchpads, LPDDR5, sticks of 128 bytes."""
from __future__ import annotations

from common.catalog import REF
from common.chip_types import GB, MB, Estimate, MemoryLevel, T, make_chip

SPYRE = ("torch-spyre docs (docs/source/architecture/spyre_accelerator.md) and IBM Research blog "
         "'Lifting the cover on the IBM Spyre accelerator'")


CHIPS = (
    # ---- IBM Spyre (one PCIe card). Only the int8 figure is published; its dtype is not stated. ----
    make_chip(
        name="spyre", vendor="IBM", kind="spyre", peak_flops={"int8": 300 * T},
        matrix_unit="per core 2 corelets, each an 8x8 systolic PE array + 1-D SFU; sticks of 128 B",
        compute_units=32, compute_unit_name="cores", clock_hz=None,
        on_chip=(MemoryLevel("LX", 2 * MB, None, count=32, note="2 MB scratchpad per core, no hardware cache"),),
        off_chip=MemoryLevel("LPDDR5", 128 * GB, 204.8 * GB),
        link_bandwidth=2 * 64 * GB, link_name="PCIe Gen5 x16 to the host (both directions)", power_w=75,
        sources={"peak_flops.int8": SPYRE + " ('more than 300 TOPS'; precision not stated, assumed int8)",
                 "compute_units": SPYRE, "facts.stick_bytes": SPYRE + " (BYTES_IN_STICK = 128)",
                 "facts.corelets_per_core": SPYRE, "facts.pe_array_dim": SPYRE + " (8x8 systolic PE array)",
                 "memory.LX": SPYRE,
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
        facts={"stick_bytes": 128, "corelets_per_core": 2, "pe_array_dim": 8},
        aliases=("ibm-spyre", "aiu"),
    ),
)
