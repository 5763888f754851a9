"""Every simulated number of a fixed set of configurations, to prove a speed-up changed none of them.

Records, for ~125 configurations (the sim_speed sweep of llama-3.1-8b, a prefill sweep, the 70B step, MoE models,
explicit chip counts, 8-bit types, single operators, on all five backends): every event as ``repr`` of its fields,
the ``summary_row``, each program's ops as decomposed and its kernels (tiling, bytes, padded FLOPs),
and the sweep tables. ``repr`` keeps
every float bit. Record on the old code, change it, record again, compare:

    python benchmarks/sim_fingerprint.py record before.json     # on the old commit (e.g. a git worktree)
    python benchmarks/sim_fingerprint.py record after.json
    python benchmarks/sim_fingerprint.py compare before.json after.json   # exit 1 and the first difference
"""
from __future__ import annotations

import dataclasses
import json
import sys

BACKENDS = ("gpu", "tpu", "wse", "lpu", "spyre")
STEPS = [  # (model, phase, batch, seq, chips)
    ("llama-3.1-70b", "decode", 1, 4096, None), ("llama-3.1-8b", "prefill", 1, 2048, None),
    ("llama-3.1-8b", "prefill", 4, 512, None), ("qwen2.5-0.5b", "decode", 8, 1024, None),
    ("mixtral-8x7b", "decode", 4, 1024, None), ("qwen3-30b-a3b", "prefill", 2, 256, None),
    ("llama-3.1-8b", "decode", 16, 1024, 96), ("llama-3.1-8b", "decode", 16, 1024, 4),
    ("test", "decode", 3, 16, None)]
OPS = [("matmul", (512, 1024, 2048)), ("sdpa", (1, 8, 512, 64)), ("softmax", (64, 4096))]


def _report(r) -> list:
    return [[repr(dataclasses.astuple(e)) for e in r.events], repr(r.summary_row()),
            [p.summary() for p in r.programs], [repr(p.stages.get("decompose")) for p in r.programs],
            repr([(k.name, k.kind, k.tiling, k.bytes, k.padded_flops) for p in r.programs for k in p.kernels])]


def record() -> dict:
    from common.sim import simulate_llm, simulate_op, sweep
    out: dict = {}
    reports: list = []
    df = sweep("llama-3.1-8b", BACKENDS, batches=(1, 4, 16, 64), seqs=(512, 2048, 8192), reports=reports)
    out["sweep llama-3.1-8b"] = repr(df.to_dict("records"))
    for r in reports:
        out[f"sweep {r.backend} {r.batch} {r.seq}"] = _report(r)
    df = sweep("qwen2.5-0.5b", BACKENDS, batches=(2, 32), seqs=(128, 4096), phase="prefill")
    out["sweep qwen2.5-0.5b prefill"] = repr(df.to_dict("records"))
    for model, phase, batch, seq, chips in STEPS:
        for b in BACKENDS:
            key = f"{model} {phase} {b} batch={batch} seq={seq} chips={chips}"
            try:
                out[key] = _report(simulate_llm(model, b, phase=phase, batch=batch, seq=seq, chips=chips))
            except Exception as exc:  # a refusal (too few chips, ...) is part of the fingerprint too
                out[key] = repr(exc)
    for b, dtype in (("gpu", "fp8"), ("lpu", "fp8"), ("tpu", "int8")):
        try:
            out[f"dtype {b} {dtype}"] = _report(simulate_llm("llama-3.1-8b", b, batch=4, seq=1024, dtype=dtype))
        except Exception as exc:
            out[f"dtype {b} {dtype}"] = repr(exc)
    for b in BACKENDS:
        for op, shape in OPS:
            out[f"op {b} {op}"] = _report(simulate_op(op, shape, b))
    return out


def compare(a: dict, b: dict) -> list[str]:
    if a.keys() != b.keys():
        return [f"different configurations: {sorted(a.keys() ^ b.keys())[:5]}"]
    return [k for k in a if a[k] != b[k]]


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "record":
        data = record()
        with open(argv[1], "w") as fh:
            json.dump(data, fh)
        print(f"{len(data)} configurations recorded in {argv[1]}")
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        a, b = (json.load(open(p)) for p in argv[1:])
        bad = compare(a, b)
        print(f"{len(a)} configurations, {len(bad)} differ" + (f": {bad[:5]}" if bad else " (identical)"))
        return 1 if bad else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
