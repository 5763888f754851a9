"""Timing regions over a simulated timeline: where did the time between two points go?

A ``TimingRegion`` is a window ``[t0, t1]`` of a ``Report``'s events (delimit it by times or by the first and
last kernel it must contain). Its wall time is split **exclusively**: at every instant the region is charged
to the highest-priority activity running then,

    kernel (device compute) > communication (chip-to-chip) > transfer (DMA, host<->device copies)
    > host (a CPU fallback op) > overhead (launches, syncs) > idle

so the six parts add up to ``t1 - t0`` exactly, and ``transfer`` is the *exposed* transfer time (the part no
kernel hides). ``busy`` gives each activity's own busy time (overlaps counted in each).

The **optimum** is the sum of the roofline floors of the region's work: each device kernel's
``max(FLOPs / peak, bytes / bandwidth)`` (``Event.floor``), and for a CPU-fallback op the floor it would have
on the device (its FLOPs at the chip's peak, its input and output bytes at main-memory bandwidth) — what a
compiler that fused everything and overlapped every transfer could reach. ``causes()`` names the fallbacks
and restickifies found in the region, the usual reasons the wall time is far above it.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from common.chips import get_chip
from common.errors import DFAError

CATEGORIES = ("kernel", "communication", "transfer", "host", "overhead", "idle")
_OF_KIND = {"compute": "kernel", "comm": "communication", "dma": "transfer", "host": "host", "launch": "overhead",
            "sync": "overhead"}


def category(event) -> str:
    """The activity an event stands for (see CATEGORIES)."""
    return _OF_KIND.get(event.kind, "overhead")


def exclusive_split(events, t0: float, t1: float) -> dict[str, float]:
    """Seconds of ``[t0, t1]`` charged to each category, highest priority first; the values sum to t1 - t0."""
    spans = [(max(e.start, t0), min(e.end, t1), CATEGORIES.index(category(e))) for e in events
             if e.end > t0 and e.start < t1 and e.duration > 0]
    cuts = sorted({t0, t1, *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    out = dict.fromkeys(CATEGORIES, 0.0)
    for a, b in zip(cuts, cuts[1:], strict=False):
        active = [p for s, e, p in spans if s <= a and e >= b]
        out[CATEGORIES[min(active)] if active else "idle"] += b - a
    return out


@dataclass
class TimingRegion:
    report: object
    t0: float
    t1: float

    @property
    def events(self) -> list:
        return [e for e in self.report.events if e.end > self.t0 and e.start < self.t1]

    @property
    def wall_s(self) -> float:
        return self.t1 - self.t0

    def split(self) -> dict[str, float]:
        return exclusive_split(self.events, self.t0, self.t1)

    def busy(self) -> dict[str, float]:
        """Each category's own busy time in the region (union of its events, overlaps with others counted)."""
        out = {}
        for c in CATEGORIES[:-1]:
            spans = sorted((max(e.start, self.t0), min(e.end, self.t1)) for e in self.events if category(e) == c)
            total, end = 0.0, self.t0
            for s, e in spans:
                total += max(0.0, e - max(s, end))
                end = max(end, e)
            out[c] = total
        return out

    def optimum_s(self) -> float:
        """Sum of the roofline floors of the region's work (device kernels; fallback ops as if on the device)."""
        chip = get_chip(self.report.chip)
        peak = chip.compute_peak(self.report.dtype)[0]
        total = 0.0
        for e in self.events:
            if e.kind == "compute":
                total += e.floor
            elif e.kind == "host":  # its bytes are the round trip next to it: inputs out, outputs back
                moved = sum(x.bytes.get("PCIe", 0.0) for x in self.report.events
                            if x.kernel == e.kernel and x.kind == "dma")
                total += max(e.flops / peak, moved / chip.main_memory.bandwidth)
        return total

    def causes(self) -> list[str]:
        """Fallbacks ('fallback:aten.cumsum') and restickifies ('restickify:<tensor>') in the region."""
        out = []
        for e in self.events:
            if e.kind == "host":
                out.append(f"fallback:{e.detail.get('fallback', e.name)}")
            elif e.kind == "compute" and e.detail.get("sdsc_kind") == "restickify":
                out.append(f"restickify:{e.name.split('(', 1)[-1].rstrip(')')}")
        return out

    def summary(self) -> pd.DataFrame:
        split, busy = self.split(), self.busy()
        return pd.DataFrame({"exclusive_s": split, "busy_s": {**busy, "idle": split["idle"]},
                             "share": {k: v / self.wall_s if self.wall_s else 0.0 for k, v in split.items()}})

    def __str__(self) -> str:
        s = self.split()
        parts = ", ".join(f"{k} {v * 1e6:.2f} us" for k, v in s.items() if v)
        return (f"region [{self.t0 * 1e6:.2f}, {self.t1 * 1e6:.2f}] us, wall {self.wall_s * 1e6:.2f} us "
                f"(SIMULATED): {parts}; optimum {self.optimum_s() * 1e6:.2f} us; causes {self.causes() or 'none'}")


def timing_region(report, start: float | str | None = None, end: float | str | None = None) -> TimingRegion:
    """The region from ``start`` to ``end``: seconds, or a kernel name ('k1': from its first event's start /
    to its last event's end); defaults: the whole report."""
    def bound(value, first: bool) -> float:
        if value is None:
            return 0.0 if first else report.time_s
        if isinstance(value, str):
            evs = [e for e in report.events if e.kernel == value]
            if not evs:
                kernels = sorted({e.kernel for e in report.events if e.kernel})
                raise DFAError(f"no events of kernel {value!r} in this report; kernels: {', '.join(kernels)}")
            return min(e.start for e in evs) if first else max(e.end for e in evs)
        return float(value)

    t0, t1 = bound(start, True), bound(end, False)
    if not 0.0 <= t0 < t1:
        raise DFAError(f"a timing region needs 0 <= start < end, got start={t0!r} end={t1!r}")
    return TimingRegion(report, t0, t1)
