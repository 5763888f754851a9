"""Static vs dynamic scheduling of a task graph on an abstract dataflow machine with P identical PEs.

* **Task graph** (``task_graph``): one task per FX node that does work (views folded into the edges, as in
  ``common.graph.draw``), with the node's roofline time on *one PE*. A PE is ``1/U`` of a catalog chip (U = its
  compute units: SMs, cores), with ``1/U`` of its peak and of its main-memory bandwidth, so

      cost(n) = max(F_n / (peak / U), B_n / (bw / U)) = U * floor(n),

  where ``floor`` is the node's roofline time on the whole chip (``common.graph.costs.node_table``). Splitting the
  bandwidth evenly is a simplification (the PEs share one memory); it keeps every node on its own roof.
* **Static list scheduling** (after Graham 1969 and the upward rank of HEFT) is Lab 2's graded stub: the
  learner writes the planner and passes it to ``compare`` (its reference lives with the lab's grader-side
  answers). ``execute_static`` runs such a plan (placement + order per PE) with the *actual* costs,
  self-timed: a task starts when its inputs are done and its PE has finished the task planned before it - so
  a wrong estimate leaves a PE idle, or makes a planned-ready task late.
* **Dynamic scheduling** (``dynamic_schedule``): a ready queue decided *at run time* with the actual costs,
  first ready first served (the task whose inputs completed first; ties in graph order), lowest idle PE
  first; it adapts, but pays ``overhead`` seconds per firing (token matching, queue arbitration). A run-time
  scheduler that used the compiler's rank instead would reproduce the static plan at exact costs - that rule
  is the lab's to write, so it is not offered here.
* **Cost noise** (``noisy_costs``): actual = estimate x exp(sigma z - sigma^2 / 2), z ~ N(0, 1) seeded; the
  factor has mean 1, so total work is unbiased while single tasks are off by ~sigma.

Bounds for any schedule: makespan >= max(critical path, total work / P); utilisation = work / (P x makespan).
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
import torch.fx as fx

from common.errors import DFAError, unknown
from common.palette import bound_style


@dataclass(frozen=True)
class Task:
    name: str
    cost: float  # estimated seconds on one PE
    preds: tuple[str, ...] = ()
    op: str = ""
    bound: str = ""  # compute | memory (from the roofline), "" for hand-built graphs


@dataclass
class TaskGraph:
    tasks: dict[str, Task]  # in a topological order
    pe: str = "one PE"  # what one PE is, for titles

    def __post_init__(self):
        self.succs: dict[str, list[str]] = {n: [] for n in self.tasks}
        index = {n: i for i, n in enumerate(self.tasks)}
        for t in self.tasks.values():
            for p in t.preds:
                if index.get(p, len(index)) >= index[t.name]:
                    raise DFAError(f"task {t.name!r}: predecessor {p!r} must be a task listed before it")
                self.succs[p].append(t.name)

    def costs(self) -> dict[str, float]:
        return {n: t.cost for n, t in self.tasks.items()}

    def total_work(self, costs: dict | None = None) -> float:
        return float(sum((costs or self.costs()).values()))

    def critical_path(self, costs: dict | None = None) -> tuple[float, list[str]]:
        """Length (s) and tasks of the longest cost-weighted path from an entry to an exit task."""
        costs = costs or self.costs()
        rank = upward_rank(self, costs)
        path = [max((n for n, t in self.tasks.items() if not t.preds), key=lambda n: rank[n])]
        while self.succs[path[-1]]:
            path.append(max(self.succs[path[-1]], key=lambda n: rank[n]))
        return rank[path[0]], path


def task_graph(gm: fx.GraphModule, chip="h100-sxm", dtype: str | None = None, *,
               pes_per_chip: int | None = None) -> TaskGraph:
    """Tasks of an annotated graph (``common.graph.costs.annotate``) with the per-PE roofline cost (module doc)."""
    from common.chips import get_chip
    from common.graph.costs import node_table
    chip = get_chip(chip)
    units = int(pes_per_chip or chip.compute_units)
    df = node_table(gm, chip, dtype).set_index("node")
    names = set(df.index)
    memo: dict[fx.Node, tuple[str, ...]] = {}

    def producers(n: fx.Node) -> tuple[str, ...]:  # look through views and inputs to the tasks feeding n
        if n not in memo:
            out: list[str] = []
            for a in n.all_input_nodes:
                for p in ((a.name,) if a.name in names else producers(a)):
                    if p not in out:
                        out.append(p)
            memo[n] = tuple(out)
        return memo[n]

    tasks = {n.name: Task(n.name, float(df.at[n.name, "floor_s"]) * units, producers(n), str(df.at[n.name, "op"]),
                          str(df.at[n.name, "bound"])) for n in gm.graph.nodes if n.name in names}
    return TaskGraph(tasks, pe=f"1/{units} of {chip.name} ({df.attrs['dtype']})")


def from_edges(costs: dict[str, float], edges: list[tuple[str, str]]) -> TaskGraph:
    """A hand-built graph: ``costs`` in topological order, ``edges`` as (producer, consumer)."""
    preds: dict[str, list[str]] = {n: [] for n in costs}
    for u, v in edges:
        if u not in costs or v not in costs:
            raise unknown("task", v if u in costs else u, costs)
        preds[v].append(u)
    return TaskGraph({n: Task(n, float(c), tuple(preds[n])) for n, c in costs.items()}, pe="one PE")


def random_dag(n: int, *, width: int = 4, seed: int = 0) -> TaskGraph:
    """A seeded random layered DAG (for tests): costs in [1, 10), each task fed by 1-3 tasks of earlier layers."""
    rng = random.Random(seed)
    names = [f"t{i}" for i in range(n)]
    costs = {m: rng.uniform(1.0, 10.0) for m in names}
    edges = []
    for i in range(width, n):
        for j in rng.sample(range(max(0, i - 3 * width), i), k=min(i, rng.randint(1, 3))):
            edges.append((names[j], names[i]))
    return from_edges(costs, edges)


def upward_rank(g: TaskGraph, costs: dict | None = None) -> dict[str, float]:
    """rank(t) = cost(t) + max over successors s of rank(s): the critical path from t to the end."""
    costs = costs or g.costs()
    rank: dict[str, float] = {}
    for n in reversed(list(g.tasks)):
        rank[n] = costs[n] + max((rank[s] for s in g.succs[n]), default=0.0)
    return rank


@dataclass(frozen=True)
class Slot:
    task: str
    pe: int
    start: float
    end: float


@dataclass
class Schedule:
    slots: dict[str, Slot]
    pes: int
    kind: str = "static"
    work: dict[str, float] = field(default_factory=dict)  # useful seconds per task (without overhead)

    @property
    def makespan(self) -> float:
        return max((s.end for s in self.slots.values()), default=0.0)

    @property
    def utilisation(self) -> float:
        """Useful PE-seconds / (P x makespan)."""
        work = sum(self.work.values()) if self.work else sum(s.end - s.start for s in self.slots.values())
        return work / (self.pes * self.makespan) if self.makespan else 0.0

    def order(self) -> dict[int, list[str]]:
        """Tasks on each PE in start order: the compile-time artefact of a static schedule."""
        out: dict[int, list[str]] = {p: [] for p in range(self.pes)}
        for s in sorted(self.slots.values(), key=lambda s: (s.start, s.end)):
            out[s.pe].append(s.task)
        return out

    def validate(self, g: TaskGraph, costs: dict | None = None, *, rel: float = 1e-9) -> None:
        """A DFAError naming the first violation: a task missing, on a bad PE, shorter than its cost, started
        before a predecessor ended, or overlapping another task on its PE."""
        costs = costs or g.costs()
        for n in g.tasks:
            s = self.slots.get(n)
            if s is None:
                raise DFAError(f"task {n!r} is not scheduled")
            if not (isinstance(s.pe, int) and 0 <= s.pe < self.pes):
                raise DFAError(f"task {n!r} is on PE {s.pe!r}; valid: 0..{self.pes - 1}")
            if s.end - s.start < costs[n] * (1 - rel) - 1e-15:
                raise DFAError(f"task {n!r} runs {s.end - s.start:.3g} s, less than its cost {costs[n]:.3g} s")
            for p in g.tasks[n].preds:
                if s.start < self.slots[p].end * (1 - rel) - 1e-15:
                    raise DFAError(f"task {n!r} starts at {s.start:.3g} s before its input {p!r} ends "
                                   f"({self.slots[p].end:.3g} s)")
        for pe, names in self.order().items():
            for a, b in zip(names, names[1:], strict=False):
                if self.slots[b].start < self.slots[a].end * (1 - rel) - 1e-15:
                    raise DFAError(f"tasks {a!r} and {b!r} overlap on PE {pe}")


def execute_static(plan: Schedule, g: TaskGraph, actual: dict) -> Schedule:
    """Run a static plan (placement + order per PE) with the actual costs, self-timed: each task starts when
    its inputs have ended and the task before it on its PE has ended."""
    order = plan.order()
    prev = {n: (names[i - 1] if i else None) for names in order.values() for i, n in enumerate(names)}
    missing = [n for n in g.tasks if n not in prev]
    if missing:
        raise DFAError(f"the plan does not place task(s) {', '.join(missing)}")
    end, slots = {}, {}
    while len(slots) < len(g.tasks):
        progressed = False
        for n in g.tasks:
            if n in slots or (prev[n] and prev[n] not in end) or any(p not in end for p in g.tasks[n].preds):
                continue
            start = max([end[p] for p in g.tasks[n].preds] + ([end[prev[n]]] if prev[n] else []), default=0.0)
            slots[n] = Slot(n, plan.slots[n].pe, start, start + actual[n])
            end[n] = slots[n].end
            progressed = True
        if not progressed:  # a PE order that contradicts the dependencies: the plan itself deadlocks
            stuck = [n for n in g.tasks if n not in slots]
            raise DFAError(f"the static plan deadlocks: {', '.join(stuck[:5])} wait on a task ordered after them "
                           "on the same PE")
    return Schedule(slots, plan.pes, "static", dict(actual))


def dynamic_schedule(g: TaskGraph, pes: int, actual: dict | None = None, *, priority: str = "fifo",
                     overhead: float = 0.0) -> Schedule:
    """Run-time ready-queue scheduling with the actual costs, first ready first served: at each event time the
    idle PEs (lowest index first) take the ready tasks in the order their inputs completed (ties: graph order);
    the clock then jumps to the next task end. Each firing occupies its PE ``overhead`` seconds longer than its
    work. ``priority`` is "fifo", the only rule offered (module docstring)."""
    actual = actual or g.costs()
    if priority != "fifo":
        raise unknown("priority", priority, ("fifo",))
    if overhead < 0:
        raise DFAError(f"overhead must be >= 0 s, got {overhead!r}")
    if isinstance(pes, bool) or not isinstance(pes, int) or pes < 1:
        raise DFAError(f"the number of PEs must be a positive int, got {pes!r}")
    index = {n: i for i, n in enumerate(g.tasks)}
    pe_free, end, slots, t = [0.0] * pes, {}, {}, 0.0
    while True:
        ready = [n for n in g.tasks if n not in slots and all(end.get(p, math.inf) <= t for p in g.tasks[n].preds)]
        ready.sort(key=lambda n: (max((end[p] for p in g.tasks[n].preds), default=0.0), index[n]))
        idle = [p for p in range(pes) if pe_free[p] <= t]
        for p, n in zip(idle, ready, strict=False):
            slots[n] = Slot(n, p, t, t + actual[n] + overhead)
            end[n] = pe_free[p] = slots[n].end
        if len(slots) == len(g.tasks):
            return Schedule(slots, pes, "dynamic", dict(actual))
        t = min(x for x in [*pe_free, *end.values()] if x > t)


def noisy_costs(g: TaskGraph, sigma: float, seed: int = 0) -> dict[str, float]:
    """Actual costs: estimate x exp(sigma z - sigma^2 / 2), z ~ N(0, 1) from ``random.Random(seed)``."""
    if sigma < 0:
        raise DFAError(f"sigma must be >= 0, got {sigma!r}")
    rng = random.Random(seed)
    return {n: t.cost * math.exp(sigma * rng.gauss(0.0, 1.0) - sigma * sigma / 2) for n, t in g.tasks.items()}


def compare(g: TaskGraph, pes_list, sigmas, seeds=(0,), *, static: Callable, overhead: float = 0.0,
            priority: str = "fifo") -> pd.DataFrame:
    """Makespan and utilisation of static (planned on estimates, run on actual costs) and dynamic scheduling,
    one row per (P, sigma, seed); ``static(g, P)`` is the planner: the learner's own (Lab 2)."""
    rows = []
    for pes in pes_list:
        plan = static(g, pes)
        for sigma in sigmas:
            for seed in seeds:
                actual = noisy_costs(g, sigma, seed)
                cp, _ = g.critical_path(actual)
                for kind, s in (("static", execute_static(plan, g, actual)),
                                ("dynamic", dynamic_schedule(g, pes, actual, priority=priority, overhead=overhead))):
                    rows.append({"P": pes, "sigma": sigma, "seed": seed, "scheduler": kind, "makespan_s": s.makespan,
                                 "utilisation": s.utilisation, "critical_path_s": cp,
                                 "lower_bound_s": max(cp, g.total_work(actual) / pes)})
    return pd.DataFrame(rows)


