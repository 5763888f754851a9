"""How fast the simulators are: one llama-3.1-70b decode step (seq 4096) on all five backends.

Goal (issue #16 part 5): <= 2 s warm and <= 5 s cold on 2 CPU cores, peak memory <= 1 GB.

* **cold**: the shell command ``dfa simulate llama-3.1-70b --backend all --phase decode --seq 4096 --json`` in a
  fresh process, wall time from ``exec`` to exit (interpreter start and every import included) and the peak
  resident set of that process (``wait4``'s ``ru_maxrss``).
* **warm**: in a fresh process whose imports are done, the first all-backend step (the strict reading: the
  step's FX capture is included) and the same step again (``llm_step``'s cache hit: the policies alone).
* **layers**: warm-first time with 10..80 decoder layers (cost should not grow with the layer count: one layer
  is captured and compiled once and repeated).

Each figure is the median of ``repeats`` fresh processes, with the machine and its load average (the 2 cores
are shared, so a loaded machine reads slower; CPU seconds, user + system, are the steadier figure).
Run: ``python benchmarks/sim_speed.py [repeats]``.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COMMAND = ["simulate", "llama-3.1-70b", "--backend", "all", "--phase", "decode", "--seq", "4096", "--json"]
GOAL = {"warm_s": 2.0, "cold_s": 5.0, "peak_rss_mb": 1024.0}

WARM = r"""
import dataclasses, json, resource, sys, time
t0 = time.perf_counter()
from common.models import get_config
from common.sim import BACKEND_NAMES, simulate_llm
import torch._dynamo  # noqa: F401  (imported by the first capture anyway: FakeTensorMode needs its config)
cfg = dataclasses.replace(get_config("llama-3.1-70b"), name="llama-3.1-70b-L%d", n_layers=int(sys.argv[1]))
t1 = time.perf_counter()
times, cpu, events = [], [], {}
for _ in range(2):
    t, c = time.perf_counter(), time.process_time()
    for b in BACKEND_NAMES:
        events[b] = len(simulate_llm(cfg, b, phase="decode", batch=1, seq=4096).events)
    times.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
print(json.dumps({"import_s": t1 - t0, "first_s": times[0], "repeat_s": times[1], "first_cpu_s": cpu[0],
                  "repeat_cpu_s": cpu[1], "events": events,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def cold() -> dict:
    """The CLI in a fresh process: wall seconds and that process's peak RSS (MB, reaped with wait4)."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "common.cli", *COMMAND], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if proc.returncode:
        raise RuntimeError(f"dfa {' '.join(COMMAND)} exited {proc.returncode}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024,
            "rows": len(json.loads(out))}


def warm(layers: int) -> dict:
    out = subprocess.run([sys.executable, "-c", WARM.replace("%d", str(layers)), str(layers)], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    sys.path.insert(0, ROOT)
    from common.bench import machine_info
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    load_before = os.getloadavg()
    colds = [cold() for _ in range(repeats)]
    warms = [warm(80) for _ in range(repeats)]
    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    result = {
        "machine": machine_info(),
        "load_average_1_5_15": [load_before, os.getloadavg()],
        "repeats": repeats,
        "command": "dfa " + " ".join(COMMAND),
        "cold_s_median": med(colds, "wall_s"),
        "cold_cpu_s_median": med(colds, "cpu_s"),
        "cold_peak_rss_mb_median": med(colds, "peak_rss_mb"),
        "warm_first_s_median": med(warms, "first_s"),
        "warm_first_cpu_s_median": med(warms, "first_cpu_s"),
        "warm_repeat_s_median": med(warms, "repeat_s"),
        "import_s_median": med(warms, "import_s"),
        "cold_s_all": [r["wall_s"] for r in colds],
        "warm_first_s_all": [r["first_s"] for r in warms],
        "events": warms[0]["events"],
        "warm_first_s_by_layers": {n: warm(n)["first_s"] for n in (10, 20, 40, 80)},
        "goal": GOAL,
    }
    result["meets_goal"] = {"warm": result["warm_first_s_median"] <= GOAL["warm_s"],
                            "cold": result["cold_s_median"] <= GOAL["cold_s"],
                            "memory": result["cold_peak_rss_mb_median"] <= GOAL["peak_rss_mb"]}
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "sim_speed.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
