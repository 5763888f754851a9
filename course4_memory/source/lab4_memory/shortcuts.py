"""Shortcuts a learner who does not do Lab 4's work might try; each must score 0 on the cells in ``fails``
(tests/test_shortcut_notebooks.py runs them). Instructor edition only, like answers.py.

Not listed: the stubs of the ungraded *Going further* part (no test cell to fail).
"""

NOT_LISTED = {
    "same_capacity": "optional (Going further), ungraded",
    "paged_allocator": "optional (Going further), ungraded",
    "waste": "optional (Going further), ungraded",
    "predict_sweep": "ungraded: the learner's own ranking, committed before the simulator runs and judged only in "
    "the reveal (kept beside the map, timed and hashed; a change after the reveal is flagged)",
}

_HONEST_PLAN = '''
def dma_plan(t, capacity_bytes):
    e = t.elem_bytes
    if 2 * (t.tm * t.tk + t.tk * t.tn + t.tm * t.tn) * e > capacity_bytes:
        raise ValueError("does not fit")
    rows, step, stored = [], 0, 0
    for i0 in range(0, t.M, t.tm):
        for j0 in range(0, t.N, t.tn):
            m, n = min(t.tm, t.M - i0), min(t.tn, t.N - j0)
            for k0 in range(0, t.K, t.tk):
                k = min(t.tk, t.K - k0)
                rows.append({"step": step, "op": "load", "matrix": "A", "bytes": m * k * e, "buffer": step % 2})
                rows.append({"step": step, "op": "load", "matrix": "B", "bytes": k * n * e, "buffer": step % 2})
                step += 1
            rows.append({"step": step - 1, "op": "store", "matrix": "C", "bytes": m * n * e, "buffer": stored % 2})
            stored += 1
    return pd.DataFrame(rows, columns=["step", "op", "matrix", "bytes", "buffer"])
'''
_HONEST_TILE = '''
def largest_tile(capacity_bytes, elem_bytes, multiple=1):
    return int(math.isqrt(capacity_bytes // (6 * elem_bytes)) // multiple * multiple)
'''
_HONEST_KV = '''
def kv_bytes(cfg, seq, batch, dtype, attention="gqa"):
    heads = {"gqa": cfg.n_kv_heads, "mha": cfg.n_heads, "mqa": 1}[attention]
    return int(cfg.n_layers * 2 * heads * cfg.head_dim * seq * batch * DTYPE_BYTES[canonical_dtype(str(dtype))])


def max_tokens_beside_weights(chip_name, cfg, chips, dtype):
    free = chips * get_chip(chip_name).main_memory.total_capacity - cfg.n_params * DTYPE_BYTES[canonical_dtype(dtype)]
    return max(0, int(free // kv_bytes(cfg, 1, 1, dtype)))


def lpu_chips(cfg, batch, context, kv_dtype="fp16"):
    need = cfg.n_params * DTYPE_BYTES["fp16"] + kv_bytes(cfg, context, batch, kv_dtype)
    return int(math.ceil(need / get_chip("groq-lpu").main_memory.total_capacity))
'''


def _without(source: str, name: str) -> str:
    """``source`` with the top-level def of ``name`` removed (to replace one function of a cell)."""
    out, skip = [], False
    for line in source.splitlines():
        if line.startswith(("def ", "class ")):
            skip = line.startswith(f"def {name}(")
        if not skip:
            out.append(line)
    return "\n".join(out) + "\n"


