"""Readable listings of the simulated Spyre compiler's kernels: layouts in sticks, copy ranges, cores, transfers.

For a compiled graph (a ``common.sim.compile.CompiledGraph``, its ``Report``, or a ``Run`` from ``run_compiled``)
this module lists what the simulated compiler decided, one SuperDSC op at a time:

* ``kernel_table``  op, lowering, input/output layouts (shape -> device shape, sticks, padding), cores, split,
                    and for copies the element range written along the innermost (stick) dimension;
* ``stick_ranges``  for every copy op, one row per (row, stick): the elements that stick holds
                    ``[s * e, min((s + 1) * e, n))`` with ``e = stick_bytes / element bytes``, the elements the
                    copy really writes, the device bytes that covers, and the core that owns the stick;
* ``transfer_log``  the host launches and the LPDDR5 <-> LX DMA lane of the timeline (what a trace shows);
* ``describe``      all three as text; ``coverage_map`` draws ``stick_ranges`` stick by stick.

Where a copy's range comes from. The Spyre policy records the range every copy covers in its plan
(``plan["copy_range_elems"]``): always the whole row, because the simulated compiler itself is correct. A
planted ``stick_copy`` fault (``common.sim.faults``) changes only the values the compiled graph computes, not
the plan. So for the node a ``stick_copy`` fault was planted on (read from the report's
``"fault planted: <kind> at <node>"`` notes) this module derives the range the faulty kernel writes from the
same rule the numerics apply, ``faults.stick_copy_stop(n, element bytes, stick bytes)`` =
``min(n, max(1, n // e) * e)``, and marks the row ``range_from="fault rule"``; every other row is
``"program"``. The DMA lane is untouched either way, which is the point of the bug.

Core assignment: the plan records how many cores each dimension is split over (``plan["split"]``, e.g.
``"stick/2"``), not which core gets which block; cores are numbered here row-major over the split dimensions
(outer dimensions first, sticks last), each core owning one contiguous block.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import pandas as pd
import torch

from common.chips import get_chip
from common.errors import DFAError
from common.palette import EMPHASIS, SEQUENCE
from common.sim import faults as F
from common.sim.compile import CompiledGraph

_PLANTED = re.compile(r"^fault planted: (\w+) at (\S+)$")  # the note CompiledGraph adds to its report


@dataclass
class Run:
    """A function compiled with ``dfa_spyre`` through ``torch.compile`` and run once on ``x``."""

    x: torch.Tensor
    out: torch.Tensor
    graphs: list[CompiledGraph] = field(default_factory=list)

    @property
    def report(self):
        if not self.graphs:
            raise DFAError("Dynamo compiled no graph for this function (it ran in plain Python)")
        return self.graphs[-1].report


def run_compiled(fn, x: torch.Tensor, *, faults=()) -> Run:
    """``torch.compile(fn, backend="dfa_spyre")`` with ``options={"faults": faults}``, run on ``x``.

    Dynamo's caches are reset first (``torch.compiler.reset``), so every call compiles afresh and the graphs it
    compiled are the ones returned (a cached graph would leave no new report)."""
    graphs: list[CompiledGraph] = []

    def backend(gm, example_inputs):
        graphs.append(CompiledGraph("spyre", gm, example_inputs, {"faults": list(faults)}))
        return graphs[-1]

    torch.compiler.reset()
    try:
        out = torch.compile(fn, backend=backend, dynamic=False)(x)
    except Exception as err:  # Dynamo wraps a backend's error: show the simulated compiler's own message
        inner = getattr(err, "inner_exception", None)
        if isinstance(inner, DFAError):
            raise inner from None
        raise
    return Run(x, out, graphs)


def clone_input(shape, dtype=torch.float16, seed: int = 0) -> torch.Tensor:
    """Values in [1, 3): no zeros, so an element the copy never writes (left 0) is visible."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    g = torch.Generator().manual_seed(seed)
    return (1 + 2 * torch.rand(shape, generator=g)).to(dtype)


