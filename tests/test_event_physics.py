"""Physics for every event: one decode step of three models on all five backends, each event checked against
floors computed here from the catalog alone (not from the simulator's own ``floor`` field):

* every event lasts at least one cycle of the chip's clock (the catalog's, or its clock estimate);
* a transfer (dma / comm, or anything that moves bytes over PCIe, a chip-to-chip link or the wafer fabric)
  lasts at least the link's latency + bytes / the most bandwidth the chip can inject in one direction;
* a compute event lasts at least max(FLOPs / peak, bytes / bandwidth of each level it streams from).
"""
from __future__ import annotations

import math

import pytest

from common.chips.catalog.links import hop_latency, host_link_latency
from common.sim import simulate_llm
from common.sim.run import make_policy

MODELS = ("qwen2.5-0.5b", "llama-3.1-8b", "mixtral-8x7b")
BACKENDS = ("gpu", "tpu", "wse", "lpu", "spyre")
REL = 1e-9  # float slack only
_REPORTS: dict = {}


def _report(model: str, backend: str):
    if (model, backend) not in _REPORTS:
        _REPORTS[model, backend] = simulate_llm(model, backend, phase="decode", batch=1, seq=1024)
    return _REPORTS[model, backend]


def _links(policy) -> dict[str, tuple[float, float]]:
    """Bytes key of a transfer event -> (latency s, fastest one-direction bandwidth B/s), from the catalog."""
    chip = policy.chip
    out = {}
    if chip.link_bandwidth:
        out["link"] = out["PCIe"] = (hop_latency(chip).value, chip.link_bandwidth / 2)
    if chip.link_bandwidth or "host_link_bandwidth" in chip.facts:  # a CPU fallback's round trip to the host
        fastest = max(chip.link_bandwidth or 0.0, chip.facts.get("host_link_bandwidth", 0.0))
        out["host link"] = (host_link_latency(chip).value, fastest / 2)
    if policy.name == "wse":  # the widest edge of the mesh: one wafer side of PE-to-PE links
        clock = chip.estimate("clock_hz")
        side = math.isqrt(chip.compute_units) * chip.estimate("fabric_bytes_per_cycle_per_link") * clock
        out["fabric"] = (chip.estimate("fabric_hop_cycles") / clock, side)
    if policy.name == "spyre":  # LPDDR5 <-> LX DMA
        out[policy.main_level] = (chip.estimate("lpddr_dma_latency_s"), chip.main_memory.bandwidth)
    return out


def _level_bandwidth(policy, level: str) -> float | None:
    bw = policy.chip.level(level).bandwidth
    if bw:
        return bw
    key = f"{level.lower()}_bandwidth"
    return policy.chip.estimate(key) if key in policy.chip.estimates else None


def _transfer_bytes(policy, e) -> dict[str, float]:
    if policy.name == "spyre" and e.kind == "dma" and e.engine == "dma":  # bytes kept in detail: counted once
        return {policy.main_level: e.detail["lpddr_read"] + e.detail["lpddr_write"]}
    return e.bytes


def violations(report) -> list[str]:
    policy = make_policy(report.backend, report.chip, None, report.dtype)
    cycle, links, out = policy.cycle_s(), _links(policy), []
    assert cycle > 0, f"{report.chip}: no clock or clock estimate"
    for e in report.events:
        if e.duration < cycle * (1 - REL):
            out.append(f"{e.name} ({e.kind}): {e.duration:.3g} s < one {cycle:.3g} s cycle")
        if e.kind in ("dma", "comm") or "PCIe" in e.bytes:
            moved = {k: b for k, b in _transfer_bytes(policy, e).items() if b > 0}
            if not moved:
                out.append(f"{e.name} ({e.kind}): a transfer that moves no bytes")
            for key, nbytes in moved.items():
                if key not in links:
                    out.append(f"{e.name}: moves {key} bytes over no link the catalog knows")
                    continue
                latency, bw = links[key]
                if e.duration < (latency + nbytes / bw) * (1 - REL):
                    out.append(f"{e.name} ({e.kind}): {e.duration:.3g} s < latency {latency:.3g} s + {nbytes:.0f} B "
                               f"/ {bw:.3g} B/s")
        elif e.kind == "compute":
            floor = e.flops / policy.peak
            for level, nbytes in e.bytes.items():
                bw = _level_bandwidth(policy, level)
                floor = max(floor, nbytes / bw if bw else 0.0)
            if e.duration < floor * (1 - REL):
                out.append(f"{e.name}: {e.duration:.3g} s < max(FLOPs / peak, bytes / bandwidth) = {floor:.3g} s")
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model", MODELS)
def test_no_event_is_faster_than_physics(model, backend):
    bad = violations(_report(model, backend))
    assert not bad, f"{len(bad)} events of {model} on {backend} beat physics, e.g.: " + "; ".join(bad[:5])


def test_the_check_catches_an_event_shorter_than_a_cycle():
    """The walker is not vacuous: an event squeezed under one cycle, or a transfer without its latency, fails."""
    import dataclasses
    r = _report("qwen2.5-0.5b", "spyre")
    dma = next(e for e in r.events if e.kind == "dma" and e.engine == "dma")
    fast = dataclasses.replace(r, events=[dataclasses.replace(dma, duration=dma.duration * 1e-3)])
    assert violations(fast)
    comp = next(e for e in r.events if e.kind == "compute" and e.flops > 0)
    fast = dataclasses.replace(r, events=[dataclasses.replace(comp, duration=comp.duration * 1e-3)])
    assert violations(fast)
