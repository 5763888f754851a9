"""The grouped expert GEMM on the GPU simulator: row-tile quantisation, its floors, and the routed data movement."""
from __future__ import annotations

import pytest

from common.chips import DTYPE_BYTES, get_chip
from common.models import get_config
from common.models.moe import ExpectedLoad
from common.sim import simulate_llm

TILE = get_chip("h200").fact("grouped_gemm_tile_m")  # the grouped MoE GEMM's thread-block rows (catalog fact)


def _layer0(r, op):
    return [e for e in r.events if e.name.startswith("L0.") and e.kind == "compute" and op in e.detail.get("ops", ())]


@pytest.fixture(scope="module")
def runs():
    """Mixtral decode steps on one H200 (every expert resident, no all-to-all), batch -> report."""
    return {b: simulate_llm("mixtral-8x7b", "gpu", chip="h200", chips=1, batch=b, seq=256) for b in (1, 8, 64, 512)}


def test_grouped_gemm_never_beats_its_floors(runs):
    chip = get_chip("h200")
    for r in runs.values():
        bmm = [e for e in _layer0(r, "aten.bmm") if "row_tile_efficiency" in e.detail]
        assert bmm
        for e in bmm:
            assert e.duration >= e.floor * (1 - 1e-12)
            assert e.duration >= e.flops / chip.peak_flops[r.dtype] * (1 - 1e-12)  # compute floor at datasheet peak
            assert e.duration >= e.detail["HBM_s"] * (1 - 1e-12)  # every touched expert's weights, once


def test_row_efficiency_falls_with_tokens_per_expert(runs):
    effs, rates = [], []
    for b in sorted(runs, reverse=True):
        rows = ExpectedLoad.of(8, 2, b).rows  # the slowest expert's rows: the grouped GEMM's M
        e = [e for e in _layer0(runs[b], "aten.bmm") if "row_tile_efficiency" in e.detail][0]
        effs.append(e.detail["row_tile_efficiency"])
        rates.append(e.flops / e.duration)
        assert e.detail["row_tile_efficiency"] == pytest.approx(rows / (-(-rows // TILE) * TILE))
    assert all(a >= b for a, b in zip(effs, effs[1:], strict=False)) and effs[-1] < effs[0]
    assert effs[-1] == pytest.approx(1 / TILE)  # one token: one row of a TILE-row tile does useful work
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))  # achieved FLOP rate falls with the rows


def test_router_gather_and_scatter_are_their_own_events(runs):
    cfg, dt = get_config("mixtral-8x7b"), DTYPE_BYTES["bf16"]
    r = runs[64]
    d, n, rows = 8, 25, 64  # 64 tokens x k=2 over 8 experts: the slowest expert's 25 rows (test_sim_moe)
    router = [e for e in _layer0(r, "aten.mm") if e.flops == 2 * rows * cfg.d_model * cfg.n_experts]
    assert router, "router GEMM (N, C) x (C, E) missing"
    assert _layer0(r, "aten.topk")
    gather = [e for e in _layer0(r, "aten.index_select") if e.bytes.get("HBM", 0) > d * n * cfg.d_model * dt]
    assert len(gather) == 1  # read the N token rows, write the D x rows routed copies, read the int64 indices
    assert gather[0].bytes["HBM"] == (rows + d * n) * cfg.d_model * dt + d * n * 8
    assert gather[0].bound == "memory"
    scatter = _layer0(r, "aten.index_add")
    assert len(scatter) == 1 and scatter[0].bytes["HBM"] >= d * n * cfg.d_model * dt  # the weighted combine


def test_dense_gemms_get_no_row_quantisation():
    r = simulate_llm("llama-3.1-8b", "gpu", chip="h200", chips=1, batch=8, seq=256)
    mm = [e for e in r.events if e.kind == "compute" and "tiles" in e.detail]
    assert mm and not [e for e in mm if "row_tile_efficiency" in e.detail]
