"""torch.compile backends: numerics vs eager, strict mode, planted faults, and the CLI's JSON contract."""
import json

import pytest
import torch

import common.sim as sim
from common.cli import main
from common.errors import DFAError
from common.models import TinyTransformerBlock, build_model, step_inputs
from common.sim import faults as F
from common.sim.compile import CompiledGraph


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2)
        self.head = torch.nn.Linear(8, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))  # (B, 8, H, W)
        x = torch.relu(self.conv2(x))  # (B, 8, H', W')
        return self.head(x.mean(dim=(2, 3)))  # (B, 10)


BACKENDS = list(sim.BACKEND_NAMES)


def _rel_err(out, ref):
    return ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


def _models():
    torch.manual_seed(0)
    lm = build_model("test")
    return {
        "decoder": (lm, (torch.randint(0, 64, (2, 8)),), {}),
        "block": (TinyTransformerBlock(32, 4), (torch.randn(2, 8, 32),), {}),
        "convnet": (ConvNet(), (torch.randn(2, 3, 16, 16),), {}),
    }


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model", ["decoder", "block", "convnet"])
def test_compiled_model_matches_eager_within_the_backends_tolerance(backend, model):
    torch._dynamo.reset()
    m, args, kwargs = _models()[model]
    ref = m(*args, **kwargs)
    out = torch.compile(m, backend=f"dfa_{backend}")(*args, **kwargs)
    tol = sim.get_backend(backend).rtol_vs_eager
    assert out.shape == ref.shape
    assert _rel_err(out, ref) <= tol
    report = sim.last_report(backend)
    assert report.time_s > 0 and report.backend == backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_with_kv_cache_updates_the_cache_in_place(backend):
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = build_model("test")
    args, kwargs = step_inputs(m, "decode", 1, 6)
    kwargs["cache"].k[0].normal_()
    kwargs["cache"].v[0].normal_()
    ref_args, ref_kwargs = step_inputs(m, "decode", 1, 6)
    ref_kwargs["cache"].k[0].copy_(kwargs["cache"].k[0])
    ref_kwargs["cache"].v[0].copy_(kwargs["cache"].v[0])
    ref = m(*ref_args, **ref_kwargs)
    out = torch.compile(m, backend=f"dfa_{backend}")(*args, **kwargs)
    tol = sim.get_backend(backend).rtol_vs_eager
    assert _rel_err(out, ref) <= tol
    # the new token's K was written at position 6 by the compiled program, as in eager
    assert _rel_err(kwargs["cache"].k[1][:, :, 6], ref_kwargs["cache"].k[1][:, :, 6]) <= max(tol, 1e-6)


def _clone_graph(n):
    x = torch.randn(n, dtype=torch.float16) + 2.0  # no zeros, so a missed element is visible
    gm = torch.fx.symbolic_trace(Clone())
    return gm, x


class Clone(torch.nn.Module):
    def forward(self, x):
        return x.clone()


@pytest.mark.parametrize("n, wrong", [(63, 0), (64, 0), (65, 1), (128, 0), (130, 2)])
def test_stick_copy_fault_misses_exactly_the_tail_beyond_whole_sticks(n, wrong):
    gm, x = _clone_graph(n)
    compiled = CompiledGraph("gpu", gm, [x], {"faults": [F.Fault("stick_copy")]})
    out = compiled(x)
    bad = (out != x).nonzero().flatten().tolist()
    assert len(bad) == wrong
    assert bad == list(range(n - wrong, n))  # the elements past the last whole 64-element stick
    clean = CompiledGraph("gpu", gm, [x], {})(x)
    assert torch.equal(clean, x)


