"""Roofline charts: ``plot_roofline`` draws rooflines on log-log axes (FLOP/byte vs FLOP/s), ridge points marked,
ceilings labelled along their slope, ops as points coloured by memory level, and any point above its roof ringed
with the reason (common.roofline.model holds the numbers)."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.text import Annotation
from matplotlib.ticker import FuncFormatter, NullFormatter
from matplotlib.transforms import Bbox

from common.errors import DFAError
from common.palette import EMPHASIS, MARKERS, SEQUENCE
from common.roofline.model import (
    _SOURCE_WORDS,
    POINT_KINDS,
    Roofline,
    best_measured_roof,
    eng,
    points_from_node_table,
    points_over_roof,
)

_COLORS = SEQUENCE  # rooflines (and the levels of one): common.palette's, each with its own ridge marker
_SET_COLORS = ("#111111", SEQUENCE[4], SEQUENCE[3], SEQUENCE[2], SEQUENCE[0])  # point sets: each with a marker too


_BOX = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8}


_POINT_STYLE = {"measured": ("o", "#111111", True), "simulated": ("s", SEQUENCE[4], True),
                "analytical": ("D", "#333333", False)}  # marker, colour, filled


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
        level_colors.update(_draw_roofline(ax, rl, x, _COLORS[i % len(_COLORS)], single, annotate, names, marks,
                                           ridge_marker="o" if single else MARKERS[i % len(MARKERS)]))
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


def _draw_roofline(ax, rl: Roofline, x, color: str, single: bool, annotate: bool, names: list, marks: list,
                   ridge_marker: str = "o") -> dict:
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
                label=label, zorder=3 if is_main else 2, solid_capstyle="round", marker=ridge_marker,
                markevery=[int(np.searchsorted(x, rl.ridge_point(lv)).clip(0, len(x) - 1))], ms=7 if is_main else 5,
                mec="white", mew=0.8)  # the marker sits under the exact ridge below; the legend shows it
        r = rl.ridge_point(lv)  # the ridge's marker tells the rooflines apart without colour (legend: marker + line)
        ax.plot([r], [rl.peak_flops], ridge_marker, color=c, ms=7 if is_main else 5, mec="white", mew=0.8, zorder=5)
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
        elif set_index is not None:  # several sets: colour and marker per set (the legend names the source)
            color, marker = _SET_COLORS[set_index % len(_SET_COLORS)], MARKERS[set_index % len(MARKERS)]
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
                   edgecolors=EMPHASIS, linewidths=1.4,
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
