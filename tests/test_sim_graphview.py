"""common.dataflow.graphview: the Spyre program read as a dataflow graph agrees with the program, counters and
events."""
import math

import matplotlib
import matplotlib.text
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from common.chips import get_chip
from common.dataflow import graphview as gv
from common.errors import DFAError
from common.sim import simulate, simulate_op
from common.sim.machines.spyre import stick_layout
from common.sim.pipeline import decompose
from common.sim.run import make_policy
from common.sim.workload import graph_workload

matplotlib.use("Agg")
STICK = int(get_chip("spyre").fact("stick_bytes"))


@pytest.fixture(scope="module")
def attn():
    return gv.attention_report("tiny-block", batch=2, seq=40)  # 80 rows: projections split over 20 cores


@pytest.fixture(scope="module")
def spilled():
    # a chain whose per-core slice does not fit the LX budget: spills both ways
    class Chain(torch.nn.Module):
        def forward(self, x):
            return torch.exp(x * 2 + 1)
    with FakeTensorMode():
        x = torch.empty(1024, 16384, dtype=torch.float16)
    return simulate(graph_workload(Chain(), (x,), dtype="fp16"), "spyre", lx_budget_bytes=500_000)


def test_every_op_sits_in_exactly_one_kernel(attn):
    p = attn.programs[0]
    ft = gv.fusion_table(p)
    assert ft["op"].is_unique and len(ft) == sum(len(k.ops) for k in p.kernels)
    decomposed = {o.name for o in p.stages["decompose"]}
    assert decomposed <= set(ft["op"])  # nothing the decompose stage produced was lost
    assert set(ft.loc[ft["inserted"], "aten"]) == {"spyre.restickify"}  # only the layout pass adds ops
    for k in p.kernels:
        assert ft.loc[ft["kernel"] == k.name, "op"].tolist() == [o.name for o in k.ops]
    # layer norm feeds Q, K and V, so the whole attention chain fuses into one bundle; the mask's arange is a
    # host fallback that breaks it
    assert ft.loc[ft["aten"] == "aten.arange", "kernel_kind"].tolist() == ["fallback"]
    assert ft.loc[ft["pattern"] == "attention0", "kernel"].nunique() == 1


@pytest.mark.parametrize("which", ["attn", "spilled"])
def test_dma_bytes_sum_to_the_counters(which, request):
    r = request.getfixturevalue(which)
    e = gv.dma_edges(r.programs[0])
    by = e.groupby("direction")["bytes"].sum()
    assert by.get("LPDDR5->LX", 0.0) == pytest.approx(r.counters["lpddr_to_lx_bytes"])
    assert by.get("LX->LPDDR5", 0.0) == pytest.approx(r.counters["lx_to_lpddr_bytes"])
    pcie = e.loc[e["kind"] == "pcie", "bytes"].sum()
    assert pcie == pytest.approx(r.counters["host_roundtrip_bytes"])
    spill_w = e.loc[(e["kind"] == "spill") & (e["direction"] == "LX->LPDDR5"), "bytes"].sum()
    assert spill_w == pytest.approx(r.counters["lx_spill_bytes"])
    assert (e["sticks"] == [math.ceil(b / STICK) for b in e["bytes"]]).all()
    # per kernel, the edges are the kernel's own LPDDR5 traffic
    for k in r.programs[0].kernels:
        if k.kind != "fallback":
            mine = e[(e["kernel"] == k.name) & (e["kind"] != "pcie")]["bytes"].sum()
            assert mine == pytest.approx(k.bytes["LPDDR5"])
    if which == "spilled":  # mul and add do not fit: each is written out and read back by its consumer
        assert r.counters["lx_spill_bytes"] > 0
        spills = e[e["kind"] == "spill"]
        assert set(spills.loc[spills["direction"] == "LX->LPDDR5", "tensor"]) == \
            set(spills.loc[spills["direction"] == "LPDDR5->LX", "tensor"]) == {"mul", "add"}
    else:  # the attention half fits LX: nothing spills, the only outputs are the mask and the result
        assert not (e["kind"] == "spill").any()


def test_restickify_edges_exactly_where_an_activation_is_read_transposed(attn):
    p = attn.programs[0]
    re_ = gv.restickify_edges(p)
    assert len(re_) == attn.counters["restickify_count"] == 1
    # an independent decompose of the same graph: activations (not weights) read through a transposed view
    gm = gv.attention_workload("tiny-block", batch=2, seq=40).segments[0].gm
    fresh = decompose(gm, make_policy("spyre"))
    needed = {(p_, o.name) for o in fresh for p_ in o.transposed_inputs if p_ not in o.param_inputs}
    got = {(row.source, c) for row in re_.itertuples() for c in row.consumers.split(", ")}
    assert got == needed
    for row in re_.itertuples():  # the layouts differ: sticks on the other dimension
        assert row.read_as[-1] == row.view_shape[-2] and row.read_as[-2] == row.view_shape[-1]
        assert row.read_as[-1] != row.view_shape[-1]
        assert math.prod(row.stored_shape) == math.prod(row.view_shape)  # the same elements, laid out anew
        assert row.sticks_in == stick_layout(row.stored_shape)["sticks"]  # K as its projection wrote it
        assert row.sticks_out == stick_layout(row.view_shape)["sticks"]
        assert row.sticks_out == math.prod(row.view_shape[:-1]) * math.ceil(row.view_shape[-1] * 2 / STICK)
    # nn.Linear weights are read transposed too, but were laid out at load time: no edge for them
    assert not any(s.startswith("state_") for s in re_["source"])


