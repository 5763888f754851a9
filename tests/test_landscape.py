"""The accelerator landscape map (common.landscape.map): validation, no silent loss, atomic saves, frame, figure."""
from __future__ import annotations

import json
import os

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from common.chips import chips_of_kind, get_chip  # noqa: E402
from common.errors import DFAError  # noqa: E402
from common.landscape.map import SOURCES, SYSTEMS, LandscapeMap, format_value, system_name, tensor_core_terms  # noqa: E402


def test_systems_and_sources_are_the_published_ones():
    assert SYSTEMS == ("GPU", "TPU", "WSE", "LPU", "Spyre")
    assert SOURCES == ("measured", "simulated", "catalog", "learner")
    assert system_name("dfa_spyre") == "Spyre" and system_name("gpu") == "GPU" and system_name("Cerebras") == "WSE"


def test_bad_system_and_source_name_the_valid_choices(tmp_path):
    lm = LandscapeMap(tmp_path / "m.json")
    with pytest.raises(DFAError, match="GPU, TPU, WSE, LPU, Spyre"):
        lm.add("FPGA", "x", 1, course=1, source="measured")
    with pytest.raises(DFAError, match="catalog, learner, measured, simulated"):
        lm.add("GPU", "x", 1, course=1, source="guessed")
    with pytest.raises(DFAError, match="course"):
        lm.add("GPU", "x", 1, course=7, source="measured")
    with pytest.raises(DFAError):
        lm.add("GPU", "x", float("nan"), course=1, source="measured")
    with pytest.raises(DFAError):
        lm.add("GPU", "", 1, course=1, source="measured")
    with pytest.raises(DFAError):
        lm.add("GPU", "x", True, course=1, source="measured")
    assert len(lm) == 0


def test_nothing_is_lost_without_asking(tmp_path):
    lm = LandscapeMap(tmp_path / "m.json")
    assert lm.add("gpu", "latency", 1.5e-4, course=1, source="simulated") is True
    assert lm.add("GPU", "latency", 1.5e-4, course=1, source="simulated") is False  # same value: no-op
    with pytest.raises(DFAError, match="overwrite=True"):
        lm.add("GPU", "latency", 2e-4, course=1, source="simulated")
    assert lm.get("GPU", "latency") == 1.5e-4
    assert lm.add("GPU", "latency", 2e-4, course=1, source="measured", overwrite=True) is True
    assert lm.rows == [{"system": "GPU", "attribute": "latency", "value": 2e-4, "course": 1, "source": "measured"}]
    # an int and a float of the same value are different cells' values only by type: asks before changing
    lm.add("TPU", "cores", 2, course=1, source="catalog")
    with pytest.raises(DFAError):
        lm.add("TPU", "cores", 2.5, course=1, source="catalog")
    rows = lm.rows
    rows[0]["value"] = "tampered"  # rows are copies
    assert lm.get("GPU", "latency") == 2e-4
    assert lm.remove("TPU", "cores") and not lm.remove("TPU", "cores")