def compile_clone(shape, dtype=torch.float16, *, faulty: bool = False, seed: int = 0) -> Run:
    """The deep dive's reproducer: ``x.clone()`` of ``shape`` compiled for Spyre, optionally with the planted
    ``stick_copy`` fault (``seed`` picks the copy it hits when there are several)."""
    faults = [F.Fault("stick_copy", seed=seed)] if faulty else []
    return run_compiled(lambda t: t.clone(), clone_input(shape, dtype), faults=faults)


def run_with_fault(fn, x: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """``fn(x)`` compiled with a ``stick_copy`` fault on one of its copies; a graph without any copy kernel
    cannot be hit, so it runs fault-free (the simulated compiler refuses a fault with nowhere to go)."""
    try:
        return run_compiled(fn, x, faults=[F.Fault("stick_copy", seed=seed)]).out
    except DFAError as err:
        if "nowhere to go" not in str(err):
            raise
        return run_compiled(fn, x).out


def run_with_every_copy_faulty(fn, x: torch.Tensor) -> Run | None:
    """``fn(x)`` compiled with the ``stick_copy`` fault on *every* copy kernel; None if the graph has no copy
    (a workaround that avoids copying altogether: it routes around the fault instead of fixing the range)."""
    try:
        return run_compiled(fn, x, faults=[F.Fault("stick_copy", params={"every": True})])
    except DFAError as err:
        if "nowhere to go" not in str(err):
            raise
        return None


def faulty_copy_elements(obj) -> int:
    """Elements written by the copies the fault was planted on: sum over them of prod(output shape)."""
    report = _report(obj)
    faults = planted(report)
    return sum(math.prod(plan["shape"]) for _k, op, plan in _ops(report) if faults.get(op.name) == "stick_copy")


# ---- what the compiler decided ------------------------------------------------------------------------------
def _report(obj):
    return obj.report if isinstance(obj, (Run, CompiledGraph)) else obj


def planted(obj) -> dict[str, str]:
    """{fx node: fault kind} for the faults planted in this compiled graph (from the report's notes)."""
    return {m.group(2): m.group(1) for m in map(_PLANTED.match, _report(obj).notes) if m}


def _elem_bytes(dtype: str) -> int:
    return torch.empty(0, dtype=getattr(torch, str(dtype).replace("torch.", ""))).element_size()


def _ops(report):
    """(kernel, op, plan) for every SuperDSC op of every bundle, in program order."""
    for program in report.programs:
        for k in program.kernels:
            for op, plan in zip(k.ops, k.tiling.get("sdsc", []), strict=False):
                yield k, op, plan


def _copy_range(report, op, plan, faults: dict) -> tuple[tuple[int, int], str]:
    """Elements [start, stop) the copy writes in every row, and where that range comes from."""
    if faults.get(op.name) == "stick_copy":
        stick = int(get_chip(report.chip).fact("stick_bytes"))
        n = plan["shape"][-1]
        return (0, F.stick_copy_stop(n, _elem_bytes(op.dtype), stick)), "fault rule"
    return tuple(plan["copy_range_elems"]), "program"


def _layout_text(shape, t: dict) -> str:
    pad = f", {t['padding_bytes']} B padding" if t["padding_bytes"] else ""
    return f"{tuple(shape)} -> {t['sticks']} sticks {tuple(t['device_shape'])}{pad}"


def kernel_table(obj) -> pd.DataFrame:
    """One row per SuperDSC op: layouts in sticks, cores, and (copies) the range written per row."""
    report = _report(obj)
    faults = planted(report)
    rows = []
    for k, op, plan in _ops(report):
        ins = [f"{p}: {_layout_text(op.in_shapes.get(p, ()), plan['tensors'][p])}" for p in op.in_bytes]
        row = {"kernel": k.name, "node": op.name, "op": op.op, "lowering": plan["lowering"],
               "inputs": "; ".join(ins), "output": _layout_text(plan["shape"], plan["tensors"][op.name]),
               "cores_used": plan["cores_used"], "split": plan["split"], "copy_range": None,
               "program_range": None, "range_from": None, "fault": faults.get(op.name, "")}
        if "copy_range_elems" in plan:
            (a, b), src = _copy_range(report, op, plan, faults)
            row.update(copy_range=(a, b), program_range=tuple(plan["copy_range_elems"]), range_from=src)
        rows.append(row)
    return pd.DataFrame(rows)


def _core_of(outer: tuple, stick: int, plan: dict) -> int:
    """Core owning (outer index, stick), numbering cores row-major over the split dims (see module doc)."""
    parts = dict(p.split("/") for p in plan["split"].split()) if plan["split"] != "none" else {}
    dims = [(f"d{i}", s, i) for i, s in enumerate(plan["shape"][:-1])]
    dims.append(("stick", plan["device_shape"][0], None))  # sticks per row
    core = 0
    for label, size, axis in dims:
        p = int(parts.get(label, 1))
        index = stick if axis is None else outer[axis]
        core = core * p + index // (size // p)
    return core


def stick_ranges(obj) -> pd.DataFrame:
    """One row per (copy op, row, stick): elements held, elements copied, device bytes covered, owning core.

    Element indices count along the innermost dimension of one row; byte offsets are into the output's device
    layout ``(sticks_per_row, *outer, e)`` (stick-major: stick s of row r starts at ``(s * rows + r) * stick``).
    An empty copied range is ``(a, a)``."""
    report = _report(obj)
    faults = planted(report)
    stick = int(get_chip(report.chip).fact("stick_bytes"))
    rows = []
    for k, op, plan in _ops(report):
        if "copy_range_elems" not in plan:
            continue
        (c0, c1), src = _copy_range(report, op, plan, faults)
        n, nrows, per_row = plan["shape"][-1], plan["copy_rows"], plan["device_shape"][0]
        e = plan["padded_shape"][-1] // per_row  # elements per stick in the device layout
        eb = stick // e
        outer_shape = plan["shape"][:-1]
        for r in range(nrows):
            outer = tuple(int(i) for i in torch.unravel_index(torch.tensor(r), outer_shape)) if outer_shape else ()
            for s in range(per_row):
                lo, hi = s * e, min((s + 1) * e, n)
                a, b = max(lo, c0), max(max(lo, c0), min(hi, c1))
                base = (s * nrows + r) * stick
                rows.append({"kernel": k.name, "node": op.name, "op": op.op, "row": r, "stick": s,
                             "core": _core_of(outer, s, plan), "elements": (lo, hi), "copied": (a, b),
                             "missed": (hi - lo) - (b - a), "bytes": (base + (a - lo) * eb, base + (b - lo) * eb),
                             "padding_slots": e - (hi - lo), "range_from": src})
    return pd.DataFrame(rows)


def transfer_log(obj) -> pd.DataFrame:
    """The launches and DMA transfers of the timeline: name, engine, start and duration, LPDDR5 bytes."""
    report = _report(obj)
    rows = [{"event": e.name, "engine": e.engine, "kind": e.kind, "start_us": e.start * 1e6,
             "duration_ns": e.duration * 1e9, "lpddr_read": e.detail.get("lpddr_read", 0.0),
             "lpddr_write": e.detail.get("lpddr_write", 0.0), "pcie": e.bytes.get("PCIe", 0.0)}
            for e in report.events if e.kind in ("dma", "launch")]
    return pd.DataFrame(rows)


def describe(obj) -> str:
    """The compiled kernels as text: per op layouts and cores, per stick ranges, the transfer log, counters."""
    report = _report(obj)
    stick = int(get_chip(report.chip).fact("stick_bytes"))
    lines = [f"SIMULATED {report.backend} ({report.chip}, {report.dtype}, stick = {stick} B from the catalog); "
             f"faults planted: {planted(report) or 'none'}"]
    sticks = stick_ranges(report)
    for _, r in kernel_table(report).iterrows():
        lines += [f"{r.kernel}  {r.node} = {r.op}  (lowering {r.lowering})",
                  f"  in : {r.inputs}", f"  out: {r.output}", f"  cores: {r.cores_used} (split {r.split})"]
        if r.copy_range is not None:
            lines.append(f"  copy range per row: elements [{r.copy_range[0]}, {r.copy_range[1]}) "
                         f"(from the {r.range_from}; the program records "
                         f"[{r.program_range[0]}, {r.program_range[1]}))")
            for _, s in sticks[sticks.node == r.node].iterrows():
                lines.append(f"    row {s.row} stick {s.stick} core {s.core}: holds [{s.elements[0]}, "
                             f"{s.elements[1]}), copies [{s.copied[0]}, {s.copied[1]}) = bytes [{s.bytes[0]}, "
                             f"{s.bytes[1]})" + (f"  <-- misses {s.missed}" if s.missed else ""))
    lines.append("transfer log:")
    lines += ["  " + line for line in transfer_log(report).to_string(index=False).splitlines()]
    counters = {k: v for k, v in report.counters.items() if v}
    lines.append(f"counters: {counters}")
    return "\n".join(lines)


def coverage_map(cases: dict, ax=None):
    """Stick-by-stick picture of ``stick_ranges`` for several compiled graphs ({label: Run/Report}): one line
    per case (row 0 of its first copy), one cell per element slot: copied, held but not copied, padding."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    frames = {label: stick_ranges(obj) for label, obj in cases.items()}
    e = max(int((f.elements.map(lambda t: t[1] - t[0]) + f.padding_slots).max()) for f in frames.values())
    width = max(int(f.stick.max() + 1) for f in frames.values()) * e
    grid = torch.full((len(frames), width), 3.0)  # 3: no stick at all
    misses = []  # (line, first missed element, end)
    for i, f in enumerate(frames.values()):
        first = f[(f.node == f.node.iloc[0]) & (f.row == 0)]
        for _, s in first.iterrows():
            grid[i, s.stick * e:(s.stick + 1) * e] = 2.0  # padding slot
            grid[i, s.elements[0]:s.elements[1]] = 1.0  # held, not copied
            grid[i, s.copied[0]:s.copied[1]] = 0.0  # copied
            if s.missed:
                misses.append((i, s.copied[1], s.elements[1]))
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.45 * len(frames) + 1.6), layout="constrained")
    # blue / vermillion (common.palette: apart under red-green colour blindness), and every miss is named in text
    cmap = ListedColormap([SEQUENCE[0], EMPHASIS, "#d9d9d9", "white"])
    ax.imshow(grid.numpy(), aspect="auto", cmap=cmap, vmin=-0.5, vmax=3.5, interpolation="nearest")
    for x in range(e, width, e):
        ax.axvline(x - 0.5, color="black", lw=1.2)
    for y in range(1, len(frames)):
        ax.axhline(y - 0.5, color="white", lw=1.5)
    for i, a, b in misses:
        ax.annotate(f"elements [{a}, {b}) never written", (a, i), xytext=(a + e / 4, i), va="center", fontsize=8,
                    color=EMPHASIS, arrowprops={"arrowstyle": "->", "color": EMPHASIS})
    ax.set_yticks(range(len(frames)), list(frames))
    ax.set_xlabel(f"element slot along the innermost dimension (a black line every stick = {e} elements)")
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=c, edgecolor="#999999") for c in cmap.colors]
    ax.legend(handles, ["copied", "held but NOT copied", "padding slot", "no stick"], loc="upper center",
              bbox_to_anchor=(0.5, -0.12), ncol=4, fontsize=8, frameon=False)
    ax.set_title("SIMULATED Spyre: what each compiled copy writes, stick by stick")
    return ax