def test_core_work_sums_to_the_total(attn):
    cw = gv.core_work(attn)
    assert len(cw) == get_chip("spyre").compute_units
    ev = [e for e in attn.events if e.kind == "compute" and e.engine == "cores"]
    assert cw["flops"].sum() == pytest.approx(sum(e.detail["padded_flops"] for e in ev))
    assert cw["sticks"].sum() == pytest.approx(sum(e.detail["sticks"] for e in ev))
    assert cw["busy_s"].sum() == pytest.approx(sum(e.duration * e.detail["cores_used"] for e in ev))
    assert cw["busy_s"].max() == pytest.approx(sum(e.duration for e in ev))  # core 0 takes part in every op
    # 80 rows split 20 ways: cores 20..31 sit out the projections, so the load is uneven
    assert cw["busy_s"].iloc[-1] < cw["busy_s"].iloc[0]
    assert (cw["busy_s"].diff().dropna() <= 1e-18).all()  # non-increasing in the core index


def test_fewer_cores_option_shows_in_the_work_table():
    r = simulate_op("softmax", (1000, 64), "spyre", cores=8)
    cw = gv.core_work(r)
    assert (cw.loc[cw["core"] >= 8, "ops"] == 0).all() and (cw.loc[cw["core"] < 8, "ops"] == 1).all()


@pytest.mark.parametrize("shape", [(2, 40, 64), (3, 100), (65,)])
def test_trace_stick_counts_match_the_layout(shape):
    r = simulate_op("clone", shape, "spyre")
    p = r.programs[0]
    src = next(iter(p.kernels[0].inputs))
    t = gv.trace_tensor(p, src)
    rows = math.prod(shape[:-1])
    sticks = rows * math.ceil(shape[-1] * 2 / STICK)
    assert t["sticks"].iloc[0] == sticks and t["bytes"].iloc[0] == sticks * STICK
    assert t["where"].iloc[0] == "LPDDR5" and t["lpddr_offset"].iloc[0] == 0
    out = gv.trace_tensor(p, p.kernels[0].ops[0].name)
    assert out["step"].tolist() == ["produced in LX", "DMA LX -> LPDDR5"]
    assert (out["bytes_per_core"] * out["cores"] == out["bytes"]).all()


def test_trace_follows_k_through_the_restickify(attn):
    p = attn.programs[0]
    src = gv.restickify_edges(p)["source"].iloc[0]
    t = gv.trace_tensor(p, src)
    assert t["step"].iloc[0] == "produced in LX"
    assert any(s.startswith("restickify") for s in t["step"])
    assert (t["sticks"] == [math.ceil(b / STICK) for b in t["bytes"]]).all()
    with pytest.raises(DFAError, match="unknown tensor 'nope'"):
        gv.trace_tensor(p, "nope")


def test_arena_is_stick_aligned_and_disjoint(attn):
    a = gv.lpddr_arena(attn.programs[0])
    assert (a["offset"] % STICK == 0).all() and a["tensor"].is_unique
    ends = a["offset"] + [math.ceil(b / STICK) * STICK for b in a["bytes"]]
    assert (a["offset"].iloc[1:].to_numpy() == ends.iloc[:-1].to_numpy()).all()


def test_drawing_has_a_node_per_op_and_rejects_other_backends(attn):
    ax = gv.draw_program(attn.programs[0])
    n_ops = sum(len(k.ops) for k in attn.programs[0].kernels)
    nodes = [ln for ln in ax.lines if ln.get_markersize() == 15]  # op: circle, restickify: diamond, host: square
    assert len(nodes) == n_ops and "SIMULATED" in ax.get_title()
    assert {ln.get_marker() for ln in nodes} == {"o", "D", "s"}  # this program has all three: shape, not only fill
    # one arrow per edge: op -> op edges that stayed in LX, plus every DMA / PCIe transfer
    p = attn.programs[0]
    ops = {o.name for k in p.kernels for o in k.ops}
    in_lx = sum(pl["inputs_from"][src] == "LX" and src in ops
                for k in p.kernels if k.kind != "fallback" for pl in k.tiling["sdsc"] for src in pl["inputs_from"])
    arrows = [t for t in ax.texts if isinstance(t, matplotlib.text.Annotation)]
    assert len(arrows) == in_lx + len(gv.dma_edges(p))
    gpu = simulate_op("add", (64,), "gpu").programs[0]
    for fn in (gv.restickify_edges, gv.dma_edges, gv.fusion_table):
        with pytest.raises(DFAError, match="graphview reads spyre programs"):
            fn(gpu)
