"""Per-op LPDDR5 <-> LX traffic of a simulated Spyre step: sums, padding, tiling, working sets, sweeps."""
import importlib.util
import itertools
import math
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from common.chips import get_chip
from common.errors import DFAError
from common.memory.traffic import (
    default_lx_budget,
    spyre_step,
    step_totals,
    sweep,
    traffic_table,
    working_set_check,
    workload_step,
)
from common.sim.machines.spyre import SpyrePolicy, stick_layout
from common.sim.run import op_workload
from common.sim.workload import graph_workload

# The Deep Dive's grader-side formulas (the learner writes them; common does not hold them): the simulated
# counters must obey them.
_ANSWERS = Path(__file__).resolve().parents[1] / "course4_memory/source/deepdive4_spyre/answers.py"
_spec = importlib.util.spec_from_file_location("deepdive4_answers", _ANSWERS)
_answers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_answers)
padding_bytes, largest_tile_rows = _answers.padding_bytes, _answers.largest_tile_rows
chain_lpddr_bytes, matmul_tile_traffic = _answers.chain_lpddr_bytes, _answers.tile_traffic

SPYRE = get_chip("spyre")
STICK = int(SPYRE.fact("stick_bytes"))
COUNTERS = ("lpddr_to_lx_bytes", "lx_to_lpddr_bytes", "lx_bytes", "lx_spill_bytes", "host_roundtrip_bytes")


def _chain(rows, cols, **options):
    class Chain(torch.nn.Module):
        def forward(self, x):
            return torch.exp(x * 2 + 1)  # two full-size intermediates: mul, add
    with FakeTensorMode():
        x = torch.empty(rows, cols, dtype=torch.float16)
    return workload_step(graph_workload(Chain(), (x,), dtype="fp16"), **options)


@pytest.mark.parametrize("options", [{}, {"batch": 64, "seq": 512, "lx_budget_bytes": 32768}])
def test_per_op_rows_sum_to_the_counters(options):
    model = "tiny-block" if not options else "qwen2.5-0.5b"
    step = spyre_step(model, **options)
    t = traffic_table(step)
    tot = step_totals(t)
    for key in COUNTERS:
        assert tot[key] == pytest.approx(step.report.counters[key], rel=1e-12), key
    assert tot["lpddr_bytes"] == pytest.approx(step.report.bytes["LPDDR5"], rel=1e-12) and tot["lpddr_bytes"] > 0
    # rows expanded by repeat are the core events of the timeline, in order
    expanded = []
    for seg, repeat in zip(step.segments, step.repeats, strict=True):
        rows = t[(t["segment"] == seg) & (t["kind"] != "fallback")]
        expanded += [(r.lpddr_read, r.lpddr_write) for _ in range(repeat) for r in rows.itertuples()]
    events = [(e.detail["lpddr_read"], e.detail["lpddr_write"]) for e in step.report.events
              if e.engine == "cores" and e.kind == "compute"]
    assert expanded == events
    assert (t["lpddr_padding"] <= t["lpddr_read"] + t["lpddr_write"]).all() and (t["lpddr_padding"] >= 0).all()
    assert {"q_proj", "down_proj"} <= set(t["weights"])  # the weight each op reads is named


@pytest.mark.parametrize("shape, elem", [((3, 100), 2), ((65,), 2), ((7, 5, 130), 1), ((4, 64), 2), ((9, 33), 4)])
def test_padding_formula_matches_the_stick_layout(shape, elem):
    dtype = {1: "int8", 2: "fp16", 4: "fp32"}[elem]
    assert padding_bytes(shape, elem, STICK) == stick_layout(shape, dtype)["padding_bytes"]


