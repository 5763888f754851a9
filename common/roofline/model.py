"""The roofline model: ceilings, rooflines from the catalog or from measured peaks, the overhead ceiling, and ops
as points under them.

An op that does F FLOPs and moves B bytes has arithmetic intensity I = F/B (FLOP/byte). On a machine with compute
peak P (FLOP/s) and memory bandwidth beta (bytes/s) it takes at least max(F/P, B/beta) seconds, so

    attainable(I) = min(P, I * beta)            ridge point = P / beta   (Williams et al., CACM 2009)

Hierarchical roofline: one ceiling per memory level l, each op with its own intensity I_l = F / (bytes it moves at
level l); the op is bound by the lowest one: min(P, min_l I_l * beta_l).

Overhead ("scheduling") ceiling, after the time-based roofline of Wang et al., arXiv 2009.04598: every op also pays
a fixed t0 seconds (kernel launch, dispatch, host round trip) that does not overlap its own work, so
T = t0 + max(F/P, B/beta) and

    attainable(I, F) = F / T = 1 / (t0/F + 1/min(P, I*beta))   <=   min(P, I*beta, F/t0)

Large ops reach the classic roof; small ops are overhead-bound near F/t0; overhead halves performance at the op size
F_half = t0 * min(P, I*beta). It depends on F, not only on I, so a chart draws it for one reference op size.

Rooflines come from the catalog (``roofline_for_chip``), from measurements (``measure_roofline``,
``roofline_for_this_machine``) or from a simulator (``source="simulated"``). No hardware numbers live here.

A measured roof is the best of what was measured: a probe (one GEMM, one copy) can be beaten by a larger GEMM
or a cache-friendly op, and a measured op above its own measured roof would make "distance to the roof" a
negative number. ``best_measured_roof`` raises the roof to the best measured op and names it; ``plot_roofline``
does so for a measured roofline, and rings any point above a datasheet or simulated roof with the reason.
"""
from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from common.chips import Chip, canonical_dtype, get_chip
from common.errors import DFAError, unknown

__all__ = ["Ceiling", "Roofline", "add_overhead_ceiling", "best_measured_roof", "eng", "points_from_node_table",
           "points_over_roof", "roofline_for_chip", "roofline_from_measured", "with_measured_gemms"]


SOURCES = ("catalog", "measured", "simulated")


CEILING_KINDS = ("compute", "bandwidth", "overhead")


POINT_KINDS = ("measured", "simulated", "analytical")


TIME_COLUMNS = ("time_s", "duration_s", "latency_s")


_SOURCE_WORDS = {"catalog": "datasheet", "measured": "measured", "simulated": "simulated"}


def eng(value: float, unit: str, digits: int = 3) -> str:
    """Engineering notation: eng(989.4e12, "FLOP/s") -> '989 TFLOP/s'; eng(5e-6, "s") -> '5 µs'."""
    if not value or not math.isfinite(value):
        return f"{value:g} {unit}"
    for power, prefix in zip(range(18, -12, -3), "EPTGMk mµn", strict=True):
        scale = 10.0**power
        if abs(value) >= scale * (1 - 5 * 10.0 ** -(digits + 1)):
            prefix = prefix.strip()
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


@dataclass(frozen=True)
class Ceiling:
    """One limit. compute: ``value`` FLOP/s; bandwidth: ``value`` bytes/s of memory ``level``;
    overhead: ``value`` seconds per op, drawn for ops of ``flops`` FLOPs (not drawn when None)."""

    name: str
    kind: str
    value: float
    level: str | None = None
    flops: float | None = None
    note: str = ""

    def __post_init__(self):
        if self.kind not in CEILING_KINDS:
            raise unknown("ceiling kind", self.kind, CEILING_KINDS)
        ok = isinstance(self.value, numbers.Real) and math.isfinite(self.value)
        if not ok or self.value < 0 or (self.value == 0 and self.kind != "overhead"):
            raise DFAError(f"ceiling {self.name!r}: value must be a finite number > 0, got {self.value!r}")
        if self.kind == "bandwidth" and not self.level:
            raise DFAError(f"bandwidth ceiling {self.name!r} needs the memory level it belongs to")


