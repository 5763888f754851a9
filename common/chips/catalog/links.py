"""Latency of one hop over a chip's link: what every transfer pays before its bytes, per link technology.

A transfer of B bytes over a link takes ``latency + B / bandwidth`` (the alpha-beta model; NCCL times its own
collectives this way: latency x steps + bytes / bandwidth). A chip record whose link has a published latency of its
own carries it (Groq's ``c2c_hop_latency_s`` fact, the TPUs' ``ici_hop_latency_s`` estimate); every other chip takes
the figure of its link's technology below, matched on the record's ``link_name``.
"""
from __future__ import annotations

from common.chips.types import Chip, Estimate
from common.errors import DFAError

# NVIDIA/nccl @01afd20a77b5804e0ecf1042509dd9d20ebf9e93 src/graph/tuning.cc, table hwLat: the latency NCCL's tuning
# model charges per step of a ring collective, in microseconds, LL (low-latency) protocol: NVLink .47, PCI 1.0,
# network (InfiniBand / RoCE) 2.7. Measured by NVIDIA for its own model; these are GPU systems' figures.
NCCL_HWLAT = ("NVIDIA/nccl src/graph/tuning.cc @01afd20, table hwLat (per-step latency of a ring collective, LL "
              "protocol, used by NCCL's time model latency x steps + bytes / bandwidth)")

LINK_LATENCY = (
    ("NVLink", Estimate(0.47e-6, "s per hop", f"{NCCL_HWLAT}: NVLink 0.47 us")),
    ("PCIe", Estimate(1.0e-6, "s per hop", f"{NCCL_HWLAT}: PCI 1.0 us; NVIDIA's figure for a PCIe hop between "
                      "GPUs, used for any PCIe card (IBM publishes none for Spyre)")),
    ("GbE", Estimate(2.7e-6, "s per hop", f"{NCCL_HWLAT}: network 2.7 us (InfiniBand / RoCE NICs); used for the "
                     "Cerebras system I/O (100 GbE), whose latency Cerebras does not publish")),
)
OWN = ("c2c_hop_latency_s", "ici_hop_latency_s")  # chip-specific figures (facts or estimates) take precedence


def hop_latency(chip: Chip) -> Estimate:
    """The latency of one hop over ``chip``'s chip-to-chip (or host) link, with its source."""
    for key in OWN:
        if key in chip.facts:
            return Estimate(chip.facts[key], "s per hop", chip.sources.get(f"facts.{key}", ""))
        if key in chip.estimates:
            return chip.estimates[key]
    for tech, est in LINK_LATENCY:
        if tech in (chip.link_name or ""):
            return est
    raise DFAError(f"{chip.name}: no hop latency for its link {chip.link_name!r}; known link kinds: "
                   f"{', '.join(t for t, _ in LINK_LATENCY)}")


def host_link_latency(chip: Chip) -> Estimate:
    """The latency of one transfer between ``chip`` and its host: a PCIe hop where the card has a PCIe host
    interface of its own (a ``host_link_bandwidth`` fact, or a PCIe ``link_name``); else its link's hop (a wafer
    reaches its host over the system I/O)."""
    if "host_link_bandwidth" in chip.facts or "PCIe" in (chip.link_name or ""):
        return dict(LINK_LATENCY)["PCIe"]
    return hop_latency(chip)
