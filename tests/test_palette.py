import re
from pathlib import Path

import pytest

import common
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


# A colour literal outside common/palette.py must be a neutral grey: the hues come from the palette, so that every
# figure uses the same colour-blind-safe set (and the marker, hatch or dash that goes with each hue).
HEX = re.compile(r"""["']#([0-9a-fA-F]{6})["']|colou?r:\s*#([0-9a-fA-F]{6})""")  # a literal, or CSS in HTML text
NAMED = re.compile(r"""(?:colou?rs?|fc|ec|facecolors?|edgecolors?|mfc|mec)\s*=\s*["'](?:tab:\w+|C\d|red|green|blue|"""
                   r"""orange|purple|yellow|brown|pink|cyan|magenta)["']""")


def _grey(h: str) -> bool:
    return h[0:2].lower() == h[2:4].lower() == h[4:6].lower()


def hues_outside_the_palette(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "palette.py" and path.parent == root:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            hues = [h for pair in HEX.findall(line) for h in pair if h and not _grey(h)]
            if hues or NAMED.search(line):
                found.append(f"{path.relative_to(root.parent)}:{n}: {line.strip()[:80]}")
    return found


def test_every_hue_in_common_comes_from_the_palette():
    assert hues_outside_the_palette(Path(common.__file__).parent) == []


def test_the_hue_check_finds_a_planted_colour(tmp_path):
    pkg = tmp_path / "common"
    pkg.mkdir()
    (pkg / "palette.py").write_text('BLUE = "#0072B2"\n')
    (pkg / "figure.py").write_text('GREY = "#777777"\nax.plot(x, y, color="#d62728")\nax.bar(x, y, fc="tab:red")\n'
                                   'html = f"<span style=\'color:#b00000\'>"\n')
    assert [f.split(":")[1] for f in hues_outside_the_palette(pkg)] == ["2", "3", "4"]


def test_series_and_fills_tell_categories_apart_without_colour():
    from common.palette import BOUND_STYLE, CONTENT_STYLE, EDGE_STYLE, MARKERS, SEQUENCE, series
    assert len(set(MARKERS)) == len(MARKERS) == len(SEQUENCE) and series(len(SEQUENCE)) == series(0)
    for table, second in ((BOUND_STYLE, 1), (CONTENT_STYLE, 1), (EDGE_STYLE, 1)):
        assert len({s[second] for s in table.values()}) == len(table)  # hatch / dash differ, not only the hue


def test_every_hue_in_a_lab_comes_from_the_palette():
    root = Path(common.__file__).parents[1]
    found = []
    for lab in sorted(root.glob("course*_*/source/*/*.py")):
        if lab.stem != lab.parent.name:  # answers.py, shortcuts.py draw nothing
            continue
        for n, line in enumerate(lab.read_text().splitlines(), 1):
            hues = [h for pair in HEX.findall(line) for h in pair if h and not _grey(h)]
            if hues or NAMED.search(line):
                found.append(f"{lab.relative_to(root)}:{n}: {line.strip()[:80]}")
    assert found == []
