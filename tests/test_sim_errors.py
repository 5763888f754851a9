"""Bad input to the simulators: one DFAError line naming the argument, its value and type, before torch loads."""
import subprocess
import sys

import numpy as np
import pytest

from common.cli import main
from common.errors import DFAError
from common.sim import args as sim_args


def _simulate_llm(**kw):
    from common.sim import simulate_llm
    args = {"model": "test", "backend": "gpu", "phase": "decode", "batch": 1, "seq": 8, **kw}
    return simulate_llm(args.pop("model"), args.pop("backend"), **args)


def _simulate_op(op="matmul", shape=(4, 4, 4), backend="gpu", **kw):
    from common.sim import simulate_op
    return simulate_op(op, shape, backend, **kw)


def _op_workload(op="matmul", shape=(4, 4, 4)):
    from common.sim.run import op_workload
    return op_workload(op, shape)


def _llm_step(model="test", phase="decode", batch=1, seq=8):
    from common.sim.workload import llm_step
    return llm_step(model, phase, batch, seq)


def _simulate(workload="llama-3.1-8b", backend="gpu", **kw):
    from common.sim import simulate
    return simulate(workload, backend, **kw)


@pytest.mark.parametrize("call, words", [
    (lambda: _simulate_llm(seq="1024"), ["seq", "'1024'", "(str)"]),
    (lambda: _simulate_llm(batch=1.5), ["batch", "1.5", "(float)"]),
    (lambda: _simulate_llm(batch=True), ["batch", "True", "(bool)"]),
    (lambda: _simulate_llm(batch=0), ["batch", "0"]),
    (lambda: _simulate_llm(model="nope"), ["unknown model 'nope'", "llama-3.1-8b"]),
    (lambda: _simulate_llm(model=3), ["model", "3 (int)", "llama-3.1-8b"]),
    (lambda: _simulate_llm(backend="xpu"), ["unknown backend 'xpu'", "gpu, lpu, spyre, tpu, wse"]),
    (lambda: _simulate_llm(backend=None), ["backend", "None (NoneType)", "gpu"]),
    (lambda: _simulate_llm(phase="train"), ["unknown phase 'train'", "decode, prefill"]),
    (lambda: _simulate_llm(seq=32), ["seq=32", "max_seq_len=32"]),
    (lambda: _simulate_llm(chips="2"), ["chips", "'2' (str)"]),
    (lambda: _simulate_llm(chip="wse-3"), ["'wse-3' is a wse", "h100-sxm"]),
    (lambda: _simulate_llm(backend="tpu", dtype="fp8"), ["tpu-v5e", "fp8", "bf16"]),
    (lambda: _simulate_op(shape=(4, 4)), ["matmul", "M K N", "(4, 4)"]),
    (lambda: _simulate_op(op="conv"), ["unknown op 'conv'", "matmul"]),
    (lambda: _simulate_op(shape=(4, -1, 4)), ["shape[1]", "-1 (int)"]),
    (lambda: _simulate_op(backend=2), ["backend", "2 (int)"]),
    (lambda: _op_workload(shape="4 4 4"), ["shape", "'4 4 4' (str)"]),
    (lambda: _op_workload(op="sdpa", shape=(1, 2, 3)), ["sdpa", "B H S D"]),
    (lambda: _op_workload(shape=()), ["at least one dimension"]),
    (lambda: _llm_step(seq="1024"), ["seq", "'1024' (str)"]),
    (lambda: _llm_step(phase=None), ["unknown phase None", "decode"]),
    (lambda: _simulate(), ["workload must be a Workload", "str", "simulate_llm"]),
    (lambda: _simulate(_op_workload(), backend="xpu"), ["unknown backend 'xpu'"]),
])
def test_bad_argument_is_one_dfa_error_line(call, words):
    with pytest.raises(DFAError) as exc:
        call()
    msg = str(exc.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, (w, msg)


def test_numpy_integers_are_accepted():
    # a sweep over np.arange(...) hands numpy integers: they are whole numbers, not a type error
    assert sim_args.positive_int("batch", np.int64(4)) == 4 and type(sim_args.positive_int("b", np.int32(2))) is int
    assert sim_args.op_shape("matmul", np.array([2, 3, 4])) == (2, 3, 4)


@pytest.mark.parametrize("argv, words", [
    (["simulate", "nope"], ["unknown model 'nope'", "llama-3.1-70b"]),
    (["simulate", "llama-3.1-8b", "--batch", "0"], ["batch must be a positive int, got 0"]),
    (["simulate", "test", "--seq", "40"], ["max_seq_len=32"]),
    (["simulate", "llama-3.1-8b", "--chips", "0"], ["chips must be a positive int"]),
    (["simulate", "llama-3.1-8b", "--backend", "gpu", "--chip", "h999"], ["unknown chip 'h999'", "h100-sxm"]),
    (["simulate", "llama-3.1-8b", "--backend", "gpu", "--chip", "wse-3"], ["'wse-3' is a wse"]),
    (["simulate", "llama-3.1-8b", "--backend", "tpu", "--dtype", "fp8"], ["no fp8 datapath"]),
    (["simulate", "llama-3.1-8b", "--stack", "nope"], ["unknown stack 'nope'", "groq-2024"]),
    (["simulate", "llama-3.1-8b", "--stack", "groq-2024"], ["needs one --backend"]),
    (["simulate", "llama-3.1-8b", "--backend", "gpu", "--stack", "groq-2024"], ["serves on the lpu backend", "vllm"]),
    (["op", "matmul", "--shape", "4", "4"], ["M K N"]),
    (["op", "sdpa", "--shape", "1", "0", "3", "4"], ["shape[1] must be a positive int, got 0"]),
])
def test_cli_error_is_one_line_exit_2(argv, words, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("dfa: error: ") and "\n" not in err, err
    assert captured.out == ""
    for w in words:
        assert w in err, (w, err)


def test_bad_model_fails_in_a_fresh_process_without_importing_torch():
    # the whole point: the answer comes before the seconds-long torch import. Checked by what was imported
    # (sys.modules), not by a wall-clock limit that a loaded machine would break.
    code = ("import sys; from common.cli import main; rc = main(['simulate', 'nope', '--backend', 'all']); "
            "print(rc, sorted(m for m in ('torch', 'pandas', 'numpy') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "2 []", proc.stdout
    err = proc.stderr.strip()
    assert err.startswith("dfa: error: unknown model 'nope'; valid:") and "\n" not in err, err
    # and the dfa command itself exits non-zero with that one line
    proc = subprocess.run([sys.executable, "-m", "common.cli", "simulate", "nope"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1


def test_sim_args_and_model_configs_import_no_torch():
    code = ("import sys, common.sim.args, common.models.config, common.cli.simulate; "
            "common.sim.args.llm_step('llama-3.1-70b', 'decode', 1, 4096); "
            "common.sim.args.chip_for('tpu', None, 'bf16'); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"


def test_checks_agree_with_the_policies():
    # sim_args repeats what the policies know (their names, chip kinds and default chips), to answer before
    # torch loads: each must match the policy class it stands for
    from common.sim import get_backend
    for name in sim_args.BACKEND_NAMES:
        cls = get_backend(name)
        assert (cls.name, cls.kind, cls.default_chip) == (name, name, sim_args.DEFAULT_CHIPS[name])
        assert sim_args.chip_for(name).name == cls().chip.name
