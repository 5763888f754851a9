"""common.compile.tools: capturing AOTAutograd graphs through a user backend, op names, decompositions,
backend timing records and reading Inductor's kernel names (no Inductor compile here: it takes tens of seconds
on a 2-core machine; the Course 3 notebook runs one). Lab 3's grader-side answers (op counts, kernel names) are
tested from their file, course3_compile/source/lab3_compile/answers.py."""

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from common.compile.tools import (
    BackendTiming,
    DecoderFFN,
    capture_with,
    code_language,
    decomposition_graphs,
    kernel_source,
    ops_in_kernel_name,
    time_backends,
)
from common.errors import DFAError
from common.models import build_model

_SPEC = importlib.util.spec_from_file_location(
    "lab3_answers", Path(__file__).parents[1] / "course3_compile/source/lab3_compile/answers.py"
)
answers = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(answers)
count_ops, fused_kernels = answers.count_ops, answers.fused_kernels


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU())


def test_backend_sees_forward_and_backward_aten_graphs():
    seen = []

    def backend(gm, example_inputs):
        seen.append(len(example_inputs))
        return gm.forward

    model, x = _model(), torch.randn(4, 8)
    got = capture_with(backend, model, x)
    assert len(got.dynamo) == 1 and len(got.forward) == 1 and len(got.backward) == 1
    assert len(seen) == 2  # the user backend compiled the forward and the backward graph
    fwd, bwd = count_ops(got.forward[0]), count_ops(got.backward[0])
    assert fwd["aten.native_layer_norm"] == 1 and fwd["aten.gelu"] == 1
    assert bwd["aten.native_layer_norm_backward"] == 1 and bwd["aten.gelu_backward"] == 1
    assert torch.allclose(got.output, model(x))
    assert model[0].weight.grad is not None  # backward really ran through the compiled graphs
    table = got.table(count_ops)
    assert set(table.columns) == {"dynamo_0", "forward_0", "backward_0"}
    assert table.loc["aten.gelu", "forward_0"] == 1


def test_inductor_decompositions_expand_layer_norm_and_gelu():
    got = capture_with(
        lambda gm, ex: gm.forward, _model(), torch.randn(4, 8), backward=False, decompositions="inductor"
    )
    ops = count_ops(got.forward[0])
    assert "aten.native_layer_norm" not in ops and "aten.gelu" not in ops
    assert ops["aten.rsqrt"] >= 1 and ops["aten.erf"] == 1 and got.backward == []


def test_backend_must_return_a_callable():
    with pytest.raises(Exception, match="not a callable"):
        capture_with(lambda gm, ex: None, _model(), torch.randn(4, 8), backward=False)


def decomposition_counts(fn, args, tables=("none", "core", "inductor")):
    return {k: count_ops(gm) for k, gm in decomposition_graphs(fn, args, tables).items()}


def test_decomposition_graphs_and_functionalization():
    x = torch.randn(4, 16)
    silu = decomposition_counts(lambda t: F.silu(t), (x,))
    assert silu["none"] == {"aten.silu": 1}
    assert sum(silu["core"].values()) >= 2 and "aten.silu" not in silu["inductor"]

    def inplace(t):
        y = t * 2
        y.add_(1)
        return torch.relu_(y)

    ops = decomposition_counts(inplace, (x,), tables=("none",))["none"]
    assert ops == {"aten.mul": 1, "aten.add": 1, "aten.relu": 1}  # functionalized: no add_ / relu_
    with pytest.raises(DFAError, match="valid"):
        decomposition_counts(inplace, (x,), tables=("xla",))


def test_time_backends_records_first_call_and_steady_state():
    model, x = _model().eval(), torch.randn(4, 8)
    df, res = time_backends(model, (x,), ("eager", "aot_eager"), min_run_time=0.01, warmup=1)
    assert list(df["backend"]) == ["eager", "aot_eager"]
    assert (df["median_s"] > 0).all() and df.loc[0, "speedup_vs_eager"] == pytest.approx(1.0)
    assert isinstance(res["aot_eager"], BackendTiming) and res["aot_eager"].code == ""
    t = BackendTiming("x", first_call_s=2.0, median_s=0.5, iqr_s=0.0)
    assert t.compile_s == 1.5


def test_decoder_ffn_shares_the_layer_weights():
    layer = build_model("test").layers[0]
    x = torch.randn(2, 4, 32)
    ffn = DecoderFFN(layer)
    y = layer.mlp(layer.post_attention_layernorm(x))
    assert torch.allclose(ffn(x), x + y)
    assert torch.allclose(DecoderFFN(layer, residual=False)(x), y)


