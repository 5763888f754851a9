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


def test_a_band_holds_only_with_the_published_figure_inside_it():
    band = SimpleNamespace(band={"tokens_per_s_per_user": (400.0, 600.0), "chips": (407, 568)})
    inside = classify(_fig("groq-2024", 480), 600, band)
    assert inside["check"] == "band" and inside["holds"] and inside["band_chips"] == [407, 568]
    below = classify(_fig("groq-2024", 300), 600, band)
    assert not below["holds"] and below["gap"] == 0.75  # 300 / the band's lower end
    assert not classify(_fig("groq-2024", 900), 600, band)["holds"]


def test_the_goal_counts_only_sourced_rows():
    rows = [{"backend": "gpu", "ratio": r, "group": "sourced"} for r in (0.9, 1.1, 1.2)]
    rows += [{"backend": "gpu", "ratio": 5.0, "group": "bound"}]
    a = per_architecture(rows)["gpu"]
    assert a["n"] == 3 and a["worst"] == 1.2 and a["goal_met"] and a["median_error"] == 1.11
    rows.append({"backend": "gpu", "ratio": 0.4, "group": "sourced"})
    assert not per_architecture(rows)["gpu"]["goal_met"]  # one figure beyond 2x
    assert error_factor(0.8) == error_factor(1.25)