def test_save_load_round_trip_and_default_path(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "map.json"
    lm = LandscapeMap.load(path)
    assert len(lm) == 0  # no file yet: an empty map
    lm.add("WSE", "execution model", "  spatial dataflow  ", course=1, source="learner")
    lm.add("LPU", "tokens/s", 358, course=1, source="simulated")
    assert lm.save() == path
    doc = json.loads(path.read_text())
    assert doc["version"] == 1 and len(doc["rows"]) == 2
    again = LandscapeMap.load(path)
    assert again.rows == lm.rows and again.get("WSE", "execution model") == "spatial dataflow"
    assert not [p for p in path.parent.iterdir() if p.name != "map.json"]  # no temporary file left behind
    monkeypatch.setenv("DFA_LANDSCAPE", str(path))
    assert LandscapeMap.load().rows == lm.rows
    monkeypatch.delenv("DFA_LANDSCAPE")
    monkeypatch.chdir(tmp_path)  # one map for every lab, wherever the notebook runs: not ./landscape_map.json
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert LandscapeMap.load().path == tmp_path / "data" / "dataflow-labs" / "landscape_map.json"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    home_data = tmp_path / "home" / ".local" / "share" / "dataflow-labs"
    assert LandscapeMap.default_path() == home_data / "landscape_map.json"


def test_a_file_that_is_not_a_map_is_an_error_not_an_empty_map(tmp_path):
    bad = tmp_path / "m.json"
    bad.write_text("{not json")
    with pytest.raises(DFAError, match="not a landscape map"):
        LandscapeMap.load(bad)
    bad.write_text(json.dumps({"rows": [{"system": "FPGA", "attribute": "a", "value": 1, "course": 1,
                                         "source": "measured"}]}))
    with pytest.raises(DFAError, match="invalid landscape row"):
        LandscapeMap.load(bad)
    assert bad.read_text().startswith("{")  # untouched


def test_save_is_atomic_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "m.json"
    lm = LandscapeMap(path)
    lm.add("GPU", "a", 1, course=1, source="measured")
    lm.save()
    before = path.read_text()
    lm.add("GPU", "b", 2, course=1, source="measured")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        lm.save()
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_frame_groups_attributes_by_course(tmp_path):
    lm = LandscapeMap(tmp_path / "m.json")
    lm.add("GPU", "KV cache policy", "paged", course=4, source="learner")
    lm.add("TPU", "execution model", "XLA static graph", course=1, source="learner")
    lm.add("GPU", "execution model", "SIMT kernels", course=1, source="learner")
    lm.add("Spyre", "latency", 5e-5, course=1, source="simulated")
    df = lm.frame()
    assert list(df.columns) == list(SYSTEMS)
    assert list(df.index) == ["execution model", "latency", "KV cache policy"]
    assert df.loc["execution model", "GPU"] == "SIMT kernels" and df.loc["latency", "Spyre"] == 5e-5
    assert pd.isna(df.loc["latency", "GPU"])
    assert df.attrs["course"] == {"execution model": 1, "latency": 1, "KV cache policy": 4}
    assert lm.frame(sources=True).loc["latency", "Spyre"] == "simulated"


def test_render_draws_a_table_with_course_bands_and_source_tags(tmp_path):
    lm = LandscapeMap(tmp_path / "m.json")
    ax = lm.render()
    assert "empty" in ax.texts[0].get_text()
    plt.close(ax.figure)
    for i, s in enumerate(SYSTEMS):
        lm.add(s, "execution model", f"a fairly long description of how {s} runs a model, wrapped", course=1,
               source="learner")
        lm.add(s, "decode step latency", 1e-4 * (i + 1), course=1, source="simulated")
    lm.add("GPU", "peak bf16", 989.4e12, course=2, source="catalog")
    ax = lm.render(title="my map")
    texts = [c.get_text().get_text() for c in ax.tables[0].get_celld().values()]
    assert "Course 1" in texts and "Course 2" in texts and "Accelerator landscape" in texts
    assert any(t.endswith("[S]") for t in texts) and any("[L]" in t for t in texts)
    assert any("989 T" in t and "[C]" in t for t in texts)
    assert ax.get_title() == "my map"
    ax.figure.savefig(tmp_path / "map.png", dpi=60)
    plt.close(ax.figure)


def test_format_value():
    assert format_value(1.9e-4) == "190 µ"
    assert format_value(358) == "358"
    assert format_value(2.5e9) == "2.5 G"
    assert format_value("text") == "text"
    assert format_value(0.0) == "0"


@pytest.mark.parametrize("chip", [c.name for c in chips_of_kind("gpu")])
def test_tensor_core_terms_rebuild_the_catalog_peak(chip):
    t = tensor_core_terms(chip)
    assert t["derived_peak_flops"] == pytest.approx(get_chip(chip).peak("fp16"), rel=0.01)
    assert t["tensor_cores"] == t["sms"] * t["tensor_cores_per_sm"]


def test_tensor_core_terms_refuses_non_gpus():
    with pytest.raises(DFAError, match="GPU"):
        tensor_core_terms("tpu-v5e")


def test_dominant_operator_of_a_simulated_decode_step():
    from common.landscape.map import dominant_operator
    from common.sim import simulate_llm
    op, share = dominant_operator(simulate_llm("llama-3.1-8b", "gpu", chip="h100-sxm", phase="decode", seq=128))
    assert op == "aten.mm" and 0.5 < share <= 1.0  # weight streaming: the projections dominate decode
    op, share = dominant_operator(simulate_llm("tiny-block", "tpu", phase="decode", seq=16))
    assert op.startswith("aten.") and 0 < share <= 1.0
