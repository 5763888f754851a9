"""The dfa command: help, the catalog table, the tour, and one-line errors with exit code 2."""
import json

import pytest

from common.cli import main


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "chips" in out and "tour" in out


def test_chips_table_and_sources(capsys):
    assert main(["chips", "--sources"]) == 0
    out = capsys.readouterr().out
    for name in ("t4", "h100-sxm", "tpu-v5e", "wse-3", "groq-lpu", "spyre"):
        assert name in out
    assert "ESTIMATE dense_fp16_flops" in out and "cloud.google.com/tpu/docs/v5e" in out


def test_chips_json(capsys):
    assert main(["chips", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    h100 = next(r for r in rows if r["chip"] == "h100-sxm")
    assert h100["bf16_tflops"] == pytest.approx(989.4)


def test_tour_writes_pngs_and_trace(tmp_path, capsys):
    assert main(["tour", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "measured roofline" in out and "SIMULATED" in out
    for name in ("roofline.png", "gantt.png", "trace_gpu.json"):
        assert (tmp_path / name).stat().st_size > 1000
    assert json.loads((tmp_path / "trace_gpu.json").read_text())["traceEvents"]


def test_unknown_model_is_one_line_exit_2(tmp_path, capsys):
    assert main(["tour", "--quick", "--model", "gpt-5", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dfa: error: unknown model 'gpt-5'; valid:") and "\n" not in err
