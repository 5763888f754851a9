"""Draw an annotated FX graph with matplotlib: one box per op, top to bottom, coloured by what bounds it.

No graphviz needed (Colab and CI have matplotlib). View ops (reshape, permute...) are folded into the edges
so a student sees the computation, not the bookkeeping. Layout: each node sits on the row of its longest
path from the inputs; rows are centred. Colours: compute-bound (orange), memory-bound (blue), inputs and
weights (white).
"""
from __future__ import annotations

from collections import defaultdict

import matplotlib.pyplot as plt
import torch.fx as fx
from matplotlib.patches import FancyBboxPatch

from common.graph.costs import NodeCost, op_name
from common.palette import BOUND_STYLE

COLORS = {"compute": BOUND_STYLE["compute"].colour, "memory": BOUND_STYLE["memory"].colour, "input": "#ffffff",
          "output": "#d3d3d3", "view": "#e0e0e0", "unknown": "#bbbbbb"}  # work kinds: common.palette's
HATCH = {"compute": BOUND_STYLE["compute"].hatch, "memory": BOUND_STYLE["memory"].hatch}


def _visible(n: fx.Node, show_params: bool) -> bool:
    cost: NodeCost | None = n.meta.get("cost")
    if n.op == "placeholder":
        return show_params or n.meta.get("kind", "input") == "input"
    if n.op == "get_attr":
        return show_params
    return not (cost is not None and cost.is_view)


def _visible_inputs(n: fx.Node, visible: set, cache: dict) -> set:
    """Producers of n, looking through hidden (view) nodes."""
    if n in cache:
        return cache[n]
    out = set()
    for a in n.all_input_nodes:
        out |= {a} if a in visible else _visible_inputs(a, visible, cache)
    cache[n] = out
    return out


def draw_graph(gm: fx.GraphModule, *, ridge: float | None = None, ax=None, show_params: bool = False,
               title: str | None = None, max_label: int = 22):
    """Draw ``gm`` (annotated by ``costs.annotate``). ``ridge`` (FLOP/B) decides compute- vs memory-bound."""
    nodes = list(gm.graph.nodes)
    visible = [n for n in nodes if _visible(n, show_params)]
    vis = set(visible)
    cache: dict = {}
    preds = {n: _visible_inputs(n, vis, cache) for n in visible}
    level = {}
    for n in visible:  # graph order is topological
        level[n] = 1 + max((level[p] for p in preds[n]), default=-1)
    rows = defaultdict(list)
    for n in visible:
        rows[level[n]].append(n)
    width = max(len(r) for r in rows.values())
    pos = {}
    for y, row in rows.items():
        for i, n in enumerate(row):
            pos[n] = (i - (len(row) - 1) / 2, -y)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 2.3 * width), max(4.0, 0.75 * len(rows))))
    for n in visible:
        for p in preds[n]:
            (x0, y0), (x1, y1) = pos[p], pos[n]
            # An edge that skips levels (a residual) would run straight behind the boxes between: bow it out.
            bow = 0.0 if y0 - y1 <= 1 else (0.6 if x0 <= x1 else -0.6)
            ax.annotate("", xy=(x1, y1 + 0.18), xytext=(x0, y0 - 0.18),
                        arrowprops={"arrowstyle": "-|>", "color": "#888888", "lw": 0.8, "shrinkA": 0, "shrinkB": 0,
                                    "connectionstyle": f"arc3,rad={bow}"})
    for n in visible:
        kind = _kind(n, ridge)
        x, y = pos[n]
        label = _label(n, gm, max_label)
        ax.add_patch(FancyBboxPatch((x - 0.45, y - 0.18), 0.9, 0.36, boxstyle="round,pad=0.02",
                                    fc=COLORS[kind], hatch=HATCH.get(kind, ""), ec="#333333", lw=0.6))
        ax.text(x, y, label, ha="center", va="center", fontsize=7, color="black",
                bbox={"fc": "white", "ec": "none", "alpha": 0.7, "pad": 0.5} if kind in HATCH else None)
    ax.set_xlim(-width / 2 - 0.2, width / 2 + 0.2)
    ax.set_ylim(-len(rows) + 0.4, 0.6)
    ax.axis("off")
    handles = [plt.Rectangle((0, 0), 1, 1, fc=COLORS[k], hatch=HATCH.get(k, ""), ec="#333333")
               for k in ("compute", "memory", "input")]
    names = [f"compute-bound (>= {ridge:.3g} FLOP/B)" if ridge else "compute-bound",
             "memory-bound", "input / output"]
    ax.legend(handles, names, loc="upper right", fontsize=7, frameon=False)
    ax.set_title(title or f"{len(visible)} ops (views folded into edges)", fontsize=9)
    return ax


def _kind(n: fx.Node, ridge: float | None) -> str:
    if n.op in ("placeholder", "get_attr"):
        return "input"
    if n.op == "output":
        return "output"
    cost: NodeCost | None = n.meta.get("cost")
    if cost is None or ridge is None:
        return "unknown"
    return "compute" if cost.intensity >= ridge else "memory"


def _label(n: fx.Node, gm: fx.GraphModule, max_label: int) -> str:
    name = n.meta.get("source", n.name) if n.op == "placeholder" else op_name(n, gm).replace("aten.", "")
    name = name if len(name) <= max_label else name[: max_label - 1] + "~"
    cost: NodeCost | None = n.meta.get("cost")
    shape = "x".join(str(s) for s in cost.shape) if cost is not None and cost.shape else ""
    return f"{name}\n{shape}" if shape else name
