"""The explorer's context view: the simulator's placement decides what fits, the KV bytes are llm_step's,
paging holds more sequences than a contiguous reservation, and a bad choice is one line."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from common.chips import get_chip  # noqa: E402
from common.errors import DFAError  # noqa: E402
from common.explore import Choices, context_curves, context_rows, explore  # noqa: E402
from common.explore.context import _at  # noqa: E402
from common.sim import simulate_llm  # noqa: E402
from common.sim.workload import llm_step  # noqa: E402

MODEL = "llama-3.1-8b"


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_the_kv_bytes_at_a_context_are_llm_steps(phase):
    base = llm_step(MODEL, phase, 3, 1, "bf16")
    for seq in (7, 4096):
        w = _at(base, seq)
        assert (w.seq, w.kv_bytes, w.weight_bytes) == (seq, llm_step(MODEL, phase, 3, seq, "bf16").kv_bytes,
                                                       base.weight_bytes)


@pytest.mark.parametrize("backend, chips, batch", [("wse", 2, 16), ("lpu", 150, 2), ("tpu", 4, 16)])
def test_fits_is_the_simulators_placement(backend, chips, batch):
    choices = Choices(MODEL, (backend,), batch=batch, chip_counts={backend: chips})
    fitting = [s for s in (4096, 16384, 65536, 131000)
               if context_rows(choices.changed(seq=s))["fits"].iloc[0]]
    assert 0 < len(fitting) < 4  # the search range has both answers
    for seq in (fitting[-1], {4096: 16384, 16384: 65536, 65536: 131000}[fitting[-1]]):
        row = context_rows(choices.changed(seq=seq)).iloc[0]
        try:
            simulate_llm(MODEL, backend, batch=batch, seq=seq, chips=chips)
            ran = True
        except DFAError:
            ran = False
        assert bool(row["fits"]) == ran and (row["problem"] == "") == ran
        assert row["kv_level"] == get_chip(row["chip"]).main_memory.name


def test_the_cache_lives_in_sram_hbm_or_lpddr():
    levels = dict(context_rows(Choices(MODEL))[["machine", "kv_level"]].values)
    assert levels == {"gpu": "HBM", "tpu": "HBM", "wse": "SRAM", "lpu": "SRAM", "spyre": "LPDDR5"}


def test_paging_holds_more_sequences_than_a_contiguous_reservation():
    choices = Choices(MODEL, ("gpu", "spyre"), batch=1, seq=8192)
    full = context_rows(choices, block_size=16, mean_tokens=8192 + 1)
    quarter = context_rows(choices, block_size=16, mean_tokens=2048)
    assert (quarter["batch_paged"] > 3 * quarter["batch_contiguous"]).all()
    assert (full["batch_paged"] <= full["batch_contiguous"]).all()  # holding it all, a block rounds up


@pytest.mark.parametrize("kw, words", [({"block_size": 0}, "block_size must be"),
                                       ({"mean_tokens": 2.5}, "mean_tokens must be")])
def test_bad_paging_is_one_line(kw, words):
    with pytest.raises(DFAError, match=words):
        context_rows(Choices(MODEL, ("gpu",)), **kw)


def test_past_max_seq_len_is_a_problem_not_a_traceback():
    row = context_rows(Choices(MODEL, ("gpu",), seq=200_000)).iloc[0]
    assert not row["fits"] and "max_seq_len" in row["problem"]


def test_on_fixed_chips_the_curve_crosses_one_where_it_stops_fitting():
    curves = context_curves(Choices(MODEL, ("lpu", "wse"), batch=8, seq=1024), [1024, 4096, 16384, 65536])
    for _, df in curves.groupby("machine"):
        assert df["used_fraction"].is_monotonic_increasing and df["chips"].nunique() == 1
        assert ((df["used_fraction"] <= 1.0) >= df["fits"]).all() and not df["fits"].iloc[-1]


def test_the_explorers_context_is_a_what_if_and_its_figure_is_saved(tmp_path):
    e = explore(MODEL, ("lpu",), interactive=False, show=False, static_path=tmp_path / "x.png")
    before = e.choices
    longer = e.context(seq=65536)
    assert e.choices == before and longer["kv_bytes"].iloc[0] > e.context()["kv_bytes"].iloc[0]
    with pytest.raises(DFAError, match="unknown choice"):
        e.context(speed=3)
    fig = e.context_figure([1024, 8192])
    assert (tmp_path / "x_context.png").exists() and "SIMULATED" in fig.axes[0].get_title()


@pytest.mark.parametrize("interactive", [False, True], ids=["static", "live"])
def test_the_context_figure_is_the_cells_result_and_leaves_pyplot(tmp_path, interactive):
    """Shown once, as the cell's result, in both modes: a figure left in pyplot would be drawn again by the
    inline backend under a static run, and a ``plt.show()`` after a live call would show nothing."""
    import matplotlib.pyplot as plt

    e = explore(MODEL, ("lpu",), interactive=interactive, show=False, static_path=tmp_path / "x.png")
    fig = e.context_figure([1024, 8192])
    assert not plt.fignum_exists(fig.number) and fig.axes  # out of pyplot, still drawn
    assert (tmp_path / "x_context.png").exists() != interactive  # saved only where widgets cannot render
