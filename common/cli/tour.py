"""``dfa chips`` and ``dfa tour``: the catalog as a table, and the main job on a built-in model.

The tour takes the small built-in LM (``tiny-block`` config), captures it at aten level, prints its node
table summary, measures this machine's roofline (GEMM + copy), places the model's ops on it and writes a
roofline PNG; then runs one decode step of the same model through the five simulated backends side by side,
writing a Gantt PNG and a Perfetto trace. Well under a minute on 2 CPU cores.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time

WIDTH = 120  # `dfa chips` output fits a terminal this wide
# (header, ``catalog_rows`` key) of the two ``dfa chips`` tables; the units are in the titles, not in every header
COMPUTE_COLUMNS = (("chip", "chip"), ("vendor", "vendor"), ("backend", "kind"),
                   *((d, f"{d}_tflops") for d in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")),
                   ("units", "units"), ("GHz", "clock_ghz"))
MEMORY_COLUMNS = (("chip", "chip"), ("on-chip memory", "on_chip"), ("main memory", "main_memory"),
                  ("TB/s", "main_bw_tbs"), ("link GB/s", "link_gbs"), ("W", "power_w"))


def add_commands(sub) -> None:
    p = sub.add_parser("chips", help="the hardware catalog as a table (every number has a source)")
    p.add_argument("--sources", action="store_true", help="instead of the tables: each number's source or estimate")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_chips)
    p = sub.add_parser("tour", help="analyse and simulate the built-in model; write roofline/Gantt/trace files")
    p.add_argument("--out", default="dfa_out", help="folder for the PNGs and the trace (default: dfa_out)")
    p.add_argument("--model", default="tiny-block", help="named configuration (default: tiny-block)")
    p.add_argument("--quick", action="store_true", help="shorter roofline measurement (CI)")
    p.set_defaults(func=cmd_tour)


def cmd_chips(args: argparse.Namespace) -> int:
    from common.chips import CHIPS, catalog_rows
    if args.sources:
        print("Where each number of `dfa chips` comes from (ESTIMATE: not published; its derivation follows).")
        for chip in CHIPS.values():
            print(f"\n{chip.name} ({chip.vendor}; {chip.matrix_unit})")
            keys_by_source: dict[str, list[str]] = {}  # one line per document, not one per number
            for key, src in chip.sources.items():
                keys_by_source.setdefault(src, []).append(key)
            for src, keys in keys_by_source.items():
                print(_wrap(f"{', '.join(keys)}: {src}"))
            for key, est in chip.estimates.items():
                print(_wrap(f"ESTIMATE {key} = {est.value:g} {est.unit}: {est.derivation}"))
        return 0
    rows = catalog_rows()
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
        return 0
    print("Compute: dense peak TFLOP/s by dtype (sparse marketing figures are not used); clock in GHz")
    print(_table(rows, COMPUTE_COLUMNS))
    print("\nMemory: capacity of each level (all units together); main-memory TB/s; chip-to-chip link GB/s; "
          "board power W")
    print(_table(rows, MEMORY_COLUMNS))
    print("\n- = not supported or not published. Sources: `dfa chips --sources`.")
    return 0


def _table(rows: list[dict], columns) -> str:
    """A plain text table: numbers right-aligned, text left-aligned, None as '-'."""
    def cell(v) -> str:
        return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)
    numeric = [all(isinstance(r[k], (int, float)) or r[k] is None for r in rows) for _, k in columns]
    cells = [[h for h, _ in columns]] + [[cell(r[k]) for _, k in columns] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(line, widths, numeric,
                                                                                       strict=True)).rstrip()
                     for line in cells)


def _wrap(text: str) -> str:
    return textwrap.fill(text, WIDTH, initial_indent="  ", subsequent_indent="      ",
                         break_long_words=False, break_on_hyphens=False)


def cmd_tour(args: argparse.Namespace) -> int:
    # the clock started with the `dfa` process (common.cli.main): importing torch alone can take longer than
    # the work, so the "done in" line counts it and says how much of it was start-up and imports
    started = getattr(args, "started", time.perf_counter())
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    import torch

    from common import roofline
    from common.graph.capture import capture_aten
    from common.graph.costs import annotate, node_table, summarize
    from common.measure import bench, roofs
    from common.models import build_model, step_inputs

    t0 = time.perf_counter()
    os.makedirs(args.out, exist_ok=True)
    print(f"dfa tour: model {args.model!r} on {bench.device_name('cpu')} (torch {torch.__version__})\n")

    # 1. capture the model at aten level and count its work
    model = build_model(args.model)
    margs, mkw = step_inputs(model, "prefill", 2, 32)
    gm = capture_aten(model, margs, mkw)
    annotate(gm, *gm.meta["example_inputs"])
    table = node_table(gm)
    s = summarize(table)
    print(f"1. aten graph: {len(gm.graph.nodes)} nodes, {s['nodes']} compute ops, "
          f"{s['flops'] / 1e6:.2f} MFLOP, {s['bytes'] / 1e6:.2f} MB moved (unfused), {s['intensity']:.2f} FLOP/B")
    top = table.groupby("op")[["flops", "bytes"]].sum().sort_values("flops", ascending=False).head(6)
    print(top.to_string(float_format=lambda v: f"{v:,.0f}"), "\n")

    # 2. this machine's roofline, measured, with the model's ops on it
    kw = {"gemm_n": 512, "copy_bytes": 64 << 20, "min_run_time": 0.2} if args.quick else {}
    rl = roofs.measure_roofline("cpu", torch.float32, **kw)
    print(f"2. measured roofline: {rl.peak_flops / 1e9:.1f} GFLOP/s peak, "
          f"{rl.bandwidth() / 1e9:.1f} GB/s, ridge {rl.ridge_point():.1f} FLOP/B")
    ax = roofline.plot_roofline(rl, table, kind="analytical",
                                title=f"MEASURED roofline of this CPU; {args.model} ops placed analytically")
    path = os.path.join(args.out, "roofline.png")
    ax.figure.savefig(path, dpi=130)
    plt.close(ax.figure)
    print(f"   wrote {path}\n")

    # 3. the same model, one decode step, on the five simulated machines
    try:
        from common.sim import BACKEND_NAMES, simulate_llm
    except ImportError:  # pragma: no cover - the simulator package is optional at this stage
        print(_done(started, t0))
        return 0
    reports = []
    for name in BACKEND_NAMES:
        try:
            reports.append(simulate_llm(args.model, name, phase="decode", batch=1, seq=32))
        except Exception as exc:  # a backend that is not built yet must not hide the others
            print(f"   {name}: not available ({exc})")
    if reports:
        rows = [{k: r.summary_row()[k] for k in ("backend", "chip", "chips", "dtype", "time_s", "tokens_per_s",
                                                  "bottleneck")} for r in reports]
        print("3. SIMULATED decode step (batch 1, 32 cached tokens):")
        print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        fig, axes = plt.subplots(len(reports), 1, figsize=(11, 1.9 * len(reports)), layout="constrained")
        for r, a in zip(reports, [axes] if len(reports) == 1 else axes, strict=True):
            r.gantt(ax=a)
        path = os.path.join(args.out, "gantt.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        trace = os.path.join(args.out, "trace_gpu.json")
        reports[0].chrome_trace(trace)
        print(f"   wrote {path} and {trace} (open in ui.perfetto.dev)")
    print("\n" + _done(started, t0))
    return 0


def _done(started: float, work_started: float) -> str:
    now = time.perf_counter()
    # Python's exit after this line (torch's teardown: up to a second) cannot be counted in it, so say so
    return (f"done in {now - started:.1f} s of wall time since dfa started: {work_started - started:.1f} s "
            f"start-up and imports (torch, matplotlib, common), {now - work_started:.1f} s the steps above "
            "(exiting Python is not counted)")


if __name__ == "__main__":  # pragma: no cover
    from common.cli import process_age_s
    sys.exit(cmd_tour(argparse.Namespace(out="dfa_out", model="tiny-block", quick=False,
                                         started=time.perf_counter() - process_age_s())))
