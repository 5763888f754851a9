"""Fair to honest work: Lab 1's timing checks (the ``measure_tests`` cell, hidden tests included) pass the lab's
own solution every time on a loaded machine.

The checks used to compare two real medians (0.25 to 4 times each other); at a load average of about 10 one
honest run in ten lost its 4 points. They now time pretend work on a pretend clock that only the work moves, so
their numbers are exact whatever the load. Here the solution and the whole test cell run ``RUNS`` times, each in a
fresh interpreter, while two ``yes > /dev/null`` processes keep both cores of a 2-core machine busy.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAB1 = REPO / "course1_landscape" / "source" / "lab1_landscape" / "lab1_landscape.py"
RUNS = 20
LOAD_PROCESSES = 2

RUN_CELLS = """
import sys
import jupytext
import torch
from common.measure import bench

nb = jupytext.read(sys.argv[1])
cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in nb.cells}
ns = {"torch": torch, "bench": bench, "MIN_RUN_TIME": 0.02}  # the lab's FAST setting, as the grader runs it
exec(cells["measure"], ns)
exec(cells["measure_tests"], ns)
print("PASS")
"""


@pytest.mark.slow
def test_honest_measure_keeps_its_points_under_load():
    pytest.importorskip("jupytext")
    # each load in a session of its own (timeout and its yes in one process group, killed together below); the
    # timeout bounds it even if this process dies before the finally clause
    load = [subprocess.Popen(["timeout", "900", "yes"], stdout=subprocess.DEVNULL, start_new_session=True)
            for _ in range(LOAD_PROCESSES)]
    failures, loads = [], []
    try:
        for run in range(RUNS):
            done = subprocess.run([sys.executable, "-c", RUN_CELLS, str(LAB1)], capture_output=True, text=True,
                                  timeout=300, cwd=REPO)
            loads.append(os.getloadavg()[0])
            if done.returncode != 0 or "PASS" not in done.stdout:
                failures.append(f"run {run + 1}: {(done.stdout + done.stderr).strip().splitlines()[-1:]}")
    finally:
        for process in load:
            os.killpg(process.pid, signal.SIGKILL)  # process.kill() alone would orphan yes, timeout's child
            process.wait()
    print(f"{RUNS} honest runs, load average {min(loads):.1f} to {max(loads):.1f}: {len(failures)} lost points")
    assert not failures, failures
