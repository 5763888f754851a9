"""Pointwise fusion (common.compile.fusion: classification, legality, the rewrite, the simulators) and Lab 3's
grader-side fusion pass (grouping, bytes saved), tested from its file course3_compile/source/lab3_compile/answers.py."""

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from common.compile.fusion import (
    check_group,
    classify,
    compute_ops,
    fuse_groups,
    fused_call_count,
    fusion_savings,
    op_by_op_workload,
)
from common.errors import DFAError
from common.graph.capture import capture_aten
from common.models import build_model, step_inputs

_SPEC = importlib.util.spec_from_file_location(
    "lab3_answers", Path(__file__).parents[1] / "course3_compile/source/lab3_compile/answers.py"
)
answers = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(answers)
find_groups, bytes_saved = answers.find_groups, answers.bytes_saved


def _chain(x):
    return torch.sigmoid(F.gelu(x * 2.0 + 1.0)) * x  # 5 pointwise ops; x itself is a placeholder


def _diamond(x, w):
    h = torch.relu(x @ w)  # mm -> relu: an epilogue
    y = h * 3.0  # y has two consumers: the reduction and the add
    s = y.sum(-1, keepdim=True)  # barrier (reduction)
    return torch.exp(y + s) - 1.0


def _names(gm, groups):
    return [set(g) for g in groups]


def test_classify_uses_torch_tags():
    gm = make_fx(_diamond)(torch.randn(4, 8), torch.randn(8, 6))
    kinds = {n.name: classify(n) for n in gm.graph.nodes}
    assert kinds["mm"] == "matmul" and kinds["relu"] == "pointwise" and kinds["sum_1"] == "other"
    assert kinds["x_1"] == "other"  # placeholders never fuse


def test_one_chain_is_one_group_with_numerics_unchanged():
    x = torch.randn(16, 32)
    gm = make_fx(_chain)(x)
    groups = find_groups(gm)
    assert groups == [["mul", "add", "gelu", "sigmoid", "mul_1"]]
    fused = fuse_groups(gm, groups)
    assert fused_call_count(fused) == 1 and compute_ops(fused) == []
    assert torch.equal(fused(x), gm(x)) and torch.allclose(fused(x), _chain(x))


def test_multi_consumer_intermediate_is_not_swallowed():
    x, w = torch.randn(4, 8), torch.randn(8, 6)
    gm = make_fx(_diamond)(x, w)
    groups = find_groups(gm)
    # mm -> relu -> mul ends at mul (read by sum and add); add -> exp -> sub is a second group
    assert _names(gm, groups) == [{"mm", "relu", "mul"}, {"add", "exp", "sub"}]
    fused = fuse_groups(gm, groups)
    assert torch.allclose(fused(x, w), _diamond(x, w))
    assert [n.name for n in fused.graph.nodes if n.op == "call_function"] == ["sum_1"]
    # swallowing mul into the second group is illegal: its value is also read by the reduction
    with pytest.raises(DFAError, match="read outside"):
        check_group(gm, ["relu", "mul", "add"])
    with pytest.raises(DFAError, match="read outside"):
        fuse_groups(gm, [["mul", "add", "exp"]])


def test_rejects_barriers_unknown_nodes_and_disconnected_groups():
    gm = make_fx(_diamond)(torch.randn(4, 8), torch.randn(8, 6))
    with pytest.raises(DFAError, match="barrier"):
        check_group(gm, ["mul", "sum_1"])
    with pytest.raises(DFAError, match="not in the graph"):
        check_group(gm, ["nope"])
    with pytest.raises(DFAError):
        check_group(gm, ["relu", "exp"])


def test_two_matmuls_never_share_a_group():
    def two(x, a, b):
        return torch.relu(x @ a) + torch.sigmoid(x @ b)

    x, a, b = torch.randn(4, 8), torch.randn(8, 8), torch.randn(8, 8)
    gm = make_fx(two)(x, a, b)
    groups = find_groups(gm)
    mm = {n.name for n in gm.graph.nodes if classify(n) == "matmul"}
    assert all(len(mm & set(g)) <= 1 for g in groups)
    assert len(groups) == 2
    assert torch.allclose(fuse_groups(gm, groups)(x, a, b), two(x, a, b))


@pytest.mark.parametrize("shape, dtype", [((16, 32), torch.float32), ((8, 100), torch.float16)])
def test_bytes_saved_is_two_bytes_per_interior_value(shape, dtype):
    x = torch.randn(*shape, dtype=dtype)
    gm = make_fx(_chain)(x)
    (g,) = find_groups(gm)
    interior = 4  # mul, add, gelu, sigmoid: written once and read once each when unfused; the last mul leaves
    assert bytes_saved(gm, g) == 2 * interior * x.numel() * x.element_size()


def test_decoder_groups_and_numerics():
    model = build_model("test")
    args, kwargs = step_inputs(model, "prefill", 2, 8)
    gm = capture_aten(model, args, kwargs, fake=False)
    groups = find_groups(gm)
    fused = fuse_groups(gm, groups)
    kinds = {n.name: classify(n) for n in gm.graph.nodes}
    assert {any(kinds[x] == "matmul" for x in g) for g in groups} == {True, False}  # epilogues and chains
    by_name = {n.name: n for n in gm.graph.nodes}
    assert any(  # SwiGLU's gate epilogue: a matmul whose value flows into silu
        [str(by_name[x].target.overloadpacket.__name__) for x in g if kinds[x] != "view"][:2] == ["mm", "silu"]
        for g in groups
    )
    state = dict(model.named_parameters(remove_duplicate=False))
    state.update(model.named_buffers(remove_duplicate=False))
    assert torch.equal(fused(state, args, kwargs), gm(state, args, kwargs))
    assert fused_call_count(fused) == len(groups)


def test_op_by_op_workload_has_one_segment_per_compute_op():
    gm = capture_aten(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU()), (torch.randn(4, 8),))
    wl = op_by_op_workload(gm)
    assert [s.name for s in wl.segments] == ["addmm", "gelu"]
    # the weight is still a parameter in its segment (its placeholder kept its kind)
    assert any(n.meta.get("kind") == "param" for n in wl.segments[0].gm.graph.nodes if n.op == "placeholder")


def test_fusion_savings_moves_intermediates_on_chip():
    class Chain(torch.nn.Module):
        def forward(self, x):
            return _chain(x)

    x = torch.randn(64, 1024, dtype=torch.float16)
    df = fusion_savings(capture_aten(Chain(), (x,)), ("gpu", "spyre")).set_index(["backend", "program"])
    nb = x.numel() * x.element_size()
    # op by op every one of the 5 ops reads its inputs and writes its output through HBM
    assert df.loc[("gpu", "op by op"), "bytes_HBM"] == pytest.approx(nb * (5 + 6))
    assert df.loc[("gpu", "fused"), "bytes_HBM"] < df.loc[("gpu", "op by op"), "bytes_HBM"]
    assert df.loc[("gpu", "fused"), "bytes_SMEM"] > 0
    assert df.loc[("spyre", "fused"), "bytes_LPDDR5"] < df.loc[("spyre", "op by op"), "bytes_LPDDR5"]
    assert df.loc[("gpu", "fused"), "time_s"] < df.loc[("gpu", "op by op"), "time_s"]
