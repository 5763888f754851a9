"""common.compile.lowering: the simulated Spyre compiler's stages as tables, and option comparisons."""
import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from common.chips import get_chip
from common.compile import lowering as L
from common.errors import DFAError
from common.models.block import TinyTransformerBlock
from common.sim import simulate, simulate_llm, simulate_op
from common.sim.machines.spyre import stick_layout
from common.sim.workload import graph_workload


def _block(d_model, heads, ffn, batch, seq):
    blk = TinyTransformerBlock(d_model, heads, ffn).half()
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(batch, seq, d_model, dtype=torch.float16)
    return graph_workload(blk, (x,), dtype="fp16", name=f"block{d_model}")


@pytest.fixture(scope="module")
def small():  # everything fits LX at the default budget
    return _block(128, 2, 512, 2, 64)


@pytest.fixture(scope="module")
def big():  # 4 MB activations: a tighter LX budget or fewer cores makes it spill
    return _block(512, 8, 2048, 4, 256)


def _bundle_ops(program):
    return [o.name for k in program.kernels if k.kind != "fallback" for o in k.ops]


def test_stages_in_pipeline_order_and_every_op_in_every_table(small):
    program = L.lower(small).programs[0]
    tables = L.stage_tables(program)
    assert tuple(tables) == L.STAGES == ("decompose", "fuse", "layout", "restickify", "span", "work", "lx")
    aten_ops = [o.name for o in program.stages["decompose"]]
    assert list(tables["decompose"]["op"]) == aten_ops
    assert sorted(tables["fuse"]["op"]) == sorted(aten_ops)  # each aten op in exactly one bundle
    # fusion keeps program order inside a bundle; kernels are listed in execution order
    order = {name: i for i, name in enumerate(aten_ops)}
    for _, g in tables["fuse"].groupby("kernel", sort=False):
        assert list(g["position"]) == list(range(len(g)))
        assert [order[o] for o in g["op"]] == sorted(order[o] for o in g["op"])
    assert list(dict.fromkeys(tables["fuse"]["kernel"])) == [k.name for k in program.kernels]
    # from layout on, every device op (restickify copies included) has a row, in bundle order
    device = _bundle_ops(program)
    for stage in ("span", "work", "lx"):
        assert list(tables[stage]["op"]) == device, stage
    assert set(device) <= set(tables["layout"]["tensor"])
    fallbacks = {o.name for k in program.kernels if k.kind == "fallback" for o in k.ops}
    assert fallbacks and not fallbacks & set(device)  # the mask's arange runs on the host
    assert "restickify" not in " ".join(tables["decompose"]["aten"])  # inserted after decompose


def test_restickify_exactly_where_the_stick_dimension_changes(small):
    report = L.lower(small)
    rs = L.restickify_table(report)
    edges = L.edge_table(small.segments[0].gm)
    transposed = edges[[len(s) >= 2 and st[-1] != 1 and s[-1] > 1
                        for s, st in zip(edges["shape"], edges["strides"], strict=True)]]
    expected = {(p, c) for p, c, w in zip(transposed["producer"], transposed["consumer"], transposed["is_weight"],
                                          strict=True) if not w}
    inserted = rs[rs["restickify"] != ""]
    assert set(zip(inserted["producer"], inserted["consumer"], strict=True)) == expected and expected  # K^T
    weights = rs[rs["restickify"] == ""]
    assert len(weights) == 6 and set(weights["producer"]) == set(transposed[transposed["is_weight"]]["producer"])
    program = report.programs[0]
    for _, row in inserted.iterrows():
        stored, read = row["stored_shape"], row["read_shape"]
        assert stored[:-2] == read[:-2] and stored[-2:] == read[-2:][::-1]  # the last two dims swap
        kernel = next(k for k in program.kernels if k.name == row["kernel"])
        names = [o.name for o in kernel.ops]
        assert names.index(row["restickify"]) == row["position"] < names.index(row["consumer"])
        assert row["bytes"] == stick_layout(read)["device_bytes"]
    assert report.counters["restickify_count"] == inserted["restickify"].nunique()