BOUND_COLORS = {k: bound_style(k).colour for k in ("compute", "memory", "")}  # common.palette's


def gantt(schedule: Schedule, g: TaskGraph, ax=None, *, title: str | None = None, unit: str = "us",
          label_min: float = 0.05):
    """One row per PE, one bar per task coloured by its bound; labels on bars wider than ``label_min`` of the
    makespan. Title says SIMULATED: this is the abstract machine, not a measurement."""
    import matplotlib.pyplot as plt
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}[unit]
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 0.45 * schedule.pes + 1.6))
    span = schedule.makespan
    for s in schedule.slots.values():
        t = g.tasks[s.task]
        fill = bound_style(t.bound)  # colour and hatch: never colour alone
        ax.broken_barh([(s.start * scale, (s.end - s.start) * scale)], (s.pe - 0.4, 0.8),
                       facecolors=fill.colour, hatch=fill.hatch, edgecolor="white", linewidth=0.5)
        if span and (s.end - s.start) >= label_min * span:
            ax.text((s.start + s.end) / 2 * scale, s.pe, s.task, ha="center", va="center", fontsize=6,
                    color="black", clip_on=True)
    ax.set_yticks(range(schedule.pes), [f"PE {p}" for p in range(schedule.pes)], fontsize=7)
    ax.set_ylim(schedule.pes - 0.5, -0.5)
    ax.set_xlabel(f"simulated time ({'µs' if unit == 'us' else unit})")
    kinds = sorted({t.bound for t in g.tasks.values()})
    handles = [plt.Rectangle((0, 0), 1, 1, fc=bound_style(k).colour, hatch=bound_style(k).hatch, ec="white")
               for k in kinds]
    ax.legend(handles, [f"{k}-bound" if k else "task" for k in kinds], loc="upper left", bbox_to_anchor=(1.002, 1.0),
              fontsize=7, frameon=False)
    ax.set_title(title or f"SIMULATED {schedule.kind} schedule on {schedule.pes} PEs ({g.pe}): makespan "
                 f"{span * scale:.3g} {unit}, utilisation {schedule.utilisation:.0%}", fontsize=9)
    return ax
