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
import time

import pandas as pd


def add_commands(sub) -> None:
    p = sub.add_parser("chips", help="the hardware catalog as a table (every number has a source)")
    p.add_argument("--sources", action="store_true", help="list each chip's sources and estimates")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_chips)
    p = sub.add_parser("tour", help="analyse and simulate the built-in model; write roofline/Gantt/trace files")
    p.add_argument("--out", default="dfa_out", help="folder for the PNGs and the trace (default: dfa_out)")
    p.add_argument("--model", default="tiny-block", help="named configuration (default: tiny-block)")
    p.add_argument("--quick", action="store_true", help="shorter roofline measurement (CI)")
    p.set_defaults(func=cmd_tour)


def cmd_chips(args: argparse.Namespace) -> int:
    from common.chips import CHIPS, catalog_rows
    rows = catalog_rows()
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
        return 0
    df = pd.DataFrame(rows).set_index("chip")
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_colwidth", 38):
        print(df.drop(columns=["matrix_unit", "estimates"]).to_string(na_rep="-", float_format=lambda v: f"{v:g}"))
    print("\n- = not supported or not published. Dense peaks only (sparse marketing figures are not used).")
    if args.sources:
        for chip in CHIPS.values():
            print(f"\n{chip.name} ({chip.vendor}; {chip.matrix_unit})")
            for key, src in chip.sources.items():
                print(f"  {key}: {src}")
            for key, est in chip.estimates.items():
                print(f"  ESTIMATE {key} = {est.value:g} {est.unit}: {est.derivation}")
    else:
        print("Sources: `dfa chips --sources`.")
    return 0


def cmd_tour(args: argparse.Namespace) -> int:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from common import bench, roofline
    from common.capture import capture_aten
    from common.costs import annotate, node_table, summarize
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
    rl = roofline.measure_roofline("cpu", torch.float32, **kw)
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
        print(f"done in {time.perf_counter() - t0:.1f} s")
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
    print(f"\ndone in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cmd_tour(argparse.Namespace(out="dfa_out", model="tiny-block", quick=False)))
