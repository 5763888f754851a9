"""The simulated Spyre backend against torch-spyre's measured cost model, op class by op class.

For each op class the published model scores (pointwise, broadcast, transport, reduction, softmax, matmul, bmm)
a set of shapes - the page's own examples and shapes of the calibration sweep's kinds - runs through
``common.sim.simulate`` on the spyre backend (fp16, 32 cores), and the simulated device time (the sum of the
op events on the cores: no bundle launch, which the model leaves out too) is compared with the reference model
(``benchmarks.spyre_cost_model``). Per class: the RMS of the relative error (sim - model) / model, in percent -
the metric of the page's "Accuracy" table (RMS of the relative error against measured kernels) - next to the
model's own published RMS. Where the gap exceeds that, ``DEVIATIONS`` names the reason and the bound it is held to.

Run: python benchmarks/spyre_vs_cost_model.py  (writes results/spyre_cost_model.json and the Spyre section of
results/fidelity.md).
"""
from __future__ import annotations

import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from benchmarks import spyre_cost_model as ref  # noqa: E402
from common.sim import simulate  # noqa: E402
from common.sim.workload import graph_workload  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "results")
E = 2  # fp16 bytes

# op class -> the published RMS (percent) it is held to; a class listed in DEVIATIONS is held to that bound.
PUBLISHED = {"pointwise": 8.5, "broadcast": 5.0, "transport": 6.1, "reduction": 7.2, "softmax": 21.1,
             "matmul": 29.8, "bmm": 40.0}
PUBLISHED_TEXT = {"matmul": "25.1 (row-tiled) / 29.8 (split)", "bmm": "26.5-40.0"}
# Classes whose gap to the model exceeds its published error: the bound they are held to (percent RMS, a little
# above today's gap so a regression fails) and the reason, found by reading both models term by term.
DEVIATIONS: dict[str, tuple[float, str]] = {
    "broadcast": (15.0, "simulator SLOWER: it prices a full input plus a broadcast operand like any balanced "
                  "1 read + 1 write op (~105 GB/s with the turnaround); the measured broadcast kernels run at "
                  "118-135 GB/s, a surface in ROWS and COLS whose mechanism the page calls open, so it is not "
                  "copied into the simulator. x + const is one-input in the captured graph and is priced like neg"),
    "transport": (25.0, "simulator FASTER: x.t().contiguous() becomes a restickify (reads only) then a clone "
                  "(writes only) in one bundle, each priced alone, so neither pays the read/write turnaround "
                  "(150 GB/s effective); the model prices the kernel once with the turnaround on its totals "
                  "('How a kernel is priced') and the measured restickify rate is a flat 116 GB/s"),
    "reduction": (17.0, "simulator FASTER at many rows: it reads at the one-directional 150 GB/s peak; the "
                  "measured row-reduction read rate falls with ROWS, min(150, 114 + 61 exp(-ROWS/3700)) GB/s, "
                  "for every reduction op alike (a fit, no mechanism given): the gap grows with the row count"),
    "matmul": (30.0, "simulator FASTER, the same direction as the model's own bias (it under-predicts measured "
               "matmuls by 22-31 % on the mean): both take max(compute, memory), but the simulator's LX tiling "
               "keeps the per-core output tile resident, while the model adds the measured operand re-read once "
               "that tile passes 64 K elements and a split-shape re-read for a 32-way split of the long dim "
               "(most of the model's time at 4096^3). Read together: the simulator is a further lower bound on "
               "matmuls"),
}
SAME_TERMS = ("within the model's own published error, by construction: the simulator prices this class with the "
              "same terms and the same catalog constants (so agreement here checks the plumbing, not the physics)")


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _run(fn, *shapes, **options):
    with FakeTensorMode():
        args = tuple(torch.empty(*s, dtype=torch.float16) for s in shapes)
    report = simulate(graph_workload(_Fn(fn), args, dtype="fp16"), "spyre", **options)
    events = [e for e in report.events if e.engine == "cores" and e.kind == "compute"]
    return sum(e.duration for e in events), report


