"""``dfa simulate`` and ``dfa op``: the simulators from the shell. ``--json`` output is a contract other tools
read: a list with one object per backend (see ``Report.summary_row``).

This module is outside ``common.sim`` on purpose: importing anything in that package imports torch, and the
parser of ``dfa`` must build without it. So the choices below are copies of ``common.sim.BACKEND_NAMES`` and
``common.sim.run.OPS`` (``tests/test_cli.py`` keeps them equal), and the commands import the simulator.
"""
from __future__ import annotations

import argparse
import json
import os

from common.errors import DFAError

BACKEND_NAMES = ("gpu", "tpu", "wse", "lpu", "spyre")
OPS = ("matmul", "sdpa", "softmax", "layernorm", "gelu", "add", "clone")
DTYPE_CHOICES = ("bf16", "fp16", "fp8", "int8", "fp32")


def add_commands(sub) -> None:
    p = sub.add_parser("simulate", help="one LLM step on the simulated backends")
    p.add_argument("model", help="named configuration (e.g. llama-3.1-70b) or a path to a Hugging Face config.json")
    _common(p)
    p.add_argument("--chips", type=int, default=None, help="chip count (default: fewest that hold weights + KV)")
    p.add_argument("--phase", choices=("prefill", "decode"), default="decode")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=1024, help="prompt length (prefill) or cached tokens (decode)")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace (one file per backend)")
    p.set_defaults(func=cmd_simulate)
    p = sub.add_parser("op", help="one operator on the simulated backends, with the tiling the compiler chose")
    p.add_argument("op", choices=OPS)
    p.add_argument("--shape", type=int, nargs="+", required=True,
                   help="matmul: M K N; sdpa: B H S D; others: the tensor shape")
    _common(p)
    p.set_defaults(func=cmd_op)


def _common(p) -> None:
    p.add_argument("--backend", default="all", choices=(*BACKEND_NAMES, "all"))
    p.add_argument("--chip", default=None, help="catalog chip name (default: the backend's reference chip)")
    p.add_argument("--dtype", default=None, choices=DTYPE_CHOICES,
                   help="default: each chip's native 16-bit type")
    p.add_argument("--json", action="store_true", help="print the JSON list instead of a table")


def _backends(args) -> list[str]:
    if args.backend == "all":
        if args.chip:
            raise DFAError("--chip needs one --backend (a chip belongs to one backend); valid backends: "
                           + ", ".join(BACKEND_NAMES))
        return list(BACKEND_NAMES)
    return [args.backend]


def cmd_simulate(args: argparse.Namespace) -> int:
    from common.sim import simulate_llm
    if args.batch <= 0 or args.seq <= 0:
        raise DFAError(f"--batch and --seq must be positive, got batch={args.batch}, seq={args.seq}")
    reports = [simulate_llm(args.model, b, phase=args.phase, batch=args.batch, seq=args.seq, chip=args.chip,
                            chips=args.chips, dtype=args.dtype) for b in _backends(args)]
    if args.trace:
        root, ext = os.path.splitext(args.trace)
        for r in reports:
            r.chrome_trace(args.trace if len(reports) == 1 else f"{root}_{r.backend}{ext or '.json'}")
    _print(reports, args.json, extra=())
    return 0


def cmd_op(args: argparse.Namespace) -> int:
    from common.sim import simulate_op
    reports = [simulate_op(args.op, args.shape, b, chip=args.chip, dtype=args.dtype) for b in _backends(args)]
    _print(reports, args.json, extra=("tiling",))
    return 0


def _tiling(report) -> list[dict]:
    return [{"kernel": k.name, "kind": k.kind, "ops": [o.op for o in k.ops], **k.tiling}
            for p in report.programs for k in p.kernels]


def _print(reports, as_json: bool, extra) -> None:
    rows = []
    for r in reports:
        row = r.summary_row()
        if "tiling" in extra:
            row["tiling"] = _tiling(r)
        rows.append(row)
    if as_json:
        print(json.dumps(rows, indent=1, default=float))
        return
    import pandas as pd

    table = pd.DataFrame([{k: row[k] for k in ("backend", "chip", "chips", "dtype", "time_s", "tokens_per_s",
                                                "bottleneck")} for row in rows])
    print("SIMULATED (common.sim cost models, not measurements)")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for row in rows:
        for t in row.get("tiling", []):
            print(f"  {row['backend']}: " + ", ".join(f"{k}={v}" for k, v in t.items()))
