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
* ``longest_context(model, backend, chips, batch, dtype, step)`` — the largest multiple of ``step`` (at most the
  model's max_seq_len - 1, the decode step's new token included) whose decode step the simulator places on
  ``chips`` chips: ``llm_step`` at that context and the backend policy's own ``fit`` (bisection; fit grows with
  the context). ``context_cases(seed)`` — the learner's variant of the question (the longest_context probe
  builds the same cases from its seed: the copy there must stay in step with this one).
* ``PagedAllocator`` — blocks of ``block_size`` slots, lowest free id first, MemoryError when out;
  ``waste_summary(frame)`` — 1 - sum(used) / sum(allocated), for paged and contiguous. Both answer the lab's
  ungraded *Going further* part (no hidden test uses them); tests/test_kvcache.py replays traces with them.
* ``LANDSCAPE_VOCAB`` — per landscape cell (attribute, system): the terms that name its mechanism and those that
  contradict it (another system's memory, a hardware cache on a compiler-managed memory, run-time scheduling on
  the LPU); ``LANDSCAPE_SHOWN`` — the sentences of the notebook that describe the systems (a row must not copy
  six words in a row from them); ``scales_out(text)`` — whether a KV-cache row says that more context takes more
  chips or wafers (a row must, where the learner's own Part 4 sweep added chips).
* ``synthetic_allocs(seed)`` — a made-up allocation table and its regions; the categorise probe builds the same
  one from the learner's seed (the copy there must stay in step with this one).
"""

from __future__ import annotations

import heapq
import math
import re

import numpy as np
import pandas as pd

from common.chips import DTYPE_BYTES, canonical_dtype, get_chip
from common.memory.cache import LRUCache, MatmulTiling


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


def kv_line(tokens, live_bytes) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through the points (numpy's own fit)."""
    slope, intercept = np.polyfit(np.asarray(tokens, dtype=float), np.asarray(live_bytes, dtype=float), 1)
    return float(slope), float(intercept)


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


def longest_context(model: str, backend: str, chips: int, batch: int, dtype=None, step: int = 256) -> int:
    """Largest multiple of ``step`` whose decode step of ``batch`` sequences ``chips`` chips of ``backend`` hold."""
    from common.errors import DFAError
    from common.models import get_config
    from common.sim.run import make_policy
    from common.sim.workload import llm_step

    dt = canonical_dtype(dtype or make_policy(backend, None, None, None).dtype)

    def fits(seq: int) -> bool:
        try:
            make_policy(backend, None, chips, dt).fit(llm_step(model, "decode", batch, seq, dt))
        except DFAError:
            return False
        return True

    lo, hi = 0, (get_config(model).max_seq_len - 1) // step
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid * step) else (lo, mid - 1)
    return lo * step


def context_cases(seed: int) -> list[tuple]:
    """(model, backend, chips, batch, dtype, step) per case: wafers packed whole layers at a time, a model whose
    tied embedding a spatial compiler stores twice, a 70B pipeline, and one HBM or LPDDR machine."""
    import random

    rng = random.Random(seed)
    other = rng.choice(("gpu", "tpu", "spyre"))
    return [("llama-3.1-8b", "wse", rng.choice((3, 4)), rng.choice((12, 16, 24, 32, 48)), None, 256),
            ("qwen2.5-0.5b", "lpu", rng.randint(7, 10), rng.choice((4, 8, 16)), None, 128),
            ("llama-3.1-70b", "lpu", rng.randint(700, 1000), rng.choice((4, 8)), rng.choice((None, "int8")), 512),
            ("llama-3.1-8b", other, rng.choice({"gpu": (1, 2), "tpu": (4, 8), "spyre": (1, 2)}[other]),
             rng.choice((16, 32, 64)), None, 256)]


# ---- Going further (ungraded): the allocator behind tests/test_kvcache.py's replays ----------------------------
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