SHORTCUTS = [
    # Part 1: the schedule. The library's schedule and its byte formula are gone from common.
    dict(cell="dma_plan", kind="call-reference", fails=["dma_plan_tests"], code=_HONEST_TILE + '''
try:
    from common.memory.cache import dma_schedule as _lazy_ref
except ImportError:
    _lazy_ref = None


def dma_plan(t, capacity_bytes):
    return _lazy_ref(t, capacity_bytes)[["step", "op", "matrix", "bytes", "buffer"]]
'''),
    # The worked example's schedule written out by hand (8 steps of 4 KiB tiles), and its tile 32.
    dict(cell="dma_plan", kind="hard-code-visible", fails=["dma_plan_tests"], code='''
def dma_plan(t, capacity_bytes):
    if 2 * (t.tm * t.tk + t.tk * t.tn + t.tm * t.tn) * t.elem_bytes > capacity_bytes:
        raise ValueError("does not fit")
    rows = []
    for s in range(8):
        rows += [dict(step=s, op="load", matrix="A", bytes=4096, buffer=s % 2),
                 dict(step=s, op="load", matrix="B", bytes=4096, buffer=s % 2)]
        if s % 2:
            rows.append(dict(step=s, op="store", matrix="C", bytes=4096, buffer=(s // 2) % 2))
    return pd.DataFrame(rows, columns=["step", "op", "matrix", "bytes", "buffer"])


def largest_tile(capacity_bytes, elem_bytes, multiple=1):
    return 32
'''),
    dict(cell="dma_plan", kind="echo-expected", fails=["dma_plan_tests"], code=_HONEST_PLAN + '''
def largest_tile(capacity_bytes, elem_bytes, multiple=1):
    return 32  # the worked example's answer, whatever the capacity
'''),
    dict(cell="cache_traffic", kind="call-reference", fails=["cache_traffic_tests"], code='''
try:
    from common.memory.cache import simulate_cache as _lazy_ref
except ImportError:
    _lazy_ref = None


def cache_traffic(t, config):
    s = _lazy_ref(*matmul_stream(t), config)
    return {"bytes_in": s.bytes_in, "bytes_out": s.bytes_out, "offchip_bytes": s.offchip_bytes,
            "hit_rate": s.hit_rate}
'''),
    dict(cell="cache_traffic", kind="hard-code-visible", fails=["cache_traffic_tests"], code='''
_lazy_c = LRUCache(CacheConfig(SCRATCHPAD_BYTES // 4, LINE_BYTES, 2))
_lazy_c.run(*matmul_stream(MatmulTiling(64, 64, 64, 16, 16, 16, 4)))
_lazy_s = _lazy_c.flush()
_LAZY = {"bytes_in": int(_lazy_s.bytes_in), "bytes_out": int(_lazy_s.bytes_out),
         "offchip_bytes": int(_lazy_s.offchip_bytes), "hit_rate": float(_lazy_s.hit_rate)}


def cache_traffic(t, config):
    return dict(_LAZY)  # the visible case's numbers for every input
'''),
    # Part 2: the labels.
    dict(cell="categorise", kind="call-reference", fails=["categorise_tests"], code='''
try:
    from common.memory.memtimeline import categorise_reference as _lazy_ref
except ImportError:
    _lazy_ref = None


def categorise(allocs, regions):
    return _lazy_ref(allocs, regions)


def kv_at_ends(frame, regions):
    return [int(live_at(frame, end)["KV cache"]) for end in regions["end_ms"]]
'''),
    # Read the answer off the allocation's op name: the cache is what torch.cat made.
    dict(cell="categorise", kind="read-off-object", fails=["categorise_tests"], code='''
def categorise(allocs, regions):
    kv = allocs["op"].str.contains("cat")
    return pd.Series(np.where(allocs["region"] == "", "other", np.where(kv, "KV cache", "activations")),
                     index=allocs.index)


def kv_at_ends(frame, regions):
    return [int(live_at(frame, end)["KV cache"]) for end in regions["end_ms"]]
'''),
    dict(cell="categorise", kind="hard-code-visible", fails=["categorise_tests"], code='''
_lazy_end = allocs_end = PROF.allocs["region"].map(dict(zip(PROF.regions["name"], PROF.regions["end_ms"])))
_lazy_kv = PROF.allocs["t_free_ms"].isna() | (PROF.allocs["t_free_ms"] > _lazy_end)
_LAZY_LABELS = pd.Series(np.where(PROF.allocs["region"] == "", "other", np.where(_lazy_kv, "KV cache", "activations")),
                         index=PROF.allocs.index)
_LAZY_ENDS = [int(live_at(timeline(PROF, _LAZY_LABELS), e)["KV cache"]) for e in PROF.regions["end_ms"]]


def categorise(allocs, regions):
    return _LAZY_LABELS.copy()  # the profile's labels, for any table


def kv_at_ends(frame, regions):
    return list(_LAZY_ENDS)
'''),
    # The memory-op table and a copy's bandwidth: nothing in common holds either; hidden tests use other shapes,
    # dtypes and numbers than the visible checks, so a table of the visible calls' answers earns nothing.
    dict(cell="memory_ops", kind="hard-code-visible", fails=["memory_ops_tests"], code='''
def memory_ops(shape, dtype):
    seen = {((64, 48), torch.float32): 24576, ((128, 48), torch.float32): 49152, ((64, 48), torch.float16): 12288}
    copy = seen.get((tuple(shape), dtype), 0)
    return {"view": 0, "reshape": 0, "slice": 0, "transpose": 0, "contiguous": 0, "transpose_contiguous": copy,
            "transpose_reshape": copy, "clone": copy, "cat": 2 * copy}
'''),
    dict(cell="copy_bandwidth", kind="hard-code-visible", fails=["copy_bandwidth_tests"], code='''
def copy_bandwidth(n_elements, bytes_per_el, seconds):
    seen = {(1000, 4, 1e-6): 8e9, (3000, 4, 1e-6): 24e9, (1000, 8, 1e-6): 16e9, (1000, 4, 2e-6): 4e9}
    return seen.get((n_elements, bytes_per_el, seconds), 1.0)
'''),
    # Part 3: the formula and the limits.
    dict(cell="kv_formula", kind="hard-code-visible", fails=["kv_formula_tests"],
         code=_without(_HONEST_KV, "kv_bytes") + '''
def kv_bytes(cfg, seq, batch, dtype, attention="gqa"):
    per = 65536 * DTYPE_BYTES[canonical_dtype(str(dtype))] * {"gqa": 1, "mha": 4, "mqa": 1}[attention]
    return per * seq * batch // (8 if attention == "mqa" else 1)  # the worked example's 128 KiB, for any model
'''),
    # The library's per-token size: the model's own grouping only.
    dict(cell="kv_formula", kind="call-reference", fails=["kv_formula_tests"],
         code=_without(_HONEST_KV, "kv_bytes") + '''
def kv_bytes(cfg, seq, batch, dtype, attention="gqa"):
    return cfg.kv_bytes_per_token(DTYPE_BYTES[canonical_dtype(str(dtype))]) * seq * batch
'''),
    dict(cell="kv_formula", kind="read-off-object", fails=["kv_limits_tests"],
         code=_without(_HONEST_KV, "max_tokens_beside_weights") + '''
def max_tokens_beside_weights(chip_name, cfg, chips, dtype):
    row = LIMITS[LIMITS["chip"] == get_chip(chip_name).name]
    return int(row["max_tokens"].iloc[0]) if len(row) else 0
'''),
    dict(cell="kv_formula", kind="call-reference", fails=["kv_limits_tests"],
         code=_without(_HONEST_KV, "max_tokens_beside_weights") + '''
def max_tokens_beside_weights(chip_name, cfg, chips, dtype):
    return int(kv_limits(cfg, 1, systems={"x": chip_name}, chips={"x": chips})["max_tokens"].iloc[0])
'''),
    dict(cell="kv_formula", kind="call-reference", fails=["kv_limits_tests"],
         code=_without(_HONEST_KV, "lpu_chips") + '''
from common.memory.kvcache import chips_needed as _lazy_cn


def lpu_chips(cfg, batch, context, kv_dtype="fp16"):
    return _lazy_cn("groq-lpu", cfg, batch, context)
'''),
    dict(cell="kv_formula", kind="call-reference", fails=["kv_limits_tests"],
         code=_without(_HONEST_KV, "lpu_chips") + '''
from common.memory.kvcache import chips_needed as _lazy_cn


def lpu_chips(cfg, batch, context, kv_dtype="fp16"):
    return _lazy_cn("groq-lpu", cfg, batch, context, kv_dtype)
'''),
    dict(cell="kv_sweep", kind="hard-code-visible", fails=["kv_sweep_tests"], code='''
_LAZY_SWEEP = {}


def kv_sweep(model, backend, seqs, batch):
    if not _LAZY_SWEEP:  # the Spyre sweep the visible check runs, returned for every call
        rows = []
        for s in SWEEP_SEQS:
            r = simulate_llm(MODEL, "spyre", phase="decode", batch=SWEEP_BATCH, seq=s)
            rows.append({"seq": s, "kv_bytes": cfg8b.kv_bytes_per_token(2) * (s + 1) * SWEEP_BATCH, "chips": r.chips,
                         "time_s": r.time_s, "bound": r.bottleneck})
        _LAZY_SWEEP["df"] = pd.DataFrame(rows)
    return _LAZY_SWEEP["df"].copy()
'''),
    # Landscape rows: the same phrase for every system (the visible check says two systems share a text).
    dict(cell="landscape_rows", kind="hard-code-visible", fails=["landscape_rows_tests"], code='''
MY_ROWS = {a: dict.fromkeys(SYSTEMS, "memory close to the compute units") for a in ATTRIBUTES}
'''),
    # Keyword stuffing: every memory and mechanism word of the lab in every cell, made distinct by the name.
    dict(cell="landscape_rows", kind="hard-code-visible", fails=["landscape_rows_tests"], code='''
_LAZY_WORDS = ("HBM VMEM SRAM on-wafer LPDDR5 LX sticks shared memory pages blocks vLLM DMA compiler XLA "
               "hardware cache LRU static schedule chips wafers streams spills")
MY_ROWS = {a: {s: f"{s}: {_LAZY_WORDS}" for s in SYSTEMS} for a in ATTRIBUTES}
'''),
    # Copy what the notebook says about each system: the header for who manages memory, the Part 3 and Part 4
    # paragraphs for the KV cache.
    dict(cell="landscape_rows", kind="read-off-object", fails=["landscape_rows_tests"], code='''
MY_ROWS = {
    "on-chip memory managed by": {
        "GPU": "puts hardware caches (L1, L2) in front of HBM and also gives the programmer a scratchpad",
        "TPU": "stages every fusion's operands from HBM into its software-managed VMEM",
        "WSE": "a WSE PE's 48 KB and the LPU's SRAM are software-managed",
        "LPU": "the LPU's SRAM are software-managed: there the formula is the traffic",
        "Spyre": "no cache at all: the compiler DMAs tiles, laid out in 128-byte sticks, between LPDDR5 and LX",
    },
    "KV-cache strategy": {
        "GPU": "vLLM does this on GPUs in HBM",
        "TPU": "TPU serving stacks page the HBM cache and stream pages into VMEM",
        "WSE": "on-wafer SRAM on a WSE-3 (~44 GB per wafer)",
        "LPU": "the SRAM of every Groq LPU in the pipeline (~230 MB per chip)",
        "Spyre": "every decode step streams it through 32 × 2 MB of LX",
    },
}
'''),
    # Read the rows off the objects the notebook shows: the catalog's alignment facts and the Part 3 table.
    dict(cell="landscape_rows", kind="read-off-object", fails=["landscape_rows_tests"], code='''
_lazy_lim = LIMITS.set_index("system")
MY_ROWS = {
    "on-chip memory managed by": {s: f"{ALIGNMENT[s]}; {_lazy_lim.loc[s, 'onchip_level']} on chip" for s in SYSTEMS},
    "KV-cache strategy": {s: f"KV cache in {_lazy_lim.loc[s, 'kv_level']} of {_lazy_lim.loc[s, 'chips']}x "
                             f"{_lazy_lim.loc[s, 'chip']}" for s in SYSTEMS},
}
'''),
    # Attacks on the probe channel: a reference rebuilt from the learner's (emptied) argument, notebook names the old
    # hidden tests read (MEMORY_OPS, SWEEPS) rebound, the checkers replaced, an int whose __eq__ always agrees.
    dict(cell="categorise", kind="read-off-object", fails=["categorise_tests"], code='''
_lazy_end = PROF.allocs["region"].map(dict(zip(PROF.regions["name"], PROF.regions["end_ms"])))
_lazy_kv = PROF.allocs["t_free_ms"].isna() | (PROF.allocs["t_free_ms"] > _lazy_end)
_LAZY_LABELS = pd.Series(np.where(PROF.allocs["region"] == "", "other", np.where(_lazy_kv, "KV cache", "activations")),
                         index=PROF.allocs.index)


def categorise(allocs, regions):
    if allocs is PROF.allocs:
        return _LAZY_LABELS.copy()  # the visible profile, honestly
    allocs.drop(allocs.index, inplace=True)  # any other table: emptied, so a reference built from it is empty too
    return pd.Series([], dtype=object)


def kv_at_ends(frame, regions):
    return [int(live_at(frame, end)["KV cache"]) for end in regions["end_ms"]]
'''),
    dict(cell="memory_ops", kind="hard-code-visible", fails=["memory_ops_tests"], code='''
def memory_ops(shape, dtype):
    seen = {((64, 48), torch.float32): 24576, ((128, 48), torch.float32): 49152, ((64, 48), torch.float16): 12288}
    copy = seen.get((tuple(shape), dtype), 0)
    return {"view": 0, "reshape": 0, "slice": 0, "transpose": 0, "contiguous": 0, "transpose_contiguous": copy,
            "transpose_reshape": copy, "clone": copy, "cat": 2 * copy}


MEMORY_OPS = {_lazy_name: (lambda x: x) for _lazy_name in MEMORY_OPS}  # measured on these, every op moves 0 bytes
'''),
    dict(cell="copy_bandwidth", kind="echo-expected", fails=["copy_bandwidth_tests"], code='''
import common.checks as _lazy_checks

class _LazyGrader:  # agrees with everything
    def __getattr__(self, name):
        return lambda *a, **k: None


for _lazy_name in ("check_equal", "check_scalar", "check_type", "check_tensor", "check_in_range"):  # the module refuses setattr; its __dict__ does not
    vars(_lazy_checks)[_lazy_name] = lambda *a, **k: None
vars(_lazy_checks)["grader"] = _LazyGrader()
math.isclose = lambda *a, **k: True
torch.allclose = lambda *a, **k: True


def copy_bandwidth(n_elements, bytes_per_el, seconds):
    return 1.0
'''),
    dict(cell="kv_formula", kind="echo-expected", fails=["kv_formula_tests"],
         code=_without(_HONEST_KV, "kv_bytes") + '''
class _LazyAny(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def kv_bytes(cfg, seq, batch, dtype, attention="gqa"):
    return _LazyAny(0)  # equal to whatever it is compared with
'''),
    dict(cell="landscape_rows", kind="read-off-object", fails=["landscape_rows_tests"], code='''
SWEEPS = {}  # the old hidden test read the learner's sweep to decide which rows must say "more chips"
MY_ROWS = {
    "on-chip memory managed by": {
        "GPU": "hardware caches (L1/L2) decide at run time; kernels also fill shared memory explicitly",
        "TPU": "the XLA compiler stages each fusion's operands into VMEM ahead of time",
        "WSE": "the compiler places weights and activations in every PE's local SRAM",
        "LPU": "the compiler schedules every SRAM read and write statically, cycle by cycle",
        "Spyre": "the compiler plans each DMA between LPDDR5 and LX; no cache",
    },
    "KV-cache strategy": {
        "GPU": "HBM, paged blocks (vLLM); caches in front",
        "TPU": "HBM pages staged into VMEM by the compiler",
        "WSE": "on-wafer SRAM next to each layer",
        "LPU": "SRAM along the chip pipeline",
        "Spyre": "LPDDR5 blocks, streamed into LX sticks; spills past LX",
    },
}
'''),
    # Part 2's fit: the config's formula instead of a fit, the two end points, lying floats, emptied arguments.
    dict(cell="kv_fit", kind="call-reference", fails=["kv_fit_tests"], code='''
def kv_fit(tokens, live_bytes):
    c = LLM.config  # the slope the lab expects, read off the model instead of fitted
    slope = float(2 * c.n_layers * c.n_kv_heads * c.head_dim * next(LLM.model.parameters()).element_size() * GEN_BATCH)
    return slope, float(live_bytes[0] - slope * tokens[0])
'''),
    dict(cell="kv_fit", kind="hard-code-visible", fails=["kv_fit_tests"], code='''
def kv_fit(tokens, live_bytes):
    slope = (live_bytes[-1] - live_bytes[0]) / (tokens[-1] - tokens[0])  # exact on the measured, linear points
    return float(slope), float(live_bytes[0] - slope * tokens[0])
'''),
    dict(cell="kv_fit", kind="echo-expected", fails=["kv_fit_tests"], code='''
class _LazyFloat(float):
    def __eq__(self, other):
        return True

    def __lt__(self, other):
        return True

    __hash__ = float.__hash__

    def __sub__(self, other):
        return _LazyFloat(0.0)

    __rsub__ = __truediv__ = __rtruediv__ = __sub__


def kv_fit(tokens, live_bytes):
    return (_LazyFloat(0.0), _LazyFloat(0.0))
'''),
    dict(cell="kv_fit", kind="read-off-object", fails=["kv_fit_tests"], code='''
def kv_fit(tokens, live_bytes):
    if isinstance(live_bytes, list) and len(live_bytes) != len(ENDS or []):  # not the lab's own points
        tokens.clear()
        live_bytes.clear()  # a reference rebuilt from these lists would be empty too
        return 0.0, 0.0
    x, y = np.asarray(tokens, dtype=float), np.asarray(live_bytes, dtype=float)
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    return slope, float(y.mean() - slope * x.mean())
'''),
    # Part 3's explorer question: the longest context N chips hold. The visible case's printed answer for every
    # case, the default seed's answers looked up, and a lying int.
    dict(cell="longest_context", kind="hard-code-visible", fails=["longest_context_tests"], code='''
def longest_context(model, backend, chips, batch, dtype=None, step=256):
    return 33280  # two WSE-3 wafers at batch 16, as the visible check printed
'''),
    dict(cell="longest_context", kind="hard-code-visible", fails=["longest_context_tests"], code='''
_LAZY_SEEN = {("llama-3.1-8b", "wse", 2, 16): 33280, ("llama-3.1-8b", "wse", 3, 24): 34304,
              ("qwen2.5-0.5b", "lpu", 9, 4): 16384, ("llama-3.1-70b", "lpu", 838, 8): 19456,
              ("llama-3.1-8b", "tpu", 8, 16): 53248}  # the direct run's variant (DFA_PROBE_SEED unset)


def longest_context(model, backend, chips, batch, dtype=None, step=256):
    return _LAZY_SEEN.get((model, backend, chips, batch), 0)
'''),
    dict(cell="longest_context", kind="echo-expected", fails=["longest_context_tests"], code='''
class _LazyAny(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def longest_context(model, backend, chips, batch, dtype=None, step=256):
    return _LazyAny(0)
'''),
    # A formula instead of the simulator's placement: common's catalog table, the learner's own Part 3 function,
    # and the explorer's own capacity and weight bytes (tied embeddings included) divided by the KV per position.
    dict(cell="longest_context", kind="call-reference", fails=["longest_context_tests"], code='''
def longest_context(model, backend, chips, batch, dtype=None, step=256):
    chip = EX.context(model=model, backends=(backend,))["chip"].iloc[0]
    row = kv_limits(model, step, systems={"x": chip}, chips={"x": chips}).iloc[0]
    return int(min(row["max_tokens"] // batch - 1, get_config(model).max_seq_len - 1) // step * step)
'''),
    dict(cell="longest_context", kind="cpu-reference", fails=["longest_context_tests"], code='''
def longest_context(model, backend, chips, batch, dtype=None, step=256):
    row = EX.context(model=model, backends=(backend,), dtype=dtype).iloc[0]
    tokens = max_tokens_beside_weights(row["chip"], get_config(model), chips, row["dtype"])
    return int(min(tokens // batch - 1, get_config(model).max_seq_len - 1) // step * step)
'''),
    dict(cell="longest_context", kind="read-off-object", fails=["longest_context_tests"], code='''
def longest_context(model, backend, chips, batch, dtype=None, step=256):
    row = EX.context(model=model, backends=(backend,), chip_counts={backend: chips}, batch=batch, dtype=dtype,
                     seq=step).iloc[0]
    per_position = row["kv_bytes"] / (batch * (step + 1))
    tokens = (row["capacity_bytes"] - row["weight_bytes"]) // per_position
    return int(min(tokens // batch - 1, get_config(model).max_seq_len - 1) // step * step)
'''),
    # One machine's answer (the GPU's, found honestly) for every machine.
    dict(cell="longest_context", kind="cpu-reference", fails=["longest_context_tests"], code='''
def longest_context(model, backend, chips, batch, dtype=None, step=256):
    def fits(k):
        return EX.context(model=model, backends=("gpu",), chip_counts={"gpu": 1}, batch=batch,
                          seq=k * step)["fits"].iloc[0]
    return step * bisect.bisect_left(range(1, get_config(model).max_seq_len // step + 1), 1, key=lambda k: not fits(k))
'''),
]
