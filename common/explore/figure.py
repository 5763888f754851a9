"""One figure for the explorer's rows, redrawn in place: left, tokens/s per machine (log scale, a hatch and a
colour per machine from ``common.palette``, so no bar relies on colour alone); right, where each machine's step
time goes (compute, memory, communication, scheduling shares, stacked). A machine with a problem gets an empty
slot labelled with the reason's first words. Every title says SIMULATED."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd

from common.explore.whatif import SHARES
from common.palette import EMPHASIS, style

SHARE_HATCH = {"compute": "", "memory": "//", "communication": "xx", "scheduling": ".."}
SHARE_SHADE = {"compute": "#444444", "memory": "#888888", "communication": "#bbbbbb", "scheduling": "#e6e6e6"}


def new_figure():
    """The figure and its two axes (kept by the explorer and redrawn on every change)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    return fig, axes


def leave_pyplot(fig) -> None:
    """Take ``fig`` out of pyplot's list of open figures. A live explorer shows it in its own widget Output and
    redraws it there; left in the list, the notebook's inline backend would also show it once more under the
    table at the end of the cell, a second copy that never changes. A closed figure still draws and saves."""
    plt.close(fig)


def draw(fig, axes, table: pd.DataFrame) -> None:
    """Draw ``table`` (``whatif.machine_rows``) into ``axes``, clearing what was there."""
    left, right = axes
    for ax in axes:
        ax.clear()
    names = list(table["machine"])
    ok = table["problem"].fillna("").str.startswith("warning") | (table["problem"].fillna("") == "")
    for i, row in table.reset_index(drop=True).iterrows():
        st = style(row["machine"])
        if ok[i] and row["tokens_per_s"] > 0:
            left.bar(i, row["tokens_per_s"], color=st.colour, hatch=st.hatch, edgecolor="black", linewidth=0.6)
            left.annotate(f"{row['tokens_per_s']:.3g}", (i, row["tokens_per_s"]), ha="center", va="bottom",
                          fontsize=8)
            bottom = 0.0
            for share in SHARES:
                v = float(row[f"{share}_share"])
                right.bar(i, v, bottom=bottom, color=SHARE_SHADE[share], hatch=SHARE_HATCH[share],
                          edgecolor="black", linewidth=0.6, label=share if i == first_ok(ok) else None)
                bottom += v
        else:
            reason = str(row["problem"])[:38] + ("…" if len(str(row["problem"])) > 38 else "")
            for ax in axes:
                ax.annotate(reason, (i, 0.02), xycoords=("data", "axes fraction"), rotation=90, fontsize=7,
                            ha="center", va="bottom", color=EMPHASIS)
    labels = [f"{m}\n{c}" + (f" x{int(n)}" if isinstance(n, (int, float)) and n == n and n > 1 else "")
              if isinstance(c, str) else m for m, c, n in zip(names, table["chip"], table["chips"], strict=True)]
    for ax in axes:
        ax.set_xticks(range(len(names)), labels, fontsize=8)
        ax.set_xlim(-0.6, len(names) - 0.4)
    values = [v for v in table["tokens_per_s"] if isinstance(v, float) and v > 0 and math.isfinite(v)]
    if values:
        left.set_yscale("log")
        left.set_ylim(min(values) / 3, max(values) * 3)
    left.set_ylabel("tokens/s (all users)")
    left.set_title("SIMULATED tokens per second", fontsize=10)
    right.set_ylim(0, 1.0)
    right.set_ylabel("share of step time")
    right.set_title("SIMULATED: where the step time goes", fontsize=10)
    if right.get_legend_handles_labels()[0]:
        right.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.suptitle(table.attrs.get("label", "SIMULATED"), fontsize=10)


def first_ok(ok) -> int:
    return next((i for i, v in enumerate(ok) if v), -1)
