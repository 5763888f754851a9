"""common.dataflow.schedule: valid schedules, bounds, seeded noise, costs from the roofline; Lab 2's reference list
scheduler (grader-side answers, loaded from its file as the grader does) against the library's fifo one."""
import importlib.util
import math
from pathlib import Path

import pytest
import torch
import torch.fx as fx

from common.chips import get_chip
from common.dataflow.schedule import (
    Schedule,
    Slot,
    compare,
    dynamic_schedule,
    execute_static,
    from_edges,
    noisy_costs,
    random_dag,
    task_graph,
    upward_rank,
)
from common.errors import DFAError
from common.graph.costs import annotate, node_table
from common.models import build_block

ANSWERS = Path(__file__).resolve().parents[1] / "course2_dataflow" / "source" / "lab2_dataflow" / "answers.py"
_spec = importlib.util.spec_from_file_location("lab2_answers", ANSWERS)
answers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(answers)
list_schedule = answers.list_schedule

# a fork/join by hand: a feeds b (5) and c (1); d joins them; e hangs off c
HAND = from_edges({"a": 2.0, "b": 5.0, "c": 1.0, "d": 1.0, "e": 3.0},
                  [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("c", "e")])


def test_upward_rank_and_critical_path_by_hand():
    assert upward_rank(HAND) == {"e": 3.0, "d": 1.0, "c": 4.0, "b": 6.0, "a": 8.0}
    assert HAND.critical_path() == (8.0, ["a", "b", "d"])
    assert HAND.total_work() == 12.0


def test_list_schedule_by_hand():
    s = list_schedule(HAND, 2)
    # t=0 a on PE0; t=2 b (rank 6) on PE0, c on PE1; t=3 e on PE1; t=7 d on PE0
    assert {n: (x.pe, x.start, x.end) for n, x in s.slots.items()} == {
        "a": (0, 0.0, 2.0), "b": (0, 2.0, 7.0), "c": (1, 2.0, 3.0), "e": (1, 3.0, 6.0), "d": (0, 7.0, 8.0)}
    assert s.makespan == 8.0 and s.utilisation == pytest.approx(12.0 / 16.0)
    assert s.order() == {0: ["a", "b", "d"], 1: ["c", "e"]}
    assert list_schedule(HAND, 1).makespan == 12.0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("pes", [1, 2, 3, 5])
def test_schedules_are_valid_and_respect_the_bounds(seed, pes):
    g = random_dag(30, width=4, seed=seed)
    actual = noisy_costs(g, 0.5, seed)
    cp, _ = g.critical_path(actual)
    for s, costs in ((list_schedule(g, pes), g.costs()), (execute_static(list_schedule(g, pes), g, actual), actual),
                     (dynamic_schedule(g, pes, actual), actual),
                     (dynamic_schedule(g, pes, actual, priority="fifo", overhead=0.3), actual)):
        s.validate(g, costs)
        assert s.makespan >= max(g.critical_path(costs)[0], g.total_work(costs) / pes) * (1 - 1e-12)
        assert 0 < s.utilisation <= 1 + 1e-12


def test_static_plan_runs_as_planned_without_noise_and_fifo_is_another_schedule():
    g = random_dag(40, width=5, seed=3)
    for pes in (2, 4):
        s = list_schedule(g, pes)
        assert execute_static(s, g, g.costs()).slots == s.slots  # exact estimates: the plan is what happens
        assert dynamic_schedule(g, pes).slots != s.slots  # first-ready-first-served is not the rank plan
    actual = noisy_costs(g, 1.0, 0)
    assert execute_static(list_schedule(g, 3), g, actual).slots != dynamic_schedule(g, 3, actual).slots
    # the library offers no rank-priority ready queue: at exact costs it would be the lab's static answer
    with pytest.raises(DFAError, match="unknown priority 'rank'"):
        dynamic_schedule(g, 2, priority="rank")
    # overhead is paid per firing: with one PE the makespan grows by exactly n x overhead
    assert dynamic_schedule(g, 1, overhead=0.5).makespan == pytest.approx(g.total_work() + 0.5 * 40)


def test_static_plan_keeps_its_order_when_a_task_runs_late():
    plan = list_schedule(HAND, 2)
    late = dict(HAND.costs(), c=6.0)  # c now ends at 8: e (after c on PE1) and d (after b on PE0) wait for it
    run = execute_static(plan, HAND, late)
    assert run.order() == plan.order() and run.slots["d"].start == 8.0 and run.slots["e"].start == 8.0
    assert run.makespan == 11.0  # e could not start before its input c
    dyn = dynamic_schedule(HAND, 2, late)
    assert dyn.makespan <= run.makespan


