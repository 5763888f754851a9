"""Record reference measurements of the labs' GPU cells on this machine, for learners who have no GPU.

One prepared run: GEMMs (fp32 and the 16-bit types the device multiplies in), Lab 1's softmax, an SDPA, the
small reference decoder (common.models ``tiny-block``: prefill and one decode step), Lab 1's real model
(``load_llm("qwen2.5-0.5b-instruct")``, all 24 layers: the forward pass over a 32-token prompt, ``generate()`` of
16 tokens, the decode step that implies, and generate's peak memory), a torch.profiler summary, memory peaks
(``torch.cuda.max_memory_allocated`` on a GPU; the profiler's allocation total on a CPU) and the roofline
peaks (``common.measure.bench``). Every number is measured here, now; the file names the machine, torch, the date and
the load average. ``common.measure.reference.load(name)`` reads it back.

    python benchmarks/reference/record.py                  # the GPU if torch sees one, else the CPU
    python benchmarks/reference/record.py --device cpu --out /tmp/ref.json
    python benchmarks/reference/record.py --quick          # tiny sizes: checks the script, not a reference

Work counted per op (the labs' conventions): GEMM 2*M*N*K FLOPs, bytes 3*N^2 elements; softmax 5 FLOPs and 2
elements moved per element; SDPA 4*B*H*S^2*D (the two matmuls) + 5*B*H*S^2 (softmax), bytes of q, k, v, out;
the decoders: FLOPs from torch.utils.flop_counter, bytes = their weights once (the compulsory minimum). The real
model's weights are random unless the Hub (or its cache) is reachable: its timings do not depend on the values.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from common.measure import bench
from common.measure.devices import this_machine
from common.models import build_model, load_llm, step_inputs

HERE = Path(__file__).resolve().parent
# package data: installed with common (common.measure.reference reads it)
DATA = HERE.parents[1] / "common" / "measure" / "reference_data"
FORMAT = 1
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
MODEL, BATCH, SEQ = "tiny-block", 4, 64  # Lab 1's forward pass
LLM_NAME, PROMPT_LEN, NEW_TOKENS = "qwen2.5-0.5b-instruct", 32, 16  # Lab 1's Part 5 (LLM_NAME, PROMPT_LEN, ...)
LAB_GEMM_N = 2048  # Lab 1's GEMM (GAP_GEMM_N): the one GEMM that is profiled
WARMUP = 3  # untimed calls first: the decoder's first two decode steps on a CPU take ~100x longer (lazy init)


def plan(kind: str, quick: bool) -> dict:
    """Sizes per device: Lab 1's full-run shapes, a GEMM sweep, and run times that fit a few minutes."""
    if quick:
        return {"gemm": (32, 64), "profiled_gemm": 64, "softmax": (64, 64), "sdpa": (1, 2, 16, 8), "batch": 1,
                "seq": 8, "new_tokens": 2, "min_run_time": 0.01, "llm_layers": 1, "prompt": 4,
                "peaks": {"gemm_n": 32, "copy_bytes": 1 << 16, "min_run_time": 0.01, "warmup": 0}}
    big = kind == "cuda"
    return {"gemm": (256, 512, 1024, 2048, 4096, 8192) if big else (256, 512, 1024, 2048),
            "profiled_gemm": LAB_GEMM_N,
            "softmax": (4096, 1024), "sdpa": (4, 16, 2048, 64) if big else (1, 8, 512, 64), "batch": BATCH,
            "seq": SEQ, "new_tokens": NEW_TOKENS, "min_run_time": 0.5 if big else 1.0, "peaks": {},
            "llm_layers": None, "prompt": PROMPT_LEN}


class Layer:
    """What differs between a CPU and a CUDA run: where tensors live, how to wait for the device, which
    profiler activities exist, how a memory peak is read. Tests replace ``tensor_device`` to run the CUDA
    branch against a faked torch.cuda."""

    def __init__(self, device: torch.device):
        self.kind = device.type
        self.device = device  # what bench.measure syncs
        self.tensor_device = device  # where tensors are made

    def sync(self) -> None:
        if self.kind == "cuda":
            torch.cuda.synchronize(self.device)

    def activities(self) -> list:
        return [ProfilerActivity.CPU, ProfilerActivity.CUDA] if self.kind == "cuda" else [ProfilerActivity.CPU]

    def memory_peak(self, fn) -> tuple[int, str]:
        """(bytes, method): the most the call allocated at once beyond what was live before it."""
        if self.kind == "cuda":
            self.sync()
            torch.cuda.reset_peak_memory_stats(self.device)
            before = torch.cuda.memory_allocated(self.device)
            fn()
            self.sync()
            return int(torch.cuda.max_memory_allocated(self.device) - before), "torch.cuda.max_memory_allocated"
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
        running = peak = 0
        for ev in sorted(prof.events(), key=lambda e: e.time_range.start):
            running += ev.self_cpu_memory_usage
            peak = max(peak, running)
        return int(peak), "torch.profiler: running total of self_cpu_memory_usage"


