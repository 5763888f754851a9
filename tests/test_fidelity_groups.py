"""benchmarks/fidelity.py's two groups: sourced figures against the goal, unpublished-cost figures as bounds."""
from types import SimpleNamespace

from benchmarks.fidelity import classify, error_factor, per_architecture


def _fig(stack, published, unit="tok/s"):
    return SimpleNamespace(stack=stack, published=published, unit=unit)


def test_a_figure_is_sourced_unless_its_stack_names_a_first_order_unknown():
    report = SimpleNamespace(band=None)
    assert classify(_fig("trtllm-v0.6", 100), 120, report) == {"group": "sourced"}  # second-order unknowns only
    assert classify(_fig(None, 100), 120, report) == {"group": "sourced"}  # hardware alone
    up = classify(_fig("cerebras-2024-08", 450), 1150, report)
    assert up["group"] == "bound" and up["check"] == "upper" and up["holds"] and up["gap"] == 2.56
    assert not classify(_fig("cerebras-2024-08", 450), 400, report)["holds"]  # simulated below published


def test_a_band_of_upper_bounds_holds_while_published_is_at_most_its_fast_end():
    # groq-2024: the chip count is unpublished (the band) and so is the per-token host cost (an upper bound)
    band = SimpleNamespace(band={"tokens_per_s_per_user": (400.0, 600.0), "chips": (407, 568)})
    inside = classify(_fig("groq-2024", 480), 600, band)
    assert inside["check"] == "band of upper bounds" and inside["holds"] and inside["inside"]
    assert inside["band_chips"] == [407, 568] and "implied_s" not in inside
    below = classify(_fig("groq-2024", 250), 600, band)
    assert below["holds"] and not below["inside"] and below["gap"] == 0.62  # 250 / the band's slow end
    assert abs(below["implied_s"] - (1 / 250 - 1 / 400)) < 1e-12  # the host time per token it implies
    above = classify(_fig("groq-2024", 900), 600, band)
    assert not above["holds"] and above["gap"] == 1.5  # faster than the fastest deployment: the model is wrong


def test_a_band_with_no_other_unknown_holds_only_inside(monkeypatch):
    import benchmarks.fidelity as fidelity
    from common.chips.catalog.stacks import Stack
    plain = Stack("chips-only", "lpu", "2024", "only the chip count is unpublished",
                  not_published=("the chip count of each model's deployment",), deployment=(568, "x"))
    monkeypatch.setitem(fidelity.BY_NAME, "chips-only", plain)
    band = SimpleNamespace(band={"tokens_per_s_per_user": (400.0, 600.0), "chips": (407, 568)})
    assert classify(_fig("chips-only", 480), 600, band)["holds"]
    for published in (300, 900):
        r = classify(_fig("chips-only", published), 600, band)
        assert r["check"] == "band" and not r["holds"]


def test_the_goal_counts_only_sourced_rows():
    rows = [{"backend": "gpu", "ratio": r, "group": "sourced"} for r in (0.9, 1.1, 1.2)]
    rows += [{"backend": "gpu", "ratio": 5.0, "group": "bound"}]
    a = per_architecture(rows)["gpu"]
    assert a["n"] == 3 and a["worst"] == 1.2 and a["goal_met"] and a["median_error"] == 1.11
    rows.append({"backend": "gpu", "ratio": 0.4, "group": "sourced"})
    assert not per_architecture(rows)["gpu"]["goal_met"]  # one figure beyond 2x
    assert error_factor(0.8) == error_factor(1.25)


def test_the_committed_json_and_table_are_one_run():
    """fidelity.py writes both files from one list of rows: a merge that keeps one side of either shows here."""
    import json
    from pathlib import Path

    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    rows = json.loads((results / "fidelity.json").read_text(encoding="utf-8"))["rows"]
    table = (results / "fidelity.md").read_text(encoding="utf-8")
    stale = [r["figure"] for r in rows if r.get("simulated") is not None
             and f"| {r['figure']} | {r['published']:,} {r['unit']} | {r['simulated']:,} {r['unit']}" not in table]
    assert stale == [], f"fidelity.json and fidelity.md disagree on: {stale}"
