"""The what-if explorer's logic, without a browser: its rows are the simulator's numbers, a change redraws the
same figure, a bad choice is one line and never a traceback, and without a front end it prints and saves."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from common.explore import Choices, explore, machine_rows, widgets_can_render  # noqa: E402
from common.sim import simulate_llm  # noqa: E402

MODEL = "llama-3.1-8b"


def test_rows_are_the_simulators_numbers():
    table = machine_rows(Choices(MODEL, ("gpu", "spyre"), batch=4, seq=512))
    for _, row in table.iterrows():
        r = simulate_llm(MODEL, row["machine"], phase="decode", batch=4, seq=512)
        assert row["time_s"] == pytest.approx(r.time_s) and row["tokens_per_s"] == pytest.approx(r.tokens_per_s)
        assert row["bottleneck"] == r.bottleneck and row["chips"] == r.chips
        shares = [row[f"{s}_share"] for s in ("compute", "memory", "communication", "scheduling")]
        assert sum(shares) == pytest.approx(1.0) and row["bytes_by_level"] == dict(r.bytes)
    assert table.attrs["label"].startswith("SIMULATED")


@pytest.mark.parametrize("change, words", [
    ({"batch": 0}, "batch must be a whole number"), ({"phase": "train"}, "unknown phase 'train'"),
    ({"backends": ("gpu", "npu")}, "unknown backend 'npu'"), ({"stack": "nope"}, "unknown stack 'nope'"),
    ({"speed": 3}, "unknown choice 'speed'"),
])
def test_a_bad_choice_is_one_line_and_keeps_the_last_view(tmp_path, change, words):
    e = explore(MODEL, ("gpu",), interactive=False, show=False, static_path=tmp_path / "x.png")
    before = e.table()
    e.update(**change)
    assert words in e.message and "\n" not in e.message
    assert e.table().equals(before)


def test_a_model_that_does_not_fit_says_why_on_its_machine_only(tmp_path):
    e = explore("llama-3.1-70b", ("gpu", "tpu"), chip_counts={"gpu": 1}, interactive=False, show=False,
                static_path=tmp_path / "x.png")
    gpu, tpu = e.table().set_index("machine").loc[["gpu", "tpu"]].to_dict("records")
    assert "needs 2x" in gpu["problem"] and gpu["tokens_per_s"] != gpu["tokens_per_s"]  # NaN: no number shown
    assert tpu["problem"] == "" and tpu["tokens_per_s"] > 0


def test_a_change_redraws_the_same_figure_with_new_numbers(tmp_path):
    e = explore(MODEL, ("gpu", "lpu"), interactive=False, show=False, static_path=tmp_path / "x.png")
    fig, first = e.figure, e.table()
    heights = [p.get_height() for p in e.axes[0].patches]
    e.update(batch=32)
    assert e.figure is fig and not e.table()["tokens_per_s"].equals(first["tokens_per_s"])
    assert [p.get_height() for p in e.axes[0].patches] != heights
    assert "batch 32" in fig._suptitle.get_text() and "SIMULATED" in e.axes[0].get_title()


def test_without_a_front_end_it_prints_the_table_and_saves_the_figure(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert not widgets_can_render()
    e = explore(MODEL, ("tpu",), static_path=tmp_path / "out" / "explorer.png")
    out = capsys.readouterr().out
    assert "SIMULATED" in out and "tpu" in out and "ms/step" in out and e.widget is None
    assert (tmp_path / "out" / "explorer.png").stat().st_size > 10_000


def test_the_widget_builds_and_a_control_updates_the_table(tmp_path):
    pytest.importorskip("ipywidgets")
    e = explore(MODEL, ("gpu", "wse"), interactive=True, show=False, static_path=tmp_path / "x.png")
    before = e.table()["time_s"].tolist()
    e.controls["seq"].value = 4096
    assert e.choices.seq == 4096 and e.table()["time_s"].tolist() != before
    e.controls["dtype"].value = "fp32"
    assert e.choices.dtype == "fp32"


def test_the_labs_model_and_a_config_folder_are_models_too(tmp_path):
    import shutil
    from pathlib import Path

    import common.models

    bundled = Path(common.models.__file__).parent / "configs" / "qwen2.5-0.5b-instruct.json"
    shutil.copy(bundled, tmp_path / "config.json")
    by_name = machine_rows(Choices("qwen2.5-0.5b-instruct", ("tpu",)))
    by_folder = machine_rows(Choices(str(tmp_path), ("tpu",)))
    assert by_name["problem"].iloc[0] == "" and by_folder["tokens_per_s"].iloc[0] == pytest.approx(
        by_name["tokens_per_s"].iloc[0])