def _row(name, op, shape, dtype, r: bench.BenchResult, **extra) -> dict:
    return {"workload": name, "op": op, "shape": list(shape), "dtype": dtype, "flops": r.flops, "bytes": r.bytes,
            "median_s": r.median_s, "iqr_s": r.iqr_s, "n_runs": r.n_runs, "number_per_run": r.number_per_run,
            "flops_per_s": r.flops_per_s, "bytes_per_s": r.bytes_per_s, "sim_op": extra.pop("sim_op", None),
            "sim_shape": extra.pop("sim_shape", None), **extra}


def workloads(layer: Layer, dtypes: list[str], p: dict):
    """(name, op, shape, dtype, fn, flops, bytes, extra) for every timed workload of the plan; extra["profiled"]
    marks the ones whose profile and memory peak are kept (Lab 1's GEMM, softmax, SDPA, prefill)."""
    dev = layer.tensor_device
    for d in dtypes:
        t = DTYPES[d]
        size = t.itemsize
        for n in p["gemm"]:
            a, b = torch.randn(n, n, device=dev, dtype=t), torch.randn(n, n, device=dev, dtype=t)
            yield (f"GEMM {n} {d}", "GEMM", (n, n, n), d, (lambda a=a, b=b: torch.mm(a, b)), 2.0 * n**3,
                   3.0 * n * n * size,
                   {"sim_op": "matmul", "sim_shape": [n, n, n], "profiled": n == p["profiled_gemm"]})
        rows, cols = p["softmax"]
        x = torch.randn(rows, cols, device=dev, dtype=t)
        yield (f"softmax {rows}x{cols} {d}", "softmax", (rows, cols), d, (lambda x=x: torch.softmax(x, -1)),
               5.0 * rows * cols, 2.0 * rows * cols * size,
               {"sim_op": "softmax", "sim_shape": [rows, cols], "profiled": True})
        bb, h, s, e = p["sdpa"]
        q, k, v = (torch.randn(bb, h, s, e, device=dev, dtype=t) for _ in range(3))
        yield (f"SDPA {bb}x{h}x{s}x{e} {d}", "SDPA", (bb, h, s, e), d,
               (lambda q=q, k=k, v=v: torch.nn.functional.scaled_dot_product_attention(q, k, v)),
               4.0 * bb * h * s * s * e + 5.0 * bb * h * s * s, 4.0 * bb * h * s * e * size,
               {"sim_op": "sdpa", "sim_shape": [bb, h, s, e], "profiled": True})
        model = build_model(MODEL, device=dev, dtype=t).eval()
        weights = float(sum(w.numel() * w.element_size() for w in model.parameters()))
        for phase in ("prefill", "decode"):
            args, kw = step_inputs(model, phase, p["batch"], p["seq"])
            with torch.no_grad(), FlopCounterMode(display=False) as counter:
                model(*args, **kw)

            def step(model=model, args=args, kw=kw):
                with torch.no_grad():
                    return model(*args, **kw)

            yield (f"{MODEL} {phase} b{p['batch']} s{p['seq']} {d}", phase, (p["batch"], p["seq"]), d, step,
                   float(counter.get_total_flops()), weights,
                   {"sim_model": MODEL, "phase": phase, "batch": p["batch"], "seq": p["seq"],
                    "profiled": phase == "prefill"})


