"""How fast ``dfa autograde`` grades course 1's lab with the sandbox, locally and on Dask, and where the time goes.

Goal: >= 6 lab submissions a minute on 2 cores with the sandbox, and linear in Dask workers.
Grades N copies (default 8) of course1_landscape/lab1_landscape's source notebook — the solutions, so every cell
runs and every autograded point is earned — on a freshly released copy of the course, four ways: ``--workers 1``
and ``--workers 2`` (the embedded pool), ``--cluster local:1`` and ``--cluster local:2`` (a Dask LocalCluster,
its start-up included and also reported alone). Each way reports the median of ``--repeats`` runs, with the
load average and the CPU busy fraction during each run: the machine may be shared, and a busy one grades
slower. Then one submission is profiled: the parent's prepare and score, and inside the sandbox the start
(bubblewrap, interpreter, runner imports, calibration), the kernel start with the setup cell (``import torch``
and ``common``, timed alone outside the sandbox for scale), each cell, and the end (kernel shutdown).

    python benchmarks/grading_throughput.py [--copies 8] [--repeats 1] [--ways workers:1,workers:2,local:1,local:2]

Writes benchmarks/results/grading_throughput.json (the machine it ran on included) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
COURSE, LAB = REPO / "course1_landscape", "lab1_landscape"
GOAL = ">= 6 submissions/min on 2 cores with the sandbox; Dask linear in workers"


def fresh_course(workdir: Path, copies: int):
    """A released copy of course 1 with ``copies`` honest submissions (the source notebook, solutions in)."""
    from common.grading.authoring.release import release
    from common.grading.courses.course import Course, quiet_nbgrader

    root = workdir / COURSE.name  # the course name is kept: badges and course ids depend on it
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(COURSE, root, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback", "grades"))
    course = Course(root)
    with quiet_nbgrader():
        release([course])
    for i in range(copies):
        folder = course.submitted_dir / f"student{i:02d}" / LAB
        folder.mkdir(parents=True)
        shutil.copy(course.source_notebook(LAB), folder / f"{LAB}.ipynb")
    return course


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


class Timers:
    """Times the parent's serial steps and the executor's start-up by wrapping autograde.py's functions."""

    def __init__(self):
        from common.grading.gradebook import autograde as ag

        self.prepare, self.score, self.startup = [], [], []
        for name, sink in (("_prepare", self.prepare), ("_score", self.score), ("open_executions", self.startup)):
            setattr(ag, name, self._timed(getattr(ag, name), sink))

    @staticmethod
    def _timed(fn, sink):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                sink.append(time.perf_counter() - started)

        return wrapper

    def clear(self):
        for sink in (self.prepare, self.score, self.startup):
            sink.clear()


def grade_once(way: str, copies: int, workdir: Path, timers: Timers) -> dict:
    from common.grading.gradebook.autograde import autograde

    kind, count = way.split(":")
    options = {"workers": int(count)} if kind == "workers" else {"cluster": way}
    course = fresh_course(workdir, copies)
    timers.clear()
    load_before, (busy0, total0) = os.getloadavg()[0], cpu_times()
    started = time.monotonic()
    graded = autograde(course, LAB, report=lambda g: None, **options)
    wall = time.monotonic() - started
    busy1, total1 = cpu_times()
    return {
        "wall_s": round(wall, 1),
        "per_minute": round(len(graded) / wall * 60, 2),
        "startup_s": round(sum(timers.startup), 1),
        "execution_s_median": round(statistics.median(g.seconds for g in graded), 1),
        "load_factor_median": statistics.median(g.load_factor for g in graded),
        "prepare_s_median": round(statistics.median(timers.prepare), 2),
        "score_s_median": round(statistics.median(timers.score), 2),
        "loadavg_1min_before": round(load_before, 2),
        "loadavg_1min_after": round(os.getloadavg()[0], 2),
        "cpu_busy_fraction": round((busy1 - busy0) / max(1, total1 - total0), 2),
        "scores": sorted({g.score for g in graded}),
        "statuses": sorted({g.status for g in graded}),
    }


