"""Simulated vs published end-to-end figures: the simulators' honesty check (not a calibration).

Each row: a public figure (with its source), the same configuration simulated, and the ratio
simulated / published. Nothing in common/sim is tuned to these numbers. Writes results/fidelity.md and
results/fidelity.json. Run: python benchmarks/fidelity.py
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from common.bench import machine_info  # noqa: E402
from common.sim import simulate_llm, simulate_op  # noqa: E402

REF = "shared/reference/accelerators.md"


@dataclass
class Figure:
    name: str
    published: float
    unit: str
    source: str
    simulate: callable


def decode_tps(model, backend, chip, *, batch=1, seq=1024, chips=None, dtype=None):
    r = simulate_llm(model, backend, phase="decode", batch=batch, seq=seq, chip=chip, chips=chips, dtype=dtype)
    return r.tokens_per_s_per_user, r


def serving_tps(model, backend, chip, *, batch, prompt, output, chips=None, dtype=None):
    """Output tokens/s of a batch served end to end: one prefill, then ``output`` decode steps at mean context."""
    pre = simulate_llm(model, backend, phase="prefill", batch=batch, seq=prompt, chip=chip, chips=chips, dtype=dtype)
    dec = simulate_llm(model, backend, phase="decode", batch=batch, seq=prompt + output // 2, chip=chip,
                       chips=chips, dtype=dtype)
    total = pre.time_s + output * dec.time_s
    return batch * output / total, dec


def attention_tflops(chip):
    r = simulate_op("sdpa", (16, 16, 8192, 128), "gpu", chip=chip, dtype="fp16")
    return r.achieved_flops / 1e12, r


FIGURES = [
    Figure("vLLM, Llama-3.1-8B bf16, batch 1 decode, A100-40GB", 75, "tok/s", f"{REF} (vLLM)",
           lambda: decode_tps("llama-3.1-8b", "gpu", "a100-40gb")),
    Figure("JetStream, Llama-3-8B bf16, batch 128, 1k in / 1k out, TPU v5e-8", 8249, "tok/s",
           f"{REF} (JetStream PyTorch)",
           lambda: serving_tps("llama-3.1-8b", "tpu", "tpu-v5e", batch=128, prompt=1024, output=1024, chips=8)),
    Figure("Groq LPU, Llama-2-70B, 4k context, per user", 300, "tok/s", f"{REF} (Groq)",
           lambda: decode_tps("llama-2-70b", "lpu", "groq-lpu", seq=4095)),  # 4k context = the model maximum
    Figure("Cerebras inference, Llama-3.1-8B, per user", 1800, "tok/s",
           "Cerebras, 'Introducing Cerebras Inference' (2024-08-27)",
           lambda: decode_tps("llama-3.1-8b", "wse", "wse-3")),
    Figure("Cerebras inference, Llama-3.1-70B, per user", 450, "tok/s",
           "Cerebras, 'Introducing Cerebras Inference' (2024-08-27)",
           lambda: decode_tps("llama-3.1-70b", "wse", "wse-3")),
    Figure("FlashAttention-3 forward, fp16, H100 SXM", 740, "TFLOP/s", f"{REF} (FlashAttention-3 paper)",
           lambda: attention_tflops("h100-sxm")),
]


def main() -> int:
    rows = []
    for f in FIGURES:
        t = time.perf_counter()
        try:
            value, report = f.simulate()
            ratio = value / f.published
            rows.append({"figure": f.name, "published": f.published, "simulated": round(value, 1),
                         "unit": f.unit, "ratio": round(ratio, 2), "chips": report.chips,
                         "bottleneck": report.bottleneck, "source": f.source,
                         "wall_s": round(time.perf_counter() - t, 2)})
        except Exception as exc:  # a backend not built yet: say so, do not hide the row
            rows.append({"figure": f.name, "published": f.published, "simulated": None, "unit": f.unit,
                         "ratio": None, "error": str(exc), "source": f.source})
    within2 = sum(1 for r in rows if r["ratio"] and 0.5 <= r["ratio"] <= 2)
    within14 = sum(1 for r in rows if r["ratio"] and 1 / 1.4 <= r["ratio"] <= 1.4)
    out = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "fidelity.json"), "w") as fh:
        json.dump({"machine": machine_info(), "rows": rows}, fh, indent=1)
    lines = ["| published figure | published | simulated | sim / pub | chips | bottleneck | source |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        sim = f"{r['simulated']:,} {r['unit']}" if r["simulated"] is not None else f"not available ({r['error']})"
        lines.append(f"| {r['figure']} | {r['published']:,} {r['unit']} | {sim} | {r['ratio'] or '-'} | "
                     f"{r.get('chips', '-')} | {r.get('bottleneck', '-')} | {r['source']} |")
    lines.append(f"\n{within2}/{len(rows)} within 2x, {within14}/{len(rows)} within 1.4x. "
                 "SIMULATED numbers from common.sim cost models; published numbers are measurements by others.")
    text = "\n".join(lines)
    with open(os.path.join(out, "fidelity.md"), "w") as fh:
        fh.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
