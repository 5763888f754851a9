"""One style per simulated machine for every figure: a colour-blind-safe colour, a marker and a hatch.

Colours are from the Okabe-Ito palette (M. Okabe and K. Ito, "Color Universal Design", 2008,
https://jfly.uni-koeln.de/color/ : eight colours distinguishable under the common colour-vision deficiencies).
Its yellow is left out: too pale on a white axis. Each machine also has its own marker (lines, scatter) and
hatch (bars), so that no figure relies on colour alone. The other categories the figures draw (what bounded an
event, what a byte of memory holds, how data moved, a series of rooflines) take their colours from the same
palette here, each with a hatch, line style or marker of its own; ``tests/test_palette.py`` keeps every other
colour in ``common/`` a neutral grey.
"""
from __future__ import annotations

from typing import NamedTuple

from common.errors import DFAError


class MachineStyle(NamedTuple):
    colour: str
    marker: str
    hatch: str


MACHINE_STYLE: dict[str, MachineStyle] = {
    "gpu": MachineStyle("#0072b2", "o", "//"),     # Okabe-Ito blue
    "tpu": MachineStyle("#e69f00", "s", "\\\\"),   # orange
    "wse": MachineStyle("#009e73", "^", "xx"),     # bluish green
    "lpu": MachineStyle("#d55e00", "D", ".."),     # vermillion
    "spyre": MachineStyle("#cc79a7", "v", "++"),   # reddish purple
}


def style(backend: str) -> MachineStyle:
    """The style of ``backend`` ('gpu' or 'dfa_gpu')."""
    key = backend.removeprefix("dfa_")
    if key not in MACHINE_STYLE:
        raise DFAError(f"no figure style for backend {backend!r}; choose one of {sorted(MACHINE_STYLE)}")
    return MACHINE_STYLE[key]


# ---- everything that is not a machine -------------------------------------------------------------------------
SEQUENCE = ("#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#000000")  # Okabe-Ito, no yellow
MARKERS = ("o", "s", "^", "D", "v", "P", "X")  # one per series, in SEQUENCE's order
EMPHASIS = "#d55e00"  # vermillion: a point or note the figure asks you to look at (ringed, never colour alone)


class FillStyle(NamedTuple):
    colour: str
    hatch: str


# What bounded a simulated event (Report.gantt, the dataflow schedule, the explorer's shares).
BOUND_STYLE: dict[str, FillStyle] = {
    "compute": FillStyle("#e69f00", ""),
    "memory": FillStyle("#56b4e9", "//"),
    "communication": FillStyle("#009e73", "xx"),
    "scheduling": FillStyle("#bbbbbb", ".."),
    "other": FillStyle("#888888", "\\\\"),
}

# What a byte of device memory holds (memory timelines, the FX graph's node kinds use the two work kinds).
CONTENT_STYLE: dict[str, FillStyle] = {
    "weights": FillStyle("#0072b2", ""),
    "KV cache": FillStyle("#d55e00", "//"),
    "activations": FillStyle("#e69f00", ".."),
    "other": FillStyle("#bbbbbb", "xx"),
}


class LineStyle(NamedTuple):
    colour: str
    dash: str | tuple  # a matplotlib linestyle


# How data moved between two ops of a compiled Spyre program (dataflow graph view).
EDGE_STYLE: dict[str, LineStyle] = {
    "LX": LineStyle("#999999", "-"),
    "dma": LineStyle("#0072b2", (0, (8, 2))),  # long dashes: apart from the LX edges' solid line
    "spill": LineStyle("#cc79a7", ":"),
    "restickify": LineStyle("#d55e00", "-."),
    "pcie": LineStyle("#009e73", "--"),
}


def bound_style(bound: str) -> FillStyle:
    """Fill of an event bounded by ``bound`` (an unknown or empty bound is drawn as 'other')."""
    return BOUND_STYLE.get(bound or "other", BOUND_STYLE["other"])


def series(i: int) -> tuple[str, str]:
    """(colour, marker) of the i-th series of a figure that is not one per machine."""
    return SEQUENCE[i % len(SEQUENCE)], MARKERS[i % len(MARKERS)]


def tint(colour: str, alpha: float = 0.2) -> tuple[float, float, float, float]:
    """``colour`` as an RGBA fill at ``alpha`` (a light background of the same hue)."""
    h = colour.lstrip("#")
    return (int(h[0:2], 16) / 255, int(h[2:4], 16) / 255, int(h[4:6], 16) / 255, alpha)
