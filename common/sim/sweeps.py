"""What-if tables: one LLM step over backends x batch sizes x sequence lengths, one row per configuration.

``sweep("llama-3.1-8b", batches=(1, 8, 64), seqs=(512, 4096))`` answers "how do time and throughput move with
the batch on each machine?" in one call. Every argument is checked first (``common.sim.args``, one DFAError
line), so a typo fails before the first capture. Each (batch, seq) step is captured once and costed on every
backend while it is fresh (``workload.llm_step``, backed by the on-disk capture cache), so a second sweep of
the same model only runs the cost models: a few milliseconds a configuration.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from common.errors import DFAError
from common.sim import args as sim_args
from common.sim.run import gc_paused, simulate_llm

if TYPE_CHECKING:  # pandas is imported when the table is built
    import pandas as pd

COLUMNS = ("model", "backend", "chip", "chips", "phase", "batch", "seq", "dtype", "time_s", "tokens_per_s",
           "tokens_per_s_per_user", "bottleneck", "compute_s", "memory_s", "scheduling_s", "communication_s",
           "flops", "bytes_by_level", "achieved_flops_per_s", "peak_flops_per_s")


def _values(name: str, values) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        values = [values]  # one number is a sweep of one
    out = [sim_args.positive_int(name, v) for v in values]
    if not out:
        raise DFAError(f"{name}s must hold at least one positive int, got none")
    return out


def sweep(model, backends: Iterable[str] | str = sim_args.BACKEND_NAMES, *, batches=(1,), seqs=(1024,),
          phase: str = "decode", chips: int | None = None, dtype: str | None = None,
          reports: list | None = None) -> pd.DataFrame:
    """One prefill or decode step of ``model`` for every (backend, batch, seq): a DataFrame with ``COLUMNS``.

    ``backends``: names (default all five) or one name; ``batches`` / ``seqs``: ints or one int; ``chips`` and
    ``dtype`` apply to every backend (default: each one's fewest chips and native 16-bit type). Pass a list as
    ``reports`` to get the ``Report`` of every row as well (for a Gantt or a trace of one of them).
    """
    if isinstance(backends, str):
        backends = [backends]
    names = [sim_args.backend_name(b) for b in backends]
    if not names:
        raise DFAError(f"backends must name at least one of {', '.join(sim_args.BACKEND_NAMES)}, got none")
    batch_list, seq_list = _values("batch", batches), _values("seq", seqs)
    for b in batch_list:
        for s in seq_list:
            config, phase, _, _ = sim_args.llm_step(model, phase, b, s)
    sim_args.chip_count(chips)
    for name in names:
        sim_args.chip_for(name, None, dtype)
    rows = []
    # The cycle collector stays off for the whole sweep, not only inside each step (``gc_paused``): turned back
    # on between steps, it walked each finished report's ~10^4 events before the row dropped them.
    with gc_paused():
        for b in batch_list:  # each step captured once, then costed on every backend while it is cached
            for s in seq_list:
                for name in names:
                    try:
                        r = simulate_llm(model, name, phase=phase, batch=b, seq=s, chips=chips, dtype=dtype)
                    except DFAError as exc:
                        raise DFAError(f"{name}, batch={b}, seq={s}: {exc}") from exc
                    if reports is not None:
                        reports.append(r)
                    rows.append(_row(config.name, r))
    import pandas as pd

    return pd.DataFrame(rows, columns=list(COLUMNS))


def _row(model: str, r) -> dict:
    """``Report.summary_row``'s numbers (``Report.totals``: each total walks every event once;
    ``tests/test_sim_sweep.py`` keeps the two equal)."""
    tot = r.totals()
    attribution = tot["attribution_s"]
    return {"model": model, "backend": r.backend, "chip": r.chip, "chips": r.chips, "phase": r.phase,
            "batch": r.batch, "seq": r.seq, "dtype": r.dtype, "time_s": tot["time_s"],
            "tokens_per_s": tot["tokens_per_s"], "tokens_per_s_per_user": tot["tokens_per_s_per_user"],
            "bottleneck": tot["bottleneck"],
            **{f"{k}_s": attribution.get(k, 0.0) for k in ("compute", "memory", "scheduling", "communication")},
            "flops": tot["flops"], "bytes_by_level": tot["bytes"], "achieved_flops_per_s": tot["achieved_flops_per_s"],
            "peak_flops_per_s": r.peak_flops * r.chips}
