"""The spatial backends compare microbatch sizes on ``spatial.Tally`` stages (durations only). For every size
compared, the tally's ``step_time`` equals that of the full stages built with every event, bit for bit, so the
size chosen is the one the full timeline would choose."""
import pytest

from common.sim import simulate_llm, spatial


@pytest.mark.parametrize("model, batch, seq", [("test", 5, 16), ("llama-3.1-8b", 16, 2048)])
def test_lpu_tally_times_every_candidate_as_its_full_stages(monkeypatch, model, batch, seq):
    from common.sim.machines.lpu import LPUPolicy
    seen = {}
    walk, tally = LPUPolicy._walk, LPUPolicy._tally

    def record_walk(self, steps, pieces):
        seen.update(policy=self, steps=steps, pieces=pieces)
        return walk(self, steps, pieces)

    def record_tally(self, w, q):
        seen.setdefault("qs", []).append(q)
        return tally(self, w, q)

    monkeypatch.setattr(LPUPolicy, "_walk", record_walk)
    monkeypatch.setattr(LPUPolicy, "_tally", record_tally)
    simulate_llm(model, "lpu", batch=batch, seq=seq)
    p, steps, pieces = seen["policy"], seen["steps"], seen["pieces"]
    assert len(seen["qs"]) > 1
    for q in seen["qs"]:
        n = round(1 / q)
        light = spatial.step_time(tally(p, walk(p, steps, pieces), q), n)
        full = spatial.step_time(p._stages(steps, pieces, q), n)
        assert light == full and light > 0


@pytest.mark.parametrize("model, batch, seq", [("test", 5, 16), ("llama-3.1-8b", 16, 2048)])
def test_wse_tally_times_every_candidate_as_its_full_stages(monkeypatch, model, batch, seq):
    from common.sim.machines.wse import WSEPolicy
    calls = []
    stages = WSEPolicy._stages

    def record(self, steps, shape, wafer, label, q, tally=False):
        if tally:
            calls.append((self, steps, shape, wafer, label, q))
        return stages(self, steps, shape, wafer, label, q, tally=tally)

    monkeypatch.setattr(WSEPolicy, "_stages", record)
    simulate_llm(model, "wse", batch=batch, seq=seq)
    assert len(calls) > 1
    for p, steps, shape, wafer, label, q in calls:
        n = round(1 / q)
        light = spatial.step_time(stages(p, steps, shape, wafer, label, q, tally=True), n)
        full = spatial.step_time(stages(p, steps, shape, wafer, label, q), n)
        assert light == full and light > 0
