"""common.sim.sweep: a what-if table whose every row is the report simulate_llm gives for that configuration."""
import dataclasses

import pytest

from common.errors import DFAError
from common.sim import simulate_llm, sweep
from common.sim.program import Event
from common.sim.sweeps import COLUMNS

KEYS = ("backend", "chip", "chips", "phase", "batch", "seq", "dtype", "time_s", "tokens_per_s",
        "tokens_per_s_per_user", "bottleneck", "flops", "achieved_flops_per_s", "peak_flops_per_s")


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_every_row_is_the_direct_simulation_event_for_event(phase):
    reports = []
    df = sweep("test", ["gpu", "wse", "lpu", "spyre", "tpu"], batches=[1, 3], seqs=(4, 16), phase=phase,
               reports=reports)
    assert list(df.columns) == list(COLUMNS) and len(df) == len(reports) == 5 * 2 * 2
    assert set(zip(df["backend"], df["batch"], df["seq"], strict=True)) == {
        (b, n, s) for b in ("gpu", "wse", "lpu", "spyre", "tpu") for n in (1, 3) for s in (4, 16)}
    for row, r in zip(df.to_dict("records"), reports, strict=True):
        direct = simulate_llm("test", row["backend"], phase=phase, batch=row["batch"], seq=row["seq"])
        assert [dataclasses.astuple(e) for e in r.events] == [dataclasses.astuple(e) for e in direct.events]
        summary = direct.summary_row()
        assert {k: row[k] for k in KEYS} == {k: summary[k] for k in KEYS}
        assert row["bytes_by_level"] == summary["bytes"] and row["model"] == "test"
        assert {k: row[f"{k}_s"] for k in summary["attribution_s"]} == summary["attribution_s"]
        assert row["time_s"] > 0


def test_a_bigger_batch_moves_more_tokens_per_second_in_decode():
    # what a learner asks of it: decode is weight-bound, so a larger batch reuses each weight read
    df = sweep("llama-3.1-8b", "gpu", batches=(1, 32), seqs=1024)
    one, many = df.sort_values("batch")["tokens_per_s"]
    assert many > 4 * one


@pytest.mark.parametrize("kwargs, words", [
    ({"batches": (1, "8")}, ["batch", "'8' (str)"]),
    ({"seqs": ()}, ["seqs must hold at least one"]),
    ({"seqs": (8, 40)}, ["seq=40", "max_seq_len=32"]),
    ({"backends": ["gpu", "xpu"]}, ["unknown backend 'xpu'"]),
    ({"backends": []}, ["at least one of gpu"]),
    ({"phase": "train"}, ["unknown phase 'train'"]),
    ({"chips": 0}, ["chips must be a positive int"]),
    ({"dtype": "fp8", "backends": "tpu"}, ["no fp8 datapath"]),
    ({"model": "nope"}, ["unknown model 'nope'"]),
])
def test_bad_input_fails_first_with_one_line(kwargs, words):
    kwargs = {"model": "test", "seqs": (8,), **kwargs}
    with pytest.raises(DFAError) as exc:
        sweep(kwargs.pop("model"), **kwargs)
    msg = str(exc.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_event_copy_is_dataclasses_replace():
    e = Event("k1", "compute", "SM", 1.0, 2.0, 3, 4.0, {"HBM": 5.0}, "memory", "k1", 1.5, {"ops": ["aten.mm"]})
    for changes in ({}, {"start": 7.0, "chip": 2}, {"name": "L3.k1", "detail": {"x": 1}, "bytes": {}}):
        c = e.copy(**changes)
        assert c == dataclasses.replace(e, **changes) and c is not e and type(c) is Event
    assert e.start == 1.0  # the original is untouched
    with pytest.raises(TypeError):
        e.copy(strat=2.0)
