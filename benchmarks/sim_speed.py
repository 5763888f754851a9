"""How fast the simulators are: one llama-3.1-70b decode step on all five backends.

Goal (issue #3): <= 10 s wall and <= 2 GB peak memory on 2 CPU cores, cost linear in graph size. Reports the
median of repeated runs in fresh processes (the first capture warms torch's tracing machinery; that warm-up is
part of what a user waits for, so each repeat is a new process) and the machine it ran on. Also times the
layer count sweep to show linear growth. Run: python benchmarks/sim_speed.py [repeats]
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r"""
import json, resource, sys, time, dataclasses
t0 = time.perf_counter()
from common.models import get_config
from common.sim import BACKEND_NAMES, simulate_llm
from common.sim.workload import llm_step
cfg = dataclasses.replace(get_config("llama-3.1-70b"), name="llama-3.1-70b-L%d", n_layers=int(sys.argv[1]))
t1 = time.perf_counter()
rows = {}
for b in BACKEND_NAMES:
    try:
        r = simulate_llm(cfg, b, phase="decode", batch=1, seq=4096)
        rows[b] = len(r.events)
    except Exception as e:
        rows[b] = repr(e)
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "simulate_s": t2 - t1, "wall_s": t2 - t0, "events": rows,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(layers: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD.replace("%d", str(layers)), str(layers)], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    sys.path.insert(0, ROOT)
    from common.bench import machine_info
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    full = [run(80) for _ in range(repeats)]
    sweep = {n: run(n)["simulate_s"] for n in (10, 20, 40, 80)}
    result = {
        "machine": machine_info(),
        "repeats": repeats,
        "wall_s_median": statistics.median(r["wall_s"] for r in full),
        "simulate_s_median": statistics.median(r["simulate_s"] for r in full),
        "peak_rss_mb_median": statistics.median(r["peak_rss_mb"] for r in full),
        "events": full[0]["events"],
        "simulate_s_by_layers": sweep,
        "goal": "<= 10 s wall, <= 2048 MB peak RSS (llama-3.1-70b decode, all five backends, 2 CPU cores)",
    }
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "sim_speed.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