def test_layout_is_the_stick_layout_of_every_tensor(small):
    lay = L.layout_table(L.lower(small))
    stick = get_chip("spyre").fact("stick_bytes")
    fp16 = lay[lay["elements_per_stick"] == stick // 2]
    assert len(fp16) >= len(lay) - 1  # all but the int64 arange (stored as int32)
    for _, row in fp16.iterrows():
        ref = stick_layout(row["shape"])
        assert row["device_shape"] == ref["device_shape"] and row["sticks"] == ref["sticks"]
        assert row["device_bytes"] == row["sticks"] * stick and row["padding_bytes"] == ref["padding_bytes"]


def test_span_by_hand_and_bounds(small):
    # (4 sticks, 2, 128 rows, 64): rows split 2 x 16 keeps all 4 stick planes in every core's span
    assert L.span_bytes((4, 2, 128, 64), {1: 2, 2: 16}, 2) == (1 + 3 * 16384 + 7 * 64 + 63) * 2
    assert L.span_bytes((4, 2, 128, 64), {0: 4}, 2) == 4 * 2 * 128 * 64 * 2 // 4  # split the outermost dim
    assert L.span_bytes((4, 2, 128, 64), {}, 2) == 4 * 2 * 128 * 64 * 2
    span = L.span_table(L.lower(small))
    work = L.work_table(L.lower(small))
    assert (span["span_bytes_per_core"] <= span["device_bytes"]).all()
    assert (span["span_bytes_per_core"] * work["cores_used"] >= span["device_bytes"]).all()


def test_halving_cores_halves_the_work_per_core(small):
    w32, w16 = L.work_table(L.lower(small)), L.work_table(L.lower(small, cores=16))
    assert list(w32["op"]) == list(w16["op"])
    for w, cores in ((w32, 32), (w16, 16)):
        assert (w["cores_used"] <= cores).all()
        assert w["flops_per_core"].mul(w["cores_used"]).tolist() == pytest.approx(w["padded_flops"].tolist())
        for dims, split, used in zip(w["dims"], w["split"], w["cores_used"], strict=True):
            parts = dict(p.split("/") for p in split.split()) if split != "none" else {}
            assert math.prod(int(v) for v in parts.values()) == used
            assert all(dict(dims)[label] % int(v) == 0 for label, v in parts.items())  # equal sticks per core
    full = w32["cores_used"] == 32  # every dimension of this block is a power of two
    assert full.all() and (w16["cores_used"] == 16).all()
    assert w16["flops_per_core"].tolist() == pytest.approx((2 * w32["flops_per_core"]).tolist())
    assert w16["sticks_per_core"].tolist() == pytest.approx((2 * w32["sticks_per_core"]).tolist())
    # 12 cores: no power-of-two dimension has a divisor of 12 above 8, so 4 cores idle
    assert (L.work_table(L.lower(small, cores=12))["cores_used"] == 8).all()


def test_work_division_uses_the_order_that_fills_most_cores():
    # rows 3 x 32: taking 3 first leaves 10 cores and 8 of the 32 rows' divisors -> 24; 32 first -> all 32
    plan = L.work_table(simulate_op("add", (3, 32, 64), "spyre"))
    assert plan["dims"][0] == (("d0", 3), ("d1", 32), ("stick", 1)) and plan["split"][0] == "d1/32"


def test_smaller_lx_budget_never_reduces_lpddr_traffic(big):
    lx = get_chip("spyre").level("LX").capacity
    budgets = [int(lx), None, 1_000_000, 500_000, 250_000, 131_072, 65_536, 32_768]
    traffic, spills = [], []
    for b in budgets:
        c = L.lower(big, lx_budget_bytes=b).counters
        traffic.append(c["lpddr_to_lx_bytes"] + c["lx_to_lpddr_bytes"])
        spills.append(c["lx_spill_bytes"])
    assert all(a <= b for a, b in zip(traffic, traffic[1:], strict=False)), traffic
    assert traffic[-1] > traffic[1] and spills[-1] > spills[1] == 0  # it does spill in the end


def test_lx_plan_stays_in_budget_at_the_default():
    blk = _block(512, 8, 2048, 4, 256)
    lx = L.lx_table(L.lower(blk))
    assert (lx["lx_bytes_per_core"] <= lx["lx_budget_bytes"]).all() and (lx["spill_bytes"] == 0).all()
    for _, row in lx.iterrows():  # an output kept in LX is read from LX by its consumers
        if row["output_to"] == "LX":
            assert all(f"{row['op']}:LX" in r for r in lx["inputs_from"] if f"{row['op']}:" in r)


def test_compare_options_lines_up_timeline_and_counters(big):
    cmp = L.compare_options(big, {}, {"cores": 8})
    assert cmp.options_after == {"cores": 8} and cmp.before.counters and cmp.after.counters
    for name in L.COUNTERS:
        assert cmp.counters.loc[name, "before"] == cmp.before.counters[name]
        assert cmp.counters.loc[name, "change"] == cmp.after.counters[name] - cmp.before.counters[name]
    assert cmp.counters.loc["time_s", "after"] == cmp.after.time_s > cmp.before.time_s
    # per-core slices 4x larger: more LPDDR5 traffic, never less
    assert cmp.counters.loc["lpddr_to_lx_bytes", "after"] >= cmp.counters.loc["lpddr_to_lx_bytes", "before"]
    tl = cmp.timeline
    assert len(tl) == len(L.timeline(cmp.before)) == len(L.timeline(cmp.after))
    assert (tl["cores_used_after"] <= 8).all() and (tl["cores_used_before"] == 32).all()
    # a compute-bound matmul on 8 of 32 cores takes 4x longer
    mm = tl[tl["event"].str.contains("addmm") & (tl["bound_after"] == "compute") & (tl["bound_before"] == "compute")]
    assert len(mm) and mm["speedup"].tolist() == pytest.approx([0.25] * len(mm))


def test_times_respect_their_floors(big):
    for opts in ({}, {"cores": 4}, {"lx_budget_bytes": 65_536}, {"coarse_tiles": 4}):
        report = L.lower(big, **opts)
        assert all(e.duration >= e.floor * (1 - 1e-12) for e in report.events)
        tl = L.timeline(report)
        assert (tl["duration_s"] >= tl["floor_s"] * (1 - 1e-12)).all() and (tl["floor_s"] > 0).any()


def test_bad_inputs_name_the_valid_choices(small):
    with pytest.raises(DFAError, match="unknown Spyre compiler option 'core'; valid: coarse_tiles, cores"):
        L.compare_options(small, {}, {"core": 8})
    with pytest.raises(DFAError, match="cores must be an integer in 1..32, got 0"):
        L.lower(small, cores=0)
    with pytest.raises(DFAError, match="lowering tables read Spyre programs; got a 'gpu' program"):
        L.work_table(simulate(small, "gpu"))
    llm = simulate_llm("test", "spyre", phase="prefill", batch=1, seq=8)  # prologue, layer, epilogue
    with pytest.raises(DFAError, match="this report has 3 programs"):
        L.work_table(llm)
    assert len(L.work_table(llm.programs[1])) > 0


def test_stick_map_puts_each_row_in_its_own_sticks():
    ids = L.stick_map((3, 130))
    assert ids.shape == (3, 130) and int(ids.max()) + 1 == stick_layout((3, 130))["sticks"] == 9
    assert ids[0, :64].eq(0).all() and ids[1, 0] == 1 and ids[0, 64] == 3 and ids[2, 129] == 8
