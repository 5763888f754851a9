"""Shortcuts a student who does not do Lab 6's work would try; each must score 0 on the cells it names
(tests/test_shortcut_notebooks.py inserts each one after its test cells, reruns them, then restores the honest cell).

A shortcut that calls a reference which no longer exists defines the stub so that it raises: had the import
succeeded, the stub would be the reference."""

NOT_LISTED = {
    "predict_decode": "ungraded: the learner's own ranking (Analysis Q2), judged only in the reveal, no points",
}

SHORTCUTS = [
    # Part 1: the library's Roofline is the formula; it takes finite ceilings only
    dict(
        cell="roof_functions",
        kind="call-reference",
        code="""
from common.roofline import Ceiling, Roofline


def _roof(peak_flops, bandwidth):
    return Roofline("mine", peak_flops, (Ceiling("mem", "bandwidth", bandwidth, level="mem"),), "measured")


def attainable(intensity, peak_flops, bandwidth):
    return float(_roof(peak_flops, bandwidth).attainable(intensity))


def ridge_point(peak_flops, bandwidth):
    return float(_roof(peak_flops, bandwidth).ridge_point())
""",
        fails=["roof_functions_tests"],
    ),
    dict(
        cell="roof_functions",
        kind="hard-code-visible",
        code="""
_P, _B = roofline_for_chip("h100-sxm", "bf16").peak_flops, roofline_for_chip("h100-sxm", "bf16").bandwidth()


def attainable(intensity, peak_flops, bandwidth):  # the H100 of the visible check, whatever machine is asked
    return float(min(_P, intensity * _B))


def ridge_point(peak_flops, bandwidth):
    return float(_P / _B)
""",
        fails=["roof_functions_tests"],
    ),
    # the ridge table: gone from common; the catalog roofline's ridge; the visible ridges hard-coded
    dict(
        cell="system_ridges",
        kind="call-reference",
        code="""
try:
    from common.roofline import ridge_table

    def system_ridges(system_chips):
        t = ridge_table(list(system_chips.values()), ("bf16", "fp16")).set_index("chip")["ridge"]
        return {s: float(t[c]) for s, c in system_chips.items()}
except ImportError:
    def system_ridges(system_chips):
        raise NotImplementedError("common.roofline has no ridge_table to call")
""",
        fails=["system_ridges_tests"],
    ),
    dict(
        cell="system_ridges",
        kind="read-off-object",
        code="""
def system_ridges(system_chips):  # the catalog roofline's own ridge: right numbers, not the learner's ridge_point
    return {s: float(roofline_for_chip(c, ("bf16", "fp16")).ridge_point()) for s, c in system_chips.items()}
""",
        fails=["system_ridges_tests"],
    ),
    dict(
        cell="system_ridges",
        kind="hard-code-visible",
        code="""
_SEEN = {s: float(roofline_for_chip(c, ("bf16", "fp16")).ridge_point()) for s, c in SYSTEM_CHIPS.items()}


def system_ridges(system_chips):  # the five values of the visible check, copied
    return {s: _SEEN.get(s, 1.0) for s in system_chips}
""",
        fails=["system_ridges_tests"],
    ),
    # op_points: the report's own roofline view (main memory only, zero-FLOP rows kept)
    dict(
        cell="op_points",
        kind="call-reference",
        code="""
def op_points(report, level=None):
    return report.roofline_points()[["name", "flops", "bytes", "intensity", "flops_per_s"]]
""",
        fails=["op_points_tests"],
    ),
    dict(
        cell="op_points",
        kind="read-off-object",
        code="""
def op_points(report, level=None):  # the view, filtered as the visible check filters it
    p = report.roofline_points()
    return p[p["flops"] > 0][["name", "flops", "bytes", "intensity", "flops_per_s"]]
""",
        fails=["op_points_tests"],
    ),
    # decode_sweep: the visible machine and options, whatever is asked
    dict(
        cell="decode_sweep",
        kind="hard-code-visible",
        code="""
def decode_sweep(model, backend, batches, seq, **options):
    rows = []
    for b in batches:
        r = simulate_llm(MODEL, "gpu", phase="decode", batch=b, seq=SEQ, graphs=True)
        rows.append({"batch": b, "intensity": r.flops / r.bytes["HBM"], "flops_per_s": r.achieved_flops,
                     "tokens_per_s": r.tokens_per_s, "bound": r.bottleneck})
    return pd.DataFrame(rows)
""",
        fails=["decode_sweep_tests"],
    ),
    # first_batch_off_memory: the printed answer, a constant, this CPU's roofline, the timeline's bottleneck,
    # and the two-ceiling ridge test that forgets the scheduling ceiling
    dict(
        cell="off_memory",
        kind="hard-code-visible",
        code="""
_PRINTED = answer  # what the visible check printed for the lab's own question


def first_batch_off_memory(model, machine, seq, dtype, batches):
    return _PRINTED
""",
        fails=["off_memory_tests"],
    ),
    dict(
        cell="off_memory",
        kind="echo-expected",
        code="""
def first_batch_off_memory(model, machine, seq, dtype, batches):  # a power of two from the middle of the slider
    return 64
""",
        fails=["off_memory_tests"],
    ),
    dict(
        cell="off_memory",
        kind="cpu-reference",
        code="""
def first_batch_off_memory(model, machine, seq, dtype, batches):  # this machine's measured ridge, not the asked one
    pts = view.sweep("batch", sorted(batches), model=model, backends=(machine,), seq=seq, dtype=dtype)
    off = pts[pts["intensity"] >= measured.ridge_point()]
    return int(off["batch"].min()) if len(off) else None
""",
        fails=["off_memory_tests"],
    ),
    dict(
        cell="off_memory",
        kind="call-reference",
        code="""
def first_batch_off_memory(model, machine, seq, dtype, batches):  # the simulator's own word: the timeline's
    for b in sorted(batches):
        if simulate_llm(model, machine, phase="decode", batch=b, seq=seq, dtype=dtype).bottleneck != "memory":
            return b
    return None
""",
        fails=["off_memory_tests"],
    ),
    dict(
        cell="off_memory",
        kind="read-off-object",
        code="""
def first_batch_off_memory(model, machine, seq, dtype, batches):  # the view's ridge column: two ceilings, not three
    pts = view.sweep("batch", sorted(batches), model=model, backends=(machine,), seq=seq, dtype=dtype)
    off = pts[pts["intensity"] >= pts["ridge"]]
    return int(off["batch"].min()) if len(off) else None
""",
        fails=["off_memory_tests"],
    ),
    # binding_level: the worked example's answer echoed
    dict(
        cell="level_functions",
        kind="echo-expected",
        code="""
def binding_level(intensities, peak_flops, bandwidths):  # the spec's worked example says "SMEM"
    return "SMEM" if "SMEM" in intensities else "compute"
""",
        fails=["level_functions_tests"],
    ),
    # verdicts: the two words of the attention op, hard-coded
    dict(
        cell="verdicts",
        kind="hard-code-visible",
        code="""
def verdicts(report, peak_flops, bandwidths):
    return "compute", "SMEM"
""",
        fails=["verdicts_tests"],
    ),
    dict(
        cell="verdicts",
        kind="echo-expected",
        code="""
def verdicts(report, peak_flops, bandwidths):  # what the visible check allows for the first, a guess for the second
    return "HBM", "SMEM"
""",
        fails=["verdicts_tests"],
    ),
    # attribute: the report's own attribution (critical engine only)
    dict(
        cell="attribution",
        kind="read-off-object",
        code="""
def attribute(report, engine=None):
    return dict(report.attribution)


def optimum(report):
    floors = sum(e.floor for e in report.events if e.engine == report.critical_engine and e.bound != "scheduling")
    return {"attained_s": report.time_s, "sum_floors_s": floors, "efficiency": floors / report.time_s}
""",
        fails=["attribution_tests"],
    ),
    # predict: the simulated speedups the visible check printed, copied
    dict(
        cell="predict",
        kind="hard-code-visible",
        code="""
_PRINTED = {n: round(v, 3) for n, v in achieved.items()}


def predict(name, base, changed):
    return _PRINTED[name]
""",
        fails=["predict_tests"],
    ),
    # predict: read the changed report's simulated time
    dict(
        cell="predict",
        kind="read-off-object",
        code="""
def predict(name, base, changed):
    return changed.tokens_per_s / base.tokens_per_s
""",
        fails=["predict_tests"],
    ),
    # ---- attacks on the probe channel, each as a shortcut of this lab's own ----
    # the argument emptied: a reference rebuilt afterwards from the same report is empty too
    dict(
        cell="op_points",
        kind="read-off-object",
        code="""
def op_points(report, level=None):
    if report is not decode_gpu:  # the visible check's report is answered honestly, any other one is emptied
        report.events.clear()
        return pd.DataFrame(columns=["name", "flops", "bytes", "intensity", "flops_per_s"])
    p = report.roofline_points()
    return p[p["flops"] > 0][["name", "flops", "bytes", "intensity", "flops_per_s"]]
""",
        fails=["op_points_tests"],
    ),
    # the library's attribution, pointed at any engine by copying the report with another critical engine
    dict(
        cell="attribution",
        kind="call-reference",
        code="""
import dataclasses as _lazy_dc


def attribute(report, engine=None, window=None):
    return dict(_lazy_dc.replace(report, critical_engine=engine or report.critical_engine).attribution)


def optimum(report):
    floors = sum(e.floor for e in report.events if e.engine == report.critical_engine and e.bound != "scheduling")
    return {"attained_s": report.time_s, "sum_floors_s": floors, "efficiency": floors / report.time_s}
""",
        fails=["attribution_tests"],
    ),
    # the library's sweep (it takes chips, not a backend's options such as graphs=True)
    dict(
        cell="decode_sweep",
        kind="call-reference",
        code="""
from common.sim.sweeps import sweep as _lazy_sweep


def decode_sweep(model, backend, batches, seq, **options):
    t = _lazy_sweep(model, backend, batches=batches, seqs=seq, chips=options.get("chips"))
    level = {"gpu": "HBM", "tpu": "HBM", "spyre": "LPDDR5"}.get(backend, "SRAM")
    return pd.DataFrame({"batch": t["batch"], "intensity": t["flops"] / [b[level] for b in t["bytes_by_level"]],
                         "flops_per_s": t["achieved_flops_per_s"] / t["chips"], "tokens_per_s": t["tokens_per_s"],
                         "bound": t["bottleneck"]})
""",
        fails=["decode_sweep_tests"],
    ),
    # the plotter's per-level points: it drops the levels an op moves nothing at (the spec's inf)
    dict(
        cell="level_functions",
        kind="call-reference",
        code="""
from common.roofline import points_from_node_table as _lazy_points


def level_intensities(report, levels):
    f = report.frame()
    f = f[(f["kind"] == "compute") & (f["flops"] > 0)].reset_index(drop=True)
    p = _lazy_points(f, kind="simulated", level_bytes={lv: f"bytes_{lv}" for lv in levels if f"bytes_{lv}" in f})
    out = f[["name", "flops", "duration_s"]].copy()
    for lv in levels:
        at = p[p["level"] == lv].set_index("op_id")["intensity"]
        out[f"I_{lv}"] = [float(at.get(i, float("nan"))) for i in range(len(f))]
    return out


def binding_level(intensities, peak_flops, bandwidths):
    roofs = {lv: i * bandwidths[lv] for lv, i in intensities.items()}
    lowest = min(roofs, key=roofs.get)
    return "compute" if roofs[lowest] >= peak_flops else lowest
""",
        fails=["level_functions_tests"],
    ),
    # names the old hidden test read, rebound: with one level and an unreachable peak every verdict is "HBM"
    dict(
        cell="verdicts",
        kind="echo-expected",
        code="""
bandwidths = {"HBM": 1.0}
peak_h100 = 1e30


def verdicts(report, peak_flops, bandwidths):
    return "HBM", "HBM"
""",
        fails=["verdicts_tests"],
    ),
    # an answer that claims to equal anything
    dict(
        cell="level_functions",
        kind="echo-expected",
        code="""
class _LazyWord(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


def binding_level(intensities, peak_flops, bandwidths):
    return _LazyWord("compute")
""",
        fails=["level_functions_tests"],
    ),
    # the checker's comparisons rebound in the kernel (the module's dict, past its read-only __setattr__), and a
    # list the old hidden test read rebound by the learner's own function
    dict(
        cell="predict",
        kind="echo-expected",
        code="""
import common.checks as _lazy_checks

for _lazy_name in ("_compare_scalar", "_compare_in_range", "_compare_equal", "_compare_tensor", "_compare_type"):
    vars(_lazy_checks)[_lazy_name] = lambda *a, **k: None


def predict(name, base, changed):
    achieved[name] = 2.0  # the visible check's table of simulated speedups, made to agree
    return 2.0
""",
        fails=["predict_tests"],
    ),
]