CODE = """
cpp_fused_add_mean_mul_pow_rsqrt_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
extern "C" void kernel(const float* in_ptr0, float* out_ptr0) {}
''')


cpp_fused__unsafe_view_mul_silu_1 = async_compile.cpp_pybinding(['float*'], r'''
extern "C" void kernel(float* in_out_ptr0) {}
''')
triton_per_fused__softmax_native_layer_norm_2 = async_compile.triton('triton_', '''
def triton_(in_ptr0): pass
''')
"""


def test_fused_kernels_from_inductor_kernel_names():
    got = fused_kernels(CODE)
    assert got == {
        "cpp_fused_add_mean_mul_pow_rsqrt_0": ["aten.add", "aten.mean", "aten.mul", "aten.pow", "aten.rsqrt"],
        "cpp_fused__unsafe_view_mul_silu_1": ["aten._unsafe_view", "aten.mul", "aten.silu"],
        "triton_per_fused__softmax_native_layer_norm_2": ["aten._softmax", "aten.native_layer_norm"],
    }
    assert ops_in_kernel_name("extern_kernels.mm") == []
    assert "in_out_ptr0" in kernel_source(CODE, "cpp_fused__unsafe_view_mul_silu_1")
    assert answers.kernel_names(CODE + "cpp_fused__softmax_native_layer_norm_2(buf0)\n") == list(got)
    with pytest.raises(DFAError, match="no kernel"):
        kernel_source(CODE, "cpp_fused_gelu_9")


def test_backward_needs_an_output_that_requires_grad():
    class NoParams(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2

    with pytest.raises(DFAError, match="requires grad"):
        capture_with(lambda gm, ex: gm.forward, NoParams(), torch.randn(3))
    got = capture_with(lambda gm, ex: gm.forward, NoParams(), torch.randn(3), backward=False)
    assert count_ops(got.forward[0]) == {"aten.relu": 1, "aten.mul": 1}


# ---- the GPU path against a faked torch.cuda (no GPU needed) ---
TRITON_CODE = """
triton_red_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_0 = async_compile.triton('triton_red_fused_0', '''
import triton
@triton.jit
def triton_red_fused_0(in_out_ptr0, xnumel, r0_numel):
    tmp0 = tl.load(in_out_ptr0)
''', device_str='cuda')
triton_poi_fused_mul_silu_1 = async_compile.triton('triton_poi_fused_mul_silu_1', '''
def triton_poi_fused_mul_silu_1(in_ptr0): pass
''', device_str='cuda')
"""


def test_kernel_source_and_language_of_triton_code():
    """On a GPU Inductor writes Triton: each kernel's source ends at its closing quotes and device_str."""
    src = kernel_source(TRITON_CODE, "triton_red_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_0")
    assert "tl.load" in src and src.rstrip().endswith("device_str='cuda')") and "silu" not in src
    assert answers.kernel_names(TRITON_CODE) == list(fused_kernels(TRITON_CODE))
    assert ops_in_kernel_name("triton_poi_fused_mul_silu_1") == ["aten.mul", "aten.silu"]
    assert (code_language(TRITON_CODE), code_language(CODE.split("triton_per")[0]), code_language("x = 1")) == (
        "Triton", "C++", "none")


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch sees one CUDA device; ``torch.cuda.synchronize`` logs each wait."""
    log: list = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: log.append(("sync", str(d))))
    return log


def test_time_backends_on_cuda_syncs_around_the_first_call_and_every_clock_read(fake_cuda):
    calls = []

    def work(x):
        fake_cuda.append("call")
        return x + 1

    df, _ = time_backends(work, (torch.ones(2),), ("eager",), min_run_time=0.001, warmup=1, device="cuda",
                          after_call=lambda: calls.append(1))
    log = fake_cuda
    assert log[:3] == [("sync", "cuda"), "call", ("sync", "cuda")]  # the first call, bracketed
    assert log[3:5] == ["call", ("sync", "cuda")]  # warm-up drained before the timed blocks
    assert log[-1] == ("sync", "cuda") and log.count(("sync", "cuda")) >= 4  # every clock read waits (bench)
    assert len(calls) == log.count("call") >= 3 and df.loc[0, "median_s"] > 0  # after_call after every call


def test_time_backends_on_the_cpu_never_syncs_cuda(fake_cuda):
    time_backends(lambda x: x * 2, (torch.ones(2),), ("eager",), min_run_time=0.001, warmup=0)
    assert fake_cuda == []