# ---- Landscape rows ---------------------------------------------------------------------------------------
def _no(term: str) -> str:
    """``term``, unless a negation stands right before it ("no HBM", "without a cache", "not at run time")."""
    negations = ("no ", "not ", "non-", "nor ", "without ", "without a ", "never ", "instead of ", "before ", "no a ")
    return "".join(f"(?<!{n})" for n in negations) + rf"\b(?:{term})\b"


# Memory names and features that belong to one system only: in another system's row they contradict it.
_OWN = {"GPU": (r"shared memory", r"SMEM", r"L1", r"L2"), "TPU": (r"VMEM",), "WSE": (r"wafers?", r"on-wafer"),
        "LPU": (), "Spyre": (r"LPDDR\w*", r"LX", r"sticks?")}
_FOREIGN = {s: tuple(_no(t) for o, terms in _OWN.items() if o != s for t in terms) for s in _OWN}
_OFFCHIP = tuple(_no(t) for t in (r"HBM\w*", r"DRAM", r"off[- ]chip (memory|DRAM)", r"spill\w* to"))
_HW_CACHE = tuple(_no(t) for t in (r"hardware[- ]managed", r"LRU", r"hardware caches?", r"caches? decides?"))
_SCALE = (r"(more|extra|second|another|adds?|added|adding|additional|several|many|hundreds of|\d+)\W+(\w+\W+)?"
          r"(chips?|wafers?|cards?|GPUs?|H100s?|TPUs?|LPUs?|devices?)\b", r"\bshard", r"scales? out",
          r"(chips?|wafers?|devices?) (grow|multiply|increase)", r"spread (over|across)")

LANDSCAPE_VOCAB = {
    "on-chip memory managed by": {
        "GPU": ((r"hardware", r"caches?", r"LRU", r"\bL[12]\b", r"shared memory", r"SMEM", r"programmer",
                 r"CUDA", r"kernel"),
                _FOREIGN["GPU"] + (_no(r"compile[- ]time schedul\w*"), r"\bno (hardware )?caches?\b")),
        "TPU": ((r"compiler", r"XLA", r"software", r"DMA", r"stag(e|es|ed|ing)", r"ahead of time"),
                _FOREIGN["TPU"] + _HW_CACHE),
        "WSE": ((r"compiler", r"software", r"plac(e|es|ed|ing|ement)", r"rout(e|es|ed|ing)", r"program\w*",
                 r"SDK", r"static\w*", r"kernel", r"ahead of time"),
                _FOREIGN["WSE"] + _HW_CACHE + _OFFCHIP),
        "LPU": ((r"compiler", r"compile[- ]time", r"static\w*", r"schedul\w*", r"software", r"deterministic",
                 r"ahead of time"),
                _FOREIGN["LPU"] + _HW_CACHE + _OFFCHIP + (_no(r"run[- ]?time"), _no(r"dynamic\w*"))),
        "Spyre": ((r"compiler", r"software", r"DMA", r"plan(s|ned|ning)?", r"explicit\w*", r"ahead of time"),
                  _FOREIGN["Spyre"] + _HW_CACHE + (_no(r"HBM\w*"),)),
    },
    "KV-cache strategy": {
        "GPU": ((r"HBM", r"pag(e|es|ed|ing)", r"blocks?", r"vLLM", r"device memory", r"DRAM"),
                _FOREIGN["GPU"] + (_no(r"SRAM[- ]only"), _no(r"on[- ]chip SRAM"))),
        "TPU": ((r"HBM", r"pag(e|es|ed|ing)", r"VMEM", r"blocks?"),
                _FOREIGN["TPU"] + (_no(r"SRAM[- ]only"),)),
        "WSE": ((r"SRAM", r"on[- ]?wafer", r"on[- ]?chip", r"wafers?", r"\bPEs?\b", r"next to", r"beside"),
                _FOREIGN["WSE"] + _OFFCHIP),
        "LPU": ((r"SRAM", r"on[- ]?chip", r"(across|over|among|between|through) (the |all |many |its )?(\w+ )?chips",
                 r"pipeline", *_SCALE),
                _FOREIGN["LPU"] + _OFFCHIP),
        "Spyre": ((r"LPDDR", r"DRAM", r"\bLX\b", r"stream\w*", r"sticks?", r"DMA"),
                  _FOREIGN["Spyre"] + (_no(r"HBM\w*"), _no(r"SRAM[- ]only"), _no(r"fits? (in|into) (the )?LX"))),
    },
}


