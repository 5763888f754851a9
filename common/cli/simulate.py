"""``dfa simulate`` and ``dfa op``: the simulators from the shell. ``--json`` output is a contract other tools
read: a list with one object per backend (see ``Report.summary_row``).

This module is outside ``common.sim`` on purpose: importing anything in that package imports torch, and the
parser of ``dfa`` must build without it. Every argument is checked by ``common.sim.args`` (torch-free) before
the simulator is imported, so a bad name, number or shape is one line within a second.
"""
from __future__ import annotations

import argparse
import gc
import json
import os

from common.errors import DFAError, unknown
from common.models.config import CONFIGS  # torch-free, like everything imported here
from common.sim import args as sim_args
from common.sim.args import BACKEND_NAMES, DTYPE_CHOICES, MOE_EXPERT_MMA, MOE_PARALLEL, OPS, PHASES

MODEL_NAMES = tuple(CONFIGS)


def add_commands(sub) -> None:
    p = sub.add_parser("simulate", help="one LLM step on the simulated backends")
    p.add_argument("model", help=f"named configuration ({', '.join(MODEL_NAMES)}) or a path to a Hugging Face "
                                 "config.json (dense or mixture of experts)")
    _common(p)
    p.add_argument("--chips", type=int, default=None, help="chip count (default: fewest that hold weights + KV)")
    p.add_argument("--phase", choices=PHASES, default="decode")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=1024, help="prompt length (prefill) or cached tokens (decode)")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace (one file per backend)")
    p.add_argument("--moe-parallel", default=None, metavar="MODE",
                   help="how a mixture-of-experts layer uses several tensor-parallel chips: "
                        f"{' | '.join(MOE_PARALLEL)} (expert: experts spread over the chips, two all-to-alls a "
                        "layer; tensor: every expert split over the chips, one all-reduce; default: the stack's, "
                        "else expert)")
    p.add_argument("--moe-expert-mma", default=None, metavar="MMA",
                   help="the tensor-core instruction a mixture of experts' GEMM kernels issue: "
                        f"{' | '.join(MOE_EXPERT_MMA)} (mma.sync: SM80 kernels, slower on Hopper; default: the "
                        "stack's, else native)")
    from common.chips.catalog.stacks import STACKS  # torch-free: the help lists what the catalog holds
    p.add_argument("--stack", default=None, metavar="NAME",
                   help="serving stack / software generation whose per-step costs to add ("
                        + ", ".join(f"{s.name} ({s.backend})" for s in STACKS)
                        + "; needs one --backend; default: the hardware alone)")
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


def _check_chip(args) -> None:
    for b in _backends(args):
        sim_args.chip_for(b, args.chip, args.dtype)


def _check_stack(stack: str | None, backend: str) -> None:
    """The checks of ``common.sim.serving.get_stack``, on the torch-free catalog."""
    if stack is None:
        return
    from common.chips.catalog.stacks import STACKS
    by_name = {s.name: s for s in STACKS}
    if stack not in by_name:
        raise unknown("stack", stack, [s.name for s in STACKS if s.backend == backend] or by_name)
    if backend == "all":
        raise DFAError(f"--stack {stack} needs one --backend (a stack serves on one backend); valid stacks: "
                       + ", ".join(by_name))
    if by_name[stack].backend != backend:
        valid = ", ".join(s.name for s in STACKS if s.backend == backend) or "none"
        raise DFAError(f"stack {stack!r} serves on the {by_name[stack].backend} backend, not {backend}; valid for "
                       f"{backend}: {valid}")


def cmd_simulate(args: argparse.Namespace) -> int:
    # every argument is checked before torch is imported (seconds): a mistake is one line at once
    sim_args.llm_step(args.model, args.phase, args.batch, args.seq)
    sim_args.chip_count(args.chips)
    stack = getattr(args, "stack", None)
    _check_stack(stack, args.backend)
    moe = {k: v for k, v in (("moe_parallel", getattr(args, "moe_parallel", None)),
                             ("moe_expert_mma", getattr(args, "moe_expert_mma", None))) if v is not None}
    if "moe_parallel" in moe:
        sim_args.moe_parallel_name(moe["moe_parallel"])
    if "moe_expert_mma" in moe:
        sim_args.moe_expert_mma_name(moe["moe_expert_mma"])
    _check_chip(args)
    was_on = gc.isenabled()
    gc.disable()  # importing torch and capturing make ~3e5 long-lived objects: collections would walk them all
    try:  # (0.1 s of a cold run); a few MB of cycles, if any, wait for the end of the command
        from common.sim.serving import simulate_served
        gc.freeze()  # torch's import-time objects live until exit: no later collection walks them
        reports = [simulate_served(args.model, b, stack=stack, phase=args.phase, batch=args.batch, seq=args.seq,
                                   chip=args.chip, chips=args.chips, dtype=args.dtype,
                                   **moe) for b in _backends(args)]
    finally:
        if was_on:
            gc.enable()
    if args.trace:
        root, ext = os.path.splitext(args.trace)
        for r in reports:
            r.chrome_trace(args.trace if len(reports) == 1 else f"{root}_{r.backend}{ext or '.json'}")
    _print(reports, args.json, extra=())
    return 0


def cmd_op(args: argparse.Namespace) -> int:
    sim_args.op_shape(args.op, args.shape)
    _check_chip(args)
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
        if hasattr(r, "ttft_s"):  # a served simulation: latency beside throughput, and what exceeds the records
            row.update(ttft_s=r.ttft_s, tpot_s=r.tpot_s, warnings=list(getattr(r, "warnings", [])))
        if "tiling" in extra:
            row["tiling"] = _tiling(r)
        rows.append(row)
    if as_json:
        print(json.dumps(rows, indent=1, default=float))
        return
    import pandas as pd

    cols = ("backend", "chip", "chips", "dtype", "time_s", "tokens_per_s", "bottleneck")
    cols += tuple(k for k in ("ttft_s", "tpot_s") if any(row.get(k) is not None for row in rows))
    table = pd.DataFrame([{k: row.get(k) for k in cols} for row in rows])
    print("SIMULATED (common.sim cost models, not measurements)")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-"))
    for row in rows:
        if "stack" in row:
            print(f"  {row['backend']}: stack {row['stack'] or 'none (hardware only)'}")
    for row in rows:
        for w in row.get("warnings", []):
            print(f"  {row['backend']}: {w if w.startswith('WARNING') else 'WARNING: ' + w}")
    for row in rows:
        for t in row.get("tiling", []):
            print(f"  {row['backend']}: " + ", ".join(f"{k}={v}" for k, v in t.items()))
