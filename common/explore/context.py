"""The explorer's context view: where each machine's context length runs out, and what paging buys.

The KV cache lives beside the weights in the memory each machine runs a model from (``main_memory`` in the
catalog): SRAM on the LPU and the WSE, HBM on the GPU and the TPU, LPDDR5 on Spyre. Whether ``batch``
sequences of ``seq`` tokens still fit is the simulator's own placement rule (``Policy.fit``: the fewest chips,
a power of two for tensor parallelism, whole layers per wafer on the WSE; an explicit chip count is checked,
not grown), applied to the workload ``common.sim.workload.llm_step`` builds:

    resident = weights + KV,   KV = kv_bytes_per_token(dtype) x batch x positions,
    positions = seq + 1 (decode: the new token too) or seq (prefill)

Paging (vLLM's blocks) changes what each sequence *reserves*. A contiguous cache reserves all ``positions`` of
the longest context for every sequence; a paged one holds ceil(mean_tokens / block_size) blocks of
``block_size`` positions, where ``mean_tokens`` is what a request really holds (an assumption the learner sets,
half the context unless told). With ``free`` = chips x capacity - weights (the simulator's resident bytes less
the KV)::

    batch_contiguous = free // (kv_per_position x positions)
    batch_paged      = free // (kv_per_position x block_size x ceil(mean_tokens / block_size))

The rows say where the cache runs out; no function here searches for the longest context that fits.
"""
from __future__ import annotations

import dataclasses
import math

import pandas as pd

from common.chips import DTYPE_BYTES, canonical_dtype
from common.errors import DFAError

CONTEXT_COLUMNS = ("machine", "chip", "chips", "dtype", "kv_level", "capacity_bytes", "weight_bytes", "kv_bytes",
                   "used_fraction", "fits", "batch_contiguous", "batch_paged", "problem")


