"""Ridge points quoted in the course text agree with the catalog they come from.

A lab's prose cannot compute, so a ridge it quotes ("Spyre's LPDDR5 ridge ~480") is a copy of a catalog number,
and a copy goes stale when the catalog changes: Deep Dive 6 and the course 6 README once said ~730 and an LX
ridge of ~37 for Spyre, the values of an older fp16 peak, while Lab 6 said ~500. Every such quote is listed
in ``CLAIMS`` with the chip, dtype and memory level it is the ridge of; the test checks each against
peak / bandwidth from ``common.chips``, and fails on a ridge number in the text that no claim covers.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from common.chips import get_chip

REPO = Path(__file__).resolve().parents[1]
TEXTS = sorted({*REPO.glob("course*_*/source/*/*.py"), *REPO.glob("course*_*/README.md"), REPO / "README.md",
                *REPO.glob("docs/*.md")} - {*REPO.glob("course*_*/source/*/answers.py"),
                                           *REPO.glob("course*_*/source/*/shortcuts.py")})
TOLERANCE = 0.15  # "~480" for 480.0, "~300" for 295.3: a rounded copy, not a different number

# (pattern whose one group is the quoted ridge, chip, dtype, memory level); level "main" is main memory
CLAIMS = [
    (r"H100's HBM3 ridge is ~(\d+)", "h100-sxm", "bf16", "main"),
    (r"the H100's \(~(\d+)\)", "h100-sxm", "bf16", "main"),
    (r"~(\d+) on the H100", "h100-sxm", "bf16", "main"),
    (r"intensity ~1 FLOP/B against a ridge of ~(\d+)", "h100-sxm", "bf16", "main"),  # Lab 6, the GPU's decode
    (r"TPU v5e's HBM ridge \(~(\d+)\)", "tpu-v5e", "bf16", "main"),
    (r"~(\d+) on the v5e", "tpu-v5e", "bf16", "main"),
    (r"Spyre card's LPDDR5 ridge ~(\d+)", "spyre", "fp16", "main"),
    (r"Spyre's LPDDR5 ridge \(~(\d+) FLOP/B\)", "spyre", "fp16", "main"),
    (r"LPDDR5 \(ridge ~(\d+) FLOP/B\)", "spyre", "fp16", "main"),
    (r"~(\d+) on Spyre", "spyre", "fp16", "main"),
    (r"LX ridge of ~(\d+)", "spyre", "fp16", "lx_bandwidth"),
    (r"Groq LPU's SRAM ridge ~(\d+)", "lpu", "fp16", "main"),
]
# a number the text gives as a ridge: "ridge ~N", "ridge (~N", "ridge of ~N", "ridge is ~N", and the lists of
# ridges by machine that follow the word "ridge" ("~300 on the H100, ~240 on the v5e")
RIDGE_NUMBER = re.compile(r"ridge[^.\d~]{0,30}~(\d+)|~(\d+) on (?:the )?(?:H100|v5e|Spyre|LPU|TPU)")


def catalog_ridge(chip: str, dtype: str, level: str) -> float:
    c = get_chip(chip)
    peak = c.compute_peak(dtype)[0]
    return peak / (c.main_memory.bandwidth if level == "main" else c.estimate(level))


def _plain(path: Path) -> str:
    """The text with the comment markers of a jupytext source removed, lines joined (a quote may wrap)."""
    return " ".join(line.lstrip("# ").rstrip() for line in path.read_text(encoding="utf-8").splitlines())


@pytest.fixture(scope="module")
def texts() -> dict[Path, str]:
    return {path: _plain(path) for path in TEXTS}


@pytest.mark.parametrize("pattern,chip,dtype,level", CLAIMS, ids=[c[0] for c in CLAIMS])
def test_each_quoted_ridge_is_the_catalogs(texts, pattern, chip, dtype, level):
    found = [(path, float(m.group(1))) for path, text in texts.items() for m in re.finditer(pattern, text)]
    assert found, f"no course text says {pattern!r} any more: remove the claim"
    want = catalog_ridge(chip, dtype, level)
    for path, quoted in found:
        assert abs(quoted - want) <= TOLERANCE * want, (
            f"{path.relative_to(REPO)} quotes {quoted:g} FLOP/B for {pattern!r}; the catalog gives "
            f"{want:.1f} ({chip} {dtype} peak / {level} bandwidth)")


def test_every_ridge_number_in_the_text_is_a_listed_claim(texts):
    unlisted = []
    for path, text in texts.items():
        covered = [m.span(1) for pattern, *_ in CLAIMS for m in re.finditer(pattern, text)]
        for m in RIDGE_NUMBER.finditer(text):
            group = 1 if m.group(1) else 2
            if not any(a <= m.start(group) < b for a, b in covered):
                unlisted.append(f"{path.relative_to(REPO)}: ...{text[max(0, m.start() - 40):m.end() + 10]}...")
    assert not unlisted, "ridge numbers no claim checks (add them to CLAIMS):\n" + "\n".join(unlisted)


def test_the_check_catches_a_stale_copy():
    stale = "Spyre's LPDDR5 ridge (~730 FLOP/B)"
    pattern = next(c[0] for c in CLAIMS if c[0].startswith("Spyre's LPDDR5"))
    quoted = float(re.search(pattern, stale).group(1))
    assert abs(quoted - catalog_ridge("spyre", "fp16", "main")) > TOLERANCE * catalog_ridge("spyre", "fp16", "main")
