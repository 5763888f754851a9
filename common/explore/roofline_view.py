"""The roofline explorer: batch, sequence and dtype move one LLM step's operating point across each machine's
memory, compute and scheduling ceilings.

For one simulated step on one chip of a machine (``simulate_served``, as the what-if explorer runs it), with
F = the step's FLOPs per chip, B = its main-memory bytes per chip, T = its simulated time and t_s = the seconds
of scheduling on its critical engine (``Report.attribution``; idle gaps count as scheduling):

    intensity I = F / B (FLOP/byte)                       attained = F / T (FLOP/s, the point)
    memory ceiling     = I * beta     (beta: the chip's main-memory bandwidth, catalog)
    compute ceiling    = P            (P: the chip's dense peak at the step's dtype, catalog)
    scheduling ceiling = F / t_s      (the time-based overhead roof of ``common.roofline.model``: no step that
                                       spends t_s scheduling can beat it; infinite when t_s = 0)

Each ceiling is F over one time floor (B/beta, F/P, t_s), so the lowest ceiling at the point is the longest
floor. The simulator never beats a floor, so the point lies on or under all three. Communication (the links
between chips) is a fourth cost with no ceiling on these axes: the table's ``bottleneck`` (the attribution's
largest share) may name it, or name a bound the ceilings do not, because the attribution reads the timeline
(achievable rates, overlap) while the ceilings are datasheet limits.

``roofline_explorer(model, backends, ...)`` returns a ``RooflineExplorer``: the what-if explorer's controls and
static fallback (``common.explore.widget``) around this figure; ``.points()`` gives the table, ``.sweep(name,
values)`` the table for each value of one choice, as a control moved through them would. Every number is
SIMULATED or from the catalog, and says so.
"""
from __future__ import annotations

import math
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from common.chips import get_chip
from common.errors import DFAError
from common.explore.whatif import Choices, _stack_for
from common.explore.widget import BATCHES as BATCH_CHOICES
from common.explore.widget import Explorer
from common.palette import EMPHASIS, style
from common.roofline import eng, roofline_for_chip
from common.sim.args import BACKEND_NAMES

CEILINGS = ("memory", "compute", "scheduling")
__all__ = ["BATCH_CHOICES", "CEILINGS", "RooflineExplorer", "draw", "operating_point", "operating_points",
           "roofline_explorer"]
COLUMNS = ("machine", "chip", "chips", "dtype", "level", "flops", "bytes", "intensity", "flops_per_s",
           "bandwidth", "memory_roof", "compute_roof", "scheduling_roof", "ridge", "bottleneck", "problem")


def operating_point(choices: Choices, backend: str) -> dict:
    """One machine's row (module docstring); a choice it cannot take leaves the numbers NaN, the reason in
    ``problem``."""
    from common.sim.serving import simulate_served

    row = dict.fromkeys(COLUMNS, math.nan) | {"machine": backend, "problem": "", "bottleneck": ""}
    try:
        r = simulate_served(choices.model, backend, stack=_stack_for(choices, backend), phase=choices.phase,
                            batch=choices.batch, seq=choices.seq, chip=choices.chips.get(backend),
                            chips=choices.chip_counts.get(backend), dtype=choices.dtype)
        roof = roofline_for_chip(r.chip, r.dtype)
    except DFAError as exc:
        row["problem"] = str(exc).splitlines()[0]
        return row
    level = get_chip(r.chip).main_memory.name
    flops, moved, t = r.flops / r.chips, r.bytes.get(level, 0.0) / r.chips, r.time_s
    scheduling_s = r.attribution.get("scheduling", 0.0)
    intensity = flops / moved if moved else math.inf
    row.update(chip=r.chip, chips=r.chips, dtype=r.dtype, level=level, flops=flops, bytes=moved,
               intensity=intensity, flops_per_s=flops / t if t else 0.0, bandwidth=roof.bandwidth(level),
               memory_roof=intensity * roof.bandwidth(level), compute_roof=roof.peak_flops,
               scheduling_roof=flops / scheduling_s if scheduling_s > 0 else math.inf,
               ridge=roof.ridge_point(level), bottleneck=r.bottleneck)
    return row


def operating_points(choices: Choices) -> pd.DataFrame:
    """The rows of every chosen machine, SIMULATED (``attrs['label']`` says so, with the choices)."""
    choices = choices.checked()
    table = pd.DataFrame([operating_point(choices, b) for b in choices.backends], columns=list(COLUMNS))
    table.attrs["label"] = (f"SIMULATED: {choices.model}, {choices.phase}, batch {choices.batch}, "
                            f"seq {choices.seq}, dtype {choices.dtype or 'each chip native'}")
    return table