def _check_paging(block_size, mean_tokens) -> None:
    for name, v in (("block_size", block_size), ("mean_tokens", mean_tokens)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise DFAError(f"{name} must be a whole number >= 1, got {v!r}")


def _workload(choices, backend: str):
    """The step's workload as ``simulate_llm`` builds it, and the policy that places it."""
    from common.sim import args as sim_args
    from common.sim.run import make_policy
    from common.sim.workload import llm_step

    chip, chips = choices.chips.get(backend), choices.chip_counts.get(backend)
    sim_args.chip_for(backend, chip, choices.dtype)
    dtype = canonical_dtype(choices.dtype or make_policy(backend, chip, None, None).dtype)
    policy = make_policy(backend, chip, chips, dtype)
    return llm_step(choices.model, choices.phase, choices.batch, 1, dtype), policy, dtype


def _at(base, seq: int):
    """``base`` (captured at a short context: placement reads bytes, not the graph) with ``seq`` cached tokens;
    its KV bytes are ``llm_step``'s (tests/test_explore_context.py holds the two equal)."""
    per_token = base.config.kv_bytes_per_token(DTYPE_BYTES[base.dtype])
    positions = seq + (1 if base.phase == "decode" else 0)
    return dataclasses.replace(base, seq=seq, kv_bytes=per_token * base.batch * positions)


def _resident(workload, policy) -> float:
    if policy.parallelism == "pipeline":  # a spatial machine stores every segment's parameters where it runs
        from common.sim import spatial
        return float(sum(spatial.resident_sizes(workload)))
    return float(workload.resident_bytes)


def context_row(choices, backend: str, *, block_size: int = 16, mean_tokens: int | None = None) -> dict:
    """One machine's row (module docstring); a DFAError (too few chips, a dtype it lacks) is its ``problem``."""
    from common.sim import args as sim_args

    row = {"machine": backend, "chip": choices.chips.get(backend), "chips": choices.chip_counts.get(backend),
           "fits": False, "problem": ""}
    try:
        sim_args.llm_step(choices.model, choices.phase, choices.batch, choices.seq)  # seq beyond max_seq_len
        base, policy, dtype = _workload(choices, backend)
    except DFAError as exc:
        row["problem"] = str(exc).splitlines()[0]
        return row
    w = _at(base, choices.seq)
    try:
        policy.fit(w)
        row["fits"] = True
    except DFAError as exc:
        row["problem"] = str(exc).splitlines()[0]
    n = int(policy.n_chips)
    capacity = n * float(policy.chip.main_memory.total_capacity)
    weights = _resident(w, policy) - float(w.kv_bytes)
    per_position = w.config.kv_bytes_per_token(DTYPE_BYTES[w.dtype])
    positions = max(1, choices.seq + (1 if w.phase == "decode" else 0))
    held = mean_tokens if mean_tokens is not None else max(1, choices.seq // 2)
    free = max(0.0, capacity - weights)
    row.update(chip=policy.chip.name, chips=n, dtype=dtype, kv_level=policy.chip.main_memory.name,
               capacity_bytes=capacity, weight_bytes=weights, kv_bytes=float(w.kv_bytes),
               used_fraction=(weights + float(w.kv_bytes)) / capacity,
               batch_contiguous=int(free // (per_position * positions)),
               batch_paged=int(free // (per_position * block_size * math.ceil(held / block_size))))
    return row


def context_rows(choices, *, block_size: int = 16, mean_tokens: int | None = None) -> pd.DataFrame:
    """Every chosen machine's context row, SIMULATED placement (``attrs['label']`` says so)."""
    choices = choices.checked()
    _check_paging(block_size, mean_tokens)
    table = pd.DataFrame([context_row(choices, b, block_size=block_size, mean_tokens=mean_tokens)
                          for b in choices.backends], columns=list(CONTEXT_COLUMNS))
    held = mean_tokens if mean_tokens is not None else max(1, choices.seq // 2)
    table.attrs["label"] = (f"SIMULATED placement: {choices.model}, batch {choices.batch}, context {choices.seq}, "
                            f"dtype {choices.dtype or 'each chip native'}; paged: {block_size}-token blocks, "
                            f"{held} tokens held per request")
    return table


def context_curves(choices, seqs) -> pd.DataFrame:
    """``used_fraction`` and ``fits`` per machine over the contexts ``seqs`` on fixed chips: the chosen
    ``chip_counts``, else the chips that hold the choices' own context. Where a curve crosses 1, that machine's
    memory runs out; a context past the model's max_seq_len is left out."""
    choices = choices.checked()
    here = context_rows(choices)
    counts = {r["machine"]: int(r["chips"]) for _, r in here.iterrows() if r["fits"]}
    fixed = choices.changed(chip_counts={**counts, **choices.chip_counts})
    rows = []
    for s in sorted({int(x) for x in seqs}):
        try:
            table = context_rows(fixed.changed(seq=s))
        except DFAError:
            continue
        for _, r in table.iterrows():
            if r["used_fraction"] == r["used_fraction"]:  # NaN: no placement (seq past max_seq_len, a dtype)
                rows.append({"seq": s, "machine": r["machine"], "chip": r["chip"], "chips": r["chips"],
                             "kv_level": r["kv_level"], "used_fraction": r["used_fraction"], "fits": bool(r["fits"])})
    return pd.DataFrame(rows, columns=["seq", "machine", "chip", "chips", "kv_level", "used_fraction", "fits"])


def draw_context(ax, curves: pd.DataFrame, title: str = "") -> None:
    """Weights + KV as a share of the chips' memory against context, one line and marker per machine (its
    palette colour and marker: no line relies on colour alone), hollow where it no longer fits. The dashed line
    at 1 is the memory the KV cache lives in."""
    from common.palette import style

    ax.clear()
    for machine, df in curves.groupby("machine", sort=False):
        st = style(machine)
        first = df.iloc[0]
        ax.loglog(df["seq"], df["used_fraction"], "-", marker=st.marker, color=st.colour, lw=1.2, ms=6,
                  label=f"{machine}: {int(first['chips'])}x {first['chip']}, KV in {first['kv_level']}")
        over = df[~df["fits"]]
        ax.loglog(over["seq"], over["used_fraction"], st.marker, color=st.colour, mfc="white", ms=6, ls="none")
    ax.axhline(1.0, color="#444444", ls="--", lw=0.8)
    ax.set(xlabel="context length [tokens]", ylabel="(weights + KV) / memory of those chips",
           title=title or "SIMULATED placement: where the context runs out (hollow: does not fit)")
    ax.grid(True, which="both", color="#dddddd", lw=0.5)
    if len(curves):
        ax.legend(fontsize=8)
        low, high = float(curves["used_fraction"].min()), float(curves["used_fraction"].max())
        ax.set_ylim(max(1e-3, low / 2), max(2.0, high * 1.5))
