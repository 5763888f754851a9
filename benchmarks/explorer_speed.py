"""How fast the what-if explorer answers a control, on this machine.

Targets (on 2 CPU cores): **first view** <= 2 s: a fresh process imports ``common.explore`` and draws the first
view of llama-3.1-8b on the five machines (interpreter start excluded, every import and capture included, the
capture cache warm as it is after a learner's first run); **update** <= 100 ms: one change of an already-seen
configuration, five machines, re-simulated and redrawn (``update_warm_s``). ``update_new_shape_s`` is a change to
a batch the process has not captured yet (a new decode step graph: the capture is the cost). Each figure is the
median of ``repeats`` runs; the load average is recorded before and after, since the 2 cores may be shared.

Run: ``python benchmarks/explorer_speed.py [repeats]`` (default 5); writes ``benchmarks/results/explorer_speed.json``.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGETS = {"first_view_s": 2.0, "update_warm_s": 0.1}
FIRST_VIEW = """
import time, matplotlib
matplotlib.use("Agg")
t = time.perf_counter()
from common.explore import explore
explore("llama-3.1-8b", interactive=False, show=False, static_path="{png}")
print(time.perf_counter() - t)
"""


def first_view(cache: str, png: str) -> float:
    env = {**os.environ, "DFA_CACHE_DIR": cache, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", FIRST_VIEW.format(png=png)], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(repeats: int = 5) -> dict:
    import matplotlib
    matplotlib.use("Agg")
    sys.path.insert(0, ROOT)
    from common.measure.bench import machine_info

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as cache:
        png = os.path.join(cache, "explorer.png")
        first_view(cache, png)  # fills the capture cache, as a learner's first run does
        firsts = [first_view(cache, png) for _ in range(repeats)]
        os.environ["DFA_CACHE_DIR"] = cache
        from common.explore import explore
        e = explore("llama-3.1-8b", interactive=False, show=False, static_path=png)
        e.update(batch=8)
        warm = []
        for i in range(repeats):
            t = time.perf_counter()
            e.update(batch=1 if i % 2 else 8)  # both seen: warm
            warm.append(time.perf_counter() - t)
        new = []
        for batch in (3, 5, 7, 9, 11)[:repeats]:
            t = time.perf_counter()
            e.update(batch=batch)
            new.append(time.perf_counter() - t)
    result = {
        "measured_on": machine_info(), "repeats": repeats, "load_before": load_before, "load_after": os.getloadavg(),
        "first_view_s": statistics.median(firsts), "first_view_runs_s": firsts,
        "update_warm_s": statistics.median(warm), "update_warm_runs_s": warm,
        "update_new_shape_s": statistics.median(new), "update_new_shape_runs_s": new,
        "targets": TARGETS,
    }
    result["met"] = {k: result[k] <= v for k, v in TARGETS.items()}
    path = os.path.join(HERE, "results", "explorer_speed.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: result[k] for k in ("first_view_s", "update_warm_s", "update_new_shape_s", "met")}))
    return result


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
