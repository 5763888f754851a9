"""common.memory.cache: hand-counted hits and misses, LRU vs associativity, write-back traffic; Lab 4's grader-side
DMA schedule and largest tile (course4_memory/source/lab4_memory/answers.py) against the library's kernel."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from common.errors import DFAError
from common.memory.cache import (
    CacheConfig,
    LRUCache,
    MatmulTiling,
    compulsory_bytes,
    fits,
    footprint_bytes,
    matmul_stream,
)

_ANSWERS = Path(__file__).resolve().parents[1] / "course4_memory/source/lab4_memory/answers.py"
_spec = importlib.util.spec_from_file_location("lab4_answers", _ANSWERS)
answers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(answers)


def simulate_cache(addrs, writes, config, *, flush=True):
    cache = LRUCache(config)
    cache.run(addrs, writes)
    return cache.flush() if flush else cache.stats


def test_direct_mapped_conflict_misses():
    # 64 B, 16 B lines, 1 way: 4 sets. Addresses 0 and 64 are lines 0 and 4: both map to set 0.
    s = simulate_cache([0, 64, 0, 64], None, CacheConfig(64, 16, 1), flush=False)
    assert (s.hits, s.misses, s.evictions) == (0, 4, 3)
    # Two ways, same capacity: 2 sets; lines 0 and 4 share set 0 but now both fit.
    s = simulate_cache([0, 64, 0, 64], None, CacheConfig(64, 16, 2), flush=False)
    assert (s.hits, s.misses, s.evictions) == (0 + 2, 2, 0)


def test_lru_replacement_order():
    # One set of two ways: A B A C B -> A is reused, so C evicts B (LRU), then B evicts A.
    c = LRUCache(CacheConfig(32, 16, 2))
    hits = [c.access(a) for a in (0, 16, 0, 32, 16)]
    assert hits == [False, False, True, False, False]
    assert (c.stats.misses, c.stats.evictions) == (4, 2)


def test_same_line_accesses_hit_and_line_granularity():
    s = simulate_cache(np.arange(0, 64, 4), None, CacheConfig(256, 64, 4), flush=False)
    assert (s.accesses, s.hits, s.misses, s.bytes_in) == (16, 15, 1, 64)


def test_write_back_write_allocate_traffic():
    cfg = CacheConfig(32, 16, 1)  # two sets
    c = LRUCache(cfg)
    assert c.access(0, write=True) is False  # write miss: the line is fetched first (write-allocate)
    assert c.stats.bytes_in == 16 and c.stats.bytes_out == 0  # nothing written off-chip yet (write-back)
    c.access(32)  # same set: evicts the dirty line -> one write-back
    assert (c.stats.writebacks, c.stats.bytes_out) == (1, 16)
    c.access(16, write=True)
    c.flush()
    assert (c.stats.writebacks, c.stats.bytes_out) == (2, 32)
    c.flush()  # clean now: a second flush writes nothing
    assert c.stats.bytes_out == 32


def test_run_collapsing_matches_access_by_access():
    rng = np.random.default_rng(3)
    addrs = rng.integers(0, 4096, 3000) // 4 * 4
    addrs = np.repeat(addrs, rng.integers(1, 4, addrs.size))  # runs on the same line
    writes = rng.random(addrs.size) < 0.3
    cfg = CacheConfig(512, 32, 2)
    slow = LRUCache(cfg)
    for a, w in zip(addrs.tolist(), writes.tolist(), strict=True):
        slow.access(a, w)
    slow.flush()
    fast = simulate_cache(addrs, writes, cfg)
    assert fast.as_dict() == slow.stats.as_dict()


def test_associativity_sweep_on_a_conflicting_stream():
    # Three lines 0, 256, 512 map to one set of a 256 B direct-mapped cache; round robin over them.
    stream = np.tile([0, 256, 512], 10)
    misses = {w: simulate_cache(stream, None, CacheConfig(256, 16, w), flush=False).misses for w in (1, 2, 4)}
    assert misses[1] == 30  # every access conflicts
    assert misses[2] == 30  # LRU with 2 ways and a cycle of 3: still every access misses
    assert misses[4] == 3  # all three fit: only compulsory misses


def test_bad_cache_config():
    with pytest.raises(DFAError, match="whole number of sets"):
        CacheConfig(100, 16, 2)
    with pytest.raises(DFAError, match="ways"):
        CacheConfig(64, 16, 0)


def test_matmul_stream_touches_every_element():
    t = MatmulTiling(6, 10, 8, 4, 4, 3, 2)  # edge tiles everywhere
    a, w = matmul_stream(t)
    a0, b0, c0 = t.bases
    assert a0 == 0 and b0 % 4096 == 0 and c0 % 4096 == 0 and b0 >= 6 * 8 * 2
    tiles_j = math.ceil(10 / 4)
    tiles_i = math.ceil(6 / 4)
    assert (~w).sum() == 6 * 8 * tiles_j + 8 * 10 * tiles_i  # A once per tile column, B once per tile row
    assert w.sum() == 6 * 10 and len(np.unique(a[w])) == 60  # C written once per element
    assert set(np.unique(a[~w])) == set((np.arange(48) * 2).tolist()) | set((b0 + np.arange(80) * 2).tolist())


def test_big_cache_moves_compulsory_bytes_plus_write_allocate():
    t = MatmulTiling(32, 32, 32, 8, 8, 8, 4)
    s = simulate_cache(*matmul_stream(t), CacheConfig(64 * 1024, 64, 1024 // 1))
    assert s.bytes_in == compulsory_bytes(t)  # A, B read once, C fetched once by write-allocate
    assert s.bytes_out == 32 * 32 * 4


def test_dma_bytes_formula_and_schedule():
    t = MatmulTiling(64, 48, 40, 16, 16, 8, 2)
    b = answers.dma_bytes(t)
    assert b["A"] == 64 * 40 * 2 * 3 and b["B"] == 40 * 48 * 2 * 4 and b["C"] == 64 * 48 * 2
    sched = answers.dma_schedule(t)
    assert sched.groupby("matrix")["bytes"].sum().to_dict() == {k: b[k] for k in "ABC"}
    assert len(sched[sched.op == "load"]) == 2 * 4 * 3 * 5
    assert sched[sched.op == "store"].shape[0] == 4 * 3
    loads = sched[sched.op == "load"]
    assert (loads["buffer"] == loads["step"] % 2).all()  # double buffering alternates
    edge = MatmulTiling(10, 10, 10, 4, 4, 4, 4)
    assert answers.dma_schedule(edge).groupby("matrix")["bytes"].sum().to_dict() == {
        k: v for k, v in answers.dma_bytes(edge).items() if k != "total"}
    assert answers.simulate_cache(*matmul_stream(edge), CacheConfig(1024, 64, 2)).as_dict() == simulate_cache(
        *matmul_stream(edge), CacheConfig(1024, 64, 2)).as_dict()


def test_footprint_fit_and_largest_tile():
    assert footprint_bytes(32, 32, 32, 4) == 2 * 3 * 32 * 32 * 4
    assert footprint_bytes(32, 32, 32, 4, double_buffer=False) == 3 * 32 * 32 * 4
    for cap, e in ((32768, 4), (65536, 2), (2 * 1024 * 1024, 2)):
        t = answers.largest_square_tile(cap, e)
        assert footprint_bytes(t, t, t, e) <= cap < footprint_bytes(t + 1, t + 1, t + 1, e)
    assert answers.largest_square_tile(32768, 4, multiple=16) == 32
    assert fits(MatmulTiling(64, 64, 64, 32, 32, 32, 4), 32768)
    assert not fits(MatmulTiling(64, 64, 64, 64, 64, 64, 4), 32768)
    assert answers.largest_square_tile(16, 4, multiple=16) == 0
