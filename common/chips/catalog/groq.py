"""Groq LPU (GroqChip 1): SRAM only, deterministic, one big matrix unit."""
from __future__ import annotations

from common.chips.catalog.host import HOST
from common.chips.types import GB, MB, TB, MemoryLevel, T, make_chip

GROQ = ("Groq GroqChip product brief; Abts et al., 'Think Fast: A Tensor Streaming Processor', ISCA 2020; "
        "TechPowerUp / Linley Group coverage")
# Linley Newsletter 'Groq Gets Connected' (Nov 2020): 16 C2C links of 4 x 30 Gb/s lanes, ~15 GB/s per link per
# direction, 480 GB/s in total over all links and both directions.
C2C = "Linley Group, 'Groq Gets Connected' (Nov 2020): 16 links x 4 lanes x 30 Gb/s, 480 GB/s total"
# The per-hop latency: the ISCA 2022 paper's all-reduce analysis (sec. 6, p. 577): a 256-TSP Dragonfly needs at most
# 3 hops, "722 ns" of pipelined network latency each, 2.2 us in all - within the abstract's "< 3 us end-to-end
# system latency". Read in a public summary of the paper (the PDF itself was not readable here), so it is cited
# as such; the abstract's bound is the cross-check.
HOP = ("Abts et al., ISCA 2022 (DOI 10.1145/3470496.3527405), sec. 6: 722 ns pipelined network latency per hop "
       "(3 hops = 2.2 us for a 256-TSP all-reduce), as summarised in github.com/flyjancy/AI-Chip-Library "
       "Architecture/NPU/A-Software-defined-Tensor-Streaming-Multiprocessor-...-summary.md; consistent with the "
       "abstract's '< 3 us end-to-end system latency'")
# The card's host interface: PCIe Gen4 x16, 16 GT/s x 16 lanes x 128/130 encoding = 31.5 GB/s each way.
PCIE = "Groq GroqCard accelerator product brief: PCIe Gen4 x16 host interface (31.5 GB/s per direction, both: 63 GB/s)"
ISCA22 = ("Abts et al., 'A Software-defined Tensor Streaming Multiprocessor for Large-scale Machine Learning', "
          "ISCA 2022: Dragonfly systems of up to 10,440 TSPs, 220 MiB of SRAM each")


CHIPS = (
    # ---- Groq LPU (GroqChip 1): SRAM only, deterministic, one big matrix unit. ----
    make_chip(
        name="groq-lpu", vendor="Groq", kind="lpu", peak_flops={"fp16": 188 * T, "int8": 750 * T},
        matrix_unit="320x320 MXM (fp16 / int8), 5,120 vector ALUs, 20 superlanes",
        compute_units=1, compute_unit_name="TSP core", clock_hz=0.9e9,
        on_chip=(MemoryLevel("SRAM", 230 * MB, 80 * TB, note="220 MiB-class global SRAM, no caches"),),
        off_chip=None, link_bandwidth=480 * GB, link_name="16 chip-to-chip links (total)", power_w=None,
        sources={"peak_flops.fp16": GROQ, "peak_flops.int8": GROQ, "compute_units": GROQ,
                 "facts.mxm_dim": GROQ, "facts.c2c_links": C2C, "facts.vxm_alus": GROQ,
                 "facts.max_system_chips": ISCA22, "facts.c2c_hop_latency_s": HOP,
                 "facts.host_link_bandwidth": PCIE,
                 "clock_hz": GROQ + " (900 MHz nominal)", "memory.SRAM": GROQ, "link_bandwidth": C2C},
        # vxm_alus: the vector unit runs pointwise work (norms, softmax, activations) beside the MXM.
        facts={"mxm_dim": 320, "c2c_links": 16, "vxm_alus": 5120, "max_system_chips": 10_440,
               "c2c_hop_latency_s": 722e-9, "host_link_bandwidth": 2 * 31.5 * GB},
        estimates={**HOST},  # the host a CPU fallback runs on (common/chips/catalog/host.py)
        aliases=("lpu", "groq", "groqchip"),
    ),
)
