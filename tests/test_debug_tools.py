"""Course 5 tools: the failure taxonomy, the first-divergence finder, the reducer and timing regions."""
import importlib.util
import random
import re
from pathlib import Path

import pytest
import torch

from common.debug import divergence, reducer, taxonomy, timing
from common.debug.bugs import make_bug
from common.errors import DFAError
from common.sim import simulate_llm


class CloneThenScale(torch.nn.Module):
    def forward(self, x):
        return x.clone() * 2 + 1


def test_taxonomy_has_eight_layers_by_five_stacks_with_sources():
    assert taxonomy.LAYER_KEYS == ("capture", "lowering", "coverage", "layout", "codegen", "memory", "schedule",
                                   "numerics")
    for layer in taxonomy.LAYERS:
        assert layer.what_fails and layer.symptom and layer.tool
        assert set(layer.examples) == set(taxonomy.SYSTEMS)
        for ex in layer.examples.values():
            assert len(ex.text) > 40 and ex.kind in ("issue", "doc", "illustrative")
            assert ex.source.startswith("http") or "ISCA" in ex.source
            if ex.kind == "issue":
                assert "/issues/" in ex.source or "/pull/" in ex.source
    df = taxonomy.frame()
    assert df.shape[0] == 8 and all(s in df.columns for s in taxonomy.SYSTEMS)
    text = taxonomy.render()
    assert all(layer.name in text for layer in taxonomy.LAYERS) and text.count("\n  - ") == 40
    assert "issues/3166" in taxonomy.get_layer("codegen").example("Spyre").source
    assert not any("65" in ex.text for layer in taxonomy.LAYERS for ex in layer.examples.values())  # Lab 5's bug
    with pytest.raises(DFAError, match="unknown layer 'dma'"):
        taxonomy.get_layer("dma")


ANSWERS = Path(__file__).resolve().parents[1] / "course5_debug/source/lab5_debug/answers.py"


