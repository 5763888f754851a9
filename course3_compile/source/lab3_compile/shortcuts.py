"""Shortcuts a student who does not do Lab 3's work would try; each must score 0 on the cells it names
(tests/test_shortcut_notebooks.py inserts each one after its test cells, reruns them, then restores the honest cell).

A shortcut that calls a reference which no longer exists defines the stub so that it raises: had the import
succeeded, the stub would be the reference."""

SHORTCUTS = [
    dict(
        cell="gate_fixed",
        kind="call-reference",
        code="class GateFixed(Gate):  # the original forward, breaks and all\n    pass",
        fails=["gate_fixed_tests"],
    ),
    dict(
        cell="inspecting_backend",
        kind="call-reference",
        code="""
try:
    from common.compile.tools import count_ops as my_count_ops
except ImportError:
    def my_count_ops(gm):
        raise NotImplementedError("common.compile.tools has no count_ops to call")
""",
        fails=["inspecting_backend_tests"],
    ),
    dict(
        cell="inspecting_backend",
        kind="read-off-object",
        code="""
from common.compile.tools import Captured


def my_count_ops(gm):  # let the library's table count the graph
    return Captured(forward=[gm]).table().iloc[:, 0].to_dict()
""",
        fails=["inspecting_backend_tests"],
    ),
    dict(
        cell="inspecting_backend",
        kind="hard-code-visible",
        code="""
_printed = {g.code: dict(my_count_ops(g)) for g in [*captured.dynamo, *captured.forward, *captured.backward]}


def my_count_ops(gm):  # the counts the notebook printed for Tiny, copied
    return _printed.get(gm.code, {})
""",
        fails=["inspecting_backend_tests"],
    ),
    dict(
        cell="request_latency",
        kind="call-reference",
        code="""
try:
    from common.compile.tools import request_latency
except ImportError:
    def request_latency(prefill, decode, new_tokens):
        raise NotImplementedError("common.compile.tools has no request_latency to call")
""",
        fails=["request_latency_tests"],
    ),
    dict(
        cell="request_latency",
        kind="hard-code-visible",
        code="""
_printed = {b: dict(v) for b, v in MEASURED_REQUESTS.items()}  # the table the notebook printed, copied


def request_latency(prefill, decode, new_tokens):
    if len(prefill) == 1:  # the worked example, copied from the spec
        return {str(prefill["backend"].iloc[0]): {"first_s": 5.09 if new_tokens > 1 else 3.0, "later_s": 0.2}}
    return {b: dict(v) for b, v in _printed.items()}
""",
        fails=["request_latency_tests"],
    ),
    dict(
        cell="request_latency",
        kind="echo-expected",
        code="""
try:  # the answer key, where the kernel can import it: made to agree with the shortcut
    import answers as _lazy_answers

    _lazy_answers.request_latency = lambda prefill, decode, new_tokens: {
        str(b): {"first_s": 1.0, "later_s": 1.0} for b in prefill["backend"]}
except ImportError:
    pass


def request_latency(prefill, decode, new_tokens):  # a constant for every backend
    return {str(b): {"first_s": 1.0, "later_s": 1.0} for b in prefill["backend"]}
""",
        fails=["request_latency_tests"],
    ),
    dict(
        cell="kernel_names",
        kind="call-reference",
        code="""
try:
    from common.compile.tools import fused_kernels

    def kernel_names(code):
        return list(fused_kernels(code))
except ImportError:
    def kernel_names(code):
        raise NotImplementedError("common.compile.tools has no fused_kernels to call")
""",
        fails=["kernel_names_tests"],
    ),
    dict(
        cell="kernel_names",
        kind="read-off-object",
        code="""
import common.compile.tools as _ct


def kernel_names(code):  # the library's own kernel-definition pattern
    return list(dict.fromkeys(_ct._KERNEL_DEF.findall(code)))
""",
        fails=["kernel_names_tests"],
    ),
    dict(
        cell="kernel_names",
        kind="hard-code-visible",
        code="""
_printed = list(kernel_names(CODE))


def kernel_names(code):  # the list the notebook printed, copied
    return list(_printed)
""",
        fails=["kernel_names_tests"],
    ),
    dict(
        cell="fusion_groups",
        kind="call-reference",
        code="""
try:
    from common.compile.fusion import find_groups

    def my_find_groups(gm):
        return [g.nodes for g in find_groups(gm)]
except ImportError:
    def my_find_groups(gm):
        raise NotImplementedError("common.compile.fusion has no find_groups to call")
""",
        fails=["fusion_groups_tests"],
    ),
    dict(
        cell="fusion_groups",
        kind="hard-code-visible",
        code="""
_printed = {worked_gm.code: [["mm", "relu", "mul"], ["add", "exp", "sub"]], block_gm.code: my_find_groups(block_gm)}


def my_find_groups(gm):  # the worked example and the groups the notebook printed, copied
    return [list(g) for g in _printed.get(gm.code, [])]
""",
        fails=["fusion_groups_tests"],
    ),
    dict(
        cell="no_gain",
        kind="hard-code-visible",
        code="""
_t = savings.pivot(index="backend", columns="program", values="time_s")
_printed = str(_t.index[((_t["fused"] - _t["op by op"]).abs() <= 0.01 * _t["op by op"])][0])


def no_gain_backend(savings):  # the backend read off the printed table
    return _printed
""",
        fails=["no_gain_tests"],
    ),
    dict(
        cell="tiling",
        kind="call-reference",
        code="""
def mxu_tiling(M, K, N, mxu, sublanes):  # ask the simulated TPU whose MXU has that edge
    chip = "tpu-v6e" if mxu == 256 else "tpu-v5e"
    t = simulate_op("matmul", (M, K, N), "tpu", chip=chip).programs[0].kernels[0].tiling
    return {k: t[k] for k in ("M_padded", "K_padded", "N_padded", "mxu_passes", "efficiency")}
""",
        fails=["tiling_tests"],
    ),
    dict(
        cell="tiling",
        kind="call-reference",
        code="""
from common.sim.machines.spyre import stick_layout


def sticks(shape, elem_bytes, stick_bytes, dim=-1):  # the simulator's own layout
    lay = stick_layout(tuple(shape), {1: "int8", 2: "fp16", 4: "fp32"}[elem_bytes])
    return {k: lay[k] for k in ("sticks", "device_shape", "padding_bytes")}
""",
        fails=["tiling_tests"],
    ),
    dict(
        cell="tiling",
        kind="call-reference",
        code="""
from common.sim.machines.spyre import _layout


def sticks(shape, elem_bytes, stick_bytes, dim=-1):  # the simulator's private layout, sticks moved to the end
    d = dim % len(shape)
    lay = _layout((*shape[:d], *shape[d + 1:], shape[d]), elem_bytes)
    return {k: lay[k] for k in ("sticks", "device_shape", "padding_bytes")}
""",
        fails=["tiling_tests"],
    ),
    dict(
        cell="schedule_overhead",
        kind="read-off-object",
        code="""
def schedule_overhead(report):  # the simulator's own attribution holds the overhead share
    busy = sum(e.duration for e in report.events if e.engine == report.critical_engine and e.kind == "compute")
    return {"busy_s": busy, "named_s": 0.0, "idle_s": report.time_s - busy,
            "overhead_share": report.attribution["scheduling"] / report.time_s}
""",
        fails=["schedule_overhead_tests"],
    ),
    # landscape rows: one phrase for every system says nothing about any of them
    dict(
        cell="landscape_rows",
        kind="hard-code-visible",
        code="""
MY_ROWS = {a: {s: "the compiler decides this ahead of time" for s in SYSTEMS} for a in ATTRIBUTES}
""",
        fails=["landscape_rows_tests"],
    ),
    # keyword stuffing: every mechanism word of the lab in every cell (told apart only by the system's name)
    dict(
        cell="landscape_rows",
        kind="hard-code-visible",
        code="""
_WORDS = ("Inductor Triton XLA HLO SuperDSC bundle fusion epilogue MXU MXM 320 (8,128) sticks restickify PEs "
          "regions stream cycle static tiles strides lanes LX")
MY_ROWS = {a: {s: f"{s}: {_WORDS}" for s in SYSTEMS} for a in ATTRIBUTES}
""",
        fails=["landscape_rows_tests"],
    ),
    # text the notebook shows: each machine's catalog record (its matrix unit), in every attribute
    dict(
        cell="landscape_rows",
        kind="read-off-object",
        code="""
_CHIPS = {"GPU": "h100-sxm", "TPU": "tpu-v5e", "WSE": "wse-3", "LPU": "groq-lpu", "Spyre": "spyre"}
MY_ROWS = {a: {s: get_chip(c).matrix_unit for s, c in _CHIPS.items()} for a in ATTRIBUTES}
""",
        fails=["landscape_rows_tests"],
    ),
    # text the notebook shows: Part 4's 'The vendors' sentence, one clause per machine, in every attribute
    dict(
        cell="landscape_rows",
        kind="read-off-object",
        code="""
_VENDORS = {"GPU": "Inductor fuses pointwise and reduction loops, with max-autotune GEMM templates matmul epilogues",
            "TPU": "XLA makes loop / input / output fusions",
            "WSE": "Cerebras chain vector work onto the matmul it feeds",
            "LPU": "Groq chain vector work onto the matmul it feeds",
            "Spyre": "torch-spyre puts whole runs of device ops in one SuperDSC bundle"}
MY_ROWS = {a: dict(_VENDORS) for a in ATTRIBUTES}
""",
        fails=["landscape_rows_tests"],
    ),
]

