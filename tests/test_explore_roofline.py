"""The roofline explorer: its points are the simulator's step and the catalog's ceilings, the point never sits
above a ceiling, a batch change moves it, a bad choice is one line, and without a front end it prints and saves."""
import math

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from common.chips import get_chip  # noqa: E402
from common.explore import Choices  # noqa: E402
from common.explore.roofline_view import CEILINGS, draw, operating_points, roofline_explorer  # noqa: E402
from common.palette import style  # noqa: E402
from common.roofline import roofline_for_chip  # noqa: E402
from common.sim import simulate_llm  # noqa: E402

MODEL = "llama-3.1-8b"


def test_a_point_is_the_simulated_step_per_chip_under_the_catalog_ceilings():
    table = operating_points(Choices(MODEL, ("gpu", "lpu"), batch=4, seq=256))
    for _, p in table.iterrows():
        r = simulate_llm(MODEL, p["machine"], phase="decode", batch=4, seq=256)
        level = get_chip(r.chip).main_memory.name
        roof = roofline_for_chip(r.chip, r.dtype)
        assert p["intensity"] == pytest.approx(r.flops / r.bytes[level])
        assert p["flops_per_s"] == pytest.approx(r.achieved_flops / r.chips)
        assert p["memory_roof"] == pytest.approx(p["intensity"] * roof.bandwidth(level))
        assert p["compute_roof"] == roof.peak_flops
        assert p["scheduling_roof"] == pytest.approx(r.flops / r.chips / r.attribution["scheduling"])
        assert p["bottleneck"] == r.bottleneck
        for c in CEILINGS:  # physics first: the step never beats a floor
            assert p["flops_per_s"] <= p[f"{c}_roof"] * (1 + 1e-9)
    assert table.attrs["label"].startswith("SIMULATED")


def test_batching_moves_the_gpu_point_right_and_off_the_memory_roof_at_fp32():
    view = roofline_explorer(MODEL, ("tpu",), interactive=False, show=False)
    sweep = view.sweep("batch", (1, 16, 256), backends=("gpu",), seq=256, dtype="fp32")
    assert list(sweep["batch"]) == [1, 16, 256] and set(sweep["machine"]) == {"gpu"}
    assert view.choices.batch == 1 and view.choices.backends == ("tpu",)  # the view stays where it was
    assert sweep["intensity"].is_monotonic_increasing
    binding = [min(CEILINGS, key=lambda c: row[f"{c}_roof"]) for _, row in sweep.iterrows()]
    assert binding[0] == "memory" and binding[-1] == "compute"


def test_a_machine_that_cannot_take_the_dtype_says_why_and_the_others_still_draw(tmp_path):
    view = roofline_explorer(MODEL, ("gpu", "wse"), dtype="fp8", interactive=False, show=False)
    gpu, wse = view.points().set_index("machine").loc[["gpu", "wse"]].to_dict("records")
    assert "fp8" in wse["problem"] and math.isnan(wse["flops_per_s"]) and gpu["problem"] == ""
    markers = [c.get_paths() and c for c in view.axes.collections]
    assert len(markers) == 1  # one point: the GPU's
    assert tuple(markers[0].get_facecolor()[0][:3]) == pytest.approx(matplotlib.colors.to_rgb(style("gpu").colour))
    assert any(t.get_text().startswith("not drawn") and "wse: chip 'wse-3' has no fp8" in t.get_text()
               for t in view.axes.texts)  # the figure says why a machine is missing


def test_a_change_redraws_in_place_and_a_bad_one_keeps_the_view(tmp_path):
    view = roofline_explorer(MODEL, ("tpu",), interactive=False, show=False)
    fig, before = view.figure, view.points()
    view.update(batch=64)
    assert view.figure is fig and view.points()["intensity"].iloc[0] > before["intensity"].iloc[0]
    assert "batch 64" in view.axes.get_title() and "SIMULATED" in view.axes.get_title()
    assert "FLOP/byte" in view.axes.get_xlabel() and "FLOP/s" in view.axes.get_ylabel()
    kept = view.points()
    view.update(seq=0)
    assert "seq must be a whole number" in view.message and "\n" not in view.message and view.points().equals(kept)
    with pytest.raises(Exception, match="batch must be a whole number"):
        view.sweep("batch", (1, 0))


def test_without_a_front_end_it_prints_the_table_and_saves_the_figure(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DFA_STATIC", "1")
    roofline_explorer(MODEL, ("spyre",), static_path=tmp_path / "out" / "roofline.png")
    out = capsys.readouterr().out
    assert "SIMULATED" in out and "memory roof TFLOP/s" in out and (tmp_path / "out" / "roofline.png").exists()


def test_draw_says_so_when_no_machine_can_take_the_choice():
    import matplotlib.pyplot as plt
    _, ax = plt.subplots()
    draw(ax, operating_points(Choices(MODEL, ("wse",), dtype="int8")))
    assert any("no machine can take" in t.get_text() for t in ax.texts)