def lab5_answers():
    spec = importlib.util.spec_from_file_location("lab5_answers", ANSWERS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_failure_reports_carry_no_answer_and_need_their_numbers():
    read_report = lab5_answers().read_report
    a, b = taxonomy.draw_reports(1, 10), taxonomy.draw_reports(1, 10)
    assert a == b and [r.id for r in a] == [f"R{i:02d}" for i in range(1, 11)]
    assert all(set(vars(r)) == {"id", "system", "text"} for r in a)  # no layer, no entry
    assert any([r.text for r in taxonomy.draw_reports(s, 10)] != [r.text for r in a] for s in range(2, 6))
    reports = [r for s in range(200) for r in taxonomy.draw_reports(s, 10)]
    keys = [read_report(r.text) for r in reports]  # every report has an entry that goes wrong first
    assert {layer for _, layer in keys} == set(taxonomy.LAYER_KEYS)
    assert not any(k in r.text for r in reports for k in ("codegen", "numerics", "coverage", "layout", "capture"))
    # the words do not give the layer away: a bag-of-words overlap with the taxonomy's own texts scores far
    # below the 8 of 10 that earn the points, and so does taking the last entry that has numbers
    def tokens(text):
        return set(re.findall(r"[a-z]\w+", text.lower()))

    words = {layer.key: tokens(" ".join([layer.key, layer.name, layer.what_fails, layer.symptom, layer.tool,
                                         *(e.text for e in layer.examples.values())])) for layer in taxonomy.LAYERS}
    bow = [max(words, key=lambda k, r=r: len(words[k] & tokens(r.text))) for r in reports]
    assert sum(g == layer for g, (_, layer) in zip(bow, keys, strict=True)) < 0.6 * len(reports)
    last = [[ln.split()[0] for ln in r.text.splitlines()[1:] if not ln.endswith("not reached")][-1] for r in reports]
    assert sum(g == entry for g, (entry, _) in zip(last, keys, strict=True)) < 0.6 * len(reports)
    with pytest.raises(DFAError, match="n must be between 1 and"):
        taxonomy.draw_reports(0, 99)


def test_first_divergence_finds_the_planted_copy_and_not_a_clean_graph():
    x = torch.randn(3, 65, dtype=torch.float16) + 3.0  # no zeros: every lost element shows
    bug = make_bug("wrong", 0)
    found = divergence.first_divergence(None, (x,), compiled=bug.compile(CloneThenScale(), (x,)))
    assert found.node == "clone" and found.op == "aten.clone" and found.index[-1] == 64
    assert found.target_value == 0.0 and found.reference_value == pytest.approx(float(x[found.index]), rel=1e-3)
    assert found.table["diverged"].tolist() == [True, True, True]  # everything after it inherits the error
    clean = divergence.first_divergence(CloneThenScale(), (x,), "spyre")
    assert clean.node is None and not clean.diverged and len(clean.table) == 3
    aligned = torch.randn(3, 64, dtype=torch.float16) + 3.0
    assert not divergence.first_divergence(None, (aligned,), compiled=bug.compile(CloneThenScale(), (aligned,))
                                           ).diverged


def test_divergence_flags_nan_in_one_run_only():
    t, r = torch.tensor([1.0, float("nan"), 2.0]), torch.tensor([1.0, 0.5, 2.0])
    worst = divergence.compare(t, r, 5e-3)
    assert worst["index"] == (1,) and worst["abs_error"] == float("inf")
    assert divergence.compare(r, r.clone(), 5e-3) is None
    both = torch.tensor([float("nan"), 1.0])
    assert divergence.compare(both, both.clone(), 5e-3) is None


def test_ddmin_is_one_minimal_on_a_known_predicate():
    items = list(range(20))
    out = reducer.ddmin(items, lambda s: {3, 7, 15} <= set(s))
    assert out == [3, 7, 15]
    with pytest.raises(DFAError, match="needs a failing input"):
        reducer.ddmin(items, lambda s: False)


@pytest.mark.parametrize("n, threshold", [(100, 65), (128, 1), (7, 7), (50, 33)])
def test_smallest_failing_on_monotone_predicates(n, threshold):
    assert reducer.smallest_failing(n, lambda m: m >= threshold) == threshold


def test_reducer_shrinks_the_stick_bug_to_one_copy_that_fails_the_same_way():
    bug = make_bug("wrong", 2)
    compiled = bug.compile(bug.model, bug.args)
    node = divergence.first_divergence(None, bug.args, compiled=compiled).node
    repro = reducer.reduce(compiled, bug.args, bug.compile_fn)
    assert repro.nodes == [node] and repro.op == "aten.clone"
    assert repro.failure == reducer.Failure("diverges", "aten.clone")
    assert repro.shape[:-1] == (1, 1) and repro.shape[-1] > 64 and repro.shape[-1] % 64
    fails = reducer.same_failure(bug.compile_fn, repro.failure)
    assert reducer.is_one_minimal(repro, fails)
    # a reproducer that is not minimal is recognised as such
    values = reducer.node_values(compiled, bug.args)
    big = reducer.Reproducer(*reducer.extract(compiled.aten, [node], values), repro.failure)
    assert fails(big.gm, big.inputs) and not reducer.is_one_minimal(big, fails)


def test_reducer_keeps_the_exception_type_of_a_hang():
    bug = make_bug("hang", 4)
    compiled = bug.compile(bug.model, bug.args)
    repro = reducer.reduce(compiled, bug.args, bug.compile_fn)
    want = "SimTimeoutError" if bug._rule["fault"] == "dma_timeout" else "DeadlockError"
    assert repro.failure == reducer.Failure("raises", want) and len(repro.nodes) == 1
    assert reducer.is_one_minimal(repro, reducer.same_failure(bug.compile_fn, repro.failure))


def _random_events(seed):
    from common.sim.program import Event
    rng = random.Random(seed)
    kinds = ("compute", "dma", "host", "launch", "sync", "comm")
    return [Event(f"e{i}", rng.choice(kinds), rng.choice(("cores", "dma", "host")), rng.uniform(0, 10),
                  rng.uniform(0.1, 3)) for i in range(25)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exclusive_split_sums_to_the_window_and_respects_priority(seed):
    events = _random_events(seed)
    split = timing.exclusive_split(events, 2.0, 9.0)
    assert sum(split.values()) == pytest.approx(7.0)
    kernel_union = timing.TimingRegion(type("R", (), {"events": events})(), 2.0, 9.0).busy()["kernel"]
    assert split["kernel"] == pytest.approx(kernel_union)  # kernels are never charged to anything else


def test_timing_region_of_a_report_sums_to_its_time_and_names_the_fallback():
    bug = next(b for b in (make_bug("slow", s) for s in range(20)) if type(b.model).__name__ == "RunningMean")
    r = bug.report()
    region = timing.timing_region(r)
    split = region.split()
    assert sum(split.values()) == pytest.approx(r.time_s, rel=1e-12)
    assert split["host"] > 0 and split["transfer"] > 0 and region.causes() == ["fallback:aten.cumsum"]
    assert 0 < region.optimum_s() < region.wall_s  # never faster than its floors
    busy = region.busy()
    assert all(busy[k] >= split[k] - 1e-15 for k in busy)
    k = next(e.kernel for e in r.events if e.kind == "host")
    sub = timing.timing_region(r, k, k)
    assert sub.wall_s < r.time_s and sub.split()["kernel"] == 0.0 and sub.split()["host"] == split["host"]
    with pytest.raises(DFAError, match="no events of kernel 'k9'"):
        timing.timing_region(r, "k9")


def test_timing_region_with_communication_on_two_cards():
    r = simulate_llm("test", "tpu", phase="decode", batch=1, seq=16, chips=2)
    region = timing.timing_region(r)
    assert sum(region.split().values()) == pytest.approx(r.time_s)
    assert region.busy()["communication"] > 0


@pytest.mark.parametrize("order", [("transfer", "host", "kernel", "overhead", "communication"),
                                   ("overhead", "host", "communication", "transfer", "kernel")])
def test_grader_split_time_under_another_priority_matches_a_direct_sweep(order):
    events, (t0, t1) = _random_events(7), (1.0, 8.0)
    got = lab5_answers().split_time(events, t0, t1, order)
    rank = {c: i for i, c in enumerate(order)}
    want = dict.fromkeys((*order, "idle"), 0.0)
    steps = 20000
    for i in range(steps):  # midpoint rule: each instant goes to the highest-ranked active category
        t = t0 + (i + 0.5) * (t1 - t0) / steps
        active = [timing.category(e) for e in events if e.start <= t < e.end]
        want[min(active, key=rank.__getitem__) if active else "idle"] += (t1 - t0) / steps
    assert set(got) == set(want) and all(got[k] == pytest.approx(want[k], abs=2e-3) for k in want)
    assert got != timing.exclusive_split(events, t0, t1)  # the library's fixed order gives another answer
