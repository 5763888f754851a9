"""IBM Spyre (one PCIe card): 32 cores with 2 MB LX scratchpads, LPDDR5, sticks of 128 bytes."""
from __future__ import annotations

from common.chip_types import GB, MB, Estimate, MemoryLevel, T, make_chip

SPYRE = ("torch-spyre docs (docs/source/architecture/spyre_accelerator.md) and IBM Research blog "
         "'Lifting the cover on the IBM Spyre accelerator'")
SCRATCHPAD = "torch-spyre docs/source/compiler/scratchpad_planning.md (LX planning parameters table)"
COST_MODEL = "torch-spyre torch_spyre/_inductor/cost_model.py module docstring (device-measured kernel sweep)"

# Estimates the Spyre simulator needs; IBM publishes none of these.
_CLOCK_HZ = 1.0e9  # order of magnitude only (see "clock_hz" below)
_LX_BYTES_PER_CYCLE = 128  # one stick per cycle per core


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
                 "facts.max_cards_per_system": SPYRE + " (IBM z17 supports up to 48 Spyre cards; IBM Z press "
                 "release newsroom.ibm.com/ai-on-z)",
                 "facts.lx_reserved_bytes": SCRATCHPAD + " (64 KB program/debug reservation per core)",
                 "facts.lx_backend_reserved_fraction": SCRATCHPAD + " (20% backend-reserved, DXP_LX_FRAC_AVAIL)",
                 "memory.LPDDR5": f"capacity: {SPYRE}; bandwidth: derived, LPDDR5-6400 x 256 bit = 204.8 GB/s",
                 "link_bandwidth": SPYRE + " (PCIe gen5 x16: 64 GB/s per direction)", "power_w": SPYRE},
        estimates={
            "dense_fp16_flops": Estimate(150 * T, "FLOP/s", "half the published 300 TOPS (int8 assumed): fp16 "
                                         "runs at half the int8 rate on the RaPiD-derived PE arrays "
                                         "(Venkataramani et al., ISCA 2021); not a published figure"),
            "clock_hz": Estimate(_CLOCK_HZ, "Hz", "order of magnitude only; IBM publishes no Spyre clock"),
            "lx_bytes_per_cycle_per_core": Estimate(_LX_BYTES_PER_CYCLE, "B/cycle", "one 128-byte stick per cycle "
                                                    "per core (the stick is the LX access granule, torch-spyre docs)"),
            "lx_bandwidth": Estimate(_LX_BYTES_PER_CYCLE * 32 * _CLOCK_HZ, "B/s", "aggregate LX port bandwidth = "
                                     "lx_bytes_per_cycle_per_core (128 B) x 32 cores x clock_hz (1 GHz estimate); "
                                     "a core using k cores gets k/32 of it"),
            "achievable_bandwidth_fraction": Estimate(0.73, "fraction of spec LPDDR5 bandwidth",
                                                      f"{COST_MODEL}: streaming peak ~150 GB/s measured for "
                                                      "one-directional traffic = 0.73 of 204.8 GB/s (balanced "
                                                      "read+write measured lower, ~105 GB/s; not modelled)"),
            "kernel_launch_s": Estimate(20e-6, "s", f"host-side setup of one SuperDSC bundle, ~20 us: {COST_MODEL} "
                                        "describes a ~20 us host-setup/Memset bucket outside device kernel time, and "
                                        "torch-spyre scratchpad_planning.md puts most of a 23.7 us single-core softmax "
                                        "(~2 MB of traffic) down to fixed per-bundle overhead"),
            "host_sync_s": Estimate(10e-6, "s", "graph break: the host waits for the device queue to drain and "
                                    "starts a PCIe transfer through the driver: ~10 us, the order of a synchronising "
                                    "round trip on PCIe accelerators; not an IBM figure"),
            "host_cpu_flops": Estimate(100e9, "FLOP/s", "a CPU-fallback aten op runs eagerly on the host: a few "
                                       "cores x SIMD at a few GHz ~ 1e11 FLOP/s; order of magnitude"),
            "host_cpu_bytes_per_s": Estimate(20e9, "B/s", "memory-bound eager CPU op (cumsum, sort, repeat) "
                                             "streaming at ~20 GB/s on one socket; order of magnitude"),
            "ring_bytes_per_cycle": Estimate(2 * 128, "B/cycle", "bidirectional ring, 128 B/cycle per direction "
                                             "(torch-spyre docs)"),
        },
        facts={"stick_bytes": 128, "corelets_per_core": 2, "pe_array_dim": 8, "max_cards_per_system": 48,
               "lx_reserved_bytes": 64 * 1024, "lx_backend_reserved_fraction": 0.2},
        aliases=("ibm-spyre", "aiu"),
    ),
)
