"""Roofline models and charts: classic, hierarchical (one bandwidth ceiling per memory level), overhead ceiling.

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

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.text import Annotation
from matplotlib.ticker import FuncFormatter, NullFormatter
from matplotlib.transforms import Bbox

from common import bench
from common.chips import Chip, canonical_dtype, chip_for_device_name, chips_of_kind, get_chip
from common.errors import DFAError, unknown

__all__ = ["Ceiling", "Roofline", "add_overhead_ceiling", "best_measured_roof", "eng", "measure_roofline",
           "plot_roofline", "points_from_node_table", "points_over_roof", "roofline_for_chip",
           "roofline_for_this_machine", "roofline_from_measured", "with_measured_gemms"]

SOURCES = ("catalog", "measured", "simulated")
CEILING_KINDS = ("compute", "bandwidth", "overhead")
POINT_KINDS = ("measured", "simulated", "analytical")
TIME_COLUMNS = ("time_s", "duration_s", "latency_s")
_SOURCE_WORDS = {"catalog": "datasheet", "measured": "measured", "simulated": "simulated"}
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f")
_SET_COLORS = ("#111111", "#6a3d9a", "#8c510a", "#01665e", "#b2182b")  # point sets: dark, unlike the roofs
_BOX = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8}
_POINT_STYLE = {"measured": ("o", "#111111", True), "simulated": ("s", "#6a3d9a", True),
                "analytical": ("D", "#333333", False)}  # marker, colour, filled


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


def roofline_from_measured(peaks: bench.MeasuredPeaks, *, name: str | None = None) -> Roofline:
    """The roofline of a ``bench.measure_peaks`` result: GEMM FLOP/s as peak, copy bytes/s as the ceiling."""
    try:
        d = canonical_dtype(peaks.dtype)
    except DFAError:
        d = str(peaks.dtype)
    bw = Ceiling(f"copy {eng(peaks.bytes_per_s, 'B/s')}", "bandwidth", peaks.bytes_per_s, level="memory",
                 note=f"dst.copy_(src) of {peaks.copy_bytes / 2**20:g} MiB")
    note = f"measured on {peaks.device_name} ({peaks.device}): GEMM N={peaks.gemm_n}, copy {bw.note}"
    return Roofline(name or peaks.device_name, peaks.flops_per_s, (bw,), "measured", d, note)


def measure_roofline(device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32, *,
                     extra_dtypes: Sequence[torch.dtype] = (), **kw) -> Roofline:
    """Measure this machine's roofline (large GEMM + large copy, ``bench.measure_peaks(device, dtype, **kw)``).

    ``extra_dtypes`` (e.g. ``(torch.float16,)`` next to fp32) time one more GEMM each
    (``bench.measure_gemm_peaks``): the fastest dtype is the roof, the others compute ceilings below it (a GPU:
    the 16-bit tensor-core roof over the fp32 CUDA-core ceiling). A dtype this device cannot multiply in is
    skipped, with a warning and a note that say so."""
    rl = roofline_from_measured(bench.measure_peaks(device, dtype, **kw))
    if not extra_dtypes:
        return rl
    gemm_kw = {k: v for k, v in kw.items() if k in ("gemm_n", "min_run_time", "warmup")}
    return with_measured_gemms(rl, bench.measure_gemm_peaks(device, extra_dtypes, **gemm_kw))


def with_measured_gemms(rl: Roofline, gemms: Mapping[str, bench.BenchResult | str]) -> Roofline:
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


def roofline_for_this_machine(device: str | torch.device | None = None, dtype: torch.dtype = torch.float32, *,
                              measure: bool = True, **kw) -> list[Roofline]:
    """[datasheet roofline, measured roofline] for the GPU in use if the catalog knows it; otherwise (unknown GPU,
    or a CPU) only the measured one - with a warning and a note that say so. Never assumes a chip."""
    dev = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
    if dev.type != "cuda":
        return [measure_roofline(dev, dtype, **kw)]
    if not torch.cuda.is_available():
        raise DFAError(f"device {str(dev)!r} is not available: torch sees no CUDA device")
    gpu = torch.cuda.get_device_name(dev)
    chip, out = chip_for_device_name(gpu), []
    if chip is None:
        from common.devices import this_machine  # devices imports bench and chips only: no cycle

        known = ", ".join(c.name for c in chips_of_kind("gpu"))
        near = this_machine(dev).chip  # the part the simulator models: chosen with the device's own properties
        msg = f"GPU {gpu!r} is not in the catalog (known: {known}); no datasheet roofline, using measured peaks" + \
            (f" (nearest catalog part, for the simulator only: {near.name!r})" if near else "")
    else:
        try:
            out.append(roofline_for_chip(chip, dtype))
            msg = f"GPU {gpu!r} is catalog record {chip.name!r}"
        except DFAError as exc:
            msg = f"GPU {gpu!r} is catalog record {chip.name!r}, but {exc}; using measured peaks only"
    if not out:
        warnings.warn(msg, UserWarning, stacklevel=2)
    else:
        out[0] = replace(out[0], note="; ".join(s for s in (out[0].note, msg) if s))
    if measure or not out:
        m = measure_roofline(dev, dtype, **kw)
        out.append(replace(m, note=f"{m.note}; {msg}"))
    return out


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


# --------------------------------------------------------------------------------------------------- plotting
def plot_roofline(rooflines: Roofline | Sequence[Roofline], points=None, *, ax=None, title: str | None = None,
                  kind: str | None = None, point_label_col: str | None = None, label_points: bool | int = 8,
                  annotate_ceilings: bool | None = None, xlim=None, ylim=None, legend_loc: str = "lower right"):
    """Draw rooflines on log-log axes (FLOP/byte vs FLOP/s) with ridge points marked, and ops as points.

    ``points``: a node table, a timeline or ``points_from_node_table`` output, or a list of them (a table's
    ``attrs['label']`` names it in the legend); see ``points_from_node_table`` for the columns and ``kind``.
    Analytical points sit on the first roofline's roof. Points belong to the first roofline: when it is
    measured, it is raised to the best measured op (``best_measured_roof``, the legend says which); points
    above any other roof are ringed in red and counted in the legend. ``label_points``: True, False or how many of the
    largest ops to name (names that fit nowhere are left out). Ceilings are named on the chart for one roofline
    (``annotate_ceilings``), in the legend for several. Returns the Axes."""
    rls = [rooflines] if isinstance(rooflines, Roofline) else list(rooflines)
    if not rls or not all(isinstance(r, Roofline) for r in rls):
        raise DFAError("plot_roofline needs a Roofline or a list of them (roofline_for_chip, measure_roofline)")
    raw = [] if points is None else [points] if isinstance(points, (pd.DataFrame, Mapping)) else list(points)
    sets = [points_from_node_table(p, rls[0], kind=kind, label_col=point_label_col) for p in raw]
    if rls[0].source == "measured" and sets:  # a measured op never sits above its own measured roof
        best = best_measured_roof(rls[0], pd.concat(sets, ignore_index=True))
        if best is not rls[0]:
            rls[0] = best
            sets = [points_from_node_table(p, best, kind=kind, label_col=point_label_col) for p in raw]
    for pts in sets:  # above a datasheet or simulated roof: ringed and named in the legend, never silently
        pts["over_roof"] = pts.index.isin(points_over_roof(pts, rls[0]).index) if len(pts) else []
    if ax is None:
        _, ax = plt.subplots(figsize=(8.5, 5.6), layout="constrained")
    ax.set_xscale("log")
    ax.set_yscale("log")
    (x0, x1), (y0, y1) = _limits(rls, sets)
    ax.set_xlim(xlim or (x0, x1))
    ax.set_ylim(ylim or (y0, y1))
    x = np.geomspace(*ax.get_xlim(), 600)
    single = len(rls) == 1
    annotate = single if annotate_ceilings is None else annotate_ceilings
    level_colors, names, marks = {}, [], []  # names are placed last, after layout, clear of marks and each other
    for i, rl in enumerate(rls):
        level_colors.update(_draw_roofline(ax, rl, x, _COLORS[i % len(_COLORS)], single, annotate, names, marks))
    for j, pts in enumerate(sets):
        _draw_points(ax, pts, level_colors if single else {}, j if len(sets) > 1 else None, label_points, names,
                     marks)
    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel(f"performance [FLOP/s]{' (' + rls[0].dtype + ')' if len({r.dtype for r in rls}) == 1 else ''}")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}" if -3 <= _log(v) <= 4 else f"$10^{{{_log(v)}}}$"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: eng(v, "FLOP/s")))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="major", color="#cccccc", lw=0.6)
    ax.grid(True, which="minor", color="#eeeeee", lw=0.4)
    ax.set_axisbelow(True)
    ax.legend(loc=legend_loc, fontsize=8, framealpha=0.92)
    if title is None:
        srcs = sorted({_SOURCE_WORDS[r.source] for r in rls})
        title = f"Roofline: {rls[0].label}" if single else f"Rooflines of {len(rls)} systems ({', '.join(srcs)})"
        kinds = [k for k in POINT_KINDS if any(k in set(p["source"]) for p in sets)]
        title += f" - ops: {', '.join(kinds)}" if kinds else ""
    ax.set_title(title, fontsize=11)
    _place_names(ax, names, marks)
    return ax


def _log(v: float) -> int:
    return round(math.log10(v))


def _limits(rls: list[Roofline], sets: list[pd.DataFrame]):
    """Whole decades around every ridge point and op, with margin; at most 7 decades of FLOP/s."""
    xs = [r.ridge_point(lv) for r in rls for lv in r.levels] + [v for s in sets for v in s["intensity"]]
    x0, x1 = 10.0 ** math.floor(math.log10(min(xs) / 8)), 10.0 ** math.ceil(math.log10(max(xs) * 8))
    top = max(r.peak_flops for r in rls)
    ys = [r.attainable(x0 * 3) for r in rls] + [r.peak_flops for r in rls] + [v for s in sets for v in s["flops_per_s"]]
    y0 = max(10.0 ** math.floor(math.log10(min(ys) / 2)), 10.0 ** (math.ceil(math.log10(top)) - 7))
    return (x0, x1), (y0, 10.0 ** math.ceil(math.log10(top * 2.5)))


def _draw_roofline(ax, rl: Roofline, x, color: str, single: bool, annotate: bool, names: list, marks: list) -> dict:
    """Roof of the main level (thick), faster levels (dashed), extra compute and overhead ceilings, ridges."""
    main, colors = rl.main_level, {}
    others = [lv for lv in rl.levels if lv != main]
    for k, lv in enumerate([*others, main]):
        is_main = lv == main
        c = color if is_main or not single else _COLORS[(k + 1) % len(_COLORS)]
        colors[lv] = c
        name = next(ce.name for ce in rl.ceilings if ce.level == lv)
        if single:
            label = f"{rl.label} · {name}" if is_main and others else rl.label if is_main else name
        else:
            label = f"{rl.label if is_main else rl.name + ' · ' + name} · ridge {rl.ridge_point(lv):.3g}"
        ax.plot(x, rl.attainable(x, lv), color=c, lw=2.4 if is_main else 1.4, ls="-" if is_main else "--",
                label=label, zorder=3 if is_main else 2, solid_capstyle="round")
        r = rl.ridge_point(lv)
        ax.plot([r], [rl.peak_flops], "o", color=c, ms=6 if is_main else 4.5, mec="white", mew=0.8, zorder=5)
        marks.append((r, rl.peak_flops))
        names.append((r, rl.peak_flops, f"{'ridge ' if single else ''}{r:.3g} FLOP/B", c, 7.5, True))
        if annotate:
            _label_slope(ax, x, rl.attainable(x, lv), r, name, c)
    for ce in rl.ceilings:
        if ce.kind == "compute":
            ax.plot(x, rl.attainable(x, compute=ce.name), color=color, lw=1.1, ls=":", label=f"{rl.name} · {ce.name}")
        elif ce.kind == "overhead" and ce.flops:
            ax.plot(x, rl.attainable(x, flops=ce.flops), color=color, lw=1.3, ls="-.",
                    label=f"{rl.name} · {ce.name}" if not single else f"{ce.name} (time-based ceiling)")
    if annotate:
        peak = f"{rl.dtype} peak {eng(rl.peak_flops, 'FLOP/s')}" + (" (estimate)" if rl.peak_is_estimate else "")
        ax.annotate(peak, (x[-1], rl.peak_flops), xytext=(-4, 3), textcoords="offset points", ha="right",
                    va="bottom", fontsize=8, color=color)
    return colors


def _label_slope(ax, x, y, ridge: float, text: str, color: str) -> None:
    """Write a bandwidth ceiling's name along its slope, left of the ridge, inside the axes."""
    y_lo = ax.get_ylim()[0]
    visible = (y > y_lo * 2.0) & (x < ridge / 2.5) & (x > x[0] * 10**0.3)
    if not visible.any():
        return
    i = int(np.argmax(visible))
    ax.add_artist(_SlopeLabel(text, (x[i], y[i]), xytext=(0, 6), textcoords="offset points", rotation_mode="anchor",
                              fontsize=8, color=color, ha="left", va="bottom"))


