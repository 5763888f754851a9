"""Grader-side answers of Lab 4 (instructor edition only: ``source/`` is never released or published).

Hidden tests import from here (``from answers import dma_schedule as _ds``); nothing in ``common`` holds these.

* ``dma_schedule(t)`` — the double-buffered output-stationary schedule: for every tile step s (loop order
  i0, j0, k0) a load of A then of B into buffer s % 2; after the last k0 of an output tile a store of C (same
  step) from buffer (output tiles stored so far) % 2. ``dma_bytes``: A = M K e ceil(N / tn),
  B = K N e ceil(M / tm), C = M N e.
* ``largest_square_tile(cap, e, multiple)`` — the largest T (a multiple of ``multiple``) with 6 T^2 e <= cap.
* ``simulate_cache(addrs, writes, config)`` — the stream through a cold ``LRUCache``, flushed.
* ``categorise(allocs, regions)`` — "other" outside every region, "KV cache" if never freed or freed after
  its region's end, else "activations".
* ``memory_ops_measured(ops, shape, dtype)`` — each op run on a contiguous tensor: 0 bytes if its result shares
  the input's storage (metadata only), else bytes read (every input tensor's nbytes) + bytes written (the result's).
* ``copy_bandwidth(n, b, t)`` — a copy reads and writes n b bytes: 2 n b / t bytes/s.
* ``kv_bytes(cfg, seq, batch, dtype, attention)`` — the KV formula with n_kv_heads (gqa), n_heads (mha) or 1 (mqa).
* ``lpu_chips(cfg, batch, context, kv_dtype)`` — ceil((fp16 weights + KV in kv_dtype) / one LPU's SRAM).
* ``PagedAllocator`` — blocks of ``block_size`` slots, lowest free id first, MemoryError when out.
* ``waste_summary(frame)`` — 1 - sum(used) / sum(allocated), for paged and contiguous.
* ``variant(name)`` — a seed per offering and learner (from the offering's secret), for fresh hidden inputs.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import os

import numpy as np
import pandas as pd

from common.cache import LRUCache, MatmulTiling
from common.chips import DTYPE_BYTES, canonical_dtype, get_chip

SALT = globals().get("GRADER_SALT") or os.environ.get("DFA_SALT", "local-dev-salt")
STUDENT = globals().get("GRADER_STUDENT", "local")


def variant(name: str, modulo: int = 2**31) -> int:
    """A seed for the hidden input ``name``: differs per offering (secret salt) and per learner."""
    return int(hashlib.sha256(f"{SALT}|{STUDENT}|lab4|{name}".encode()).hexdigest()[:12], 16) % modulo


# ---- Part 1 -------------------------------------------------------------------------------------------------
def dma_schedule(t: MatmulTiling) -> pd.DataFrame:
    """step, op, matrix, bytes, buffer of every DMA (see the module docstring)."""
    e, rows, out = t.elem_bytes, [], 0
    for s, (_i0, _j0, k0, m, n, k) in enumerate(t.tiles()):
        rows.append((s, "load", "A", m * k * e, s % 2))
        rows.append((s, "load", "B", k * n * e, s % 2))
        if k0 + k >= t.K:
            rows.append((s, "store", "C", m * n * e, out % 2))
            out += 1
    return pd.DataFrame(rows, columns=["step", "op", "matrix", "bytes", "buffer"])


def dma_bytes(t: MatmulTiling) -> dict[str, int]:
    e = t.elem_bytes
    a, b, c = t.M * t.K * e * -(-t.N // t.tn), t.K * t.N * e * -(-t.M // t.tm), t.M * t.N * e
    return {"A": a, "B": b, "C": c, "total": a + b + c}


def largest_square_tile(capacity_bytes: int, elem_bytes: int, multiple: int = 1) -> int:
    return math.isqrt(capacity_bytes // (6 * elem_bytes)) // multiple * multiple


def simulate_cache(addrs, writes, config):
    cache = LRUCache(config)
    cache.run(addrs, writes)
    return cache.flush()


# ---- Part 2 -------------------------------------------------------------------------------------------------
def categorise(allocs: pd.DataFrame, regions: pd.DataFrame) -> pd.Series:
    end = allocs["region"].map(dict(zip(regions["name"], regions["end_ms"], strict=True)))
    survives = allocs["t_free_ms"].isna() | (allocs["t_free_ms"] > end)
    labels = np.where(survives, "KV cache", "activations")
    return pd.Series(np.where(allocs["region"] == "", "other", labels), index=allocs.index)


def synthetic_allocs(seed: int, n: int = 60, steps: int = 5) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A made-up allocation table and its regions (steps of 10 ms), shuffled index: inputs no notebook shows."""
    rng = np.random.default_rng(seed)
    regions = pd.DataFrame({"name": ["prefill"] + [f"decode_{s}" for s in range(steps - 1)],
                            "start_ms": 10.0 * np.arange(steps) + 0.5, "end_ms": 10.0 * np.arange(steps) + 9.5})
    which = rng.integers(-1, steps, n)  # -1: outside every region
    start = np.where(which < 0, rng.uniform(0, 10 * steps, n), 10.0 * which + rng.uniform(0.6, 9.0, n))
    life = rng.choice([0.2, 3.0, 25.0, np.nan], n, p=[0.4, 0.2, 0.2, 0.2])
    return pd.DataFrame({"bytes": rng.integers(1, 1 << 20, n), "t_alloc_ms": start, "t_free_ms": start + life,
                         "region": [regions["name"].iloc[w] if w >= 0 else "" for w in which], "op": ["x"] * n},
                        index=rng.permutation(n) + 100), regions


