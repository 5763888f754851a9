"""One style per simulated machine for every figure: a colour-blind-safe colour, a marker and a hatch.

Colours are from the Okabe-Ito palette (M. Okabe and K. Ito, "Color Universal Design", 2008,
https://jfly.uni-koeln.de/color/ : eight colours distinguishable under the common colour-vision deficiencies).
Its yellow is left out: too pale on a white axis. Each machine also has its own marker (lines, scatter) and
hatch (bars), so that no figure relies on colour alone.
"""
from __future__ import annotations

from typing import NamedTuple

from common.errors import DFAError


class MachineStyle(NamedTuple):
    colour: str
    marker: str
    hatch: str


MACHINE_STYLE: dict[str, MachineStyle] = {
    "gpu": MachineStyle("#0072B2", "o", "//"),     # Okabe-Ito blue
    "tpu": MachineStyle("#E69F00", "s", "\\\\"),   # orange
    "wse": MachineStyle("#009E73", "^", "xx"),     # bluish green
    "lpu": MachineStyle("#D55E00", "D", ".."),     # vermillion
    "spyre": MachineStyle("#CC79A7", "v", "++"),   # reddish purple
}


def style(backend: str) -> MachineStyle:
    """The style of ``backend`` ('gpu' or 'dfa_gpu')."""
    key = backend.removeprefix("dfa_")
    if key not in MACHINE_STYLE:
        raise DFAError(f"no figure style for backend {backend!r}; choose one of {sorted(MACHINE_STYLE)}")
    return MACHINE_STYLE[key]