class _SlopeLabel(Annotation):
    """Text along a bandwidth ceiling (slope 1 on log-log axes); its angle is taken at draw time, after layout."""

    def get_rotation(self):
        if self.axes is None:
            return super().get_rotation()
        (x, y), tr = self.xy, self.axes.transData
        (x0, y0), (x1, y1) = tr.transform([(x, y), (x * 10, y * 10)])
        return math.degrees(math.atan2(y1 - y0, x1 - x0))


def _draw_points(ax, pts: pd.DataFrame, level_colors: dict, set_index: int | None, label_points, names: list,
                 marks: list) -> None:
    """Ops as markers: shape and legend text by source (measured / simulated / analytical), colour by level."""
    if pts.empty:
        return
    hierarchical = pts["level"].nunique() > 1
    name = pts.attrs.get("label")
    for (k, lv), grp in pts.groupby(["source", "level"], sort=False, dropna=False):
        marker, color, filled = _POINT_STYLE[k]
        if hierarchical and lv in level_colors:
            color = level_colors[lv]
        elif set_index is not None:
            color = _SET_COLORS[set_index % len(_SET_COLORS)]
        what = {"analytical": f"analytical, on the {pts.attrs.get('roof') or 'roof'}", "measured": "measured",
                "simulated": "simulated"}[k]
        label = f"{name + ': ' if name else ''}ops{f' @ {lv}' if hierarchical else ''} ({what}, n={len(grp)})"
        if pts.attrs.get("dropped") and lv == pts["level"].iloc[0]:
            label += f"; {pts.attrs['dropped']} without FLOPs not shown"
        ax.scatter(grp["intensity"], grp["flops_per_s"], marker=marker, s=34, zorder=8, label=label,
                   facecolors=color if filled else "white", edgecolors=color, linewidths=1.2)
    over = pts[pts["over_roof"]] if "over_roof" in pts else pts.iloc[:0]
    if len(over):
        ax.scatter(over["intensity"], over["flops_per_s"], marker="o", s=150, zorder=9, facecolors="none",
                   edgecolors="#d62728", linewidths=1.4,
                   label=f"{name + ': ' if name else ''}{len(over)} above the roof (counted work too low, "
                         "or served from a faster level)")
    marks.extend(zip(pts["intensity"], pts["flops_per_s"], strict=True))
    if hierarchical:  # one op, one row of points (same performance, one intensity per level)
        for _, grp in pts.groupby("op_id"):
            ax.plot(grp["intensity"], grp["flops_per_s"], color="#999999", lw=0.7, zorder=4)
    if label_points is False or label_points == 0:
        return
    first = pts[pts["level"] == pts["level"].iloc[0]]
    groups = first.groupby([np.round(np.log10(first["intensity"]), 2), np.round(np.log10(first["flops_per_s"]), 2)])
    spots = [(g["flops"].max(), g["intensity"].iloc[0], g["flops_per_s"].iloc[0],
              g["label"].iloc[0] + (f" ×{len(g)}" if len(g) > 1 else "")) for _, g in groups]
    spots.sort(key=lambda s: -(s[0] if s[0] == s[0] else s[2]))
    for _, xi, yi, text in spots if label_points is True else spots[: int(label_points)]:
        names.append((xi, yi, text, "#222222", 7, False))


