"""Groq LPU (GroqChip 1): SRAM only, deterministic, one big matrix unit."""
from __future__ import annotations

from common.chip_types import GB, MB, TB, MemoryLevel, T, make_chip

GROQ = ("Groq GroqChip product brief; Abts et al., 'Think Fast: A Tensor Streaming Processor', ISCA 2020; "
        "TechPowerUp / Linley Group coverage")


CHIPS = (
    # ---- Groq LPU (GroqChip 1): SRAM only, deterministic, one big matrix unit. ----
    make_chip(
        name="groq-lpu", vendor="Groq", kind="lpu", peak_flops={"fp16": 188 * T, "int8": 750 * T},
        matrix_unit="320x320 MXM (fp16 / int8), 5,120 vector ALUs, 20 superlanes",
        compute_units=1, compute_unit_name="TSP core", clock_hz=0.9e9,
        on_chip=(MemoryLevel("SRAM", 230 * MB, 80 * TB, note="220 MiB-class global SRAM, no caches"),),
        off_chip=None, link_bandwidth=480 * GB, link_name="16 chip-to-chip links (total)", power_w=None,
        sources={"peak_flops.fp16": GROQ, "peak_flops.int8": GROQ, "compute_units": GROQ,
                 "facts.mxm_dim": GROQ, "facts.c2c_links": GROQ,
                 "clock_hz": GROQ + " (900 MHz nominal)", "memory.SRAM": GROQ, "link_bandwidth": GROQ},
        facts={"mxm_dim": 320, "c2c_links": 16},
        aliases=("lpu", "groq", "groqchip"),
    ),
)
