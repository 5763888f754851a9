"""Where the bytes of an LLM inference run live over time, measured on the CPU with ``torch.profiler``.

``profile_decode`` runs the reference decoder (``common.models``) for a prefill and ``steps`` decode steps under
``torch.profiler.profile(profile_memory=True, record_shapes=True)`` (``with_stack`` too when the export is
wanted), each step inside a
``record_function`` region (``prefill``, ``decode_0``, ...). The KV cache grows as Hugging Face's dynamic
cache does: every decode step concatenates one position to each layer's K and V (``kv_append`` region) and
the old tensors are freed, so the cache's live bytes grow by ``kv_bytes_per_token x batch`` per step.

Two views of the same run:

* ``allocs`` — built from the profiler's allocation events (``kineto_results.experimental_event_tree()``: one
  event per allocation, a negative one when it is freed, paired by address): bytes, allocation and
  free time (ms from the first event; NaN = still live at the end), the step region and the op that allocated
  it. The weights were allocated before profiling started, so they are a constant ``weight_bytes``.
* ``torch_timeline`` — PyTorch's own ``prof.export_memory_timeline`` (JSON: times, bytes per category) where
  the installed torch supports it on the CPU (None otherwise). Its categories come from training (parameters,
  activations, gradients...): it finds the weights but has no notion of a KV cache. Its analysis runs in Python
  and takes seconds per decode step, so ``torch_export=False`` skips it (the fast setting of the lab).

``profile_generate`` profiles the real thing: an ``LLM`` (``common.models.load_llm``) running Hugging Face
``generate`` with a ``DynamicCache``, each forward pass (prefill, then one per new token) in its own region, on
the model's device (CUDA activities and CUDA allocations on a GPU; there also ``torch.cuda.max_memory_allocated``
and, where this torch has it, the CUDA memory snapshot: a private API, guarded).

Labelling each allocation (weights, activations, KV cache) is Lab 4's exercise, not the library's.
``timeline`` turns any labels into live bytes per category over time; ``plot_memory_timeline`` draws it
(MEASURED, with machine, batch, sequence lengths and dtype in the title).
"""
from __future__ import annotations

import json
import os
import tempfile
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from common.errors import DFAError
from common.measure.bench import machine_info
from common.models import KVCache, build_model, get_config
from common.palette import CONTENT_STYLE

CATEGORIES = ("weights", "KV cache", "activations")
COLORS = {k: s.colour for k, s in CONTENT_STYLE.items()}  # common.palette's, each with a hatch too
# Order of torch.profiler._memory_profiler._CATEGORY_TO_INDEX (the export's columns 1..8; column 0 is unused).
TORCH_CATEGORIES = ("parameters", "optimizer state", "inputs", "temporaries", "activations", "gradients",
                    "autograd detail", "unknown")