def real_llm(layer: Layer, dtype: str, p: dict):
    """Lab 1's Part 5 on this device: the real model's forward pass over the prompt, ``generate()`` of
    ``new_tokens`` tokens (greedy, ``min_new_tokens`` so random weights cannot stop early) and the decode step
    they imply, (generate - forward) / (new - 1), as Lab 1 derives it. Yields (name, op, shape, fn, flops,
    bytes, extra) like ``workloads``; ``extra["profiled"]`` marks generate, whose memory peak is kept."""
    llm = load_llm(LLM_NAME, layers=p["llm_layers"], dtype=DTYPES[dtype], device=layer.tensor_device)
    ids = torch.randint(llm.config.vocab_size, (1, p["prompt"]), generator=torch.Generator().manual_seed(0))
    ids = ids.to(layer.tensor_device)  # (1, prompt) token ids
    weights = float(sum(w.numel() * w.element_size() for w in llm.model.parameters()))
    kw = {"max_new_tokens": p["new_tokens"], "min_new_tokens": p["new_tokens"], "do_sample": False,
          "pad_token_id": llm.model.config.eos_token_id, "attention_mask": torch.ones_like(ids)}

    def forward():
        with torch.no_grad():
            return llm.model(ids, use_cache=False).logits

    def generate():
        with torch.no_grad():
            return llm.model.generate(ids, **kw)

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        forward()
    sim = {"sim_model": LLM_NAME, "sim_layers": llm.layers, "batch": 1, "llm": llm.label}
    tag = f"{llm.display} ({llm.layers} layers)"
    yield (f"{tag} forward b1 s{p['prompt']} {dtype}", "prefill", (1, p["prompt"]), forward,
           float(counter.get_total_flops()), weights, {**sim, "phase": "prefill", "seq": p["prompt"],
                                                       "profiled": False})
    yield (f"{tag} generate {p['new_tokens']} tokens {dtype}", "generate", (1, p["prompt"]), generate, None, None,
           {"llm": llm.label, "new_tokens": p["new_tokens"], "profiled": True})