def memory_ops_measured(ops: dict, shape: tuple[int, int], dtype) -> dict[str, int]:
    """Bytes each op of ``ops`` moves, found by running it (first principles: storage sharing, nbytes)."""
    import torch

    x = torch.zeros(shape, dtype=dtype)
    out = {}
    for name, op in ops.items():
        y = op(x)
        if y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
            out[name] = 0
        else:  # a copy reads every input it is given (cat: x twice) and writes the result
            out[name] = int(x.nbytes * (y.numel() // x.numel()) + y.nbytes)
    return out


def copy_bandwidth(n_elements: int, bytes_per_el: int, seconds: float) -> float:
    return float(2 * n_elements * bytes_per_el / seconds)


# ---- Part 3 -------------------------------------------------------------------------------------------------
def kv_bytes(cfg, seq: int, batch: int, dtype, attention: str = "gqa") -> int:
    """n_layers x 2 x heads x head_dim x seq x batch x bytes; heads = n_kv_heads (gqa), n_heads (mha), 1 (mqa)."""
    e = DTYPE_BYTES[canonical_dtype(str(dtype))]
    heads = {"gqa": cfg.n_kv_heads, "mha": cfg.n_heads, "mqa": 1}[attention]
    return int(cfg.n_layers * 2 * heads * cfg.head_dim * seq * batch * e)


def max_tokens_beside_weights(chip_name: str, cfg, chips: int, dtype) -> int:
    free = chips * get_chip(chip_name).main_memory.total_capacity - cfg.n_params * DTYPE_BYTES[canonical_dtype(dtype)]
    return max(0, int(free // kv_bytes(cfg, 1, 1, dtype)))


def lpu_chips(cfg, batch: int, context: int, kv_dtype="fp16") -> int:
    need = cfg.n_params * DTYPE_BYTES["fp16"] + kv_bytes(cfg, context, batch, kv_dtype)
    return int(math.ceil(need / get_chip("groq-lpu").main_memory.total_capacity))


# ---- Part 4 -------------------------------------------------------------------------------------------------
class PagedAllocator:
    """Fixed-size KV blocks, one block table per request, lowest free block id first."""

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks, self.block_size = num_blocks, block_size
        self._free = list(range(num_blocks))  # a heap
        self._tables: dict = {}
        self._tokens: dict = {}

    def _take(self, n: int) -> list[int]:
        if n > len(self._free):
            raise MemoryError(f"{n} blocks needed, {len(self._free)} free")
        return [heapq.heappop(self._free) for _ in range(n)]

    def allocate(self, req, n_tokens: int) -> list[int]:
        self._tables[req] = self._take(-(-n_tokens // self.block_size))
        self._tokens[req] = n_tokens
        return list(self._tables[req])

    def append(self, req, n_tokens: int = 1) -> list[int]:
        total = self._tokens[req] + n_tokens
        self._tables[req] += self._take(max(0, -(-total // self.block_size) - len(self._tables[req])))
        self._tokens[req] = total
        return list(self._tables[req])

    def free(self, req) -> None:
        for b in self._tables.pop(req):
            heapq.heappush(self._free, b)
        del self._tokens[req]

    def block_table(self, req) -> list[int]:
        return list(self._tables[req])

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    def tokens_used(self) -> int:
        return sum(self._tokens.values())

    def slots_allocated(self) -> int:
        return self.block_size * sum(len(t) for t in self._tables.values())


def waste_summary(frame: pd.DataFrame) -> dict:
    used = frame["used"].sum()
    return {"paged": float(1 - used / frame["paged"].sum()), "contiguous": float(1 - used / frame["contiguous"].sum())}