def test_noise_is_seeded_and_unbiased():
    g = random_dag(200, seed=0)
    a, b = noisy_costs(g, 0.5, 7), noisy_costs(g, 0.5, 7)
    assert a == b and a != noisy_costs(g, 0.5, 8)
    assert noisy_costs(g, 0.0, 1) == g.costs()
    ratios = [a[n] / g.tasks[n].cost for n in g.tasks]
    assert sum(ratios) / len(ratios) == pytest.approx(1.0, abs=0.15)
    logs = [math.log(r) for r in ratios]
    assert sum(logs) / len(logs) == pytest.approx(-0.125, abs=0.1)  # mean of log = -sigma^2 / 2


def test_validate_names_the_violation():
    good = {"a": Slot("a", 0, 0.0, 2.0), "b": Slot("b", 1, 2.0, 7.0), "c": Slot("c", 0, 2.0, 3.0),
            "d": Slot("d", 0, 7.0, 8.0), "e": Slot("e", 0, 3.0, 6.0)}
    Schedule(good, 2).validate(HAND)
    with pytest.raises(DFAError, match="task 'b' starts at 1 s before its input 'a' ends"):
        Schedule({**good, "b": Slot("b", 1, 1.0, 6.0)}, 2).validate(HAND)
    with pytest.raises(DFAError, match="tasks 'b' and 'e' overlap on PE 1"):
        Schedule({**good, "e": Slot("e", 1, 3.0, 6.0)}, 2).validate(HAND)
    with pytest.raises(DFAError, match="task 'e' runs 1 s, less than its cost 3 s"):
        Schedule({**good, "e": Slot("e", 0, 3.0, 4.0)}, 2).validate(HAND)
    with pytest.raises(DFAError, match="task 'd' is not scheduled"):
        Schedule({k: v for k, v in good.items() if k != "d"}, 2).validate(HAND)
    with pytest.raises(DFAError, match="positive int"):
        dynamic_schedule(HAND, 0)
    with pytest.raises(DFAError, match="unknown priority 'lifo'"):
        dynamic_schedule(HAND, 2, priority="lifo")


def test_task_graph_costs_are_the_per_pe_roofline():
    block = build_block("tiny-block", seed=0)
    gm = fx.symbolic_trace(block)
    annotate(gm, torch.randn(2, 16, 64))
    g = task_graph(gm, "h100-sxm", "fp32")
    df = node_table(gm, "h100-sxm", "fp32").set_index("node")
    chip = get_chip("h100-sxm")
    assert list(g.tasks) == list(df.index)  # one task per non-view node, in graph order
    peak, bw = chip.compute_peak("fp32")[0] / chip.compute_units, chip.main_memory.bandwidth / chip.compute_units
    for n, t in g.tasks.items():
        assert t.cost == pytest.approx(max(df.at[n, "flops"] / peak, df.at[n, "bytes"] / bw))
    assert g.tasks["q_proj"].preds == ("ln1",)  # through no views
    assert set(g.tasks["matmul"].preds) == {"q_proj", "k_proj"}  # through unflatten/transpose views
    assert g.tasks["add"].preds == ("o_proj",)  # the input x is not a task
    assert g.critical_path()[1][:2] == ["ln1", "q_proj"]


def test_compare_table():
    g = random_dag(25, seed=5)
    df = compare(g, (2, 4), (0.0, 1.0), seeds=(0, 1), static=list_schedule)
    assert len(df) == 2 * 2 * 2 * 2
    none = df[df["sigma"] == 0.0].pivot_table(index="P", columns="scheduler", values="makespan_s")
    assert list(none["static"]) == [list_schedule(g, p).makespan for p in (2, 4)]
    assert list(none["dynamic"]) == [dynamic_schedule(g, p).makespan for p in (2, 4)]
    assert (df["makespan_s"] >= df["lower_bound_s"] * (1 - 1e-12)).all()


def test_gantt_draws_one_bar_per_task_on_its_pe_row():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from common.dataflow.schedule import gantt
    s = list_schedule(HAND, 2)
    ax = gantt(s, HAND, unit="s")
    bars = [p for c in ax.collections for p in c.get_paths()]
    assert len(bars) == len(HAND.tasks)
    assert ax.get_title().startswith("SIMULATED static schedule on 2 PEs") and "makespan 8 s" in ax.get_title()
    assert ax.get_xlabel() == "simulated time (s)"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["PE 0", "PE 1"]
    plt.close(ax.figure)
