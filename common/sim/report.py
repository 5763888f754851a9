"""The result of one simulated execution: the event timeline and everything derived from it.

``Report.time_s`` is the end of the last event. ``attribution`` splits that time by what bounded it, read on
the critical engine (the one whose busy time is the step): compute-, memory-, communication-bound events,
and *scheduling* = named overhead events (launch, sync, pipeline fill) plus the engine's idle gaps.
Views: ``frame()`` (pandas), ``gantt()`` (matplotlib), ``chrome_trace()`` (Perfetto), ``roofline_points()``.
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING

from common.palette import BOUND_STYLE, bound_style
from common.sim.program import BOUNDS, Event, Program

if TYPE_CHECKING:  # pandas is loaded by frame() only
    import pandas as pd

COLORS = {b: s.colour for b, s in BOUND_STYLE.items()}  # the palette's (common.palette), kept for the labs


@dataclass(repr=False)  # __repr__ below: a summary, not thousands of events
class Report:
    backend: str
    chip: str
    chips: int
    dtype: str
    events: list[Event]
    programs: list[Program]
    critical_engine: str
    workload: str = ""
    phase: str = "forward"
    batch: int = 1
    seq: int = 1
    tokens: int = 0
    peak_flops: float = 0.0
    counters: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # a compiled graph's (common.sim.compile): where the program's work ran (common.sim.coverage.Coverage), and
    # the overflow / underflow / NaN events its precision rules caused (common.sim.numerics.NumericsEvent)
    coverage: object = None
    numerics: list = field(default_factory=list)

    # ---- totals ----------------------------------------------------------------------------------------
    # Each total walks every event (10^3-10^4 of them); ``summary_row`` and ``sweeps`` take each one once
    # (``totals``). Not cached: ``serving`` appends events to a finished report.
    @property
    def time_s(self) -> float:
        return end_of(self.events)

    @property
    def flops(self) -> float:
        """FLOPs done by all chips (an event of a tensor-parallel step stands for ``replicas`` chips)."""
        return sum([e.flops * e.detail.get("replicas", 1) for e in self.events if e.kind == "compute"])

    @property
    def bytes(self) -> dict[str, float]:
        """Bytes moved per memory level, over all chips."""
        out: dict[str, float] = defaultdict(float)
        for e in self.events:
            if e.bytes:
                r = e.detail.get("replicas", 1)
                for level, b in e.bytes.items():
                    out[level] += b * r
        return dict(out)

    @property
    def tokens_per_s(self) -> float:
        t = self.time_s
        return self.tokens / t if t else 0.0

    @property
    def tokens_per_s_per_user(self) -> float:
        return self.tokens_per_s / max(self.batch, 1)

    @property
    def achieved_flops(self) -> float:
        t = self.time_s
        return self.flops / t if t else 0.0

    @property
    def attribution(self) -> dict[str, float]:
        """Seconds of the step by bound: events on the critical engine, idle gaps counted as scheduling."""
        return attribution_of(self.events, self.critical_engine, self.time_s)

    @property
    def bottleneck(self) -> str:
        att = self.attribution
        return max(att, key=att.get)

    def totals(self) -> dict:
        """``time_s``, ``flops``, ``bytes``, ``attribution`` and what follows from them, each computed once."""
        t, flops = self.time_s, self.flops
        att = attribution_of(self.events, self.critical_engine, t)
        tokens_per_s = self.tokens / t if t else 0.0
        return {"time_s": t, "flops": flops, "bytes": self.bytes, "attribution_s": att,
                "bottleneck": max(att, key=att.get), "tokens_per_s": tokens_per_s,
                "tokens_per_s_per_user": tokens_per_s / max(self.batch, 1),
                "achieved_flops_per_s": flops / t if t else 0.0}

    def summary_row(self) -> dict:
        """The CLI's JSON contract (``dfa simulate --json``): one object per backend."""
        tot = self.totals()
        return {"backend": self.backend, "chip": self.chip, "chips": self.chips, "phase": self.phase,
                "batch": self.batch, "seq": self.seq, "dtype": self.dtype, "time_s": tot["time_s"],
                "tokens_per_s": tot["tokens_per_s"], "tokens_per_s_per_user": tot["tokens_per_s_per_user"],
                "bottleneck": tot["bottleneck"], "flops": tot["flops"], "bytes": tot["bytes"],
                "attribution_s": tot["attribution_s"], "achieved_flops_per_s": tot["achieved_flops_per_s"],
                "peak_flops_per_s": self.peak_flops * self.chips, "counters": self.counters,
                "workload": self.workload, "notes": self.notes}

    def coverage_line(self) -> str:
        """What share of the program's FLOPs and bytes the simulated machine ran, and what ran outside it."""
        if self.coverage is None:
            return (f"dfa_{self.backend}: a cost-only simulation of {self.workload or 'the workload'} "
                    "(every op on the machine; no program was run)")
        return self.coverage.line()

    def numerics_line(self) -> str:
        from common.sim.numerics import numerics_line
        return numerics_line(self)

    def summary(self) -> str:
        scale, unit = _time_unit(self.time_s)
        lines = [f"SIMULATED dfa_{self.backend} on {self.chips}x {self.chip} ({self.dtype}): {self.workload} "
                 f"{self.phase}, {self.time_s * scale:.3g} {unit}, {self.flops:.3g} FLOPs, {self.bottleneck}-bound",
                 self.coverage_line(), self.numerics_line()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Report {self.summary()}>"

    # ---- views ----------------------------------------------------------------------------------------
    def frame(self) -> pd.DataFrame:
        rows = []
        for e in self.events:
            row = {"name": e.name, "kind": e.kind, "engine": e.engine, "chip": e.chip, "start_s": e.start,
                   "duration_s": e.duration, "end_s": e.end, "flops": e.flops, "bound": e.bound,
                   "floor_s": e.floor, "kernel": e.kernel}
            row.update({f"bytes_{k}": v for k, v in e.bytes.items()})
            rows.append(row)
        import pandas as pd

        return pd.DataFrame(rows)

    def chrome_trace(self, path: str | None = None) -> dict:
        """Chrome trace-event JSON (opens in ui.perfetto.dev or chrome://tracing): one track per chip/engine."""
        trace = [{"name": "process_name", "ph": "M", "pid": c, "args": {"name": f"{self.backend} chip {c}"}}
                 for c in sorted({e.chip for e in self.events})]
        for e in self.events:
            args = {"bound": e.bound, "flops": e.flops, "floor_us": e.floor * 1e6,
                    **{f"bytes_{k}": v for k, v in e.bytes.items()}}
            args.update({k: v for k, v in e.detail.items() if isinstance(v, (int, float, str))})
            trace.append({"name": e.name, "cat": e.kind, "ph": "X", "ts": e.start * 1e6,
                          "dur": max(e.duration * 1e6, 1e-3), "pid": e.chip, "tid": e.engine, "args": args})
        doc = {"traceEvents": trace, "displayTimeUnit": "ns",
               "otherData": {"backend": self.backend, "chip": self.chip, "chips": self.chips,
                             "note": "simulated timeline (common.sim), not a measurement"}}
        if path:
            with open(path, "w") as f:
                json.dump(doc, f)
        return doc

    def gantt(self, ax=None, *, max_events: int = 4000, title: str | None = None):
        """Timeline, one row per (chip, engine), coloured by what bounded each event."""
        import matplotlib.pyplot as plt
        events = self.events[:max_events]
        lanes = sorted({(e.chip, e.engine) for e in events})
        if ax is None:
            _, ax = plt.subplots(figsize=(11, 0.5 * len(lanes) + 1.6))
        scale, unit = _time_unit(self.time_s)
        min_width = 0.002 * self.time_s * scale  # keep sub-pixel events visible (drawing only)
        for i, lane in enumerate(lanes):
            for b in BOUNDS:  # one collection per bound: its colour and its hatch (never colour alone)
                bars = [(e.start * scale, max(e.duration * scale, min_width)) for e in events
                        if (e.chip, e.engine) == lane and e.bound == b]
                if bars:
                    ax.broken_barh(bars, (i - 0.4, 0.8), facecolors=bound_style(b).colour, hatch=bound_style(b).hatch,
                                   edgecolor="white", linewidth=0.3)
        ax.set_yticks(range(len(lanes)))
        ax.set_yticklabels([f"chip {c} {eng}" if self.chips > 1 else eng for c, eng in lanes], fontsize=8)
        ax.set_xlabel(f"simulated time ({unit})")
        ax.invert_yaxis()
        handles = [plt.Rectangle((0, 0), 1, 1, fc=bound_style(b).colour, hatch=bound_style(b).hatch, ec="white")
                   for b in BOUNDS]
        ax.legend(handles, [f"{b}-bound" if b in ("compute", "memory") else b for b in BOUNDS],
                  loc="lower right", fontsize=7, ncol=4)
        ax.set_title(title or f"SIMULATED {self.backend} on {self.chips}x {self.chip} ({self.dtype}): "
                     f"{self.workload} {self.phase}, {self.time_s * scale:.3g} {unit}", fontsize=9)
        return ax

    def roofline_points(self) -> pd.DataFrame:
        """Per compute event: intensity against main memory (counted FLOPs / counted bytes) and attained FLOP/s."""
        df = self.frame()
        df = df[df["kind"] == "compute"].copy()
        main = next((c for c in df.columns if c.startswith("bytes_") and c[6:] in self.main_levels), None)
        df["bytes"] = df[main] if main else 0.0
        df = df[df["bytes"] > 0]
        df["intensity"] = df["flops"] / df["bytes"]
        df["flops_per_s"] = df["flops"] / df["duration_s"]
        df["source"] = "simulated"
        return df[["name", "kernel", "flops", "bytes", "intensity", "flops_per_s", "duration_s", "bound", "source"]]

    @property
    def main_levels(self) -> set[str]:
        return {"HBM", "GDDR6", "LPDDR5", "SRAM"}


def end_of(events) -> float:
    """The end of the last event (``Event.end`` inlined: a sweep reads it for every event of every row)."""
    return max([e.start + e.duration for e in events], default=0.0)


def attribution_of(events, engine: str, time_s: float) -> dict[str, float]:
    """``Report.attribution`` of ``events`` read on ``engine``, for a step that ends at ``time_s``."""
    out = dict.fromkeys(BOUNDS, 0.0)
    busy_until = 0.0
    for e in sorted([e for e in events if e.engine == engine], key=_start):
        start = e.start
        end = start + e.duration
        if start > busy_until:
            out["scheduling"] += start - busy_until
        covered = end - (busy_until if busy_until > start else start)
        out[e.bound] += covered if covered > 0.0 else 0.0
        if end > busy_until:
            busy_until = end
    rest = time_s - busy_until
    out["scheduling"] += rest if rest > 0.0 else 0.0
    return out


_start = attrgetter("start")


def _time_unit(seconds: float) -> tuple[float, str]:
    if seconds >= 1:
        return 1.0, "s"
    if seconds >= 1e-3:
        return 1e3, "ms"
    return 1e6, "µs"
