"""Simulated vs published end-to-end figures: the simulators' honesty check (not a calibration).

Each row: a public figure (with its source and exact conditions, ``benchmarks/fidelity_figures.py``), the same
configuration simulated on the serving stack (software
generation, ``common.catalog.stacks``) the figure was measured on, and the ratio simulated / published.

TEST FIGURES vs CALIBRATION INPUTS: the figures below are end-to-end results and are only ever compared with.
The simulators' terms come from calibration inputs kept apart from them - microbenchmarks and profiles in
common/catalog (matmul ceilings, copy bandwidths, torch-spyre's kernel fits, stack profiles) - and nothing in
common/sim or common/catalog is tuned to these numbers. Writes results/fidelity.md and results/fidelity.json,
with the median and worst ratio per architecture. Run: python benchmarks/fidelity.py
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks.fidelity_figures import FIGURES  # noqa: E402
from common.bench import machine_info  # noqa: E402


def per_architecture(rows) -> dict:
    """{backend: {"n", "median", "worst", "within2"}} of sim / published; worst = farthest from 1 in either
    direction; within2 = how many lie in [0.5, 2]."""
    out = {}
    for backend in sorted({r["backend"] for r in rows}):
        ratios = sorted(r["ratio"] for r in rows if r["backend"] == backend and r["ratio"])
        if ratios:
            out[backend] = {"n": len(ratios), "median": round(statistics.median(ratios), 2),
                            "worst": max(ratios, key=lambda x: max(x, 1 / x)),
                            "within2": sum(1 for x in ratios if 0.5 <= x <= 2)}
    return out


def main() -> int:
    rows = []
    for f in FIGURES:
        t = time.perf_counter()
        try:
            value, report = f.simulate()
            ratio = value / f.published
            rows.append({"figure": f.name, "published": f.published, "simulated": round(value, 1),
                         "unit": f.unit, "ratio": round(ratio, 2), "chips": report.chips,
                         "bottleneck": report.bottleneck, "backend": f.backend, "stack": f.stack or "-",
                         "conditions": f.conditions, "measured_on": f.measured_on,
                         "source": f.source, "wall_s": round(time.perf_counter() - t, 2)})
        except Exception as exc:  # a backend not built yet: say so, do not hide the row
            rows.append({"figure": f.name, "published": f.published, "simulated": None, "unit": f.unit,
                         "ratio": None, "error": str(exc), "backend": f.backend, "stack": f.stack or "-",
                         "conditions": f.conditions, "measured_on": f.measured_on, "source": f.source})
        print(f"{f.name}: {rows[-1]['ratio']}", file=sys.stderr, flush=True)
    within2 = sum(1 for r in rows if r["ratio"] and 0.5 <= r["ratio"] <= 2)
    within14 = sum(1 for r in rows if r["ratio"] and 1 / 1.4 <= r["ratio"] <= 1.4)
    arch = per_architecture(rows)
    out = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "fidelity.json"), "w") as fh:
        json.dump({"machine": machine_info(), "rows": rows, "per_architecture": arch}, fh, indent=1)
    lines = ["| published figure | published | simulated | sim / pub | stack | chips | bottleneck | conditions | "
             "measured on | source |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sim = f"{r['simulated']:,} {r['unit']}" if r["simulated"] is not None else f"not available ({r['error']})"
        lines.append(f"| {r['figure']} | {r['published']:,} {r['unit']} | {sim} | {r['ratio'] or '-'} | "
                     f"{r['stack']} | {r.get('chips', '-')} | {r.get('bottleneck', '-')} | {r['conditions']} | "
                     f"{r['measured_on']} | {r['source']} |")
    lines.append(f"\n{within2}/{len(rows)} within 2x, {within14}/{len(rows)} within 1.4x. "
                 "SIMULATED numbers from common.sim cost models; published numbers are measurements by others "
                 "(test figures; the models' calibration inputs are microbenchmarks and profiles in common/catalog).")
    lines += ["", "| architecture | figures | median sim / pub | worst sim / pub | within 2x |",
              "|---|---|---|---|---|"]
    lines += [f"| {b} | {a['n']} | {a['median']} | {a['worst']} | {a['within2']}/{a['n']} |" for b, a in arch.items()]
    text = "\n".join(lines)
    with open(os.path.join(out, "fidelity.md"), "w") as fh:
        fh.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
