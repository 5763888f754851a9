"""Simulated vs published end-to-end figures: the simulators' honesty check (not a calibration).

Each row: a public figure (with its source), the same configuration simulated on the serving stack (software
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
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from common.bench import machine_info  # noqa: E402
from common.sim import simulate_op  # noqa: E402
from common.sim.serving import simulate_served  # noqa: E402

REF = "shared/reference/accelerators.md"


@dataclass
class Figure:
    name: str
    published: float
    unit: str
    source: str
    backend: str
    stack: str | None  # the software generation the figure was measured on (None: a kernel, no serving stack)
    simulate: callable


def decode_tps(model, backend, chip, *, stack, batch=1, seq=1024, chips=None, dtype=None):
    r = simulate_served(model, backend, stack=stack, phase="decode", batch=batch, seq=seq, chip=chip, chips=chips,
                        dtype=dtype)
    return r.tokens_per_s_per_user, r


def serving_tps(model, backend, chip, *, stack, batch, prompt, output, chips=None, dtype=None):
    """Output tokens/s of a batch served end to end: one prefill, then ``output`` decode steps at mean context."""
    pre = simulate_served(model, backend, stack=stack, phase="prefill", batch=batch, seq=prompt, chip=chip,
                          chips=chips, dtype=dtype)
    dec = simulate_served(model, backend, stack=stack, phase="decode", batch=batch, seq=prompt + output // 2,
                          chip=chip, chips=chips, dtype=dtype)
    total = pre.time_s + output * dec.time_s
    return batch * output / total, dec


def attention_tflops(chip):
    r = simulate_op("sdpa", (16, 16, 8192, 128), "gpu", chip=chip, dtype="fp16")
    return r.achieved_flops / 1e12, r


FIGURES = [
    Figure("vLLM, Llama-3.1-8B bf16, batch 1 decode, A100-40GB", 75, "tok/s", f"{REF} (vLLM)", "gpu",
           "vllm-2023-08", lambda: decode_tps("llama-3.1-8b", "gpu", "a100-40gb", stack="vllm-2023-08")),
    Figure("JetStream, Llama-3-8B bf16, batch 128, 1k in / 1k out, TPU v5e-8", 8249, "tok/s",
           f"{REF} (JetStream PyTorch)", "tpu", "jetstream-2024-07",
           lambda: serving_tps("llama-3.1-8b", "tpu", "tpu-v5e", stack="jetstream-2024-07", batch=128, prompt=1024,
                               output=1024, chips=8)),
    Figure("Groq LPU, Llama-2-70B, 4k context, per user", 300, "tok/s", f"{REF} (Groq)", "lpu", "groq-2024",
           lambda: decode_tps("llama-2-70b", "lpu", "groq-lpu", stack="groq-2024", seq=4095)),  # 4k = model max
    Figure("Cerebras inference, Llama-3.1-8B, per user", 1800, "tok/s",
           "Cerebras, 'Introducing Cerebras Inference' (2024-08-27)", "wse", "cerebras-2024-08",
           lambda: decode_tps("llama-3.1-8b", "wse", "wse-3", stack="cerebras-2024-08")),
    Figure("Cerebras inference, Llama-3.1-70B, per user", 450, "tok/s",
           "Cerebras, 'Introducing Cerebras Inference' (2024-08-27)", "wse", "cerebras-2024-08",
           lambda: decode_tps("llama-3.1-70b", "wse", "wse-3", stack="cerebras-2024-08")),
    Figure("Cerebras inference (Oct 2024 release), Llama-3.1-70B, per user", 2100, "tok/s",
           "Cerebras, 'Cerebras Inference now 3x faster: Llama3.1-70B breaks 2,100 tokens/s' (2024-10-24)", "wse",
           "cerebras-2024-10", lambda: decode_tps("llama-3.1-70b", "wse", "wse-3", stack="cerebras-2024-10")),
    Figure("FlashAttention-3 forward, fp16, H100 SXM", 740, "TFLOP/s", f"{REF} (FlashAttention-3 paper)", "gpu",
           None, lambda: attention_tflops("h100-sxm")),
]


def per_architecture(rows) -> dict:
    """{backend: {"n", "median", "worst"}} of sim / published; worst = farthest from 1 in either direction."""
    out = {}
    for backend in sorted({r["backend"] for r in rows}):
        ratios = sorted(r["ratio"] for r in rows if r["backend"] == backend and r["ratio"])
        if ratios:
            out[backend] = {"n": len(ratios), "median": round(statistics.median(ratios), 2),
                            "worst": max(ratios, key=lambda x: max(x, 1 / x))}
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
                         "source": f.source, "wall_s": round(time.perf_counter() - t, 2)})
        except Exception as exc:  # a backend not built yet: say so, do not hide the row
            rows.append({"figure": f.name, "published": f.published, "simulated": None, "unit": f.unit,
                         "ratio": None, "error": str(exc), "backend": f.backend, "stack": f.stack or "-",
                         "source": f.source})
    within2 = sum(1 for r in rows if r["ratio"] and 0.5 <= r["ratio"] <= 2)
    within14 = sum(1 for r in rows if r["ratio"] and 1 / 1.4 <= r["ratio"] <= 1.4)
    arch = per_architecture(rows)
    out = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "fidelity.json"), "w") as fh:
        json.dump({"machine": machine_info(), "rows": rows, "per_architecture": arch}, fh, indent=1)
    lines = ["| published figure | published | simulated | sim / pub | stack | chips | bottleneck | source |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sim = f"{r['simulated']:,} {r['unit']}" if r["simulated"] is not None else f"not available ({r['error']})"
        lines.append(f"| {r['figure']} | {r['published']:,} {r['unit']} | {sim} | {r['ratio'] or '-'} | "
                     f"{r['stack']} | {r.get('chips', '-')} | {r.get('bottleneck', '-')} | {r['source']} |")
    lines.append(f"\n{within2}/{len(rows)} within 2x, {within14}/{len(rows)} within 1.4x. "
                 "SIMULATED numbers from common.sim cost models; published numbers are measurements by others "
                 "(test figures; the models' calibration inputs are microbenchmarks and profiles in common/catalog).")
    lines += ["", "| architecture | figures | median sim / pub | worst sim / pub |", "|---|---|---|---|"]
    lines += [f"| {b} | {a['n']} | {a['median']} | {a['worst']} |" for b, a in arch.items()]
    text = "\n".join(lines)
    with open(os.path.join(out, "fidelity.md"), "w") as fh:
        fh.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