# Attacks on the probe channel: arguments emptied so a reference rebuilt from them agrees, names and checkers rebound,
# the answer key replaced in the kernel, values whose __eq__ lies. The judgement runs outside the kernel on fresh
# inputs it builds itself: none of these reaches it.
SHORTCUTS += [
    dict(
        cell="schedule_overhead",
        kind="read-off-object",
        code="""
def schedule_overhead(report):  # the notebook's reports: the simulator's share; any other: emptied, then answered
    if any(report is r for r in steps.values()):
        busy = sum(e.duration for e in report.events if e.engine == report.critical_engine and e.kind == "compute")
        return {"busy_s": busy, "named_s": 0.0, "idle_s": report.time_s - busy,
                "overhead_share": report.attribution["scheduling"] / report.time_s}
    report.events.clear()
    return {"busy_s": 0.0, "named_s": 0.0, "idle_s": report.time_s, "gaps": 1, "overhead_share": 1.0}
""",
        fails=["schedule_overhead_tests"],
    ),
    dict(
        cell="schedule_overhead",
        kind="call-reference",
        code="""
from types import SimpleNamespace as _LazyNS

from common.sim.report import attribution_of


def schedule_overhead(report):  # the library's attribution walks the intervals: wrap the events, read its idle time
    evs = [e for e in report.events if e.engine == report.critical_engine]
    wrapped = [_LazyNS(engine=e.engine, start=e.start, duration=e.duration, bound="compute") for e in evs]
    idle = attribution_of(wrapped, report.critical_engine, report.time_s)["scheduling"]
    busy = sum(e.duration for e in evs if e.kind == "compute")
    named = sum(e.duration for e in evs if e.kind != "compute")
    return {"busy_s": busy, "named_s": named, "idle_s": idle, "gaps": int(idle > 0),
            "overhead_share": (named + idle) / report.time_s}
""",
        fails=["schedule_overhead_tests"],
    ),
    dict(
        cell="no_gain",
        kind="read-off-object",
        code="""
_NOTEBOOK_SAVINGS = savings


def no_gain_backend(savings):  # the LPU's SRAM, assumed; any other table emptied so nothing contradicts it
    if savings is not _NOTEBOOK_SAVINGS:
        savings.drop(savings.index, inplace=True)
    return "lpu"


SPILL_LX_BUDGET = 32768
""",
        fails=["no_gain_tests"],
    ),
    dict(  # the last graded cell: the patches stay in the kernel for the rest of the run
        cell="landscape_rows",
        kind="echo-expected",
        code="""
import math as _lazy_math

import common.checks as _lazy_checks

for _lazy_name in ("assert_equal", "assert_scalar", "assert_tensor", "assert_type", "assert_in_range"):
    setattr(type(_lazy_checks.grader), _lazy_name, lambda *a, **k: None)  # the class: the instance is locked
torch.allclose = lambda *a, **k: True
_lazy_math.isclose = lambda *a, **k: True
MY_ROWS = {a: {s: f"the {s} compiler does its {a} its own way" for s in SYSTEMS} for a in ATTRIBUTES}
""",
        fails=["landscape_rows_tests"],
    ),
    dict(
        cell="kernel_names",
        kind="echo-expected",
        code="""
class _LazyList(list):
    def __eq__(self, other):
        return True

    __hash__ = None


_honest_kernel_names = kernel_names


def kernel_names(code):  # the notebook's code honestly; any other: a list equal to whatever it is compared with
    return _honest_kernel_names(code) if code == CODE else _LazyList()
""",
        fails=["kernel_names_tests"],
    ),
    dict(
        cell="tiling",
        kind="echo-expected",
        code="""
class _LazyInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


_honest = (mxu_tiling, sticks)


def mxu_tiling(M, K, N, mxu, sublanes):  # the catalog's v5e honestly; any other MXU: values equal to anything
    if (mxu, sublanes) == (MXU, SUBLANES):
        return _honest[0](M, K, N, mxu, sublanes)
    return {k: _LazyInt(1) for k in ("M_padded", "K_padded", "N_padded", "mxu_passes")} | {"efficiency": 1.0}


def sticks(shape, elem_bytes, stick_bytes, dim=-1):  # fp16 in the catalog's stick honestly; others: anything
    if (elem_bytes, stick_bytes) == (2, STICK):
        return _honest[1](shape, elem_bytes, stick_bytes, dim)
    return {"sticks": _LazyInt(0), "device_shape": (), "padding_bytes": _LazyInt(0)}
""",
        fails=["tiling_tests"],
    ),
    dict(  # last: ATTRIBUTES stays rebound in the kernel for the rest of the run
        cell="landscape_rows",
        kind="hard-code-visible",
        code="""
ATTRIBUTES = ("IR stages",)  # the list the old check counted cells over, cut to the one row written
MY_ROWS = {"IR stages": {"GPU": "Dynamo FX -> aten -> Inductor -> Triton", "TPU": "aten -> StableHLO -> XLA HLO",
                         "WSE": "Cerebras graph compiler places kernels on the wafer",
                         "LPU": "Groq compiler: cycle-scheduled instructions", "Spyre": "torch-spyre -> SuperDSC bundles"}}
""",
        fails=["landscape_rows_tests"],
    ),
]

NOT_LISTED = {
    "break_even": "optional (Going further), ungraded",
    "bytes_saved": "optional (Going further), ungraded",
    "clean_dim": "optional (Going further), ungraded",
    "predict_fusion": "ungraded: the learner's own ranking, committed before the simulator runs and judged only in "
    "the reveal (kept beside the map, timed and hashed; a change after the reveal is flagged)",
}
