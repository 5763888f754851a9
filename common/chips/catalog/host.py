"""The host CPU a CPU fallback runs on: one set of estimates every simulated machine's record shares.

A graph break sends an op the device cannot run to the host: the host waits for the device, the op's inputs cross
the host link, the op runs eagerly on the CPU, its outputs cross back. None of these is a vendor figure.
"""
from __future__ import annotations

from common.chips.types import Estimate

HOST = {
    "host_sync_s": Estimate(10e-6, "s", "graph break: the host waits for the device queue to drain and starts a "
                            "transfer through the driver: ~10 us, the order of a synchronising round trip on PCIe "
                            "accelerators; not a vendor figure"),
    "host_cpu_flops": Estimate(100e9, "FLOP/s", "a CPU-fallback aten op runs eagerly on the host: a few cores x "
                               "SIMD at a few GHz ~ 1e11 FLOP/s; order of magnitude"),
    "host_cpu_bytes_per_s": Estimate(20e9, "B/s", "memory-bound eager CPU op (cumsum, sort, repeat) streaming at "
                                     "~20 GB/s on one socket; order of magnitude"),
}