def _mm_split(report) -> tuple[int, int]:
    """The simulator's work division of its (first) matmul: cores on M (batch and M) and on N."""
    plan = next(p for k in report.programs[0].kernels for p in k.tiling["sdsc"] if "mc" in p)
    parts = dict(x.split("/") for x in plan["split"].split() if "/" in x)
    return int(parts.get("M", 1)), int(parts.get("N", 1))


def _case(cls, label, sim_fn, ref_fn):
    return {"class": cls, "case": label, "sim": sim_fn, "ref": ref_fn}


def cases() -> list[dict]:
    out = []
    for r, c in ((1024, 2048), (4096, 2048), (8192, 4096)):
        b = r * c * E
        out.append(_case("pointwise", f"add {r}x{c} + {r}x{c}", lambda r=r, c=c: _run(torch.add, (r, c), (r, c)),
                         lambda rep, b=b: ref.pointwise_s(2 * b, b)))
        out.append(_case("pointwise", f"neg {r}x{c}", lambda r=r, c=c: _run(torch.neg, (r, c)),
                         lambda rep, b=b: ref.pointwise_s(b, b)))
    for r, c in ((1024, 2048), (4096, 2048), (4096, 8192), (16384, 1024)):
        b = r * c * E
        out.append(_case("broadcast", f"bcast {r}x{c} + 1x{c}", lambda r=r, c=c: _run(torch.add, (r, c), (1, c)),
                         lambda rep, b=b, r=r, c=c: ref.broadcast_s(b + c * E, b, r, c, True)))
        out.append(_case("broadcast", f"bcastcol {r}x{c} + {r}x1",
                         lambda r=r, c=c: _run(torch.add, (r, c), (r, 1)),
                         lambda rep, b=b, r=r, c=c: ref.broadcast_s(b + r * 128, b, r, c, False)))
        out.append(_case("broadcast", f"copy {r}x{c} + const", lambda r=r, c=c: _run(lambda x: x + 1.0, (r, c)),
                         lambda rep, b=b, r=r, c=c: ref.broadcast_s(b, b, r, c, False)))
    for r, c in ((1024, 1024), (2048, 4096), (4096, 4096)):
        b = r * c * E
        out.append(_case("transport", f"transpose {r}x{c}",
                         lambda r=r, c=c: _run(lambda x: x.t().contiguous(), (r, c)),
                         lambda rep, b=b: ref.transpose_s(b, b)))
    for r, c in ((1024, 2048), (4096, 2048), (16384, 1024)):
        b = r * c * E
        for name, f in (("sum", lambda x: x.sum(-1)), ("amax", lambda x: x.amax(-1))):
            out.append(_case("reduction", f"{name} {r}x{c} over the last dim", lambda r=r, c=c, f=f: _run(f, (r, c)),
                             lambda rep, b=b, r=r: ref.reduction_s(b, -(-r // 64) * 128, r)))
    for r, c in ((4096, 2048), (1024, 4096), (8192, 8192), (4096, 16384)):
        out.append(_case("softmax", f"softmax {r}x{c}", lambda r=r, c=c: _run(lambda x: torch.softmax(x, -1), (r, c)),
                         lambda rep, r=r, c=c: ref.softmax_s(r, c, tiles=_row_tiles(rep))))
    for m, k, n in ((4096, 2048, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (512, 4096, 4096),
                    (256, 4096, 11008)):
        out.append(_case("matmul", f"mm {m}x{k} @ {k}x{n}", lambda m=m, k=k, n=n: _run(torch.mm, (m, k), (k, n)),
                         lambda rep, m=m, k=k, n=n: _mm_ref(rep, m, k, n)))
    for bt, m, k, n in ((8, 1024, 1024, 1024), (16, 512, 2048, 512), (4, 1024, 2048, 1024), (32, 2048, 128, 2048)):
        out.append(_case("bmm", f"bmm {bt}x{m}x{k} @ {bt}x{k}x{n}",
                         lambda bt=bt, m=m, k=k, n=n: _run(torch.bmm, (bt, m, k), (bt, k, n)),
                         lambda rep, bt=bt, m=m, k=k, n=n: _mm_ref(rep, m, k, n, bt)))
    return out


def _row_tiles(report) -> int:
    plan = report.programs[0].kernels[0].tiling["sdsc"]
    return max(p.get("row_tiles", 1) for p in plan)


def _mm_ref(report, m, k, n, batch=1) -> float:
    ms, ns = _mm_split(report)
    return ref.matmul_s(m, k, n, batch=batch, m_split=max(1, ms), n_split=ns, both_batched=batch > 1)["total_s"]


def _rms(xs) -> float:
    return math.sqrt(sum(x * x for x in xs) / len(xs))


def compare() -> dict:
    """Every case: simulated and reference time, relative error; per class: RMS, mean, worst, the bound."""
    rows = []
    for c in cases():
        sim_s, report = c["sim"]()
        ref_s = c["ref"](report)  # the model reads the work division / row tiles the compiler chose
        rows.append({"class": c["class"], "case": c["case"], "sim_us": round(sim_s * 1e6, 2),
                     "ref_us": round(ref_s * 1e6, 2), "error_pct": round(100 * (sim_s - ref_s) / ref_s, 2)})
    classes = {}
    for cls in PUBLISHED:
        errs = [r["error_pct"] for r in rows if r["class"] == cls]
        if not errs:
            continue
        bound, reason = DEVIATIONS.get(cls, (PUBLISHED[cls], SAME_TERMS))
        rms = _rms(errs)
        classes[cls] = {"n": len(errs), "rms_pct": round(rms, 1), "mean_pct": round(sum(errs) / len(errs), 1),
                        "worst_pct": max(errs, key=abs), "published_rms_pct": PUBLISHED_TEXT.get(cls, PUBLISHED[cls]),
                        "bound_pct": bound, "reason": reason, "within": rms <= bound}
    return {"source": ref.DOC, "params": ref.PARAMS, "metric": "RMS over the cases of (sim - model) / model, %",
            "rows": rows, "classes": classes}


def markdown(res: dict) -> str:
    lines = ["## Spyre: the simulator against torch-spyre's measured cost model", "",
             f"Reference: {res['source']}, its formulas re-implemented in benchmarks/spyre_cost_model.py with the "
             f"fitted constants of {res['params']}; the model is calibrated on ~1,500 measured kernels and publishes "
             "its own RMS error per category. Metric: "
             f"{res['metric']} (the page scores its model the same way against measurements). Both are fp16 on 32 "
             "cores, device time only (no bundle launch). A model is not a measurement: a class within the "
             "published error is as close to the model as the model is to the hardware.", "",
             "| op class | cases | sim vs model RMS | mean | worst | model's published RMS vs measured | bound | "
             "within | why |", "|---|---|---|---|---|---|---|---|---|"]
    for cls, c in res["classes"].items():
        lines.append(f"| {cls} | {c['n']} | {c['rms_pct']} % | {c['mean_pct']:+} % | {c['worst_pct']:+} % | "
                     f"{c['published_rms_pct']} % | {c['bound_pct']} % | {'yes' if c['within'] else '**NO**'} | "
                     f"{c['reason']} |")
    lines += ["", "| op class | case | simulated | model | error |", "|---|---|---|---|---|"]
    lines += [f"| {r['class']} | {r['case']} | {r['sim_us']:,} us | {r['ref_us']:,} us | {r['error_pct']:+} % |"
              for r in res["rows"]]
    return "\n".join(lines)


MARK = "<!-- spyre-cost-model -->"


def write_section(res: dict, path: str | None = None) -> None:
    """Replace (or append) the Spyre section of fidelity.md, between two markers."""
    path = path or os.path.join(RESULTS, "fidelity.md")
    text = open(path).read() if os.path.exists(path) else ""
    if MARK in text:
        text = text[:text.index(MARK)].rstrip("\n")
    with open(path, "w") as fh:
        fh.write(f"{text}\n\n{MARK}\n{markdown(res)}\n{MARK}\n".lstrip("\n"))


def main() -> int:
    res = compare()
    with open(os.path.join(RESULTS, "spyre_cost_model.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    write_section(res)
    print(markdown(res))
    return 0 if all(c["within"] for c in res["classes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
