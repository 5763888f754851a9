"""How fast the simulators are: one llama-3.1-70b decode step (seq 4096) on all five backends.

Goal (issue #16 part 5): <= 2 s warm and <= 5 s cold on 2 CPU cores, peak memory <= 1 GB.

A captured step is kept in an on-disk cache (``common.sim.capture_cache``, under ``DFA_CACHE_DIR``), so a fresh
process can skip the FakeTensor capture and ``torch._dynamo``. Every figure below says which state that cache
was in; each process gets its own ``DFA_CACHE_DIR`` (an empty temporary folder, or one warmed by a previous run),
so the user's own cache is never read or written.

* **cold, empty cache**: the shell command ``dfa simulate llama-3.1-70b --backend all --phase decode --seq 4096
  --json`` in a fresh process with an empty cache: wall time from ``exec`` to exit (interpreter start, every
  import and the capture included) and the peak resident set of that process (``wait4``'s ``ru_maxrss``).
* **cold, warm cache**: the same command in a fresh process whose cache holds the step (written by an earlier
  process): the capture is read from disk.
* **warm**: in a fresh process whose imports are done (``torch._dynamo`` too), the first all-backend step and
  the same step again (``llm_step``'s in-process cache hit: the policies alone). ``first`` is measured with an
  empty disk cache (the strict reading: the step's FX capture is included) and with a warm one.
* **layers**: warm-first time (empty cache) with 10..80 decoder layers (cost should not grow with the layer
  count: one layer is captured and compiled once and repeated).

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
import tempfile
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


def _env(cache: str) -> dict:
    env = {**os.environ, "DFA_CACHE_DIR": cache}
    env.pop("DFA_CAPTURE_CACHE", None)
    return env


def cold(cache: str) -> dict:
    """The CLI in a fresh process (capture cache in ``cache``): wall seconds and its peak RSS (MB, from wait4)."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "common.cli", *COMMAND], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=_env(cache))
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if proc.returncode:
        raise RuntimeError(f"dfa {' '.join(COMMAND)} exited {proc.returncode}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024,
            "rows": len(json.loads(out))}


def warm(layers: int, cache: str) -> dict:
    out = subprocess.run([sys.executable, "-c", WARM.replace("%d", str(layers)), str(layers)], cwd=ROOT,
                         capture_output=True, text=True, check=True, env=_env(cache))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    sys.path.insert(0, ROOT)
    from common.bench import machine_info
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="dfa-sim-speed-") as tmp:
        empty = lambda: tempfile.mkdtemp(dir=tmp)  # noqa: E731  (a fresh, empty cache per process)
        warmed = empty()
        cold(warmed)  # fills it (not timed)
        cold_empty = [cold(empty()) for _ in range(repeats)]
        cold_warm = [cold(warmed) for _ in range(repeats)]
        warms = [warm(80, empty()) for _ in range(repeats)]
        warms_cached = [warm(80, warmed) for _ in range(repeats)]
        by_layers = {n: warm(n, empty())["first_s"] for n in (10, 20, 40, 80)}
    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    result = {
        "machine": machine_info(),
        "load_average_1_5_15": [load_before, os.getloadavg()],
        "load_note": "the 2 cores are shared with other work: wall times read slower under load, CPU seconds less",
        "repeats": repeats,
        "command": "dfa " + " ".join(COMMAND),
        "cache_note": "cold_empty_cache: a fresh process, empty capture cache (captures, imports torch._dynamo); "
                      "cold_warm_cache: a fresh process, the step already in the on-disk capture cache; "
                      "warm_first: imports done, empty disk cache (capture included); warm_first_warm_cache: "
                      "imports done, step read from the disk cache; warm_repeat: the in-process cache hit",
        "cold_empty_cache_s_median": med(cold_empty, "wall_s"),
        "cold_empty_cache_cpu_s_median": med(cold_empty, "cpu_s"),
        "cold_empty_cache_peak_rss_mb_median": med(cold_empty, "peak_rss_mb"),
        "cold_warm_cache_s_median": med(cold_warm, "wall_s"),
        "cold_warm_cache_cpu_s_median": med(cold_warm, "cpu_s"),
        "cold_warm_cache_peak_rss_mb_median": med(cold_warm, "peak_rss_mb"),
        "warm_first_s_median": med(warms, "first_s"),
        "warm_first_cpu_s_median": med(warms, "first_cpu_s"),
        "warm_first_warm_cache_s_median": med(warms_cached, "first_s"),
        "warm_repeat_s_median": med(warms, "repeat_s"),
        "warm_repeat_cpu_s_median": med(warms, "repeat_cpu_s"),
        "import_s_median": med(warms, "import_s"),
        "cold_empty_cache_s_all": [r["wall_s"] for r in cold_empty],
        "cold_warm_cache_s_all": [r["wall_s"] for r in cold_warm],
        "warm_first_s_all": [r["first_s"] for r in warms],
        "warm_first_warm_cache_s_all": [r["first_s"] for r in warms_cached],
        "events": warms[0]["events"],
        "events_warm_cache": warms_cached[0]["events"],
        "warm_first_s_by_layers": by_layers,
        "goal": GOAL,
    }
    peak = max(result["cold_empty_cache_peak_rss_mb_median"], result["cold_warm_cache_peak_rss_mb_median"])
    result["meets_goal"] = {"warm_first_empty_cache": result["warm_first_s_median"] <= GOAL["warm_s"],
                            "warm_first_warm_cache": result["warm_first_warm_cache_s_median"] <= GOAL["warm_s"],
                            "cold_empty_cache": result["cold_empty_cache_s_median"] <= GOAL["cold_s"],
                            "cold_warm_cache": result["cold_warm_cache_s_median"] <= GOAL["cold_s"],
                            "memory": peak <= GOAL["peak_rss_mb"]}
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "sim_speed.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
