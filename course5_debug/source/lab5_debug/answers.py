"""Grader-side answers of Lab 5 (instructor edition only; imported by hidden tests, never by the learner).

* ``REPORT_LAYERS``: the layer of every failure report of ``common.debug.taxonomy.REPORTS`` (its ids are
  neutral; the rule for a hang: what the stuck work waited for — a transfer is ``memory``, other work is
  ``schedule``; the watchdog only reports).
* ``layer_of(bug)``: the layer of a planted bug: wrong value -> codegen (the copy kernel's range stops at a
  whole stick while the DMA moved every byte), NaN -> numerics, slow -> coverage (a CPU fallback), hang ->
  memory for a DMA that never completes, schedule for a cyclic wait.
* ``secret_bug(key, tag, like)``: a variant the learner never saw, seeded by
  ``sha256(GRADER_SALT | GRADER_STUDENT | key | tag | i)`` (the first ``i`` whose bug satisfies ``like``).
* ``split_time(events, t0, t1, priority)``: the exclusive split under any priority order, obtained from the
  library's fixed-order ``exclusive_split`` by relabelling each event's kind (rank r of ``priority`` gets the
  kind of the library's rank r), then renaming the result back.
* ``perf_region(bug)``: (t0, t1) of the kernel holding the host op, and its cause, from ``timing_region``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

from common.debug import bugs
from common.debug.timing import CATEGORIES, category, exclusive_split, timing_region

SALT = globals().get("GRADER_SALT") or os.environ.get("DFA_SALT", "local-dev-salt")
STUDENT = globals().get("GRADER_STUDENT", "local")

REPORT_LAYERS = {
    "R01": "capture", "R02": "codegen", "R03": "lowering", "R04": "capture", "R05": "coverage",
    "R06": "capture", "R07": "lowering", "R08": "layout", "R09": "schedule", "R10": "layout",
    "R11": "codegen", "R12": "memory", "R13": "layout", "R14": "schedule", "R15": "numerics",
    "R16": "codegen", "R17": "coverage", "R18": "schedule", "R19": "numerics", "R20": "lowering",
    "R21": "memory", "R22": "memory", "R23": "coverage", "R24": "numerics",
}

_FIXED = {"wrong": "codegen", "nan": "numerics", "slow": "coverage"}
_HANG = {"dma_timeout": "memory", "deadlock": "schedule"}


def layer_of(bug) -> str:
    return _HANG[bug._rule["fault"]] if bug.key == "hang" else _FIXED[bug.key]


def secret_seed(key: str, tag: str, i: int = 0) -> int:
    return int(hashlib.sha256(f"{SALT}|{STUDENT}|{key}|{tag}|{i}".encode()).hexdigest()[:8], 16)


def secret_bug(key: str, tag: str = "hidden", like=lambda b: True):
    """The first secret variant of bug ``key`` for which ``like(bug)`` holds."""
    for i in range(200):
        bug = bugs.make_bug(key, secret_seed(key, tag, i))
        if like(bug):
            return bug
    raise RuntimeError(f"no secret {key} variant satisfies the condition")


_KIND = {"kernel": "compute", "communication": "comm", "transfer": "dma", "host": "host", "overhead": "launch"}


def split_time(events, t0, t1, priority=CATEGORIES[:-1]) -> dict[str, float]:
    rank = {c: i for i, c in enumerate(priority)}
    relabelled = [dataclasses.replace(e, kind=_KIND[CATEGORIES[rank[category(e)]]]) for e in events]
    out = exclusive_split(relabelled, t0, t1)
    return {**{priority[i]: out[CATEGORIES[i]] for i in range(len(priority))}, "idle": out["idle"]}


def perf_region(bug) -> tuple[tuple[float, float], str]:
    report = bug.report()
    kernel = next(e.kernel for e in report.events if e.kind == "host")
    region = timing_region(report, kernel, kernel)
    return (region.t0, region.t1), region.causes()[0]
