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
# A copy of common.models.CONFIGS' names (tests/test_sim_moe.py keeps them equal): the help lists them.
MODEL_NAMES = ("qwen2.5-0.5b", "llama-2-7b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "tiny-block", "test",
               "mixtral-8x7b", "gpt-oss-120b", "qwen3-30b-a3b")


def add_commands(sub) -> None:
    p = sub.add_parser("simulate", help="one LLM step on the simulated backends")
    p.add_argument("model", help=f"named configuration ({', '.join(MODEL_NAMES)}) or a path to a Hugging Face "
                                 "config.json (dense or mixture of experts)")
    _common(p)
    p.add_argument("--chips", type=int, default=None, help="chip count (default: fewest that hold weights + KV)")
    p.add_argument("--phase", choices=("prefill", "decode"), default="decode")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=1024, help="prompt length (prefill) or cached tokens (decode)")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace (one file per backend)")
    p.add_argument("--stack", default=None, metavar="NAME",
                   help="serving stack / software generation whose per-step costs to add (e.g. cerebras-2024-08, "
                        "cerebras-2024-10, vllm-2023-08, trtllm-v0.5, trtllm-v0.6, jetstream-2024-07, groq-2024; "
                        "needs one --backend; default: the hardware alone)")
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
    from common.sim.serving import STACK_NAMES, get_stack, simulate_served
    if args.batch <= 0 or args.seq <= 0:
        raise DFAError(f"--batch and --seq must be positive, got batch={args.batch}, seq={args.seq}")
    stack = getattr(args, "stack", None)
    if stack is not None:
        get_stack(stack)  # an unknown name: one line listing the valid ones
        if args.backend == "all":
            raise DFAError(f"--stack {stack} needs one --backend (a stack serves on one backend); valid stacks: "
                           + ", ".join(STACK_NAMES))
    reports = [simulate_served(args.model, b, stack=stack, phase=args.phase, batch=args.batch, seq=args.seq,
                               chip=args.chip, chips=args.chips, dtype=args.dtype) for b in _backends(args)]
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
        if hasattr(r, "stack"):
            row["stack"] = r.stack
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
        if "stack" in row:
            print(f"  {row['backend']}: stack {row['stack'] or 'none (hardware only)'}")
    for row in rows:
        for t in row.get("tiling", []):
            print(f"  {row['backend']}: " + ", ".join(f"{k}={v}" for k, v in t.items()))