@dataclass(frozen=True)
class DecodeRun:
    """What to profile: a reference model, batch, prompt length, decode steps, parameter/cache dtype."""

    model: str = "tiny-block"
    batch: int = 16
    prompt: int = 32
    steps: int = 32
    dtype: torch.dtype = torch.float32
    seed: int = 0

    def __post_init__(self) -> None:
        cfg = get_config(self.model)
        for name in ("batch", "prompt", "steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise DFAError(f"{name} must be a positive int, got {v!r}")
        if self.prompt + self.steps > cfg.max_seq_len:
            raise DFAError(f"prompt {self.prompt} + steps {self.steps} exceed max_seq_len {cfg.max_seq_len} of "
                           f"{self.model!r}")


@dataclass
class MemoryProfile:
    run: DecodeRun
    allocs: pd.DataFrame  # bytes, t_alloc_ms, t_free_ms, region, op
    regions: pd.DataFrame  # name, start_ms, end_ms: prefill, decode_0, ...
    weight_bytes: int
    kv_bytes_per_token: int  # one sequence, every layer, K and V, in the dtype in use
    end_ms: float
    meta: dict = field(default_factory=dict)
    torch_timeline: pd.DataFrame | None = None  # ms index, MB per TORCH_CATEGORIES

    @property
    def title(self) -> str:
        m, r = self.meta, self.run
        where = m.get("gpu") or f"{m['cpu']} ({m['threads']} threads)"
        return (f"MEASURED on {where}, torch {m['torch']}: {m.get('label', r.model)}, batch {r.batch}, "
                f"prompt {r.prompt} + {r.steps} decode steps, {m['dtype']}")


def _grow(cache: KVCache) -> KVCache:
    """One more position per layer: torch.cat allocates the larger tensors, the old ones die with ``cache``."""
    def more(t):  # (B, n_kv, S, hd) -> (B, n_kv, S + 1, hd)
        return torch.cat([t, t.new_zeros(t.shape[0], t.shape[1], 1, t.shape[3])], dim=2)
    return KVCache([more(t) for t in cache.k], [more(t) for t in cache.v])


def _decode_loop(model, run: DecodeRun) -> None:
    cfg = model.config
    gen = torch.Generator().manual_seed(run.seed)
    tokens = torch.randint(0, cfg.vocab_size, (run.batch, run.prompt), generator=gen)  # (B, T)
    nxt = torch.zeros(run.batch, 1, dtype=torch.long)  # (B, 1), reused: no allocation survives a step but KV
    with record_function("prefill"):
        cache = KVCache.empty(cfg, run.batch, run.prompt, dtype=run.dtype)
        nxt.copy_(model(tokens, cache=cache, start_pos=0)[:, -1:].argmax(-1))
    for s in range(run.steps):
        with record_function(f"decode_{s}"):
            with record_function("kv_append"):
                cache = _grow(cache)
            nxt.copy_(model(nxt, cache=cache, start_pos=run.prompt + s)[:, -1:].argmax(-1))


def _allocation_events(prof) -> tuple[list, list]:
    """(allocation events, step-region events) from the profiler's event tree (torch >= 2.0)."""
    try:
        from torch._C._profiler import _EventType
        roots = prof.profiler.kineto_results.experimental_event_tree()
    except (AttributeError, ImportError) as exc:  # pragma: no cover - depends on the torch build
        raise DFAError(f"torch {torch.__version__} does not expose the profiler's event tree ({exc})") from None
    allocs, regions, stack = [], [], list(roots)
    while stack:
        e = stack.pop()
        if e.tag == _EventType.Allocation:
            allocs.append(e)
        elif e.tag == _EventType.TorchOp and (e.name == "prefill" or e.name.startswith("decode_")):
            regions.append(e)
        stack.extend(e.children)
    return allocs, regions


def _op_of(event) -> str:
    p = event.parent
    return p.name if p is not None else ""


def _frames(prof, device_type: str = "cpu") -> tuple[pd.DataFrame, pd.DataFrame, float, int]:
    """(allocs, regions, end in ms, t0 in ns): times are ms since the first region or allocation; only the
    allocations on ``device_type``."""
    events, region_events = _allocation_events(prof)
    if not region_events:
        raise DFAError("the profile holds no prefill/decode regions")
    t0 = min([e.start_time_ns for e in region_events] + [e.start_time_ns for e in events])
    regions = pd.DataFrame({"name": [e.name for e in region_events],
                            "start_ms": [(e.start_time_ns - t0) / 1e6 for e in region_events],
                            "end_ms": [(e.end_time_ns - t0) / 1e6 for e in region_events]})
    regions = regions.sort_values("start_ms", ignore_index=True)
    rows: list[dict] = []
    live: dict[int, int] = {}  # address -> row of the allocation now holding it (an address is reused after free)
    for e in sorted(events, key=lambda e: e.start_time_ns):
        f = e.extra_fields
        if f.device.type != device_type:
            continue
        t = (e.start_time_ns - t0) / 1e6
        if f.alloc_size > 0:
            live[f.ptr] = len(rows)
            rows.append({"bytes": int(f.alloc_size), "t_alloc_ms": t, "t_free_ms": np.nan, "op": _op_of(e)})
        elif f.ptr in live:  # frees of tensors made before profiling started are not ours
            rows[live.pop(f.ptr)]["t_free_ms"] = t
    allocs = pd.DataFrame(rows, columns=["bytes", "t_alloc_ms", "t_free_ms", "op"])
    # the step region each allocation was made in ("" before the first region or between regions)
    idx = np.searchsorted(regions["start_ms"].to_numpy(), allocs["t_alloc_ms"].to_numpy(), side="right") - 1
    inside = (idx >= 0) & (allocs["t_alloc_ms"].to_numpy() <= regions["end_ms"].to_numpy()[np.clip(idx, 0, None)])
    allocs.insert(3, "region", np.where(inside, regions["name"].to_numpy()[np.clip(idx, 0, None)], ""))
    end = float(max(regions["end_ms"].max(), np.nanmax(allocs[["t_alloc_ms", "t_free_ms"]].to_numpy())))
    return allocs, regions, end, t0


def _torch_export(prof, t0_us: float) -> pd.DataFrame | None:
    """``export_memory_timeline`` (JSON) as MB per torch category vs ms; None where unsupported."""
    path = os.path.join(tempfile.mkdtemp(prefix="dfa_mem_"), "timeline.json")
    try:
        with warnings.catch_warnings():  # deprecated in favour of a CUDA-only API: still the CPU's only export
            warnings.simplefilter("ignore")
            prof.export_memory_timeline(path, device="cpu")
        with open(path, encoding="utf-8") as f:
            times, sizes = json.load(f)
    except Exception:  # noqa: BLE001 - any failure means "not supported here"; the event view still works
        return None
    sizes = np.asarray(sizes, dtype=float)
    if sizes.ndim != 2 or sizes.shape[1] != len(TORCH_CATEGORIES) + 1:
        return None
    frame = pd.DataFrame(sizes[:, 1:] / 1e6, columns=list(TORCH_CATEGORIES))
    frame.index = pd.Index((np.asarray(times, dtype=float) - t0_us) / 1e3, name="ms")
    return frame


def profile_decode(run: DecodeRun | None = None, *, torch_export: bool = True) -> MemoryProfile:
    """Profile prefill + decode of ``run`` on the CPU; returns both views (see the module docstring)."""
    run = run or DecodeRun()
    model = build_model(run.model, dtype=run.dtype).eval()
    with torch.no_grad():
        _decode_loop(model, DecodeRun(run.model, 1, 2, 1, run.dtype))  # warm-up: lazy init outside the profile
        # with_stack: export_memory_timeline needs the Python tracer to find the parameters (and costs time)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                     with_stack=torch_export) as prof:
            _decode_loop(model, run)
    allocs, regions, end, t0 = _frames(prof)
    tl = _torch_export(prof, t0 / 1e3) if torch_export else None
    if tl is not None:  # the export's first point is the profile start, before our first region
        tl = tl[tl.index >= -1.0]
    info = machine_info()
    cfg = model.config
    elem = torch.empty((), dtype=run.dtype).element_size()
    return MemoryProfile(
        run=run, allocs=allocs, regions=regions,
        weight_bytes=sum(p.numel() * p.element_size() for p in model.parameters()),
        kv_bytes_per_token=2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * elem, end_ms=end,
        meta={"cpu": info["cpu"], "threads": info["num_threads"], "torch": info["torch"],
              "dtype": str(run.dtype).replace("torch.", "")},
        torch_timeline=tl)


def timeline(profile: MemoryProfile, categories) -> pd.DataFrame:
    """Live bytes per category at every allocation/free event (ms index); weights constant from t = 0."""
    a = profile.allocs
    cats = pd.Series(list(categories), index=a.index)
    names = [c for c in (*CATEGORIES, "other") if c != "weights" and (cats == c).any()]
    t_free = a["t_free_ms"].fillna(np.inf)
    times = np.unique(np.r_[0.0, a["t_alloc_ms"], a["t_free_ms"].dropna(), profile.end_ms])
    out = {"weights": np.full(times.shape, float(profile.weight_bytes))}
    for c in names:
        sel = (cats == c).to_numpy()
        born = np.sort(a["t_alloc_ms"].to_numpy()[sel])
        died = np.sort(t_free.to_numpy()[sel])
        sizes_b = a["bytes"].to_numpy()[sel][np.argsort(a["t_alloc_ms"].to_numpy()[sel], kind="stable")]
        sizes_d = a["bytes"].to_numpy()[sel][np.argsort(t_free.to_numpy()[sel], kind="stable")]
        cum_b = np.r_[0, np.cumsum(sizes_b)]
        cum_d = np.r_[0, np.cumsum(sizes_d)]
        out[c] = (cum_b[np.searchsorted(born, times, side="right")]
                  - cum_d[np.searchsorted(died, times, side="right")]).astype(float)
    return pd.DataFrame(out, index=pd.Index(times, name="ms"))


def live_at(frame: pd.DataFrame, t_ms: float) -> pd.Series:
    """Live bytes per category just after time ``t_ms`` (the last event at or before it)."""
    i = max(0, int(np.searchsorted(frame.index.to_numpy(), t_ms, side="right")) - 1)
    return frame.iloc[i]


def plot_memory_timeline(profile: MemoryProfile, frame: pd.DataFrame, ax=None, *, title: str | None = None):
    """Stacked live MB per category vs time, prefill and decode steps shaded and labelled."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(13, 5), layout="constrained")
    cols = [c for c in (*CATEGORIES, "other") if c in frame.columns]
    ax.stackplot(frame.index, *(frame[c] / 1e6 for c in cols), labels=cols, step="post",
                 colors=[COLORS[c] for c in cols], hatch=[CONTENT_STYLE[c].hatch for c in cols], alpha=0.9,
                 lw=0, edgecolor="white")
    top = float((frame[cols].sum(axis=1) / 1e6).max()) * 1.15
    for i, r in profile.regions.iterrows():
        ax.axvspan(r["start_ms"], r["end_ms"], color="#000000", alpha=0.06 if i % 2 == 0 else 0.0, lw=0)
    pre = profile.regions.iloc[0]
    ax.text((pre["start_ms"] + pre["end_ms"]) / 2, top * 0.97, "prefill", ha="center", va="top", fontsize=9)
    dec = profile.regions.iloc[1:]
    if len(dec):
        ax.annotate("", xy=(dec["end_ms"].iloc[-1], top * 0.9), xytext=(dec["start_ms"].iloc[0], top * 0.9),
                    arrowprops={"arrowstyle": "<->", "color": "#444444"})
        ax.text((dec["start_ms"].iloc[0] + dec["end_ms"].iloc[-1]) / 2, top * 0.92,
                f"{len(dec)} decode steps (shaded: every other step)", ha="center", va="bottom", fontsize=9)
    ax.set(xlim=(0, profile.end_ms), ylim=(0, top), xlabel="time since the prefill started [ms]",
           ylabel="live CPU memory [MB]", title=title or profile.title)
    handles, labels = ax.get_legend_handles_labels()  # top of the stack first, outside the data
    ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=9)
    ax.grid(True, axis="y", color="#dddddd", lw=0.5)
    return ax


@dataclass(frozen=True)
class GenerateRun:
    """What ``profile_generate`` ran: random prompt ids (batch x prompt) and ``steps`` decode steps."""

    model: str
    batch: int
    prompt: int
    steps: int
    dtype: torch.dtype
    seed: int = 0


class _StepRegions:
    """Forward hooks that put every forward pass of a model in a profiler region: prefill, decode_0, ..."""

    def __init__(self, model):
        self.count, self.region = 0, None
        self.handles = [model.register_forward_pre_hook(self._open, with_kwargs=True),
                        model.register_forward_hook(self._close, with_kwargs=True)]

    def _open(self, _module, _args, _kwargs):
        self.region = record_function("prefill" if self.count == 0 else f"decode_{self.count - 1}")
        self.region.__enter__()

    def _close(self, _module, _args, _kwargs, _out):
        self.region.__exit__(None, None, None)
        self.count += 1

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _generate(model, ids: torch.Tensor, steps: int):
    from transformers import DynamicCache
    cache = DynamicCache(config=model.config)
    with warnings.catch_warnings():  # transformers 5 renames past_key_values to cache: either is accepted
        warnings.simplefilter("ignore", FutureWarning)
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=steps, min_new_tokens=steps,
                       do_sample=False, past_key_values=cache, pad_token_id=0)
    return cache


def cache_bytes(cache) -> int:
    """Bytes of every key and value tensor a transformers ``DynamicCache`` holds."""
    return int(sum(t.nbytes for layer in cache.layers for t in (layer.keys, layer.values) if t is not None))


def cuda_snapshot_blocks(device) -> int | None:
    """Active blocks in the CUDA memory snapshot (``torch.cuda.memory._snapshot``, a private API: None where
    this torch lacks it or no history is being recorded)."""
    try:
        snap = torch.cuda.memory._snapshot(device)
    except (AttributeError, RuntimeError, TypeError):
        return None
    return sum(1 for seg in snap.get("segments", []) for b in seg.get("blocks", [])
               if b.get("state") == "active_allocated")


def profile_generate(llm, batch: int = 4, prompt: int = 16, steps: int = 8, *, seed: int = 0) -> MemoryProfile:
    """Profile ``llm.model.generate`` (greedy, a ``DynamicCache``) on random prompt ids, on the model's device."""
    for name, v in (("batch", batch), ("prompt", prompt), ("steps", steps)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise DFAError(f"{name} must be a positive int, got {v!r}")
    model = llm.model
    p = next(model.parameters())
    dev, dtype = p.device, p.dtype
    ids = torch.randint(0, llm.config.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(seed))
    ids = ids.to(dev)  # (B, T)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    meta = {}
    with torch.no_grad():
        _generate(model, ids[:1, :2], 2)  # warm-up: lazy init outside the profile
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            before = torch.cuda.memory_allocated(dev)
            history = getattr(torch.cuda.memory, "_record_memory_history", None)  # private API: guarded
            if history is not None:
                history(max_entries=100_000)
        hooks = _StepRegions(model)
        try:
            with profile(activities=activities, profile_memory=True, record_shapes=True) as prof:
                cache = _generate(model, ids, steps)
        finally:
            hooks.remove()
        meta["cache_bytes"] = cache_bytes(cache)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            meta["cuda_max_allocated"] = int(torch.cuda.max_memory_allocated(dev))
            meta["cuda_before"] = int(before)
            meta["cuda_snapshot_blocks"] = cuda_snapshot_blocks(dev) if history is not None else None
            if history is not None:
                history(enabled=None)
            meta["gpu"] = torch.cuda.get_device_name(dev)
    allocs, regions, end, _t0 = _frames(prof, dev.type)
    cfg = llm.config
    info = machine_info()
    meta.update({"cpu": info["cpu"], "threads": info["num_threads"], "torch": info["torch"],
                 "dtype": str(dtype).replace("torch.", ""), "label": llm.label, "device": str(dev)})
    return MemoryProfile(
        run=GenerateRun(llm.name, batch, prompt, steps, dtype, seed), allocs=allocs, regions=regions,
        weight_bytes=sum(q.numel() * q.element_size() for q in model.parameters()),
        kv_bytes_per_token=2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * p.element_size(), end_ms=end,
        meta=meta)