@pytest.mark.parametrize("rows, cols", [(3, 100), (64, 1000), (5, 64)])
def test_misaligned_copy_moves_padding_both_ways(rows, cols):
    class Clone(torch.nn.Module):
        def forward(self, x):
            return x.clone()
    with FakeTensorMode():
        x = torch.empty(rows, cols, dtype=torch.float16)
    t = traffic_table(workload_step(graph_workload(Clone(), (x,), dtype="fp16")))
    pad = rows * (math.ceil(cols * 2 / STICK) * STICK // 2 - cols) * 2  # from the catalog's stick bytes
    assert t["lpddr_padding"].sum() == pytest.approx(2 * pad)  # read in, written back
    assert t["lpddr_read"].sum() == rows * math.ceil(cols * 2 / STICK) * STICK


@pytest.mark.parametrize("head_dim", [16, 64, 72])
def test_kv_cache_read_carries_head_dim_padding(head_dim):
    seq, kv_heads = 64, 2  # tiny-block: 2 KV heads; the decode step reads seq + 1 cached positions
    t = traffic_table(spyre_step("tiny-block", seq=seq, head_dim=head_dim))
    layer = t[(t["segment"] == "layer") & (t["op"] == "aten.bmm")]
    pv = layer.iloc[-1]  # probabilities @ V: V comes straight from the cache in LPDDR5
    assert pv["b_from"] == "LPDDR5" and pv["a_from"] == "LX"
    v_pad = padding_bytes((kv_heads, seq + 1, head_dim), 2, STICK)
    assert pv["lpddr_padding"] == pytest.approx(v_pad)
    assert pv["b_bytes"] == kv_heads * (seq + 1) * math.ceil(head_dim * 2 / STICK) * STICK
    assert (v_pad == 0) == (head_dim % (STICK // 2) == 0)


@pytest.mark.parametrize("shape, budget, coarse", [((4096, 2048, 1024), None, 1), ((4096, 2048, 1024), 100_000, 1),
                                                   ((4096, 4096, 4096), 300_000, 1), ((2048, 1000, 3000), 200_000, 1),
                                                   ((4096, 2048, 1024), None, 8)])
def test_matmul_traffic_follows_the_tile_schedule(shape, budget, coarse):
    opts = {"coarse_tiles": coarse} | ({"lx_budget_bytes": budget} if budget else {})
    step = workload_step(op_workload("matmul", shape, "fp16"), **opts)
    r = traffic_table(step).iloc[0]
    assert r["lpddr_read"] == matmul_tile_traffic(r["a_bytes"], r["b_bytes"], r["mc"], r["nc"], r["tm"], r["tn"])
    assert r["ws_bytes_per_core"] <= step.lx_budget_bytes
    if coarse == 1 and r["tm"] < r["mc"]:  # rows limited by LX, not by coarse tiling: the largest that fits
        assert r["tm"] == largest_tile_rows(step.lx_budget_bytes, int(r["tn"]), STICK // 2, 2)
    if coarse > 1:
        assert r["m_tiles"] >= coarse


def test_default_budget_is_derived_from_the_catalog():
    lx = SPYRE.level("LX").capacity
    assert default_lx_budget() == SpyrePolicy().lx_budget
    assert default_lx_budget() < lx - SPYRE.fact("lx_reserved_bytes") and default_lx_budget() % STICK == 0
    assert largest_tile_rows(1000, 64, 64, 2) == 0  # not even one row of a 64-wide tile fits 1000 bytes


@pytest.mark.parametrize("rows, cols, budget", [(4096, 16384, None), (64, 1024, None), (1024, 16384, 500_000),
                                                (1000, 640, 32768)])
def test_working_set_over_budget_spills_and_costs_lpddr_traffic(rows, cols, budget):
    step = _chain(rows, cols, **({"lx_budget_bytes": budget} if budget else {}))
    t = traffic_table(step)
    nbytes = rows * cols * 2
    cores = int(t["cores"].iloc[0])
    tot = step_totals(t)
    assert tot["lpddr_bytes"] == chain_lpddr_bytes(nbytes, 2, cores, step.lx_budget_bytes)
    ws = working_set_check(step, t)
    if nbytes / cores > step.lx_budget_bytes:
        assert tot["lx_spill_bytes"] == 2 * nbytes and tot["spill_read_bytes"] == 2 * nbytes
        assert ws["action"].tolist() == ["output spilled", "output spilled; reads a spilled input",
                                         "reads a spilled input"]  # mul, add, exp
        assert ws["extra_lpddr_bytes"].sum() == tot["lpddr_bytes"] - 2 * nbytes
    else:
        assert ws.empty and tot["lx_spill_bytes"] == 0


def test_decode_step_with_a_small_lx_budget_retiles_spills_and_moves_more():
    base = spyre_step("qwen2.5-0.5b", batch=64, seq=512)
    tight = spyre_step("qwen2.5-0.5b", batch=64, seq=512, lx_budget_bytes=32768)
    tb, tt = step_totals(traffic_table(base)), step_totals(traffic_table(tight))
    assert tt["lpddr_bytes"] > tb["lpddr_bytes"] and tt["lx_spill_bytes"] > tb["lx_spill_bytes"] == 0
    ws = working_set_check(tight)
    # matmuls retile; the softmax runs over row tiles (torch-spyre's softmax_row_tiling) instead of streaming
    # its intermediates through LPDDR5
    assert ws["action"].str.contains("retiled").any() and not ws["action"].str.contains("streamed").any()
    plans = [p for prog in tight.report.programs for k in prog.kernels for p in k.tiling.get("sdsc", [])]
    assert any(p.get("row_tiles", 1) > 1 and p["op"] == "aten._softmax" for p in plans)
    extra = (ws["extra_lpddr_bytes"] * ws["repeat"]).sum()
    assert extra == pytest.approx(tt["reread_bytes"] + tt["lx_spill_bytes"] + tt["spill_read_bytes"])
    assert (ws["lx_capacity_bytes"] == SPYRE.level("LX").capacity).all()


def test_sweeps_are_monotonic_and_respect_the_floor():
    ct = sweep("qwen2.5-0.5b", "coarse_tiles", (1, 2, 4, 8), batch=256, seq=256)
    lp = ct["lpddr_bytes"].tolist()
    assert all(a < b for a, b in itertools.pairwise(lp))  # finer row tiling re-reads the weights
    flat = sweep("qwen2.5-0.5b", "coarse_tiles", (1, 8), batch=1, seq=256)
    assert flat["lpddr_bytes"].nunique() == 1  # batch 1: one output row per core, nothing to re-read
    bud = sweep("qwen2.5-0.5b", "lx_budget_bytes", (32768, 131072, 524288, default_lx_budget()), batch=64, seq=512)
    lp = bud["lpddr_bytes"].tolist()
    assert all(a >= b for a, b in itertools.pairwise(lp)) and lp[0] > lp[-1]
    hd = sweep("tiny-block", "head_dim", (56, 64, 72, 128), seq=64)
    pad = dict(zip(hd["head_dim"], hd["lpddr_padding_bytes"], strict=True))
    assert pad[72] > pad[64] and pad[56] > pad[64] and pad[72] > pad[128]
    logical = (hd["lpddr_bytes"] - hd["lpddr_padding_bytes"]).tolist()
    assert all(a < b for a, b in itertools.pairwise(logical))  # useful bytes grow with the head size
    for df in (ct, flat, bud, hd):
        assert (df["time_s"] >= df["floor_s"]).all() and (df["floor_s"] > 0).all()


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(DFAError, match="unknown sweep knob 'tiles'; valid: batch, coarse_tiles"):
        sweep("tiny-block", "tiles", (1,))
    with pytest.raises(DFAError, match="head_dim must be an even integer"):
        spyre_step("tiny-block", head_dim=15)
    with pytest.raises(DFAError, match="needs 2 Spyre cards"):
        spyre_step("llama-3.1-70b", seq=128)