# Where a name may go around its point: offset (points), alignment. Ridge names try below-right first.
_SPOTS = ((5, 3, "left", "bottom"), (5, -3, "left", "top"), (-5, 3, "right", "bottom"), (-5, -3, "right", "top"),
          (0, 7, "center", "bottom"), (0, -7, "center", "top"), (9, 13, "left", "bottom"), (9, -13, "left", "top"),
          (-9, 13, "right", "bottom"), (-9, -13, "right", "top"))
_RIDGE_SPOTS = (_SPOTS[1], _SPOTS[2], _SPOTS[0], _SPOTS[3])


def _place_names(ax, names: list, marks: list) -> None:
    """After layout, put each name at the first spot inside the axes that clears the markers, the legend and the
    names already placed (measured text extents). Ridge names always appear; op names that fit nowhere do not."""
    fig = ax.figure
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    r = 4.0 * fig.dpi / 72  # marker radius in pixels
    taken = [Bbox.from_extents(px - r, py - r, px + r, py + r) for px, py in ax.transData.transform(marks)] \
        if marks else []
    if ax.get_legend() is not None:
        taken.append(ax.get_legend().get_window_extent(renderer))
    frame = ax.get_window_extent(renderer)
    for x, y, text, color, size, is_ridge in names:
        ann = ax.annotate(text, (x, y), xytext=(0, 0), textcoords="offset points", fontsize=size, color=color,
                          zorder=7, bbox=_BOX)
        spots = _RIDGE_SPOTS if is_ridge else _SPOTS
        px, py = ax.transData.transform((x, y))
        others = [t for t in taken if not t.contains(px, py)]  # the point's own marker does not block its name
        for dx, dy, ha, va in spots:
            ann.xyann = (dx, dy)
            ann.set(ha=ha, va=va)
            box = ann.get_window_extent(renderer).padded(2)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(t) for t in others):
                break
        else:
            if not is_ridge:
                ann.remove()
                continue
            ann.xyann = spots[0][:2]
            ann.set(ha=spots[0][2], va=spots[0][3])
        taken.append(ann.get_window_extent(renderer))
