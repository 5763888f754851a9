"""The sticks explorer: its layout is the Spyre backend's, its traffic the simulator's counters, padding shows up
only off stick multiples, a bad choice is one line, and without a front end it prints and saves."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from common.chips import get_chip  # noqa: E402
from common.errors import DFAError  # noqa: E402
from common.explore.sticks_view import StickChoices, operand_rows, stick_point, sticks_explorer  # noqa: E402
from common.sim.run import simulate_op  # noqa: E402

E = int(get_chip("spyre").fact("stick_bytes")) // 2  # fp16 elements per stick (catalog)


def test_operand_layout_is_whole_sticks_of_the_innermost_dim():
    ops = operand_rows(StickChoices(m=3, k=E + 1, n=E)).set_index("operand")
    assert ops.loc["A", "sticks_per_row"] == 2
    assert ops.loc["A", "padding_bytes"] == 3 * (E - 1) * 2  # the second stick holds one value
    assert ops.loc["A", "device_shape"] == (2, 3, E)
    assert ops.loc["B", "padding_bytes"] == 0 and ops.loc["C", "padding_share"] == 0.0
    assert ops.attrs["label"].startswith("SIMULATED")


def test_the_point_is_the_simulators_counters_and_plan():
    p = stick_point(StickChoices(m=128, k=100, n=1024))
    r = simulate_op("matmul", (128, 100, 1024), "spyre", dtype="fp16")
    assert p["lpddr_bytes"] == r.counters["lpddr_to_lx_bytes"] + r.counters["lx_to_lpddr_bytes"]
    assert p["time_s"] == r.time_s
    plan = r.programs[0].kernels[0].tiling["sdsc"][0]
    assert p["tile"] == plan["tile"] and p["ws_bytes_per_core"] == plan["ws_bytes_per_core"]
    assert p["fits_lx"] and p["ws_bytes_per_core"] <= p["lx_budget_bytes"]
    assert p["useful_bytes"] == 2 * (128 * 100 + 100 * 1024 + 128 * 1024)


def test_padding_costs_traffic_only_off_stick_multiples():
    view = sticks_explorer(64, E, 512, interactive=False, show=False)
    rows = view.sweep("k", (E, E + 1, 2 * E)).set_index("k")
    assert rows.loc[E, "lpddr_padding"] == 0 and rows.loc[2 * E, "lpddr_padding"] == 0
    assert rows.loc[E, "bytes_per_useful_byte"] == pytest.approx(1.0)
    assert rows.loc[E + 1, "lpddr_padding"] > 0
    assert rows.loc[E + 1, "bytes_per_useful_byte"] > rows.loc[2 * E, "bytes_per_useful_byte"]
    assert view.point()["k"] == E  # a sweep leaves the view where it was


def test_a_small_budget_changes_the_tile_and_costs_re_reads():
    big = stick_point(StickChoices(m=4096, k=1024, n=4096))
    small = stick_point(StickChoices(m=4096, k=1024, n=4096, lx_budget_bytes=100_000))
    assert small["tile"] != big["tile"] and small["ws_bytes_per_core"] <= 100_000
    assert small["lpddr_bytes"] > big["lpddr_bytes"]


def test_bad_choices_are_one_line_and_the_view_keeps_its_state(tmp_path):
    view = sticks_explorer(interactive=False, show=False, static_path=tmp_path / "s.png")
    before = view.point()
    view.update(k=0)
    assert "k must be a positive integer" in view.message and view.point() == before
    view.update(dtype="fp32")
    assert "fp16" in view.message and "\n" not in view.message
    with pytest.raises(DFAError, match="no choice 'rows'"):
        view.sweep("rows", (1, 2))
    view.update(k=65)
    assert view.message == "" and view.point()["k"] == 65


def test_static_fallback_prints_and_saves(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DFA_STATIC", "1")
    path = tmp_path / "sticks.png"
    sticks_explorer(32, 100, 256, static_path=path)
    out = capsys.readouterr().out
    assert path.exists() and "SIMULATED" in out and "padding" in out and "figure saved" in out
