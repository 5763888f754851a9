"""The simulated Spyre compiler's lowering of one graph, stage by stage, as tables (Course 3 Deep Dive).

``common.sim.pipeline`` keeps ``program.stages`` (decompose, fuse); the Spyre policy
(``common.sim.machines.spyre``) records every later decision per SuperDSC op in ``kernel.tiling["sdsc"]``.
This module reads them back, one DataFrame per stage, in pipeline order (``STAGES``); nothing here re-decides anything:

* decompose   aten op -> kind, coverage (native | decomposed | fallback) and what it lowers to.
* fuse        op -> bundle (one SuperDSC bundle per run of device ops; a CPU fallback stands alone).
* layout      tensor -> sticks: device shape (sticks per row, *outer dims, elements per stick), padding.
* restickify  every read through a transposed view: where ``spyre.restickify`` was inserted, and why not
              for weights (laid out at load time).
* span        per-core address span of the tensor an op's work division splits: with device shape D
              (row-major) and a core holding e_i = D_i / c_i positions of dim i,
              span = (1 + sum_i (e_i - 1) x stride_i) x element bytes. torch-spyre caps this span per core
              (``MAX_SPAN_BYTES``), forcing splits or coarse tiles where it is exceeded; the simulator models
              **neither** the cap nor that reaction: the table only shows how much work division shrank each span.
* work        split across cores (equal sticks per core), per-core FLOPs and sticks, matmul tiles.
* lx          scratchpad plan: per-core working set and residency, where each input came from, spills.

``compare_options`` compiles one workload under two option sets and returns the differences in timeline and
counters. Hardware numbers come from the catalog through the policy; nothing here holds one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
import torch.fx as fx

from common.chips import get_chip
from common.errors import DFAError, unknown
from common.sim.machines.spyre import CUSTOM_OPS, stick_layout
from common.sim.pipeline import _root
from common.sim.report import Report, _time_unit
from common.sim.run import simulate

STAGES = ("decompose", "fuse", "layout", "restickify", "span", "work", "lx")
OPTIONS = ("cores", "lx_budget_bytes", "coarse_tiles", "strict")  # SpyrePolicy's compiler knobs
COUNTERS = ("lpddr_to_lx_bytes", "lx_to_lpddr_bytes", "lx_bytes", "lx_spill_bytes", "restickify_count",
            "restickify_bytes", "fallback_count", "host_roundtrip_bytes", "bundle_launches")


def _check_options(options: dict) -> dict:
    for key in options:
        if key not in OPTIONS:
            raise unknown("Spyre compiler option", key, OPTIONS)
    return dict(options)


def lower(workload, **options) -> Report:
    """Compile and run ``workload`` on one simulated Spyre card with the given compiler options."""
    return simulate(workload, "spyre", chips=1, **_check_options(options))


def _program(obj):
    """A Spyre Program, or the only program of a one-segment Report."""
    if isinstance(obj, Report):
        if len(obj.programs) != 1:
            raise DFAError(f"this report has {len(obj.programs)} programs (one per segment); pass one of "
                           "report.programs[0..]")
        obj = obj.programs[0]
    program = obj
    if program.backend != "spyre":
        raise DFAError(f"lowering tables read Spyre programs; got a {program.backend!r} program")
    return program


def _plans(program):
    """(kernel, position, op, plan) for every SuperDSC op of every device bundle, in program order."""
    for k in program.kernels:
        if k.kind != "fallback":
            for i, (op, plan) in enumerate(zip(k.ops, k.tiling["sdsc"], strict=True)):
                yield k, i, op, plan


def decompose_table(program) -> pd.DataFrame:
    """Stage 1: one row per aten op (restickify copies are inserted later, by the layout stage)."""
    program = _program(program)
    rows = [{"op": o.name, "aten": o.op, "kind": o.kind, "coverage": o.coverage,
             "lowering": "CPU fallback" if o.coverage == "fallback" else
             (CUSTOM_OPS.get(o.op) or "+".join(o.decomposed_into) or o.op),
             "shape": tuple(o.shape), "flops": o.flops, "out_bytes": o.out_bytes, "pattern": o.pattern}
            for o in program.stages["decompose"]]
    return pd.DataFrame(rows)


def fuse_table(program) -> pd.DataFrame:
    """Stage 2: one row per aten op: its bundle (kernel), the bundle's kind and the op's place in it."""
    program = _program(program)
    rows = []
    for k in program.kernels:
        ops = [o for o in k.ops if o.op != "spyre.restickify"]
        rows += [{"op": o.name, "aten": o.op, "kernel": k.name, "kernel_kind": k.kind, "position": i,
                  "bundle_ops": len(ops)} for i, o in enumerate(ops)]
    return pd.DataFrame(rows)


def layout_table(program) -> pd.DataFrame:
    """Stage 3: one row per tensor as stored in sticks (bundle outputs and external inputs)."""
    program = _program(program)
    stick = int(get_chip(program.chip).fact("stick_bytes"))
    rows: dict[str, dict] = {}
    for k, _, op, plan in _plans(program):
        for name, t in plan["tensors"].items():
            if name in rows:
                continue
            mine = name == op.name
            shape = plan["shape"] if mine else tuple(op.in_shapes.get(name, ()))
            rows[name] = {"tensor": name, "producer": op.op if mine else "external", "kernel": k.name,
                          "shape": tuple(shape), "stick_dim_size": shape[-1] if shape else 1,
                          "elements_per_stick": t["device_shape"][-1], "device_shape": tuple(t["device_shape"]),
                          "sticks": t["sticks"], "device_bytes": t["sticks"] * stick,
                          "padding_bytes": t["padding_bytes"]}
    return pd.DataFrame(list(rows.values()))


def restickify_table(program) -> pd.DataFrame:
    """Stage 4: every read through a transposed view (innermost stride != 1), with the restickify inserted for it.

    An activation read that way needs its sticks on the other dimension: a ``spyre.restickify`` copy runs first
    (``restickify`` = its name). A weight read that way needs none: it was laid out at load time."""
    program = _program(program)
    rows = []
    for k, i, op, plan in _plans(program):
        if op.op == "spyre.restickify":
            (src, stored), = op.in_shapes.items()
            for c in (o for o in k.ops if op.name in o.in_bytes):
                rows.append({"producer": src, "consumer": c.name, "consumer_aten": c.op, "kernel": k.name,
                             "restickify": op.name, "position": i, "stored_shape": tuple(stored),
                             "read_shape": tuple(op.shape), "bytes": plan["out_device_bytes"],
                             "why": "activation read transposed: sticks must move to the other dimension"})
        for p in op.transposed_inputs:  # what is left after insertion: weights
            rows.append({"producer": p, "consumer": op.name, "consumer_aten": op.op, "kernel": k.name,
                         "restickify": "", "position": i, "stored_shape": (), "read_shape": op.in_shapes.get(p, ()),
                         "bytes": 0,
                         "why": "weight: laid out in sticks for this matmul at load time"})
    cols = ["producer", "consumer", "consumer_aten", "kernel", "restickify", "position", "stored_shape",
            "read_shape", "bytes", "why"]
    return pd.DataFrame(rows, columns=cols)


def _split_dims(plan: dict, device_shape: tuple) -> dict[int, int]:
    """Split labels of a plan ("d0/2 stick/4", "B/8 M/4", "N/32") -> {device dim: cores on it}."""
    if plan["split"] == "none":
        return {}
    out = {}
    for part in plan["split"].split():
        label, n = part.split("/")
        if "mc" in plan:  # matmul output (N sticks, [B,] M, epc)
            dim = {"N": 0, "B": 1, "M": len(device_shape) - 2}[label]
        else:  # (sticks per row, *outer dims d0.., epc)
            dim = 0 if label == "stick" else 1 + int(label[1:])
        out[dim] = int(n)
    return out


def _split_tensor(op, plan: dict) -> str:
    """The tensor whose dimensions the work division splits: a reduction's largest input, else the output."""
    if plan["sdsc_kind"] == "reduction" and len(plan["tensors"]) > 1:
        return max((n for n in plan["tensors"] if n != op.name), key=lambda n: plan["tensors"][n]["sticks"])
    return op.name


