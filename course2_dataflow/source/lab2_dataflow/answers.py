"""Grader-side references for Lab 2 (instructor edition only: never released, never published).

Hidden tests import these (``from answers import run_tokens as _ref``); nothing here is reachable from the
learner's kernel. Each function is the spec of its stub, written once:

* ``run_tokens(gm, *args)``: one-shot token firing. Nodes without inputs are ready at the start (graph order);
  a FIFO queue of ready nodes; firing pops the tokens on a node's input edges, evaluates it
  (``common.dataflow.Evaluator``) and pushes the result to each user in ``node.users`` order; a user whose
  last token arrived joins the back of the queue. Returns (the output node's value, names in firing order).
* ``levels(sg)`` / ``skew_capacities(sg)``: level(a) = 0 without inputs, else 1 + max level of its producers;
  capacity(u -> v) = level(v) - level(u) + 1 (actor v fires item i in round i + level(v)).
* ``list_schedule(g, P)``: list scheduling, priority = upward rank cost(t) + max rank of successors (ties:
  graph order), ready tasks paired with idle PEs (lowest index first) at each event time.
* ``node_annotations(gm, args, peak, bandwidth)``: ``common.costs.node_table`` rows (nodes that do work, no
  views) with bound = "compute" iff intensity >= peak / bandwidth (a roofline the catalog need not hold).
* ``dma_edges(program)``: (producer, op) for each input read from LPDDR5, (op, "LPDDR5") for each op with
  ``lpddr_write > 0``, over the plans of non-fallback kernels; sorted.
* ``qk_intensity(seq, head_dim, b)``: 2 seq^2 head_dim FLOPs / (b (2 seq head_dim + seq^2)) bytes (read Q, K;
  write the seq x seq scores). ``qk_bound(seq, head_dim, dtype, chip)``: "compute" iff that intensity (b =
  ``DTYPE_BYTES[dtype]``) >= the catalog chip's ``ridge_point(dtype)`` (peak over main-memory bandwidth).
* ``fusion_bytes(chain, numel, b)``: (len(chain) * 2 numel b, 2 numel b): each op reads and writes numel
  elements op by op; fused, the chain reads once and writes once.
"""

from __future__ import annotations

from collections import deque

import pandas as pd

from common.chips import DTYPE_BYTES, get_chip
from common.costs import annotate, node_table
from common.dataflow import Evaluator
from common.schedule import Schedule, Slot, upward_rank


def run_tokens(gm, *args):
    ev = Evaluator(gm, *args)
    missing = {n: len(n.all_input_nodes) for n in gm.graph.nodes}
    tokens, trace, result = {}, [], None
    ready = deque(n for n in gm.graph.nodes if missing[n] == 0)
    while ready:
        n = ready.popleft()
        value = ev.evaluate(n, {p: tokens.pop((p, n)) for p in n.all_input_nodes})
        trace.append(n.name)
        if n.op == "output":
            result = value
        for user in n.users:
            tokens[(n, user)] = value
            missing[user] -= 1
            if missing[user] == 0:
                ready.append(user)
    return result, trace


def levels(sg) -> dict[str, int]:
    lv: dict[str, int] = {}
    for name, actor in sg.actors.items():  # producers before consumers
        lv[name] = 1 + max((lv[p] for p in actor.inputs), default=-1)
    return lv


def skew_capacities(sg) -> dict[tuple[str, str], int]:
    lv = levels(sg)
    return {(u, v): lv[v] - lv[u] + 1 for (u, v) in sg.edges}


def list_schedule(g, pes: int) -> Schedule:
    costs, index = g.costs(), {n: i for i, n in enumerate(g.tasks)}
    rank = upward_rank(g, costs)
    pe_free, slots, t = [0.0] * pes, {}, 0.0
    while len(slots) < len(g.tasks):
        ready = [
            n for n in g.tasks if n not in slots and all(p in slots and slots[p].end <= t for p in g.tasks[n].preds)
        ]
        ready.sort(key=lambda n: (-rank[n], index[n]))
        for p, n in zip([p for p in range(pes) if pe_free[p] <= t], ready, strict=False):
            slots[n] = Slot(n, p, t, t + costs[n])
            pe_free[p] = slots[n].end
        later = [e for e in [*pe_free, *(s.end for s in slots.values())] if e > t]
        t = min(later) if later else t
    return Schedule(slots, pes, "static", dict(costs))


def node_annotations(gm, args, peak: float, bandwidth: float) -> pd.DataFrame:
    df = node_table(annotate(gm, *args))[["node", "op", "shape", "flops", "bytes", "intensity"]]
    return df.assign(bound=["compute" if i >= peak / bandwidth else "memory" for i in df["intensity"]])


def dma_edges(program) -> list[tuple[str, str]]:
    edges = set()
    for k in program.kernels:
        for plan in k.tiling.get("sdsc", []):
            edges |= {(src, plan["name"]) for src, where in plan["inputs_from"].items() if where == "LPDDR5"}
            if plan["lpddr_write"] > 0:
                edges.add((plan["name"], "LPDDR5"))
    return sorted(edges)


def qk_intensity(seq: int, head_dim: int, bytes_per_el: float) -> float:
    return 2 * seq * seq * head_dim / (bytes_per_el * (2 * seq * head_dim + seq * seq))


def qk_bound(seq: int, head_dim: int, dtype: str, chip) -> str:
    ridge = get_chip(chip).ridge_point(dtype)
    return "compute" if qk_intensity(seq, head_dim, DTYPE_BYTES[dtype]) >= ridge else "memory"


def fusion_bytes(chain, numel: int, bytes_per_el: int) -> tuple[int, int]:
    return len(chain) * 2 * numel * bytes_per_el, 2 * numel * bytes_per_el
