"""KV-cache arithmetic, where it fits on each of the five systems, and a paged block allocator (as vLLM does).

* Size. Every layer keeps a K and a V vector per KV head per token:

      kv_bytes = n_layers x 2 x n_kv_heads x head_dim x seq x batch x dtype_bytes

  with ``dtype_bytes`` the element size of the dtype actually in use (fp32 = 4 on a CPU run of the reference
  model, 2 for bf16/fp16 on an accelerator). Llama-3.1-8B in bf16: 32 x 2 x 8 x 128 x 2 = 128 KiB per token.
* Limits (``kv_limits``): for each system, the chips that hold the weights (power-of-two tensor-parallel groups
  on GPU/TPU/Spyre, any count for the pipelined WSE/LPU, as ``common.sim`` places them), the memory left
  beside the weights, and the largest batch x context that fits there: ``max_tokens = free // kv_per_token``.
  ``onchip_context`` is the longest batch-1 context whose *one layer* of K/V fits the largest on-chip level
  (H100 L2, TPU VMEM, Spyre LX after its reservations; on the SRAM-only WSE and LPU the whole cache is on-chip).
* ``chips_needed``: the fewest chips (or wafers, cards) for weights + KV of ``batch`` x ``context`` tokens.
* ``request_trace`` and ``replay``: a seeded trace of requests and continuous batching over it with any
  paged block allocator (Lab 4's learner writes one, as vLLM does: fixed-size blocks of ``block_size`` token
  slots, a block table per request). Internal fragmentation = allocated slots - tokens stored. Contiguous
  pre-allocation reserves ``max_len`` slots per request, whatever its final length.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from common.chips import DTYPE_BYTES, canonical_dtype, get_chip
from common.errors import DFAError
from common.models import ModelConfig, resolve_config
from common.palette import MACHINE_STYLE

SYSTEM_CHIPS = {"GPU": "h100-sxm", "TPU": "tpu-v5e", "WSE": "wse-3", "LPU": "groq-lpu", "Spyre": "spyre"}
PIPELINED = ("wse", "lpu")  # placed layer by layer over any number of chips; the others split tensors 2^n ways
_BACKEND_OF = {"GPU": "gpu", "TPU": "tpu", "WSE": "wse", "LPU": "lpu", "Spyre": "spyre"}
# The project's one colour-blind-safe palette, with a marker per machine so no line relies on colour alone.
COLORS = {system: MACHINE_STYLE[b].colour for system, b in _BACKEND_OF.items()}
MARKERS = {system: MACHINE_STYLE[b].marker for system, b in _BACKEND_OF.items()}


def kv_cache_bytes(config: ModelConfig | str, seq: int, batch: int = 1, dtype_bytes: int = 2) -> int:
    """n_layers x 2 (K and V) x n_kv_heads x head_dim x seq x batch x dtype_bytes; a sliding-window layer
    counts min(seq, window) positions (``ModelConfig.kv_bytes``)."""
    cfg = resolve_config(config)
    for name, v in (("seq", seq), ("batch", batch), ("dtype_bytes", dtype_bytes)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise DFAError(f"{name} must be a non-negative int, got {v!r}")
    if cfg.sliding_layers:
        return cfg.kv_bytes(int(seq), int(dtype_bytes)) * int(batch)
    return cfg.n_layers * 2 * cfg.n_kv_heads * cfg.head_dim * int(seq) * int(batch) * int(dtype_bytes)


def native_dtype(chip) -> str:
    """The chip's 16-bit type: bf16 where it has a datapath (or an estimate) for it, else fp16."""
    return "bf16" if get_chip(chip).supports("bf16") else "fp16"


def onchip_bytes(chip) -> float:
    """Usable bytes of the largest on-chip level; Spyre's LX less the per-core reservations in the catalog."""
    c = get_chip(chip)
    level = max(c.on_chip, key=lambda lv: lv.total_capacity)
    if c.kind == "spyre":
        per_core = (level.capacity - c.fact("lx_reserved_bytes")) * (1 - c.fact("lx_backend_reserved_fraction"))
        return per_core * level.count
    return level.total_capacity


def chips_needed(chip, config: ModelConfig | str, batch: int, context: int, dtype: str | None = None) -> int:
    """Fewest chips whose main memory holds weights + KV of batch x context (power of two unless pipelined)."""
    c, cfg = get_chip(chip), resolve_config(config)
    e = DTYPE_BYTES[canonical_dtype(dtype or native_dtype(c))]
    total = cfg.n_params * e + kv_cache_bytes(cfg, context, batch, e)
    need = max(1, math.ceil(total / c.main_memory.total_capacity))
    return need if c.kind in PIPELINED else 1 << (need - 1).bit_length()