def scales_out(text: str) -> bool:
    """Does the row say that a longer context takes more chips, wafers or cards?"""
    return any(re.search(p, str(text), re.IGNORECASE) for p in _SCALE)


# What the notebook itself says about each system (its header, the vendors' paragraphs, the notes on the
# figures, the wrap-up, the catalog rows of the map): keep in step with the lab's prose.
LANDSCAPE_SHOWN = (
    "A **GPU** puts hardware caches (L1, L2) in front of HBM and also gives the programmer a scratchpad (shared "
    "memory). A **TPU** stages every fusion's operands from HBM into its software-managed VMEM. **IBM Spyre** has no "
    "cache at all: the compiler DMAs tiles, laid out in 128-byte sticks, between LPDDR5 and each core's 2 MB LX "
    "scratchpad. The **Cerebras WSE** and the **Groq LPU** have no off-chip memory for the model: weights and KV "
    "cache must fit in on-chip SRAM, spread over enough PEs or chips.",
    "GPUs have both (L1/L2 caches and shared memory); the TPU's VMEM, Spyre's LX, a WSE PE's 48 KB and the LPU's "
    "SRAM are software-managed: there the formula *is* the traffic.",
    "The KV cache sits beside the weights in the memory the model runs from: HBM on an H100 (80 GB) or a TPU v5e "
    "(16 GB per chip), on-wafer SRAM on a WSE-3 (~44 GB per wafer), the SRAM of every Groq LPU in the pipeline "
    "(~230 MB per chip), LPDDR5 on a Spyre card (128 GB).",
    "The Spyre row is the odd one: 128 GB of LPDDR5 holds a huge cache, but every decode step streams it through "
    "32 × 2 MB of LX (less the compiler's reservations) at 204.8 GB/s. The WSE and LPU rows are the opposite: there "
    "is no slower memory to spill to, so the cache must fit in SRAM — beside 16 GB of weights, a wafer holds a few "
    "hundred thousand tokens and a 75-chip LPU pipeline only a few thousand; more context means more chips.",
    "On the GPU and TPU the cache streams from HBM every step. On Spyre, attention stages K and V from LPDDR5 into "
    "LX sticks — K, read through a transposed view, is *re-sticked* (copied with the stick on the other dimension) "
    "— and what does not fit the LX budget spills back to LPDDR5. On the WSE and the LPU the cache stays in SRAM: "
    "more context, more wafers or chips.",
    "~half a million tokens on one H100, ~9,000 on the 75 Groq LPUs that hold the weights, ~850,000 on a Spyre card "
    "(which streams them through 64 MB of LX every step). When the KV cache outgrows the fastest level, GPUs and "
    "TPUs slow down with HBM traffic, Spyre spills and re-sticks, and the WSE and LPU add wafers or chips.",
    "vLLM does this on GPUs in HBM; TPU serving stacks page the HBM cache and stream pages into VMEM; on Spyre the "
    "blocks live in LPDDR5 and are staged into LX in 128-byte sticks; on the WSE and the LPU the cache must fit in "
    "SRAM, so every wasted slot is SRAM that could hold a token.",
    "none: SRAM only",
)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:[-'.][a-z0-9]+)*", str(text).lower())


def copied(text: str, shown, n: int = 6) -> bool:
    """Does ``text`` repeat ``n`` words in a row from any of the ``shown`` sentences?"""
    words = _words(text)
    grams = {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}
    return any(grams & {tuple(w[i:i + n]) for i in range(len(w) - n + 1)} for w in map(_words, shown))