def test_dma_timeout_and_deadlock_fail_like_a_runtime():
    gm = torch.fx.symbolic_trace(TinyTransformerBlock(32, 4))
    x = torch.randn(1, 4, 32)
    with pytest.raises(F.SimTimeoutError, match="did not complete within 1.0 s"):
        CompiledGraph("gpu", gm, [x], {"faults": [F.Fault("dma_timeout", seed=3)]})(x)
    with pytest.raises(F.DeadlockError, match="cyclic wait k"):
        CompiledGraph("gpu", gm, [x], {"faults": [F.Fault("deadlock", seed=1)]})(x)


def test_fp16_overflow_fault_gives_nan_and_seeds_pick_different_nodes():
    class Scores(torch.nn.Module):
        def forward(self, s):
            return torch.softmax(s, dim=-1)

    x = torch.randn(4, 32) * 40  # logits above ~11 overflow exp() in fp16 without the max subtraction
    sm = torch.fx.symbolic_trace(Scores())
    assert torch.isfinite(CompiledGraph("gpu", sm, [x], {})(x)).all()
    out = CompiledGraph("gpu", sm, [x], {"faults": [F.Fault("fp16_overflow")]})(x)
    assert torch.isnan(out).any()
    gm = torch.fx.symbolic_trace(TinyTransformerBlock(32, 4))
    xb = torch.randn(1, 4, 32)
    a = CompiledGraph("gpu", gm, [xb], {"faults": [F.Fault("dma_timeout", seed=0)]}).planted
    b = CompiledGraph("gpu", gm, [xb], {"faults": [F.Fault("dma_timeout", seed=5)]}).planted
    assert [n for _, n in a] != [n for _, n in b]


def test_layout_mismatch_gives_wrong_values_with_the_right_shape():
    gm = torch.fx.symbolic_trace(TinyTransformerBlock(32, 4))
    x = torch.randn(1, 8, 32)
    ref = gm(x)
    out = CompiledGraph("gpu", gm, [x], {"faults": [F.Fault("layout_mismatch")]})(x)
    assert out.shape == ref.shape and not torch.allclose(out, ref, atol=1e-3)


def test_unknown_fault_and_fault_without_target_are_clear_errors():
    with pytest.raises(DFAError, match="unknown fault 'bitflip'; valid: stick_copy"):
        F.Fault("bitflip")
    gm, x = _clone_graph(8)
    with pytest.raises(DFAError, match="fault 'fp16_overflow' has nowhere to go"):
        CompiledGraph("gpu", gm, [x], {"faults": [F.Fault("fp16_overflow")]})


def test_simulate_json_contract(capsys):
    if len(BACKENDS) < len(sim.BACKEND_NAMES):
        pytest.skip("--backend all needs every backend module")
    assert main(["simulate", "tiny-block", "--backend", "all", "--json", "--seq", "16"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["backend"] for r in rows] == list(sim.BACKEND_NAMES)
    for r in rows:
        for key in ("backend", "chip", "chips", "phase", "batch", "seq", "dtype", "time_s", "tokens_per_s",
                    "tokens_per_s_per_user", "bottleneck", "flops", "bytes"):
            assert key in r, key
        assert isinstance(r["bytes"], dict) and r["time_s"] > 0


def test_op_json_reports_tiling(capsys):
    assert main(["op", "matmul", "--shape", "256", "512", "128", "--backend", "gpu", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["flops"] == 2 * 256 * 512 * 128
    assert row["tiling"][0]["tiles"] == 2 * 1


@pytest.mark.parametrize("argv, message", [
    (["simulate", "tiny-block", "--backend", "gpu", "--chip", "h300", "--seq", "16"], "unknown chip 'h300'"),
    (["simulate", "tiny-block", "--batch", "0"], "batch must be a positive int, got 0"),
    (["simulate", "llama-3.1-70b", "--backend", "gpu", "--chip", "t4"], "needs 141.4 GB"),
    (["simulate", "not-a-model", "--backend", "gpu"], "unknown model 'not-a-model'"),
    (["op", "matmul", "--shape", "4", "4", "--backend", "gpu"], "matmul takes shape M K N (3 dimensions)"),
])
def test_cli_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dfa: error:") and message in err and "\n" not in err
