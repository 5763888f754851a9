"""The sticks explorer: a Spyre matmul's shape (M, K, N) and dtype move its stick layout, the tile its compiler
picks, and the LPDDR5 <-> LX bytes that follow.

For C = A @ B with A (M, K), B (K, N), C (M, N) on the SIMULATED Spyre backend, every number is read from the
simulator, never re-derived here:

* per operand, ``stick_layout`` (the backend's own layout): e = stick_bytes / elem_bytes elements per stick,
  ``sticks_per_row`` = ceil(n / e) for innermost length n, ``padding_bytes`` = rows x (ceil(n / e) e - n) x elem,
  ``padding_share`` = padding / device bytes, and the device shape (sticks, *outer, e);
* for the op, the compiled plan (``simulate_op`` -> ``common.memory.traffic.traffic_table``): the tile
  tm x tk x tn the planner chose, its working set per core and whether it fits the LX budget per core, the
  LPDDR5 bytes read and written (whole sticks, re-reads included), the part that is stick padding, and the
  simulated time;
* ``bytes_per_useful_byte`` = LPDDR5 bytes / (A + B + C logical bytes): 1 would be each tensor moved once with
  no padding; padding and re-reads push it up.

``sticks_explorer(m, k, n, dtype)`` returns a ``SticksExplorer``: controls for M, K, N and dtype around a figure
redrawn in place (left: one row of each operand as sticks, held slots and padding; right: bytes per useful
byte against K near the chosen K, the stick multiples marked). Where no widget can render (grading, CI,
``DFA_STATIC``, a plain shell) it prints the tables and saves the figure, like ``common.explore.widget``.
``.sweep(name, values, **fixed)`` gives the op rows for each value of one choice.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from common.chips import get_chip
from common.errors import DFAError
from common.explore.widget import widgets_can_render
from common.memory.traffic import SpyreStep, default_lx_budget, traffic_table
from common.palette import EMPHASIS, SEQUENCE
from common.sim.machines.spyre import stick_layout
from common.sim.run import simulate_op

__all__ = ["OP_COLUMNS", "StickChoices", "SticksExplorer", "draw", "operand_rows", "stick_point",
           "sticks_explorer"]
OP_COLUMNS = ("m", "k", "n", "dtype", "tile", "ws_bytes_per_core", "lx_budget_bytes", "fits_lx", "lpddr_read",
              "lpddr_write", "lpddr_bytes", "lpddr_padding", "useful_bytes", "bytes_per_useful_byte", "time_s")
HELD, PADDING = (SEQUENCE[0], ""), (EMPHASIS, "///")  # (colour, hatch): held slots, padding slots


@dataclass(frozen=True)
class StickChoices:
    """A matmul (M, K) @ (K, N) in ``dtype`` on one simulated Spyre card; ``lx_budget_bytes`` None = the
    default budget the catalog gives the planner."""
    m: int = 128
    k: int = 100
    n: int = 1024
    dtype: str = "fp16"
    lx_budget_bytes: int | None = None

    def checked(self) -> StickChoices:
        for name in ("m", "k", "n"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise DFAError(f"{name} must be a positive integer, got {v!r}")
        b = self.lx_budget_bytes
        if b is not None and (isinstance(b, bool) or not isinstance(b, int) or b < 1):
            raise DFAError(f"lx_budget_bytes must be a positive integer or None, got {b!r}")
        get_chip("spyre").compute_peak(self.dtype)  # one DFAError line naming Spyre's datapaths
        return self

    def changed(self, **changes) -> StickChoices:
        bad = sorted(set(changes) - set(StickChoices.__dataclass_fields__))
        if bad:
            raise DFAError(f"no choice {bad[0]!r}; choose from {', '.join(StickChoices.__dataclass_fields__)}")
        return dataclasses.replace(self, **changes).checked()


def _operands(c: StickChoices) -> dict[str, tuple[int, int]]:
    return {"A": (c.m, c.k), "B": (c.k, c.n), "C": (c.m, c.n)}


def operand_rows(choices: StickChoices) -> pd.DataFrame:
    """One row per operand: its stick layout from the Spyre backend (``stick_layout``)."""
    c, rows = choices.checked(), []
    for name, shape in _operands(c).items():
        lay = stick_layout(shape, c.dtype)
        device = lay["device_bytes"]
        rows.append({"operand": name, "shape": shape, "innermost": shape[-1], "elements_per_stick":
                     lay["elements_per_stick"], "sticks_per_row": lay["sticks_per_row"], "bytes": lay["bytes"],
                     "device_bytes": device, "padding_bytes": lay["padding_bytes"],
                     "padding_share": lay["padding_bytes"] / device if device else 0.0,
                     "device_shape": lay["device_shape"]})
    out = pd.DataFrame(rows)
    out.attrs["label"] = f"SIMULATED Spyre stick layout of ({c.m}, {c.k}) @ ({c.k}, {c.n}), {c.dtype}"
    return out


def stick_point(choices: StickChoices) -> dict:
    """The op's row (``OP_COLUMNS``): the compiled plan and counters of one simulated matmul."""
    c = choices.checked()
    knobs = {"lx_budget_bytes": c.lx_budget_bytes} if c.lx_budget_bytes else {}
    report = simulate_op("matmul", (c.m, c.k, c.n), "spyre", dtype=c.dtype, **knobs)
    budget = c.lx_budget_bytes or default_lx_budget(report.chip)
    table = traffic_table(SpyreStep(report, ("matmul",), (1,), budget))
    mm = table[table["kind"] == "matmul"].iloc[0]
    plan = next(p for k in report.programs[0].kernels for p in k.tiling.get("sdsc", ()) if p.get("tile"))
    useful = sum(stick_layout(s, c.dtype)["bytes"] for s in _operands(c).values())
    moved = float((table["lpddr_read"] + table["lpddr_write"]).sum())
    return {"m": c.m, "k": c.k, "n": c.n, "dtype": c.dtype, "tile": plan["tile"],
            "ws_bytes_per_core": float(mm["ws_bytes_per_core"]), "lx_budget_bytes": float(budget),
            "fits_lx": bool(mm["ws_bytes_per_core"] <= budget), "lpddr_read": float(table["lpddr_read"].sum()),
            "lpddr_write": float(table["lpddr_write"].sum()), "lpddr_bytes": moved,
            "lpddr_padding": float(table["lpddr_padding"].sum()), "useful_bytes": float(useful),
            "bytes_per_useful_byte": moved / useful, "time_s": float(report.time_s)}