@dataclass(frozen=True)
class Roofline:
    """A compute peak plus ceilings (>= 1 bandwidth ceiling, optional extra compute and one overhead ceiling)."""

    name: str
    peak_flops: float
    ceilings: tuple[Ceiling, ...]
    source: str = "catalog"  # catalog | measured | simulated
    dtype: str = ""
    note: str = ""
    peak_is_estimate: bool = False

    def __post_init__(self):
        object.__setattr__(self, "ceilings", tuple(self.ceilings))
        if self.source not in SOURCES:
            raise unknown("roofline source", self.source, SOURCES)
        if not (self.peak_flops > 0 and math.isfinite(self.peak_flops)):
            raise DFAError(f"roofline {self.name!r}: peak_flops must be > 0, got {self.peak_flops!r}")
        if not self.levels:
            raise DFAError(f"roofline {self.name!r} needs at least one bandwidth ceiling")
        if sum(c.kind == "overhead" for c in self.ceilings) > 1:
            raise DFAError(f"roofline {self.name!r}: at most one overhead ceiling (add_overhead_ceiling replaces)")

    @property
    def levels(self) -> tuple[str, ...]:
        """Memory levels with a bandwidth ceiling, in the order given (fastest first for catalog rooflines)."""
        return tuple(c.level for c in self.ceilings if c.kind == "bandwidth")

    @property
    def main_level(self) -> str:
        """The slowest level (HBM, DRAM, LPDDR; SRAM on SRAM-only chips): the default for ``level=None``."""
        return min((c for c in self.ceilings if c.kind == "bandwidth"), key=lambda c: c.value).level

    @property
    def overhead(self) -> Ceiling | None:
        return next((c for c in self.ceilings if c.kind == "overhead"), None)

    @property
    def label(self) -> str:
        """'h100-sxm · bf16 · datasheet' (or 'catalog estimate', 'measured', 'simulated'): where numbers come from."""
        src = _SOURCE_WORDS[self.source]
        src = "catalog estimate" if self.peak_is_estimate and src == "datasheet" else \
            f"{src}, est. peak" if self.peak_is_estimate else src
        return " · ".join(s for s in (self.name, self.dtype, src) if s)

    def bandwidth(self, level: str | None = None) -> float:
        level = self.main_level if level is None else level
        for c in self.ceilings:
            if c.kind == "bandwidth" and c.level.lower() == str(level).lower():
                return c.value
        raise unknown(f"memory level of roofline {self.name!r}", level, self.levels)

    def ridge_point(self, level: str | None = None) -> float:
        """FLOP/byte where the ``level`` bandwidth ceiling meets the compute peak: peak / bandwidth."""
        return self.peak_flops / self.bandwidth(level)

    def attainable(self, intensity, level: str | None = None, *, flops=None, compute: str | None = None):
        """min(peak, intensity * bandwidth(level)), vectorised. ``intensity`` may be a mapping level -> intensity
        (hierarchical: min over levels). With ``flops`` (per op) an overhead ceiling applies: F / (t0 + F/roof).
        ``compute`` names a lower compute ceiling to use instead of the peak."""
        peak = self.peak_flops
        if compute is not None:
            names = [c.name for c in self.ceilings if c.kind == "compute"]
            if compute not in names:
                raise unknown(f"compute ceiling of roofline {self.name!r}", compute, names)
            peak = next(c.value for c in self.ceilings if c.name == compute)
        pairs = intensity.items() if isinstance(intensity, Mapping) else [(level, intensity)]
        if isinstance(intensity, Mapping) and level is not None:
            raise DFAError("give either a level or a mapping level -> intensity, not both")
        roof = np.asarray(peak, dtype=float)
        for lv, i in pairs:
            roof = np.minimum(roof, np.asarray(i, dtype=float) * self.bandwidth(lv))
        oh = self.overhead
        if flops is not None and oh is not None and oh.value > 0:
            f = np.asarray(flops, dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                roof = f / (oh.value + f / roof)
        return float(roof) if np.ndim(roof) == 0 else roof

    def with_ceiling(self, ceiling: Ceiling) -> Roofline:
        """A copy with one more ceiling (an overhead ceiling replaces the existing one)."""
        keep = tuple(c for c in self.ceilings if not (ceiling.kind == "overhead" and c.kind == "overhead"))
        return replace(self, ceilings=keep + (ceiling,))


def _pick_dtype(chip: Chip, dtype) -> str:
    """A dtype name, a torch.dtype, or a preference list ('bf16', 'fp16'): the first the chip supports."""
    if isinstance(dtype, (str, torch.dtype)):
        return canonical_dtype(str(dtype))
    prefs = [canonical_dtype(str(d)) for d in dtype]
    for d in prefs:
        if chip.supports(d):
            return d
    raise DFAError(f"chip {chip.name!r} supports none of {', '.join(prefs)}")


def roofline_for_chip(chip: str | Chip, dtype: str | torch.dtype | Sequence[str] = "bf16", *,
                      levels: str | Sequence[str] = "main", extra_dtypes: Sequence[str] = ()) -> Roofline:
    """The datasheet roofline: peak from ``chip.compute_peak(dtype)`` (estimates are labelled) and one bandwidth
    ceiling per memory level: ``levels`` = "main" (main memory), "all" (every level whose bandwidth is published;
    the others are listed in the note) or level names. ``extra_dtypes`` ("fp32") add their peaks as compute
    ceilings (a T4: fp16 tensor-core roof, fp32 CUDA-core ceiling); ones the chip lacks are named in the note."""
    chip = get_chip(chip)
    d = _pick_dtype(chip, dtype)
    peak, estimated = chip.compute_peak(d)
    notes = [f"{d} peak is an estimate: {chip.estimates[f'dense_{d}_flops'].derivation}"] if estimated else []
    names = [lv.name for lv in chip.memory_levels]
    if levels == "main":
        wanted, strict = [chip.main_memory], True
    elif levels == "all":
        wanted, strict = list(chip.memory_levels), False
    else:
        asked = [levels] if isinstance(levels, str) else list(levels)
        if any(n.lower() not in [m.lower() for m in names] for n in asked):
            raise unknown(f"levels of {chip.name}", levels, ["main", "all", *names])
        wanted, strict = [chip.level(n) for n in asked], True
    ceilings, unpublished = [], []
    for lv in wanted:
        if lv.bandwidth:
            ceilings.append(Ceiling(f"{lv.name} {eng(lv.bandwidth, 'B/s')}", "bandwidth", lv.bandwidth,
                                    level=lv.name, note=lv.note))
        elif strict:
            raise DFAError(f"{chip.name}: bandwidth of {lv.name} is not published, so it has no ceiling")
        else:
            unpublished.append(lv.name)
    if unpublished:
        notes.append(f"no ceiling for {', '.join(unpublished)}: bandwidth not published")
    for extra in (canonical_dtype(str(x)) for x in extra_dtypes):
        if extra == d:
            continue
        if not chip.supports(extra):
            notes.append(f"no {extra} ceiling: {chip.name} has no {extra} datapath")
            continue
        value, est = chip.compute_peak(extra)
        ceilings.append(Ceiling(f"{extra} peak {eng(value, 'FLOP/s')}" + (" (estimate)" if est else ""), "compute",
                                value))
    return Roofline(chip.name, peak, tuple(ceilings), "catalog", d, "; ".join(notes), estimated)


def roofline_from_measured(peaks, *, name: str | None = None) -> Roofline:
    """The roofline of a ``common.measure.bench.measure_peaks`` result (``MeasuredPeaks``): GEMM FLOP/s as peak,
    copy bytes/s as the ceiling."""
    try:
        d = canonical_dtype(peaks.dtype)
    except DFAError:
        d = str(peaks.dtype)
    bw = Ceiling(f"copy {eng(peaks.bytes_per_s, 'B/s')}", "bandwidth", peaks.bytes_per_s, level="memory",
                 note=f"dst.copy_(src) of {peaks.copy_bytes / 2**20:g} MiB")
    note = f"measured on {peaks.device_name} ({peaks.device}): GEMM N={peaks.gemm_n}, copy {bw.note}"
    return Roofline(name or peaks.device_name, peaks.flops_per_s, (bw,), "measured", d, note)


def with_measured_gemms(rl: Roofline, gemms: Mapping) -> Roofline:
    """A measured roofline with one compute ceiling per further measured GEMM ({dtype: result with
    ``flops_per_s`` and ``sub_label``, or 'skipped: why'}); the fastest of all is the roof."""
    computes = {rl.dtype: (rl.peak_flops, "GEMM")}
    notes = [rl.note]
    for tag, res in gemms.items():
        try:
            d = canonical_dtype(tag)
        except DFAError:
            d = tag
        if isinstance(res, str):
            warnings.warn(f"{d}: {res}", UserWarning, stacklevel=3)
            notes.append(f"{d} {res}")
        elif d not in computes:
            computes[d] = (res.flops_per_s, "GEMM")
            notes.append(f"{d}: {res.sub_label}")
    top = max(computes, key=lambda k: computes[k][0])
    if top != rl.dtype:
        notes.append(f"roof = the fastest measured dtype, {top}")
    extra = tuple(Ceiling(f"{d} {what} {eng(v, 'FLOP/s')}", "compute", v) for d, (v, what) in computes.items()
                  if d != top)
    return replace(rl, peak_flops=computes[top][0], dtype=top, ceilings=rl.ceilings + extra,
                   note="; ".join(notes))


def add_overhead_ceiling(roofline: Roofline, overhead_s: float, *, flops: float | None = None,
                         name: str | None = None, note: str = "") -> Roofline:
    """Add the scheduling ceiling: a fixed ``overhead_s`` per op, T = t0 + max(F/P, B/beta) (module docstring).
    ``flops`` is the op size its curve is drawn for; ``attainable(..., flops=F)`` applies it to any op size."""
    if flops is not None and not flops > 0:
        raise DFAError(f"flops (reference op size) must be > 0, got {flops!r}")
    label = name or f"overhead {eng(overhead_s, 's')}/op" + (f", {eng(flops, 'FLOP')} ops" if flops else "")
    return roofline.with_ceiling(Ceiling(label, "overhead", float(overhead_s), flops=flops, note=note))


def points_from_node_table(df, roofline: Roofline | None = None, *, kind: str | None = None,
                           label_col: str | None = None, level_bytes: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Ops as roofline points: op_id, label, flops, intensity, flops_per_s, source, level (+ bound, with a roofline).

    Achieved performance comes from a ``flops_per_s`` column, or ``flops`` / time (``time_s``, ``duration_s``,
    ``latency_s`` or ``end_s - start_s``) of a timeline; then ``kind`` ('measured' | 'simulated') or a ``source``
    column must say where it came from (a ``kind`` column is a timeline's event kind and is ignored). Without
    times, ops are 'analytical': placed on ``roofline``'s roof (with its overhead ceiling when there is a
    ``flops`` column). Intensity: an ``intensity`` column, else flops / bytes. ``level_bytes``
    ({'HBM': 'bytes', 'SMEM': 'smem_bytes'}) gives one point per op per level (hierarchical roofline). Ops without
    FLOPs or bytes cannot sit on log axes: dropped, counted in ``attrs['dropped']``."""
    df = df if isinstance(df, pd.DataFrame) else pd.DataFrame(df)
    label_col = label_col or next((c for c in ("label", "op", "node", "name") if c in df), None)
    labels = df[label_col].astype(str).to_numpy() if label_col else np.array([f"op {i}" for i in range(len(df))])
    flops = df["flops"].to_numpy(float) if "flops" in df else np.full(len(df), np.nan)
    time_col = next((c for c in TIME_COLUMNS if c in df), None)
    time = df[time_col] if time_col else (df["end_s"] - df["start_s"]) if {"start_s", "end_s"} <= set(df) else None
    achieved = None if kind == "analytical" else df["flops_per_s"].to_numpy(float) if "flops_per_s" in df else \
        flops / time.to_numpy(float) if time is not None else None
    if "intensity" not in df and not ({"flops", "bytes"} <= set(df) or level_bytes):
        raise DFAError(f"ops need an intensity column, or flops and bytes; got columns {list(df.columns)}")
    roof = df.attrs.get("roof")
    if achieved is None:
        if kind not in (None, "analytical"):  # kind='analytical' places timed ops on the roof anyway
            raise DFAError(f"kind={kind!r} needs achieved performance: a flops_per_s or time column {TIME_COLUMNS}")
        kinds = "analytical"
    elif kind in ("measured", "simulated"):
        kinds = kind
    elif "source" in df and kind is None:  # e.g. sim reports' roofline_points(): source = "simulated"
        kinds = df["source"].to_numpy()
    else:
        raise DFAError("these ops have times: say where they come from, kind='measured' or kind='simulated'")
    if set(np.atleast_1d(kinds)) - set(POINT_KINDS):
        raise unknown("point kind", sorted(set(np.atleast_1d(kinds)) - set(POINT_KINDS))[0], POINT_KINDS)
    main = roofline.main_level if roofline else "memory"
    with np.errstate(divide="ignore", invalid="ignore"):  # ops that move nothing: dropped below
        if level_bytes:
            parts = {lv: flops / df[col].to_numpy(float) for lv, col in level_bytes.items()}
        else:
            i = df["intensity"].to_numpy(float) if "intensity" in df else flops / df["bytes"].to_numpy(float)
            parts = {main: i}
        if achieved is None:
            if roofline is None:
                raise DFAError("ops without times are placed on a roof: pass the roofline")
            sized = np.isfinite(flops).all() and roofline.overhead is not None and roofline.overhead.value > 0
            achieved = roofline.attainable(parts, flops=flops if sized else None)
            roof = f"{roofline.name} roof" + (f" + {eng(roofline.overhead.value, 's')}/op" if sized else "")
    op_id = df["op_id"].to_numpy() if "op_id" in df else np.arange(len(df))
    out = pd.concat([pd.DataFrame({"op_id": op_id, "label": labels, "flops": flops, "intensity": i,
                                   "flops_per_s": achieved, "source": kinds,
                                   "level": df["level"].to_numpy() if "level" in df and not level_bytes else lv})
                     for lv, i in parts.items()], ignore_index=True)
    good = (out["intensity"] > 0) & (out["flops_per_s"] > 0) & np.isfinite(out["intensity"])
    out = out[good].reset_index(drop=True)
    if roofline is not None and len(out):
        out["bound"] = _bounds(out, roofline)
    out.attrs.update(df.attrs, roof=roof,
                     dropped=df.attrs.get("dropped", 0) + int((~good).sum()) // len(parts))
    return out


def _as_points(points, rl: Roofline) -> pd.DataFrame:
    """A points table from a node table / points table, or from measurement records (``bench.BenchResult`` or
    anything with ``flops``, ``bytes``, ``median_s`` and optionally ``label``), which count as measured."""
    if isinstance(points, pd.DataFrame):
        if "source" in points or {"op_id", "flops_per_s", "level"} <= set(points):
            return points_from_node_table(points, rl)
        return points_from_node_table(points, rl, kind="measured")
    rows = [{"label": getattr(r, "label", f"op {i}"), "flops": r.flops, "bytes": r.bytes, "time_s": r.median_s}
            for i, r in enumerate(points)]
    if not rows:
        return pd.DataFrame(columns=["op_id", "label", "flops", "intensity", "flops_per_s", "source", "level"])
    return points_from_node_table(pd.DataFrame(rows), rl, kind="measured")


def points_over_roof(points, roofline: Roofline) -> pd.DataFrame:
    """The measured or simulated points above ``roofline`` at their intensity (and level): each is a finding -
    counted work too low, data served from a faster level than the roof's, or a roof that is not the best."""
    pts = _as_points(points, roofline)
    if pts.empty:
        return pts
    lv = pts["level"].where(pts["level"].str.lower().isin([n.lower() for n in roofline.levels]),
                            roofline.main_level)
    roof = np.minimum(roofline.peak_flops, pts["intensity"] * lv.map(roofline.bandwidth))
    over = (pts["source"] != "analytical") & (pts["flops_per_s"] > roof * (1 + 1e-9))
    return pts[over].assign(roof_flops_per_s=roof[over])


def best_measured_roof(roofline: Roofline, points) -> Roofline:
    """A measured roofline raised to the best of what was measured: peak = max(GEMM probe, every measured op's
    FLOP/s), bandwidth = max(copy probe, every measured op's bytes/s at its compulsory bytes). The note and the
    ceiling names say which op raised which roof; the probe's peak stays as a compute ceiling below. ``points``:
    a points or node table with times, or ``bench.BenchResult``s. Nothing above the roof: returned unchanged."""
    if roofline.source != "measured":
        raise DFAError(f"best_measured_roof raises a measured roofline; {roofline.name!r} is {roofline.source} "
                       "(a point above a datasheet roof is a finding: see points_over_roof)")
    pts = _as_points(points, roofline)
    pts = pts[pts["source"] == "measured"]
    if pts.empty:
        return roofline
    main, notes, ceilings = roofline.main_level, [roofline.note] if roofline.note else [], list(roofline.ceilings)
    peak = roofline.peak_flops
    best = pts.loc[pts["flops_per_s"].idxmax()]
    if best["flops_per_s"] > peak:
        ceilings.append(Ceiling(f"GEMM probe {eng(peak, 'FLOP/s')}", "compute", peak,
                                note="the peak probe, beaten by a measured op"))
        notes.append(f"compute roof = best measured op {best['label']!r} {eng(best['flops_per_s'], 'FLOP/s')}, "
                     f"above the GEMM probe's {eng(peak, 'FLOP/s')}")
        peak = float(best["flops_per_s"])
    level = pts["level"].str.lower()
    at_main = pts[(level == main.lower()) | ~level.isin([n.lower() for n in roofline.levels])]
    if not at_main.empty:
        bytes_per_s = at_main["flops_per_s"] / at_main["intensity"]
        k = bytes_per_s.idxmax()
        bw = roofline.bandwidth(main)
        if bytes_per_s[k] > bw:
            label, value = at_main.loc[k, "label"], float(bytes_per_s[k])
            ceilings = [Ceiling(f"best measured {eng(value, 'B/s')} ({label})", "bandwidth", value, level=main,
                                note=f"{label!r} moved its compulsory bytes faster than the copy probe's "
                                     f"{eng(bw, 'B/s')}: the probe is not this level's best")
                        if c.kind == "bandwidth" and c.level == main else c for c in ceilings]
            notes.append(f"{main} roof = best measured op {label!r} {eng(value, 'B/s')}, above the copy probe's "
                         f"{eng(bw, 'B/s')}")
    if peak == roofline.peak_flops and ceilings == list(roofline.ceilings):
        return roofline
    return replace(roofline, peak_flops=peak, ceilings=tuple(ceilings), note="; ".join(notes))


def _bounds(points: pd.DataFrame, rl: Roofline) -> np.ndarray:
    """Per op: 'overhead' if t0 exceeds its roofline time, else 'compute' or 'memory (level)' by its lowest roof."""
    lv = points["level"].where(points["level"].str.lower().isin([n.lower() for n in rl.levels]), rl.main_level)
    roof = points["intensity"] * lv.map(rl.bandwidth)
    lowest = roof.groupby(points["op_id"]).transform("idxmin")  # an op's binding level (hierarchical)
    roof, lv = roof[lowest].to_numpy(), lv[lowest].to_numpy().astype(str)
    overhead = rl.overhead.value if rl.overhead else 0.0
    with np.errstate(invalid="ignore"):
        slow = overhead > points["flops"].to_numpy() / np.minimum(roof, rl.peak_flops)
    return np.where(slow, "overhead", np.where(roof >= rl.peak_flops, "compute", np.char.add("memory (", lv) + ")"))
