"""FX capture at three levels and per-node costs, checked against hand-computed FLOPs and bytes."""
import dataclasses
import resource

import pytest
import torch

from common.errors import DFAError
from common.graph.capture import capture_aten, explain_dynamo, trace_torch
from common.graph.costs import annotate, node_table, summarize, touched_bytes
from common.models import TinyTransformerBlock, build_model, get_config, step_inputs


class MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def _aten_table(model, args, **kw):
    gm = capture_aten(model, args)
    annotate(gm, *gm.meta["example_inputs"])
    return gm, node_table(gm, **kw)


def test_matmul_flops_and_bytes_by_hand():
    m, k, n = 64, 32, 16
    _, df = _aten_table(MatMul(), (torch.randn(m, k), torch.randn(k, n)))
    (row,) = df.itertuples()
    assert row.op == "aten.mm"
    assert row.flops == 2 * m * k * n  # 65,536
    assert row.bytes_read == 4 * (m * k + k * n)  # fp32 operands read once
    assert row.bytes_written == 4 * m * n
    assert row.intensity == pytest.approx(2 * m * k * n / (4 * (m * k + k * n + m * n)))


def test_copy_moves_bytes_and_no_flops_views_move_nothing():
    class CopyT(torch.nn.Module):
        def forward(self, x):
            return x.t().contiguous()  # a view, then a real copy

    _, df = _aten_table(CopyT(), (torch.randn(128, 256),), include_views=True)
    views = df[df["op"] == "aten.t"]
    copies = df[df["op"] == "aten.clone"]
    assert views["bytes"].sum() == 0 and views["flops"].sum() == 0
    assert copies["bytes_read"].item() == 128 * 256 * 4 and copies["bytes_written"].item() == 128 * 256 * 4
    assert copies["flops"].item() == 0


def test_broadcast_view_counts_distinct_elements_only():
    x = torch.randn(1, 512).expand(64, 512)
    assert touched_bytes(x) == 512 * 4
    assert touched_bytes(torch.randn(64, 512)) == 64 * 512 * 4


def test_pointwise_and_softmax_flop_convention():
    class Soft(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x + 1.0, dim=-1)

    _, df = _aten_table(Soft(), (torch.randn(8, 100),))
    flops = dict(zip(df["op"], df["flops"], strict=True))
    assert flops["aten.add"] == 800  # one FLOP per output element
    assert flops["aten._softmax"] == 5 * 800  # max, sub, exp, sum, div per element


def test_torch_level_graph_of_the_block_with_bound_from_a_chip():
    block = TinyTransformerBlock(64, 4)
    gm = trace_torch(block)
    annotate(gm, torch.randn(2, 16, 64))
    df = node_table(gm, chip="t4", dtype="fp32")
    q = df[df["op"] == "linear (q_proj)"].iloc[0]
    assert q["flops"] == 2 * 2 * 16 * 64 * 64
    assert df.attrs["ridge"] == pytest.approx(8.1e12 / 320e9)
    assert set(df["bound"]) <= {"compute", "memory"}
    total = summarize(df)
    assert total["nodes"] == len(df) and total["flops"] == df["flops"].sum()


def test_symbolic_trace_failure_is_explained():
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # Python control flow on a tensor value
                return x * 2
            return x

    with pytest.raises(DFAError, match="symbolic_trace cannot trace DataDependent.*capture_aten.*explain_dynamo"):
        trace_torch(DataDependent())


def test_dynamo_reports_graph_breaks():
    class Breaky(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            if y.sum().item() > 0:  # .item() + data-dependent branch: a graph break
                y = y + 1
            return y.relu()

    report = explain_dynamo(Breaky(), torch.ones(4))
    assert report.graph_break_count >= 1
    assert report.graph_count == report.graph_break_count + 1
    assert report.break_reasons and "graph(s)" in str(report)


def test_70b_analysed_on_fake_tensors_without_allocating():
    # Full llama-3.1-70b width and vocabulary (two of its 80 layers): weights alone would be ~6 GB in bf16.
    cfg = dataclasses.replace(get_config("llama-3.1-70b"), n_layers=2)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model = build_model(cfg, fake=True, dtype=torch.bfloat16)
    args, kwargs = step_inputs(model, "decode", 1, 2048)
    gm = capture_aten(model, args, kwargs)
    annotate(gm, *gm.meta["example_inputs"])
    df = node_table(gm, chip="h100-sxm")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 1000
    # A decode step reads every weight once: matmul bytes ~ 2 bytes x matmul parameters (embedding is a gather).
    matmul_params = cfg.n_params - cfg.vocab_size * cfg.d_model - (2 * cfg.n_layers + 1) * cfg.d_model
    mm_bytes = df[df["op"] == "aten.mm"]["bytes_read"].sum()
    assert mm_bytes == pytest.approx(2 * matmul_params, rel=0.01)
    assert (df[df["op"] == "aten.mm"]["bound"] == "memory").all()  # GEMV at batch 1


def test_graph_drawing_colours_bound_ness(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    from common.graph.draw import COLORS, draw_graph

    gm = trace_torch(TinyTransformerBlock(64, 4))
    annotate(gm, torch.randn(2, 16, 64))
    ax = draw_graph(gm, ridge=1.0)  # a low ridge: the linears become compute-bound, the adds stay memory-bound
    faces = {matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches}
    assert {COLORS["compute"], COLORS["memory"], COLORS["input"]} <= faces
    ax.figure.savefig(tmp_path / "graph.png")
    assert (tmp_path / "graph.png").stat().st_size > 5000
