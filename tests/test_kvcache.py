"""common.memory.kvcache: the KV formula on known configs, per-system limits from the catalog, the paged allocator."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from common.chips import DTYPE_BYTES, get_chip
from common.errors import DFAError
from common.memory.kvcache import (
    SYSTEM_CHIPS,
    chips_needed,
    kv_cache_bytes,
    kv_limits,
    onchip_bytes,
    replay,
    request_trace,
)
from common.models import get_config

# Lab 4's grader-side allocator and waste (the learner writes them; common does not hold them)
_ANSWERS = Path(__file__).resolve().parents[1] / "course4_memory/source/lab4_memory/answers.py"
_spec = importlib.util.spec_from_file_location("lab4_answers", _ANSWERS)
answers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(answers)
PagedAllocator, waste_summary = answers.PagedAllocator, answers.waste_summary


def test_kv_formula_llama_8b():
    # Llama-3.1-8B: 32 layers, 8 KV heads of 128: 32 * 2 * 8 * 128 * 2 B = 128 KiB per token in bf16.
    assert kv_cache_bytes("llama-3.1-8b", 1, 1, 2) == 131072
    assert kv_cache_bytes("llama-3.1-8b", 8192, 1, 2) == 1 << 30  # 1 GiB at 8k context
    assert kv_cache_bytes("llama-3.1-8b", 8192, 4, 4) == 8 << 30  # fp32, batch 4
    cfg = get_config("llama-3.1-70b")
    assert kv_cache_bytes(cfg, 1000, 3, 2) == cfg.kv_bytes_per_token(2) * 1000 * 3
    assert kv_cache_bytes("llama-2-7b", 1, 1, 2) == 32 * 2 * 32 * 128 * 2  # no GQA: 4x Llama-3.1-8B


def test_kv_formula_rejects_bad_input():
    with pytest.raises(DFAError, match="seq"):
        kv_cache_bytes("llama-3.1-8b", -1)
    with pytest.raises(DFAError, match="unknown model"):
        kv_cache_bytes("llama-9", 1)


def test_limits_follow_the_catalog():
    cfg = get_config("llama-3.1-8b")
    df = kv_limits(cfg, 8192).set_index("system")
    assert list(df.index) == list(SYSTEM_CHIPS)
    for system, row in df.iterrows():
        chip = get_chip(SYSTEM_CHIPS[system])
        e = DTYPE_BYTES[row["dtype"]]
        cap = chip.main_memory.total_capacity * row["chips"]
        free = cap - cfg.n_params * e
        assert row["max_tokens"] == int(free // (cfg.kv_bytes_per_token(e)))
        assert row["max_batch"] == int(free // (cfg.kv_bytes_per_token(e) * 8192))
        assert row["max_batch"] >= 1  # the chip count was chosen to hold at least one sequence
    assert df.loc["GPU", "chips"] == 1 and df.loc["Spyre", "chips"] == 1 and df.loc["WSE", "chips"] == 1
    assert df.loc["TPU", "chips"] == 2  # 16 GB of bf16 weights do not fit one 16 GB v5e
    lpu = get_chip("groq-lpu")
    assert df.loc["LPU", "chips"] == math.ceil((cfg.n_params * 2 + 8192 * 131072) / lpu.main_memory.capacity)
    # SRAM-only: the whole cache is on-chip; elsewhere only what one layer's K/V of the largest level holds
    assert df.loc["WSE", "onchip_context"] == df.loc["WSE", "max_tokens"]
    assert df.loc["GPU", "onchip_context"] == int(get_chip("h100-sxm").level("L2").capacity // (131072 / 32))


def test_spyre_lx_working_set_uses_reservations():
    s = get_chip("spyre")
    lx = s.level("LX")
    expect = (lx.capacity - s.fact("lx_reserved_bytes")) * (1 - s.fact("lx_backend_reserved_fraction")) * lx.count
    assert onchip_bytes(s) == pytest.approx(expect)
    assert onchip_bytes("tpu-v5e") == get_chip("tpu-v5e").level("VMEM").total_capacity


def test_chips_needed_grows_with_context():
    counts = [chips_needed("groq-lpu", "llama-3.1-8b", 1, c) for c in (1024, 16384, 131072)]
    assert counts == sorted(counts) and counts[-1] > counts[0]
    cfg = get_config("llama-3.1-8b")
    # the lab's lpu_chips equals the library only with an fp16 KV cache; an fp8 cache needs fewer chips
    assert [answers.lpu_chips(cfg, 1, c) for c in (1024, 16384, 131072)] == counts
    assert answers.lpu_chips(cfg, 8, 131072, "fp8") < chips_needed("groq-lpu", cfg, 8, 131072)
    assert answers.lpu_chips(cfg, 8, 131072, "fp8") != chips_needed("groq-lpu", cfg, 8, 131072, "fp8")
    tpu = [chips_needed("tpu-v5e", "llama-3.1-8b", 8, c) for c in (1024, 65536)]
    assert all(n & (n - 1) == 0 for n in tpu)  # tensor parallel: powers of two


def test_paged_allocator_hand_trace():
    a = PagedAllocator(num_blocks=8, block_size=4)
    assert a.allocate("a", 5) == [0, 1]
    assert a.allocate("b", 3) == [2]
    assert a.append("a", 3) == [0, 1]  # 8 tokens: both blocks exactly full
    assert a.append("a") == [0, 1, 3]  # the 9th token opens a block
    a.free("b")
    assert a.allocate("c", 9) == [2, 4, 5]  # the freed block is reused first
    assert (a.tokens_used(), a.slots_allocated(), a.num_free_blocks) == (18, 24, 2)
    assert a.block_table("c") == [2, 4, 5]
    with pytest.raises(MemoryError):
        a.allocate("d", 12)
    with pytest.raises(MemoryError, match="3 blocks needed"):
        a.append("c", 12)


def test_replay_fragmentation():
    trace = request_trace(24, seed=1, max_len=1024)
    assert trace.equals(request_trace(24, seed=1, max_len=1024))  # seeded
    assert ((trace["prompt"] + trace["output"]) <= 1024).all() and trace["prompt"].nunique() > 10
    frame = replay(trace, PagedAllocator, 16, 1024)
    live = frame["live"]
    assert (frame["paged"] >= frame["used"]).all()
    assert (frame["paged"] - frame["used"] < 16 * live.clip(lower=1)).all()  # < one block per request
    assert (frame["contiguous"] == 1024 * live).all()
    w = waste_summary(frame)
    assert 0 <= w["paged"] < w["contiguous"] < 1
    assert frame["live"].iloc[-1] == 0 and frame["used"].iloc[-1] == 0  # everyone finished and was freed
    bigger = waste_summary(replay(trace, PagedAllocator, 256, 1024))
    assert bigger["paged"] > w["paged"]  # larger blocks waste more
