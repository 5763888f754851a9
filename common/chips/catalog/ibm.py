"""IBM Spyre (one PCIe card): 32 cores with 2 MB LX scratchpads, LPDDR5, sticks of 128 bytes."""
from __future__ import annotations

from common.chips.catalog.host import HOST
from common.chips.types import GB, MB, Estimate, MemoryLevel, T, make_chip

SPYRE = ("torch-spyre docs (docs/source/architecture/spyre_accelerator.md) and IBM Research blog "
         "'Lifting the cover on the IBM Spyre accelerator'")
SCRATCHPAD = "torch-spyre docs/source/compiler/scratchpad_planning.md (LX planning parameters table)"
COST_MODEL = "torch-spyre torch_spyre/_inductor/cost_model.py module docstring (device-measured kernel sweep)"
# torch-spyre/torch-spyre @ 92c8b3fd2d5d7b33382e57f4f95f9fe893df09da, torch_spyre/_inductor/cost_model.py, class
# CostParams (line numbers are not stable in the stored copy; cited by field): mac_peak_per_core_ns = 1140.0
# "MAC/ns/core (sustained; compute-isolate fit)", fitted on compute-dominant runs at 4-8 cores; its comment calls
# "the old 1536 datasheet" ~33 % optimistic. bw_peak_gbps = 150 (one-directional); rw_turnaround_ns_per_byte =
# 0.00574 = 2/105 - 2/150, so a balanced 1 read + 1 write stream runs at 105 GB/s. bmm_default_mac_peak_per_core_ns
# = 160 for a batched matmul whose both rank-3 operands have the compiler-default [0,1,2] tile order (every bmm the
# compiler emits today), gated to batch >= 4 (bmm_default_min_batch) and >= 8 cores (bmm_default_min_cores).
# These are CALIBRATION INPUTS: per-kernel device-time fits (torch.profiler 'Self SPYRE'), not end-to-end figures.
CP = "torch-spyre torch_spyre/_inductor/cost_model.py @92c8b3f, CostParams"
_MAC_DATASHEET = 1536  # MAC/ns/core
_MAC_SUSTAINED = 1140
_MAC_BMM_DEFAULT = 160

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
                 "facts.bmm_default_min_batch": f"{CP}.bmm_default_min_batch",
                 "facts.bmm_default_min_cores": f"{CP}.bmm_default_min_cores",
                 "memory.LPDDR5": f"capacity: {SPYRE}; bandwidth: derived, LPDDR5-6400 x 256 bit = 204.8 GB/s",
                 "link_bandwidth": SPYRE + " (PCIe gen5 x16: 64 GB/s per direction)", "power_w": SPYRE},
        estimates={
            "dense_fp16_flops": Estimate(_MAC_DATASHEET * 1e9 * 2 * 32, "FLOP/s",
                                         f"{CP}: the datasheet rate its mac_peak_per_core_ns comment quotes, "
                                         "1536 MAC/ns/core x 2 FLOP x 32 cores = 98.3 TFLOP/s (was half the "
                                         "300 TOPS, 150 TF: above torch-spyre's own constants)"),
            "matmul_efficiency_fp16": Estimate(_MAC_SUSTAINED / _MAC_DATASHEET, "fraction of dense_fp16_flops",
                                               f"{CP}.mac_peak_per_core_ns = 1140 MAC/ns/core sustained (fit on "
                                               "compute-dominant 4-8 core runs) / 1536 datasheet = 0.742"),
            "bmm_default_layout_efficiency": Estimate(
                _MAC_BMM_DEFAULT / _MAC_DATASHEET, "fraction of dense_fp16_flops",
                f"{CP}.bmm_default_mac_peak_per_core_ns = 160 MAC/ns/core: a bmm whose two batched operands carry "
                "the compiler-default [0,1,2] device tile order (batch just inside the stick) runs the array at "
                "160 / 1536 = 0.104; applied from batch >= 4 on >= 8 cores (bmm_default_min_batch / _min_cores)"),
            "lpddr_turnaround_s_per_byte": Estimate(
                0.00574e-9, "s/B", f"{CP}.rw_turnaround_ns_per_byte = 0.00574: LPDDR5 is one bus that turns "
                "around between reads and writes; a kernel reading R and writing W pays (R + W) / 150 GB/s + "
                "alpha x min(R, W), so a balanced copy runs at 2 / (2/150 + alpha) = 105 GB/s"),
            "clock_hz": Estimate(_CLOCK_HZ, "Hz", "order of magnitude only; IBM publishes no Spyre clock"),
            "lx_bytes_per_cycle_per_core": Estimate(_LX_BYTES_PER_CYCLE, "B/cycle", "one 128-byte stick per cycle "
                                                    "per core (the stick is the LX access granule, torch-spyre docs)"),
            "lx_bandwidth": Estimate(_LX_BYTES_PER_CYCLE * 32 * _CLOCK_HZ, "B/s", "aggregate LX port bandwidth = "
                                     "lx_bytes_per_cycle_per_core (128 B) x 32 cores x clock_hz (1 GHz estimate); "
                                     "a core using k cores gets k/32 of it"),
            "achievable_bandwidth_fraction": Estimate(0.73, "fraction of spec LPDDR5 bandwidth",
                                                      f"{CP}.bw_peak_gbps = 150 GB/s, the one-directional peak "
                                                      "(read-only or write-only) = 0.73 of 204.8 GB/s; mixed "
                                                      "traffic also pays lpddr_turnaround_s_per_byte"),
            "lpddr_dma_latency_s": Estimate(
                100e-9, "s per transfer", "order of magnitude, not an IBM figure: a DMA from LPDDR5 opens a row "
                "(tRCD >= 18 ns, JEDEC JESD209-5) and waits the read latency (~20 ns at 6400 MT/s) behind the memory "
                "controller and the on-chip network; DRAM load-to-use latency on LPDDR5 systems is ~100 ns. Paid "
                "once per op's LPDDR5 <-> LX transfer (later tiles are double-buffered under it)"),
            "kernel_launch_s": Estimate(20e-6, "s", f"host-side setup of one SuperDSC bundle, ~20 us: {COST_MODEL} "
                                        "describes a ~20 us host-setup/Memset bucket outside device kernel time, and "
                                        "torch-spyre scratchpad_planning.md puts most of a 23.7 us single-core softmax "
                                        "(~2 MB of traffic) down to fixed per-bundle overhead"),
            **HOST,  # host_sync_s, host_cpu_flops, host_cpu_bytes_per_s (common/chips/catalog/host.py)
            "ring_bytes_per_cycle": Estimate(2 * 128, "B/cycle", "bidirectional ring, 128 B/cycle per direction "
                                             "(torch-spyre docs)"),
        },
        facts={"stick_bytes": 128, "corelets_per_core": 2, "pe_array_dim": 8, "max_cards_per_system": 48,
               "lx_reserved_bytes": 64 * 1024, "lx_backend_reserved_fraction": 0.2,
               "bmm_default_min_batch": 4, "bmm_default_min_cores": 8},
        aliases=("ibm-spyre", "aiu"),
    ),
)
