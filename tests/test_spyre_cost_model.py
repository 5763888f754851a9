"""The Spyre simulator against torch-spyre's measured cost model (benchmarks/spyre_cost_model.py, re-implemented
from docs/source/compiler/cost_model.md): the page's worked examples, then every op class within its bound."""
import json
import os

import pytest

import benchmarks.spyre_vs_cost_model as cmp
from benchmarks import spyre_cost_model as ref

MB = 1e6


def test_reproduces_the_pages_worked_examples():
    # "A plain kernel": softmax 4096 x 2048 fp16 on 32 cores, untiled -> 320.0 us (16.8 MB in, 16.8 MB out)
    assert ref.softmax_s(4096, 2048) == pytest.approx(320.0e-6, rel=0.005)
    # Appendix "re-fetch": matmul_row_tiling 4096x2048 @ 2048x1024 in 8 tiles -> 423.1 us, 58.7 MB of which
    # 29.4 MB is B read again on 7 later tiles
    mm = ref.matmul_s(4096, 2048, 1024, tiles=8)
    assert mm["total_s"] == pytest.approx(423.1e-6, rel=0.005)
    assert mm["loop_reread_bytes"] == pytest.approx(29.4 * MB, rel=0.005)
    assert (4096 * 2048 + 2048 * 1024 + 4096 * 1024) * 2 + mm["loop_reread_bytes"] == pytest.approx(58.7 * MB,
                                                                                                    rel=0.005)
    assert mm["compute_s"] < mm["mem_s"]  # memory-bound: the re-read is what costs


def test_tiled_softmax_example_differs_from_the_cited_constants_by_their_plateau():
    # "A coarse-tiled kernel" prints 320.0 us for 8 tiles; the CostParams cited (coarse_underfill_cap 1.08, reached
    # at 16 rows per core per tile) give 320 / 1.08: the printout predates that plateau. Recorded, not hidden.
    tiled, untiled = ref.softmax_s(4096, 2048, tiles=8), ref.softmax_s(4096, 2048)
    assert untiled / tiled == pytest.approx(ref.FIT.coarse_cap)


def test_the_shared_hardware_numbers_come_from_the_catalog():
    from common.chips import get_chip
    c = get_chip("spyre")
    assert ref.HW.bw == c.main_memory.bandwidth * c.estimate("achievable_bandwidth_fraction")
    assert ref.HW.mac_peak == pytest.approx(1140e9) and ref.HW.mac_bmm_default == pytest.approx(160e9)


@pytest.fixture(scope="module")
def result():
    return cmp.compare()


def test_every_op_class_stays_within_its_bound(result):
    for cls, c in result["classes"].items():
        assert c["n"] >= 3, cls
        assert c["rms_pct"] <= c["bound_pct"], (cls, c)
        if cls not in cmp.DEVIATIONS:  # held to the model's own published error
            assert c["bound_pct"] == cmp.PUBLISHED[cls]
        else:  # a named deviation is wider than the published error, never looser than it needs to be
            assert c["bound_pct"] > cmp.PUBLISHED[cls] and c["reason"]


def test_a_slower_simulator_would_fail(monkeypatch):
    run = cmp._run

    def slow(fn, *shapes, **options):
        t, report = run(fn, *shapes, **options)
        return 1.2 * t, report
    monkeypatch.setattr(cmp, "_run", slow)
    monkeypatch.setattr(cmp, "cases", lambda: [c for c in _cases() if c["class"] == "pointwise"][:2])
    got = cmp.compare()["classes"]["pointwise"]
    assert got["rms_pct"] == pytest.approx(20.0, abs=0.5) and not got["within"]


_cases = cmp.cases


def test_checked_in_results_are_what_the_code_gives(result):
    path = os.path.join(cmp.RESULTS, "spyre_cost_model.json")
    with open(path) as fh:
        stored = json.load(fh)
    assert stored["rows"] == result["rows"] and stored["classes"] == result["classes"]
    with open(os.path.join(cmp.RESULTS, "fidelity.md")) as fh:
        assert cmp.markdown(stored) in fh.read()


def test_the_section_is_replaced_not_appended(tmp_path, result):
    md = tmp_path / "fidelity.md"
    md.write_text("## Sourced\n\nrows\n")
    cmp.write_section(result, str(md))
    cmp.write_section(result, str(md))
    text = md.read_text()
    assert text.startswith("## Sourced") and text.count(cmp.MARK) == 2 and text.count("## Spyre") == 1