def decode_step_row(timings: list[dict], p: dict) -> dict | None:
    """The decode step implied by the real model's forward and generate rows (Lab 1's DECODE_STEP_S), with the
    sequence length halfway through generation for the simulator.

    The step is a difference of two timings: (generate - forward) / (new_tokens - 1). Where that difference is not
    above the two timings' noise (their IQRs; a --quick run times each once, and under load generate of 2 tokens
    can come out faster than the forward pass) no step was measured: the row says so in ``unresolved`` and its
    ``median_s`` is None, rather than a clamped 0 s that no machine runs in."""
    fwd = next((r for r in timings if r["op"] == "prefill" and r.get("sim_model") == LLM_NAME), None)
    gen = next((r for r in timings if r["op"] == "generate" and r.get("llm")), None)
    if fwd is None or gen is None:
        return None
    n = p["new_tokens"]
    gap, noise = gen["median_s"] - fwd["median_s"], (fwd["iqr_s"] or 0.0) + (gen["iqr_s"] or 0.0)
    step = gap / max(n - 1, 1) if gap > noise else None
    unresolved = None if step is not None else (
        f"generate - forward = {gap * 1e3:.3g} ms is not above the timings' noise (IQRs {noise * 1e3:.3g} ms): "
        f"no decode step derived from {n} new tokens")
    return {"workload": fwd["workload"].replace(f"forward b1 s{p['prompt']}", "decode step (from generate)"),
            "op": "decode", "shape": [1, p["prompt"] + n // 2], "dtype": fwd["dtype"], "flops": None, "bytes": None,
            "median_s": step, "iqr_s": None, "n_runs": min(fwd["n_runs"], gen["n_runs"]), "number_per_run": 1,
            "flops_per_s": None, "bytes_per_s": None, "sim_op": None, "sim_shape": None,
            "sim_model": LLM_NAME, "sim_layers": fwd["sim_layers"], "phase": "decode", "batch": 1,
            "seq": p["prompt"] + n // 2, "llm": fwd["llm"], "derived": "(generate - forward) / (new_tokens - 1)",
            **({"unresolved": unresolved} if unresolved else {})}


def top_ops(layer: Layer, fn, k: int = 5, runs: int = 3) -> list[dict]:
    """The ``k`` ops with the most self time (device time on a GPU) over ``runs`` calls."""
    fn()
    layer.sync()
    with profile(activities=layer.activities()) as prof:
        for _ in range(runs):
            fn()
        layer.sync()
    rows = []
    for e in prof.key_averages():
        dev_us = getattr(e, "self_device_time_total", 0.0) if layer.kind == "cuda" else 0.0
        rows.append({"key": e.key, "count": e.count, "self_cpu_us": e.self_cpu_time_total / runs,
                     "self_device_us": dev_us / runs})
    rows.sort(key=lambda r: -(r["self_device_us"] if layer.kind == "cuda" else r["self_cpu_us"]))
    return rows[:k]


def _load() -> list[float] | None:
    return [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None


def record(device: str | None = None, quick: bool = False, layer: Layer | None = None) -> dict:
    """Measure everything of the plan on ``device``; return the document ``common.measure.reference`` reads."""
    started, load_before, t0 = dt.datetime.now(dt.UTC), _load(), time.perf_counter()
    machine = this_machine(device)
    layer = layer or Layer(torch.device(machine.device))
    p = plan(layer.kind, quick)
    dtypes = ["fp32", "fp16", "bf16"] if layer.kind == "cuda" else ["fp32"]
    dtypes = [d for d in dtypes if d in machine.dtypes]
    main_dtype = "fp16" if layer.kind == "cuda" else "fp32"  # the dtype of Lab 1's GPU / CPU cells
    timings, profiles, memory = [], [], []
    for name, op, shape, d, fn, flops, nbytes, extra in workloads(layer, dtypes, p):
        r = bench.measure(fn, label=name, flops=flops, bytes=nbytes, device=layer.device,
                          min_run_time=p["min_run_time"], warmup=WARMUP)
        profiled = extra.pop("profiled") and d == main_dtype
        timings.append(_row(name, op, shape, d, r, **extra))
        if profiled:
            profiles += [{"workload": name, **row} for row in top_ops(layer, fn)]
            peak, method = layer.memory_peak(fn)
            memory.append({"workload": name, "peak_bytes": peak, "method": method})
    for name, op, shape, fn, flops, nbytes, extra in real_llm(layer, main_dtype, p):
        r = bench.measure(fn, label=name, flops=flops, bytes=nbytes, device=layer.device,
                          min_run_time=p["min_run_time"], warmup=1)  # one warm-up call: each takes seconds on a CPU
        if extra.pop("profiled"):
            peak, method = layer.memory_peak(fn)
            memory.append({"workload": name, "peak_bytes": peak, "method": method})
        timings.append(_row(name, op, shape, main_dtype, r, **extra))
    step = decode_step_row(timings, p)
    if step is not None:
        timings.append(step)
    peaks = _peaks(layer, machine, p)
    info = bench.machine_info()
    return {"format": FORMAT, "provenance": {
        **machine.as_dict(), **{k: info[k] for k in ("cpu", "platform", "python", "num_threads")},
        "date_utc": started.isoformat(timespec="seconds"),
        "load_avg_before": load_before, "load_avg_after": _load(), "duration_s": round(time.perf_counter() - t0, 1),
        "recorded_by": "benchmarks/reference/record.py" + (" --quick" if quick else ""), "quick": quick,
        "min_run_time_s": p["min_run_time"], "gpu_rows": layer.kind == "cuda",
        "rows": ("GPU rows, measured on this GPU" if layer.kind == "cuda" else
                 "CPU rows only: this machine has no GPU, so this file holds no GPU measurement")},
        "timings": timings, "profile": profiles, "memory": memory, "peaks": peaks}


def _peaks(layer: Layer, machine, p: dict) -> list[dict]:
    """Roofline peaks: an fp32 GEMM and a copy (bench.measure_peaks), then each 16-bit GEMM this device runs."""
    kw = p["peaks"]
    mp = bench.measure_peaks(layer.device, torch.float32, **kw)
    rows = [{"dtype": "fp32", "what": "gemm", "gemm_n": mp.gemm_n, "flops_per_s": mp.flops_per_s},
            {"dtype": "fp32", "what": "copy", "copy_bytes": mp.copy_bytes, "bytes_per_s": mp.bytes_per_s}]
    sixteen = [DTYPES[d] for d in ("fp16", "bf16") if d in machine.dtypes]
    gemm_kw = {k: v for k, v in kw.items() if k in ("gemm_n", "min_run_time", "warmup")}
    for tag, res in bench.measure_gemm_peaks(layer.device, sixteen, **gemm_kw).items():
        d = {"float16": "fp16", "bfloat16": "bf16"}[tag]
        rows.append({"dtype": d, "what": "gemm", "skipped": res} if isinstance(res, str) else
                    {"dtype": d, "what": "gemm", "gemm_n": int(re.sub(r"\D", "", res.sub_label)),
                     "flops_per_s": res.flops_per_s})
    return rows


def default_name(doc: dict) -> str:
    """'t4' for a catalog GPU, else the device name as a file name ('cpu-amd-epyc-7b13')."""
    prov = doc["provenance"]
    if prov.get("chip") and prov.get("match") == "exact":
        return prov["chip"]
    slug = re.sub(r"[^a-z0-9]+", "-", prov["device_name"].lower()).strip("-")
    return slug if prov["device_type"] == "cuda" else f"cpu-{slug}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    ap.add_argument("--out", default=None, help=f"output JSON (default: {DATA}/<machine>.json)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks the script only")
    args = ap.parse_args(argv)
    doc = record(args.device, args.quick)
    out = Path(args.out) if args.out else DATA / f"{default_name(doc)}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    prov = doc["provenance"]
    print(f"{len(doc['timings'])} timings, {len(doc['profile'])} profile rows, {len(doc['memory'])} memory peaks "
          f"on {prov['device_name']} (torch {prov['torch']}, {prov['date_utc']}, load {prov['load_avg_before']} -> "
          f"{prov['load_avg_after']}) in {prov['duration_s']} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