def kv_limits(config: ModelConfig | str, context: int, *, systems: Mapping[str, str] = SYSTEM_CHIPS,
              chips: Mapping[str, int] | None = None) -> pd.DataFrame:
    """One row per system: where the KV cache lives and the largest batch x context beside the weights.

    ``chips`` per system defaults to the fewest that hold the weights and one sequence of ``context``."""
    cfg = resolve_config(config)
    rows = []
    for system, name in systems.items():
        c = get_chip(name)
        dtype = native_dtype(c)
        e = DTYPE_BYTES[dtype]
        n = (chips or {}).get(system) or chips_needed(c, cfg, 1, context, dtype)
        capacity = c.main_memory.total_capacity * n
        weights = cfg.n_params * e
        per_token = kv_cache_bytes(cfg, 1, 1, e)
        free = max(0.0, capacity - weights)
        onchip = onchip_bytes(c) * n
        sram_only = c.off_chip is None
        rows.append({
            "system": system, "chip": c.name, "chips": n, "dtype": dtype, "kv_level": c.main_memory.name,
            "capacity_bytes": capacity, "weight_bytes": weights, "free_bytes": free,
            "kv_bytes_per_token": per_token, "max_tokens": int(free // per_token),
            "max_batch": int(free // (per_token * context)),
            "onchip_level": max(c.on_chip, key=lambda lv: lv.total_capacity).name, "onchip_bytes": onchip,
            "onchip_context": int(free // per_token) if sram_only else int(onchip // (per_token / cfg.n_layers)),
            "bandwidth_Bps": c.main_memory.bandwidth * n if c.main_memory.bandwidth else np.nan,
        })
    return pd.DataFrame(rows)


def plot_kv_limits(config: ModelConfig | str, limits: pd.DataFrame, contexts, *, axes=None, title: str = ""):
    """Left: max batch vs context per system (catalog capacity, formula); right: LPU chips needed vs context."""
    import matplotlib.pyplot as plt

    cfg = resolve_config(config)
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(14, 5.2), layout="constrained")
    ax, ax2 = axes
    ctx = np.asarray(sorted(contexts), dtype=float)
    for _, r in limits.iterrows():
        batch = np.floor(r["max_tokens"] / ctx)
        ok = batch >= 1
        ax.loglog(ctx[ok], batch[ok], MARKERS.get(r["system"], "o") + "-", color=COLORS.get(r["system"]), ms=5,
                  label=f"{r['system']}: {r['chips']}x {r['chip']} {r['kv_level']} ({r['dtype']})")
    ax.set(xlabel="context length [tokens]", ylabel="largest batch beside the weights",
           title=title or f"{cfg.name}: KV cache beside the weights (catalog capacities, formula)")
    ax.grid(True, which="both", color="#dddddd", lw=0.5)
    ax.legend(fontsize=8)
    lpu = get_chip(SYSTEM_CHIPS["LPU"])
    for b, style in ((1, "s-"), (8, "^--"), (64, "d:")):
        n = [chips_needed(lpu, cfg, b, int(c)) for c in ctx]
        ax2.loglog(ctx, n, style, color=COLORS["LPU"], label=f"batch {b}")
    ax2.axhline(lpu.fact("max_system_chips"), color="#444444", lw=0.8, ls="--")
    ax2.text(ctx[0], lpu.fact("max_system_chips"), " largest published LPU system", va="bottom", fontsize=8)
    ax2.set(xlabel="context length [tokens]", ylabel="Groq LPUs needed (SRAM only)",
            title=f"{cfg.name} on Groq LPUs: chips for weights + KV (catalog, formula)")
    ax2.grid(True, which="both", color="#dddddd", lw=0.5)
    ax2.legend(fontsize=8)
    return axes


# ---- paged KV-cache allocation: the trace and the replay ----------------------------------------------------
def request_trace(n: int = 48, seed: int = 0, max_len: int = 2048, mean_gap: float = 4.0) -> pd.DataFrame:
    """A seeded trace: request, arrival (decode step), prompt and output lengths (log-normal, within max_len)."""
    rng = np.random.default_rng(seed)
    prompt = np.clip(rng.lognormal(np.log(300), 0.9, n), 4, max_len // 2).astype(int)
    output = np.clip(rng.lognormal(np.log(120), 0.9, n), 1, max_len - prompt).astype(int)
    arrival = np.floor(np.cumsum(rng.exponential(mean_gap, n))).astype(int)
    return pd.DataFrame({"request": np.arange(n), "arrival": arrival, "prompt": prompt, "output": output})


def replay(trace: pd.DataFrame, make_allocator: Callable[[int, int], object], block_size: int,
           max_len: int, num_blocks: int | None = None) -> pd.DataFrame:
    """Continuous batching, one decode step at a time: a request is allocated its prompt when it arrives,
    appends one token per step until its output is done, then is freed.

    Per step: ``used`` tokens, ``paged`` slots the allocator holds (``slots_allocated()``), ``contiguous``
    slots a max_len-per-request reservation would hold, and ``live`` requests."""
    if num_blocks is None:  # enough for every request at its final length at once
        num_blocks = int(sum(-(-(p + o) // block_size) for p, o in zip(trace["prompt"], trace["output"],
                                                                       strict=True)))
    alloc = make_allocator(num_blocks, block_size)
    left: dict = {}
    rows = []
    arrivals = trace.sort_values(["arrival", "request"]).itertuples(index=False)
    pending = next(arrivals, None)
    step = 0
    while pending is not None or left:
        for req in list(left):  # one decode step for everyone running
            alloc.append(req, 1)
            left[req] -= 1
            if left[req] == 0:
                alloc.free(req)
                del left[req]
        while pending is not None and pending.arrival <= step:
            alloc.allocate(pending.request, int(pending.prompt))
            left[pending.request] = int(pending.output)
            pending = next(arrivals, None)
        used = int(alloc.tokens_used())
        rows.append({"step": step, "live": len(left), "used": used, "paged": int(alloc.slots_allocated()),
                     "contiguous": len(left) * max_len})
        step += 1
    return pd.DataFrame(rows)