def draw(ax, table: pd.DataFrame) -> None:
    """Each machine's catalog roofline (memory slope and compute flat, solid), its scheduling ceiling for this
    step (dashed) and the step's point, in the machine's colour and marker (``common.palette``)."""
    ax.clear()
    ok = table[table["problem"].fillna("") == ""]
    if ok.empty:
        ax.text(0.5, 0.5, "no machine can take this choice:\n" + "\n".join(table["problem"]), ha="center",
                va="center", transform=ax.transAxes, fontsize=8, color=EMPHASIS)
    lo = min([0.5, *(ok["intensity"] / 4)])
    hi = max([1e4, *(ok["ridge"] * 8), *(ok["intensity"] * 4)])
    x = np.geomspace(lo, hi, 400)
    for _, p in ok.iterrows():
        st = style(p["machine"])
        beta = p["bandwidth"]
        ax.plot(x, np.minimum(p["compute_roof"], x * beta), color=st.colour, lw=1.6,
                label=f"{p['machine']} ({p['chip']}, {p['dtype']}): {p['level']} {eng(beta, 'B/s')}, "
                      f"peak {eng(p['compute_roof'], 'FLOP/s')}")
        if math.isfinite(p["scheduling_roof"]):
            ax.axhline(p["scheduling_roof"], color=st.colour, ls="--", lw=1.0)
        ax.scatter(p["intensity"], p["flops_per_s"], s=70, marker=st.marker, color=st.colour, edgecolor="black",
                   zorder=5)
        ax.annotate(f"{p['machine']}: {eng(p['flops_per_s'], 'FLOP/s')}", (p["intensity"], p["flops_per_s"]),
                    xytext=(6, -10), textcoords="offset points", fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    values = [*ok["flops_per_s"], *ok["compute_roof"], *(v for v in ok["scheduling_roof"] if math.isfinite(v))]
    if values:
        ax.set_ylim(min(values) / 10, max(values) * 3)
    refused = table[table["problem"].fillna("") != ""]
    if not refused.empty and not ok.empty:  # a machine left out says why, on the figure itself
        ax.text(0.01, 0.99, "not drawn:\n" + "\n".join(f"{m}: {p.split(';')[0][:56]}" for m, p in
                                                       zip(refused["machine"], refused["problem"], strict=True)),
                transform=ax.transAxes, fontsize=6.5, color=EMPHASIS, va="top",
                bbox={"fc": "white", "ec": "none", "alpha": 0.85})
    ax.set_xlabel("arithmetic intensity at main memory (FLOP/byte)")
    ax.set_ylabel("FLOP/s per chip")
    ax.plot([], [], color="#555555", ls="--", lw=1.0, label="scheduling ceiling of this step: F / t_s")
    ax.legend(loc="lower right", fontsize=7, frameon=False)
    ax.set_title(f"{table.attrs.get('label', 'SIMULATED')}\nSIMULATED step points under catalog rooflines",
                 fontsize=9)


def _display(table: pd.DataFrame) -> pd.DataFrame:
    """The rows as a learner reads them: units in the headers."""
    out = pd.DataFrame({"machine": table["machine"], "chip": table["chip"], "chips": table["chips"].astype("Int64"),
                        "dtype": table["dtype"], "FLOP/B": table["intensity"],
                        "TFLOP/s attained": table["flops_per_s"] / 1e12,
                        **{f"{c} roof TFLOP/s": table[f"{c}_roof"] / 1e12 for c in CEILINGS},
                        "ridge FLOP/B": table["ridge"], "bottleneck (timeline)": table["bottleneck"],
                        "problem": table["problem"]})
    out.attrs = dict(table.attrs)
    return out


class RooflineExplorer(Explorer):
    """The what-if explorer's choices and controls, drawing the roofline view (module docstring)."""

    def __init__(self, choices: Choices, *, interactive: bool | None = None,
                 static_path: str | os.PathLike = "dfa_out/roofline_explorer.png"):
        super().__init__(choices, interactive=interactive, static_path=static_path)

    def _new_figure(self):
        return plt.subplots(figsize=(9, 5.6), layout="constrained")

    def _rows_for(self, choices: Choices) -> pd.DataFrame:
        return operating_points(choices)

    def _draw(self, rows: pd.DataFrame) -> None:
        draw(self.axes, rows)

    def points(self) -> pd.DataFrame:
        """The current rows (``operating_points``)."""
        return self.table()

    def sweep(self, name: str, values, **fixed) -> pd.DataFrame:
        """The rows for each of ``values`` of the choice ``name`` (a column of that name says which), as moving
        its control through them would after setting the other controls to ``fixed`` (choices, e.g. seq=512);
        the view itself is left where it was. A bad value is a one-line DFAError."""
        before, rows = self.choices.changed(**fixed), []
        for v in values:
            rows.append(operating_points(before.changed(**{name: v})).assign(**{name: v}))
        out = pd.concat(rows, ignore_index=True)
        out.attrs["label"] = f"SIMULATED sweep of {name} over {list(values)}"
        return out

    def show(self) -> None:
        """Live: the controls, table and figure. Static: print the table and save the figure."""
        if self.interactive:
            super().show()
            return
        self.static_path.parent.mkdir(parents=True, exist_ok=True)
        self.figure.savefig(self.static_path, dpi=110)
        with pd.option_context("display.width", 200, "display.max_columns", 30, "display.precision", 3):
            print(self._rows.attrs.get("label", "SIMULATED"))
            print(_display(self._rows).to_string(index=False))
        if self.message:
            print(f"not applied: {self.message}")
        print(f"figure saved: {self.static_path}")

    def _table_frame(self) -> pd.DataFrame:
        return _display(self._rows)

    def _context_frame(self) -> None:  # the roofline view has no KV-cache table
        return None


def roofline_explorer(model: str = "llama-3.1-8b", backends=BACKEND_NAMES, *, interactive: bool | None = None,
                      static_path: str | os.PathLike = "dfa_out/roofline_explorer.png", show: bool = True,
                      **choices) -> RooflineExplorer:
    """A ``RooflineExplorer`` on ``model`` for ``backends``, shown at once unless ``show=False``. ``choices``:
    phase, batch, seq, dtype, stack, chips ({backend: chip}), chip_counts ({backend: n})."""
    try:
        made = Choices(model=model, backends=backends, **choices)
    except TypeError as exc:
        raise DFAError(f"roofline_explorer: {exc}; choices are {', '.join(Choices.__dataclass_fields__)}") from None
    explorer = RooflineExplorer(made, interactive=interactive, static_path=static_path)
    if show:
        explorer.show()
    return explorer