def _k_window(c: StickChoices) -> list[int]:
    """K values around the chosen K: two sticks either side, in eighth-sticks, the chosen K and multiples."""
    e = stick_layout((1, 1), c.dtype)["elements_per_stick"]
    step = max(1, e // 8)
    lo, hi = max(1, c.k - 2 * e), c.k + 2 * e
    return sorted({c.k, *range(lo, hi + 1, step), *range(-(-lo // e) * e, hi + 1, e)})


def draw(axes, operands: pd.DataFrame, curve: pd.DataFrame, point: dict) -> None:
    """Left: one row of each operand as sticks (held slots solid, padding hatched). Right: bytes per useful byte
    against K (the chosen K ringed, stick multiples dotted)."""
    left, right = axes
    left.clear()
    right.clear()
    e = int(operands["elements_per_stick"].iloc[0])
    for y, r in enumerate(operands.itertuples()):
        held, total = r.innermost, r.sticks_per_row * e
        left.broken_barh([(0, held)], (y - 0.35, 0.7), facecolor=HELD[0], edgecolor="black", lw=0.4)
        if total > held:
            left.broken_barh([(held, total - held)], (y - 0.35, 0.7), facecolor="white", edgecolor=PADDING[0],
                             hatch=PADDING[1], lw=0.8)
        for s in range(1, r.sticks_per_row):
            left.plot([s * e, s * e], [y - 0.35, y + 0.35], color="black", lw=0.6)
        left.annotate(f"{r.sticks_per_row} sticks, {r.padding_share:.0%} padding", (total, y), xytext=(4, 0),
                      textcoords="offset points", va="center", fontsize=7)
    left.set_yticks(range(len(operands)), [f"{r.operand} {r.shape}" for r in operands.itertuples()], fontsize=8)
    left.invert_yaxis()
    left.set_xlim(0, max(operands["sticks_per_row"]) * e * 1.35)
    left.set_xlabel(f"elements of one row along the innermost dim (stick = {e} elements)")
    left.bar([0], [0], color=HELD[0], label="held values")
    left.bar([0], [0], color="white", edgecolor=PADDING[0], hatch=PADDING[1], label="stick padding")
    left.legend(fontsize=7, loc="lower right", frameon=False)
    fit = "fits" if point["fits_lx"] else "does NOT fit"
    left.set_title(f"SIMULATED Spyre: one row of each operand in sticks; tile {point['tile']} "
                   f"{fit} LX ({point['ws_bytes_per_core'] / 1e3:.0f} of {point['lx_budget_bytes'] / 1e3:.0f} kB)",
                   fontsize=9)
    for m in range(e, int(curve["k"].max()) + 1, e):
        right.axvline(m, color="#aaaaaa", ls=":", lw=1)
    right.plot(curve["k"], curve["bytes_per_useful_byte"], color=SEQUENCE[0], marker="o", ms=3, lw=1.2,
               label="LPDDR5 bytes / useful byte")
    right.scatter([point["k"]], [point["bytes_per_useful_byte"]], s=120, facecolor="none", edgecolor=EMPHASIS,
                  lw=2, zorder=5, label=f"K = {point['k']}: {point['bytes_per_useful_byte']:.3f}")
    right.set_xlabel("K, innermost length of A (elements; dotted: whole sticks)")
    right.set_ylabel("LPDDR5 bytes per useful byte (ratio)")
    right.legend(fontsize=7, frameon=False)
    right.set_title(f"SIMULATED: ({point['m']}, K) @ (K, {point['n']}), {point['dtype']}: "
                    f"{point['lpddr_bytes'] / 1e6:.3g} MB moved, {point['time_s'] * 1e6:.3g} us", fontsize=9)


class SticksExplorer:
    """The choices, their rows, the figure and (live) the controls; see the module docstring."""

    def __init__(self, choices: StickChoices, *, interactive: bool | None = None,
                 static_path: str | os.PathLike = "dfa_out/sticks_explorer.png"):
        self.choices = choices.checked()
        self.interactive = widgets_can_render() if interactive is None else interactive
        self.static_path = Path(static_path)
        self.figure, self.axes = plt.subplots(1, 2, figsize=(13, 4.6), layout="constrained")
        self.message = ""
        self._redraw(self.choices)
        self.widget = self._build() if self.interactive else None

    def point(self) -> dict:
        """The current op row (``stick_point``)."""
        return dict(self._point)

    def operands(self) -> pd.DataFrame:
        """The current operand rows (``operand_rows``)."""
        return self._operands.copy()

    def update(self, **changes) -> dict:
        """Apply ``changes`` (fields of ``StickChoices``); a bad one keeps the last good view, sets ``message``."""
        try:
            self._redraw(self.choices.changed(**changes))
            self.message = ""
        except DFAError as exc:
            self.message = str(exc).splitlines()[0]
        self._refresh()
        return self.point()

    def sweep(self, name: str, values, **fixed) -> pd.DataFrame:
        """The op rows for each of ``values`` of choice ``name`` after setting the others to ``fixed``; the view
        stays where it was. A bad value is a one-line DFAError."""
        base = self.choices.changed(**fixed)
        out = pd.DataFrame([stick_point(base.changed(**{name: v})) for v in values], columns=list(OP_COLUMNS))
        out.attrs["label"] = f"SIMULATED Spyre sweep of {name} over {list(values)}"
        return out

    def show(self) -> None:
        """Live: the controls, tables and figure. Static: print the tables and save the figure."""
        if self.interactive:
            from IPython.display import display
            display(self.widget)
            return
        self.static_path.parent.mkdir(parents=True, exist_ok=True)
        self.figure.savefig(self.static_path, dpi=110)
        print(self._text())
        if self.message:
            print(f"not applied: {self.message}")
        print(f"figure saved: {self.static_path}")

    def _ipython_display_(self):
        self.show()

    def _redraw(self, choices: StickChoices) -> None:
        point, operands = stick_point(choices), operand_rows(choices)
        curve = pd.DataFrame([stick_point(choices.changed(k=k)) for k in _k_window(choices)])
        self.choices, self._point, self._operands = choices, point, operands
        draw(self.axes, operands, curve, point)

    def _text(self) -> str:
        p = self._point
        cols = ["operand", "shape", "sticks_per_row", "padding_bytes", "padding_share", "device_shape"]
        with pd.option_context("display.width", 200, "display.precision", 3):
            ops = self._operands[cols].to_string(index=False)
        return (f"{self._operands.attrs['label']}\n{ops}\ntile {p['tile']}: {p['ws_bytes_per_core']:.0f} B per core "
                f"of a {p['lx_budget_bytes']:.0f} B LX budget ({'fits' if p['fits_lx'] else 'does NOT fit'}); "
                f"LPDDR5 {p['lpddr_read']:.0f} B read + {p['lpddr_write']:.0f} B written "
                f"({p['lpddr_padding']:.0f} B padding) = {p['bytes_per_useful_byte']:.3f} B per useful byte; "
                f"SIMULATED time {p['time_s'] * 1e6:.3g} us")

    def _build(self):
        import ipywidgets as w
        c = self.choices
        self.controls = {name: w.BoundedIntText(value=getattr(c, name), min=1, max=1 << 16, description=name)
                         for name in ("m", "k", "n")}
        self.controls["dtype"] = w.Dropdown(options=("fp16", "int8"), value=c.dtype, description="dtype")
        self._status, self._out = w.HTML(), w.Output()
        for name, control in self.controls.items():
            control.observe(lambda change, name=name: self.update(**{name: change["new"]}), names="value")
        self._refresh()
        return w.VBox([w.HBox(list(self.controls.values())), self._status, self._out])

    def _refresh(self) -> None:
        if not self.interactive or not hasattr(self, "_status"):
            return
        from html import escape

        from IPython.display import display
        self._status.value = (f"<span style='color:{EMPHASIS}'>not applied: {escape(self.message)}</span>"
                              if self.message else f"<pre>{escape(self._text())}</pre>")
        with self._out:
            self._out.clear_output(wait=True)
            display(self.figure)


def sticks_explorer(m: int = 128, k: int = 100, n: int = 1024, dtype: str = "fp16", *,
                    lx_budget_bytes: int | None = None, interactive: bool | None = None,
                    static_path: str | os.PathLike = "dfa_out/sticks_explorer.png",
                    show: bool = True) -> SticksExplorer:
    """A ``SticksExplorer`` on the matmul (m, k) @ (k, n), shown at once unless ``show=False``."""
    explorer = SticksExplorer(StickChoices(m, k, n, dtype, lx_budget_bytes), interactive=interactive,
                              static_path=static_path)
    if show:
        explorer.show()
    return explorer

