"""A hardware cache and a software scratchpad running the same tiled matmul: who moves more bytes off-chip?

* ``LRUCache`` — a set-associative cache with LRU replacement, **write-back** (a dirty line is written to
  off-chip memory only when it is evicted or flushed) and **write-allocate** (a write miss first fetches the
  whole line, then writes into it). An address ``a`` maps to line ``a // line_bytes``, set ``line % sets``,
  tag ``line // sets``; ``ways = 1`` is direct-mapped, ``ways = capacity / line_bytes`` fully associative.
  Off-chip bytes = (misses x line_bytes) fetched + (dirty evictions x line_bytes) written back.
* ``matmul_stream`` — the addresses an output-stationary tiled ``C = A @ B`` touches (row-major, A, B, C at
  separate page-aligned bases): for each output tile (i0, j0), for each k0, read the A tile (tm x tk) and the
  B tile (tk x tn) row by row; after the k loop write the C tile (tm x tn), kept in registers until then.
* ``footprint_bytes`` — the scratchpad bytes of one A, B and C tile, twice with double buffering:
  ``2 (tm tk + tk tn + tm tn) e``. The explicit DMA schedule for a scratchpad of the same capacity, and its
  off-chip bytes, are what Lab 4's learner writes (``dma_plan``); the library does not hold them.

The cache needs no schedule but pays for it: conflict misses (two tiles mapping to the same sets), capacity
misses (LRU evicting a tile still needed) and write-allocate fetches of C lines that are only overwritten.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from common.errors import DFAError

PAGE = 4096  # matrices start on page boundaries, as an allocator would place large arrays


@dataclass(frozen=True)
class CacheConfig:
    """``capacity_bytes`` split into ``sets`` x ``ways`` lines of ``line_bytes``."""

    capacity_bytes: int
    line_bytes: int = 64
    ways: int = 8

    def __post_init__(self) -> None:
        for name in ("capacity_bytes", "line_bytes", "ways"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise DFAError(f"cache {name} must be a positive int, got {v!r}")
        if self.capacity_bytes % (self.line_bytes * self.ways):
            raise DFAError(f"capacity {self.capacity_bytes} B is not a whole number of sets of {self.ways} ways x "
                           f"{self.line_bytes} B lines")

    @property
    def sets(self) -> int:
        return self.capacity_bytes // (self.line_bytes * self.ways)


@dataclass
class CacheStats:
    """Counts over one run; ``bytes_in`` = misses x line (fetched), ``bytes_out`` = dirty evictions x line."""

    accesses: int = 0
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    writebacks: int = 0
    bytes_in: int = 0
    bytes_out: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.accesses if self.accesses else 0.0

    @property
    def offchip_bytes(self) -> int:
        return self.bytes_in + self.bytes_out

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("accesses", "hits", "misses", "evictions", "writebacks", "bytes_in",
                                               "bytes_out", "offchip_bytes", "hit_rate")}


@dataclass
class LRUCache:
    """Set-associative, LRU, write-back, write-allocate. ``access(addr, write)`` returns True on a hit."""

    config: CacheConfig
    stats: CacheStats = field(default_factory=CacheStats)

    def __post_init__(self) -> None:
        # one OrderedDict per set: tag -> dirty, least recently used first
        self._sets: list[OrderedDict] = [OrderedDict() for _ in range(self.config.sets)]

    def _touch_line(self, line: int, write: bool, repeats: int = 1) -> bool:
        s = self.stats
        lines = self._sets[line % self.config.sets]
        tag = line // self.config.sets
        s.accesses += repeats
        if tag in lines:
            lines.move_to_end(tag)
            lines[tag] = lines[tag] or write
            s.hits += repeats
            return True
        s.misses += 1
        s.hits += repeats - 1  # the rest of a run on the same line find it just fetched
        s.bytes_in += self.config.line_bytes  # write-allocate: a write miss fetches the line too
        if len(lines) == self.config.ways:
            _, dirty = lines.popitem(last=False)
            s.evictions += 1
            if dirty:
                s.writebacks += 1
                s.bytes_out += self.config.line_bytes
        lines[tag] = write
        return False

    def access(self, addr: int, write: bool = False) -> bool:
        if addr < 0:
            raise DFAError(f"address must be >= 0, got {addr}")
        return self._touch_line(int(addr) // self.config.line_bytes, bool(write))

    def run(self, addrs, writes=None) -> CacheStats:
        """Feed a stream (array of byte addresses, optional bool array of writes); returns the running stats.

        Consecutive accesses to one line are collapsed into one lookup: after the first, the line is the most
        recently used of its set, so the rest are hits and LRU order is unchanged (exact, and fast)."""
        a = np.asarray(addrs, dtype=np.int64).ravel()
        w = np.zeros(a.shape, bool) if writes is None else np.asarray(writes, bool).ravel()
        if a.shape != w.shape:
            raise DFAError(f"addrs and writes differ in length: {a.size} vs {w.size}")
        if a.size == 0:
            return self.stats
        if a.min() < 0:
            raise DFAError("addresses must be >= 0")
        lines = a // self.config.line_bytes
        starts = np.flatnonzero(np.r_[True, lines[1:] != lines[:-1]])  # first access of each same-line run
        counts = np.diff(np.r_[starts, a.size])
        dirty = np.logical_or.reduceat(w, starts)
        for line, wr, n in zip(lines[starts].tolist(), dirty.tolist(), counts.tolist(), strict=True):
            self._touch_line(line, wr, n)
        return self.stats

    def flush(self) -> CacheStats:
        """Write back every dirty line (end of the kernel: C must reach off-chip memory)."""
        for lines in self._sets:
            for tag, dirty in lines.items():
                if dirty:
                    self.stats.writebacks += 1
                    self.stats.bytes_out += self.config.line_bytes
                lines[tag] = False
        return self.stats


# ---- the kernel ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MatmulTiling:
    """C (M, N) = A (M, K) @ B (K, N), row-major, ``elem_bytes`` per element, tiles tm x tn x tk."""

    M: int
    N: int
    K: int
    tm: int
    tn: int
    tk: int
    elem_bytes: int = 4

    def __post_init__(self) -> None:
        for name in ("M", "N", "K", "tm", "tn", "tk", "elem_bytes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise DFAError(f"{name} must be a positive int, got {v!r}")

    @property
    def bases(self) -> tuple[int, int, int]:
        """Byte addresses of A, B, C: each starts on a page after the previous."""
        a_bytes = self.M * self.K * self.elem_bytes
        b = -(-a_bytes // PAGE) * PAGE
        c = b + -(-(self.K * self.N * self.elem_bytes) // PAGE) * PAGE
        return 0, b, c

    def tiles(self):
        """(i0, j0, k0, tm, tn, tk) of every tile step in loop order i0, j0, k0; edge tiles are smaller."""
        for i0 in range(0, self.M, self.tm):
            for j0 in range(0, self.N, self.tn):
                for k0 in range(0, self.K, self.tk):
                    yield (i0, j0, k0, min(self.tm, self.M - i0), min(self.tn, self.N - j0),
                           min(self.tk, self.K - k0))


def _tile_addrs(base: int, row0: int, col0: int, rows: int, cols: int, ld: int, e: int) -> np.ndarray:
    r = np.arange(row0, row0 + rows, dtype=np.int64)[:, None]  # (rows, 1)
    c = np.arange(col0, col0 + cols, dtype=np.int64)[None, :]  # (1, cols)
    return (base + (r * ld + c) * e).ravel()  # (rows * cols,) row by row


def matmul_stream(t: MatmulTiling) -> tuple[np.ndarray, np.ndarray]:
    """(addresses, is_write) of the output-stationary tiled matmul, element by element (see module doc)."""
    a0, b0, c0 = t.bases
    e = t.elem_bytes
    addrs, writes = [], []
    for i0, j0, k0, m, n, k in t.tiles():
        for part in (_tile_addrs(a0, i0, k0, m, k, t.K, e), _tile_addrs(b0, k0, j0, k, n, t.N, e)):
            addrs.append(part)
            writes.append(np.zeros(part.size, bool))
        if k0 + k >= t.K:  # last k step: the finished C tile leaves the registers
            part = _tile_addrs(c0, i0, j0, m, n, t.N, e)
            addrs.append(part)
            writes.append(np.ones(part.size, bool))
    return np.concatenate(addrs), np.concatenate(writes)


# ---- the scratchpad ------------------------------------------------------------------------------------------
def footprint_bytes(tm: int, tn: int, tk: int, elem_bytes: int, double_buffer: bool = True) -> int:
    """Scratchpad bytes of one A, B and C tile, times two with double buffering."""
    return (2 if double_buffer else 1) * (tm * tk + tk * tn + tm * tn) * elem_bytes


def fits(t: MatmulTiling, capacity_bytes: int, double_buffer: bool = True) -> bool:
    return footprint_bytes(t.tm, t.tn, t.tk, t.elem_bytes, double_buffer) <= capacity_bytes


def compulsory_bytes(t: MatmulTiling) -> int:
    """Every input read once and the output written once: the least any hierarchy can move."""
    return (t.M * t.K + t.K * t.N + t.M * t.N) * t.elem_bytes
