"""The dfa command: help, the catalog table, the tour, and one-line errors with exit code 2."""
import json
import subprocess
import sys

import pytest

from common.cli import main, process_age_s

HEAVY = ("torch", "pandas", "matplotlib", "nbgrader")


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "chips" in out and "tour" in out and "simulate" in out and "autograde" in out


def test_parser_builds_without_heavy_imports():
    # `dfa --help` and argument errors must answer at once: building the parser may not import torch & co.
    # A fresh interpreter, because this test process has long imported them all.
    code = ("import sys; from common.cli import build_parser; build_parser(); import common; "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"building the parser imported {out.strip()}"


@pytest.mark.parametrize("argv", [["simulate", "--bogus"], ["simulate", "llama-3.1-8b", "--backend", "xpu"],
                                  ["op", "conv"], ["autograde"], ["frobnicate"]])
def test_argument_error_is_one_line_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "error:" in err and "\n" not in err and "--help" in err
    assert captured.out == ""


def test_every_cli_choice_is_simulated():
    # the choices come from common.sim.args (torch-free); each must be one the simulator can run
    from common.cli import simulate as sim_cli
    from common.sim import get_backend
    from common.sim.run import op_workload

    for name in sim_cli.BACKEND_NAMES:
        assert get_backend(name).name == name
    for op in sim_cli.OPS:
        shape = {"matmul": (2, 3, 4), "sdpa": (1, 2, 4, 8)}.get(op, (2, 8))
        assert any(n.op == "call_function" for n in op_workload(op, shape).segments[0].gm.graph.nodes)


def test_chips_table_fits_120_columns(capsys):
    assert main(["chips"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 120, max(lines, key=len)
    for name in ("t4", "h100-sxm", "tpu-v5e", "wse-3", "groq-lpu", "spyre"):
        assert sum(line.startswith(name + " ") for line in lines) == 2  # one row in each of the two tables
    assert "989.4" in out and "dfa chips --sources" in out


def test_chips_sources_lists_sources_only(capsys):
    assert main(["chips", "--sources"]) == 0
    out = capsys.readouterr().out
    for name in ("t4", "h100-sxm", "tpu-v5e", "wse-3", "groq-lpu", "spyre"):
        assert f"\n{name} (" in out
    assert "ESTIMATE dense_fp16_flops" in out and "cloud.google.com/tpu/docs/v5e" in out
    assert "Compute:" not in out and "Memory:" not in out  # not the table again
    assert max(len(line) for line in out.splitlines()) <= 120
    # every citation is a public document, not a file of some other checkout
    assert "shared/" not in out and "accelerators.md" not in out


def test_chips_json(capsys):
    assert main(["chips", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    h100 = next(r for r in rows if r["chip"] == "h100-sxm")
    assert h100["bf16_tflops"] == pytest.approx(989.4)


def test_process_age_counts_from_process_start():
    code = "import time; time.sleep(0.5); from common.cli import process_age_s; print(process_age_s())"
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    if sys.platform.startswith("linux"):
        assert 0.45 <= age < 60
    assert process_age_s() >= 0.0


def test_tour_writes_pngs_and_trace(tmp_path, capsys):
    assert main(["tour", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "measured roofline" in out and "SIMULATED" in out
    assert "s of wall time since dfa started:" in out.splitlines()[-1]
    for name in ("roofline.png", "gantt.png", "trace_gpu.json"):
        assert (tmp_path / name).stat().st_size > 1000
    assert json.loads((tmp_path / "trace_gpu.json").read_text())["traceEvents"]


def test_unknown_model_is_one_line_exit_2(tmp_path, capsys):
    assert main(["tour", "--quick", "--model", "gpt-5", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dfa: error: unknown model 'gpt-5'; valid:") and "\n" not in err


def test_simulate_prints_latency_and_the_deployment_warning(capsys):
    assert main(["simulate", "llama-3.1-70b", "--backend", "lpu", "--chips", "1200", "--phase", "decode"]) == 0
    out = capsys.readouterr().out
    assert "tpot_s" in out.splitlines()[1] and "ttft_s" not in out  # decode: time per output token
    warning = [line for line in out.splitlines() if "WARNING" in line]
    assert len(warning) == 1 and "1200" in warning[0] and "568" in warning[0]  # the record it exceeds
    assert main(["simulate", "llama-3.1-8b", "--backend", "gpu", "--phase", "prefill", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["ttft_s"] >= row["time_s"] > 0 and row["tpot_s"] is None and row["warnings"] == []