def span_bytes(device_shape, splits: dict[int, int], elem_bytes: int) -> int:
    """Address span one core touches: (1 + sum_i (D_i / c_i - 1) x stride_i) x element bytes (row-major D)."""
    strides = [math.prod(device_shape[i + 1:]) for i in range(len(device_shape))]
    last = sum((device_shape[i] // splits.get(i, 1) - 1) * strides[i] for i in range(len(device_shape)))
    return (1 + last) * elem_bytes


def stick_map(shape, dtype: str = "fp16") -> torch.Tensor:
    """Index of the stick holding each element of a row-major tensor stored as (sticks per row, *outer, epc):
    element (row r, column c) sits in stick (c // epc) x rows + r. Same shape as the tensor."""
    lay = stick_layout(tuple(shape), dtype)
    epc, rows = lay["elements_per_stick"], lay["rows"]
    col = torch.arange(lay["shape"][-1]) // epc  # (n,)
    row = torch.arange(rows).unsqueeze(1)  # (rows, 1)
    return (col * rows + row).reshape(lay["shape"])  # (rows, n) -> shape


def span_table(program) -> pd.DataFrame:
    """Stage 5 (shown, not modelled as a constraint): per op, the split tensor's per-core span vs its size."""
    program = _program(program)
    stick = int(get_chip(program.chip).fact("stick_bytes"))
    rows = []
    for k, _, op, plan in _plans(program):
        name = _split_tensor(op, plan)
        t = plan["tensors"][name]
        dev = tuple(t["device_shape"])
        span = span_bytes(dev, _split_dims(plan, dev), stick // dev[-1])
        total = t["sticks"] * stick
        rows.append({"op": op.name, "aten": op.op, "kernel": k.name, "split": plan["split"], "tensor": name,
                     "device_shape": dev, "device_bytes": total, "span_bytes_per_core": span,
                     "span_reduction": total / span})
    return pd.DataFrame(rows)


def _work_dims(op, plan: dict) -> tuple:
    """The dimensions the work division chose from, in priority order, as (label, units) pairs: a matmul's
    batch, M and N in sticks; a reduction's input rows; otherwise the output rows and its sticks per row."""
    if "mc" in plan:
        b, m, _, n = op.mnk
        return (("B", b), ("M", m), ("N", -(-n // plan["tensors"][op.name]["device_shape"][-1])))
    dev = plan["tensors"][_split_tensor(op, plan)]["device_shape"]  # (sticks per row, *outer dims, epc)
    dims = tuple((f"d{i}", s) for i, s in enumerate(dev[1:-1]))
    return dims if plan["sdsc_kind"] in ("reduction", "gather") else (*dims, ("stick", dev[0]))


def work_table(program) -> pd.DataFrame:
    """Stage 6: how each op's work is divided across cores (equal sticks per core) and its per-core share."""
    program = _program(program)
    rows = []
    for k, _, op, plan in _plans(program):
        c = plan["cores_used"]
        rows.append({"op": op.name, "aten": op.op, "kernel": k.name, "sdsc_kind": plan["sdsc_kind"],
                     "dims": _work_dims(op, plan), "split": plan["split"], "cores_used": c, "flops": op.flops,
                     "padded_flops": plan["padded_flops"], "flops_per_core": plan["padded_flops"] / c,
                     "sticks": plan["sticks"], "sticks_per_core": plan["sticks"] / c, "tile": plan.get("tile", ""),
                     "m_tiles": plan.get("m_tiles", 0), "n_tiles": plan.get("n_tiles", 0)})
    return pd.DataFrame(rows)


def lx_table(program) -> pd.DataFrame:
    """Stage 7: the scratchpad (LX) plan per op: working set, what is resident, traffic and spills."""
    program = _program(program)
    rows = []
    for k, _, op, plan in _plans(program):
        budget = k.tiling["lx_budget_bytes"]
        rows.append({"op": op.name, "aten": op.op, "kernel": k.name, "ws_bytes_per_core": plan["ws_bytes_per_core"],
                     "lx_bytes_per_core": plan["lx_bytes_per_core"], "lx_budget_bytes": budget,
                     "lx_fill": plan["lx_bytes_per_core"] / budget,
                     "inputs_from": ", ".join(f"{p}:{s}" for p, s in plan["inputs_from"].items()),
                     "output_to": plan["output_to"], "lpddr_read": plan["lpddr_read"],
                     "lpddr_write": plan["lpddr_write"], "spill_bytes": plan["spill_bytes"]})
    return pd.DataFrame(rows)


TABLES = {"decompose": decompose_table, "fuse": fuse_table, "layout": layout_table, "restickify": restickify_table,
          "span": span_table, "work": work_table, "lx": lx_table}


def stage_tables(program) -> dict[str, pd.DataFrame]:
    """Every stage's table, in pipeline order."""
    return {name: TABLES[name](program) for name in STAGES}


def edge_table(gm: fx.GraphModule) -> pd.DataFrame:
    """Every tensor edge of an aten graph as its consumer reads it: producer (through views), the view's shape
    and strides, and whether the producer is a weight. The raw input of the restickify decision."""
    rows = []
    for node in gm.graph.nodes:
        cost = node.meta.get("cost")
        if node.op != "call_function" or cost is None or cost.is_view:
            continue
        for arg in node.all_input_nodes:
            val = arg.meta.get("val")
            if isinstance(val, torch.Tensor):
                src = _root(arg)
                rows.append({"producer": src.name, "consumer": node.name, "shape": tuple(val.shape),
                             "strides": tuple(val.stride()), "is_weight": src.meta.get("kind") == "param"})
    return pd.DataFrame(rows, columns=["producer", "consumer", "shape", "strides", "is_weight"])


def timeline(report: Report) -> pd.DataFrame:
    """Compute events on the cores, one per SuperDSC op: start, duration, physics floor, bound, traffic."""
    rows = [{"event": e.name, "op": e.detail.get("name", ""), "kernel": e.kernel, "start_s": e.start,
             "duration_s": e.duration, "floor_s": e.floor, "bound": e.bound, "cores_used": e.detail["cores_used"],
             "lpddr_bytes": e.detail["lpddr_read"] + e.detail["lpddr_write"], "lx_bytes": e.bytes.get("LX", 0.0)}
            for e in report.events if e.kind == "compute" and e.engine == "cores"]
    return pd.DataFrame(rows)


@dataclass
class Comparison:
    """Two compilations of one workload: ``before`` / ``after`` reports and what changed between them."""
    options_before: dict
    options_after: dict
    before: Report
    after: Report
    timeline: pd.DataFrame  # per op event: *_before, *_after
    counters: pd.DataFrame  # index counter (plus time_s and attribution), columns before, after, change, ratio


def compare_options(workload, before: dict | None = None, after: dict | None = None) -> Comparison:
    """Compile ``workload`` under two option sets (e.g. ``{}`` vs ``{"cores": 8}``) and line up the results."""
    ob, oa = _check_options(before or {}), _check_options(after or {})
    rb, ra = lower(workload, **ob), lower(workload, **oa)
    tl = timeline(rb).merge(timeline(ra), on=["event", "op"], how="outer", suffixes=("_before", "_after"))
    tl = tl.sort_values(["start_s_before", "start_s_after"]).reset_index(drop=True)  # program order
    tl["speedup"] = tl["duration_s_before"] / tl["duration_s_after"]
    rows = {c: (rb.counters[c], ra.counters[c]) for c in COUNTERS}
    rows["time_s"] = (rb.time_s, ra.time_s)
    rows.update({f"{b}_s": (rb.attribution[b], ra.attribution[b]) for b in rb.attribution})
    counters = pd.DataFrame.from_dict(rows, orient="index", columns=["before", "after"]).astype(float)
    counters["change"] = counters["after"] - counters["before"]
    counters["ratio"] = (counters["after"] / counters["before"]).where(counters["before"] != 0)
    return Comparison(ob, oa, rb, ra, tl, counters)


def plot_comparison(cmp: Comparison, axes=None):
    """Two Gantt charts (before above after), each labelled SIMULATED with its options, on one time axis when
    both are drawn in the same unit."""
    import matplotlib.pyplot as plt
    same_unit = _time_unit(cmp.before.time_s) == _time_unit(cmp.after.time_s)
    if axes is None:
        _, axes = plt.subplots(2, 1, figsize=(11, 5.2), sharex=same_unit, layout="constrained")
    for ax, r, opts in ((axes[0], cmp.before, cmp.options_before), (axes[1], cmp.after, cmp.options_after)):
        label = ", ".join(f"{k}={v}" for k, v in opts.items()) or "default options"
        scale, unit = _time_unit(r.time_s)
        r.gantt(ax=ax, title=f"SIMULATED {r.backend} ({label}): {r.workload}, {r.time_s * scale:.3g} {unit}")
    if same_unit:
        scale, _ = _time_unit(cmp.before.time_s)
        for ax in axes:
            ax.set_xlim(0, max(cmp.before.time_s, cmp.after.time_s) * scale * 1.02)
    return axes
