import pytest

from common.errors import DFAError
from common.palette import MACHINE_STYLE, style
from common.sim.args import BACKEND_NAMES


def test_every_backend_has_its_own_colour_marker_and_hatch():
    assert set(MACHINE_STYLE) == set(BACKEND_NAMES)
    for field in range(3):  # colour, marker, hatch each tell the machines apart on their own
        assert len({s[field] for s in MACHINE_STYLE.values()}) == len(MACHINE_STYLE)


def test_style_accepts_compile_names_and_rejects_unknown_ones():
    assert style("dfa_gpu") == MACHINE_STYLE["gpu"]
    with pytest.raises(DFAError, match="'npu'.*choose one of"):
        style("npu")