def import_seconds() -> float:
    """``import common.checks, torch`` (what the setup cell imports) in a fresh interpreter, minus its start."""

    def run(code: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        return time.perf_counter() - started

    return round(statistics.median(run("import common.checks, torch") - run("pass") for _ in range(3)), 2)


def profile_one(workdir: Path, timers: Timers) -> dict:
    """One submission on one local worker, timed at each event the runner sends (sandbox.py's reader)."""
    import nbformat

    from common.grading.gradebook.autograde import autograde
    from common.grading.sandbox import sandbox, sandbox_events
    from common.grading.sandbox.limits import CALIBRATION_REFERENCE_S

    marks, apply_event, run = [], sandbox_events.apply_event, sandbox.Sandbox.run

    def spy(execution, line, max_factor):
        try:
            event = json.loads(line)
            marks.append((time.monotonic(), event.get("event"), event.get("index")))
        except ValueError:
            pass
        return apply_event(execution, line, max_factor)

    def timed_run(self, *args, **kwargs):
        marks.append((time.monotonic(), "run", None))
        try:
            return run(self, *args, **kwargs)
        finally:
            marks.append((time.monotonic(), "cleaned up", None))

    course = fresh_course(workdir, 1)
    cells = nbformat.read(course.source_notebook(LAB), as_version=4).cells
    timers.clear()
    sandbox_events.apply_event, sandbox.Sandbox.run = spy, timed_run  # read_events looks it up per line
    try:
        load = os.getloadavg()[0]
        graded = autograde(course, LAB, workers=1, report=lambda g: None)[0]
    finally:
        sandbox_events.apply_event, sandbox.Sandbox.run = apply_event, run
    # each step: (what ended it, cell index, seconds since the step before)
    steps = [(kind, index, round(t - marks[i][0], 2)) for i, (t, kind, index) in enumerate(marks[1:])]
    assert [s[0] for s in steps[:2]] == ["start", "cell"] and [s[0] for s in steps[-2:]] == ["end", "cleaned up"]
    cell_steps = steps[2:-2]
    slowest = sorted(cell_steps, key=lambda s: -s[2])[:6]
    return {
        "loadavg_1min": round(load, 2),
        "execution_s": graded.seconds,
        "load_factor": graded.load_factor,
        "parent_prepare_s": round(timers.prepare[0], 2),
        "parent_score_s": round(timers.score[0], 2),
        "sandbox_start_s": steps[0][2],  # bubblewrap, interpreter, runner imports, copies, calibration
        "of_which_calibration_s_about": round(min(graded.load_factor, 4.0) * CALIBRATION_REFERENCE_S, 2),
        "kernel_start_and_setup_cell_s": steps[1][2],
        "setup_imports_alone_s": import_seconds(),
        "other_cells_s": round(sum(s[2] for s in cell_steps), 2),
        "slowest_cells": [
            {"cell": index, "s": seconds, "first_line": cells[index].source.splitlines()[0][:90]}
            for _, index, seconds in slowest
        ],
        "after_last_cell_s": steps[-2][2],  # the cells after it (no code) and the kernel's graceful shutdown
        "sandbox_teardown_s": steps[-1][2],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--ways", default="workers:1,workers:2,local:1,local:2")
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    sys.path.insert(0, str(REPO))
    from common.measure.bench import machine_info

    timers = Timers()
    result = {"machine": machine_info(), "goal": GOAL, "lab": f"{COURSE.name}/{LAB}", "copies": args.copies,
              "repeats": args.repeats, "ways": {}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="dfa-bench-") as tmp:
        for way in args.ways.split(","):
            runs = [grade_once(way, args.copies, Path(tmp), timers) for _ in range(args.repeats)]
            row = {key: statistics.median(r[key] for r in runs) for key in ("wall_s", "per_minute", "startup_s")}
            result["ways"][way] = {**row, "runs": runs}
            print(f"{way:<10} {row['per_minute']:5.2f} submissions/min  (wall {row['wall_s']} s, start-up "
                  f"{row['startup_s']} s, load {[r['loadavg_1min_before'] for r in runs]})", flush=True)  # fmt: skip
        if not args.no_profile:
            result["profile_one_submission"] = profile_one(Path(tmp), timers)
    scores = {tuple(r["scores"]) for way in result["ways"].values() for r in way["runs"]}
    statuses = {tuple(r["statuses"]) for way in result["ways"].values() for r in way["runs"]}
    result["same_full_scores"] = len(scores) == 1 and len(next(iter(scores))) == 1 and statuses == {("completed",)}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "grading_throughput.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0 if result["same_full_scores"] else 1


if __name__ == "__main__":  # the guard matters: LocalCluster's worker processes import this file again
    sys.exit(main())
