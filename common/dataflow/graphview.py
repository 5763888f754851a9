"""Read a compiled simulated-Spyre program as a dataflow graph: fusions, DMA and restickify edges, core work.

Everything here is read back from what ``common.sim.machines.spyre`` decided (``program.kernels``, each kernel's
per-op plans in ``kernel.tiling["sdsc"]``, ``program.stages`` and the report's events); nothing is re-modelled.

* ``fusion_table``      one row per op of the device program: the bundle (kernel) it was fused into.
* ``dma_edges``         one row per transfer across the LPDDR5 <-> LX boundary (or host <-> LPDDR5 over PCIe).
                        Per op plan: reads = sum over inputs from LPDDR5 of device bytes x passes, plus any
                        spilled internal intermediates; the sums equal ``report.counters`` (one card).
* ``restickify_edges``  one row per ``spyre.restickify`` the compiler inserted: a tensor stored with its sticks
                        on one dimension, read through a transposed view that needs them on the other.
* ``core_work``         per core: busy time, FLOPs and sticks. An op split over k cores gives each of cores
                        0..k-1 padded FLOPs / k and sticks / k (equal shares is the split rule); cores >= k idle.
* ``trace_tensor``      one tensor from its producer through LPDDR5 and the LX slices of its consumers.
* ``draw_program``      the graph in three lanes (LPDDR5, cores/LX, host) with every edge coloured by kind.

A tensor of shape (..., n) occupies rows x ceil(n x elem_bytes / stick_bytes) sticks (``stick_bytes`` from the
catalog); LPDDR5 addresses come from ``lpddr_arena``: a stick-aligned bump allocation in first-use order (the
simulator counts bytes, it does not place tensors, so the addresses are ours - the offsets and sizes are not).
"""
from __future__ import annotations

import pandas as pd
import torch

from common.chips import get_chip
from common.errors import DFAError, unknown
from common.palette import EDGE_STYLE, SEQUENCE, tint
from common.sim.program import Program
from common.sim.report import Report

LANES = {"LPDDR5": 1.0, "cores": 0.0, "host": -1.0}  # y of each lane in ``draw_program``
EDGE_COLORS = {k: s.colour for k, s in EDGE_STYLE.items()}  # common.palette's; each kind has its own dash too


def stick_bytes(program: Program) -> int:
    return int(get_chip(program.chip).fact("stick_bytes"))


def attention_workload(config: str = "tiny-block", batch: int = 2, seq: int = 32):
    """The first half of ``TinyTransformerBlock``, ``x + attention(ln1(x))``, as a one-segment workload:
    fp16 weights and input on fake tensors (shapes only, nothing is computed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from common.models.build import build_block
    from common.sim.workload import graph_workload

    block = build_block(config, dtype=torch.float16)

    class AttentionHalf(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = block

        def forward(self, x):  # (B, T, C)
            return x + self.block.attention(self.block.ln1(x))

    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(batch, seq, block.d_model, dtype=torch.float16)
    return graph_workload(AttentionHalf(), (x,), name=f"{config} attention", dtype="fp16")


def attention_report(config: str = "tiny-block", batch: int = 2, seq: int = 32, **options) -> Report:
    """``attention_workload`` compiled for one simulated Spyre card; ``options`` are the Spyre compiler knobs
    (cores, lx_budget_bytes, coarse_tiles, strict)."""
    from common.sim.run import simulate
    return simulate(attention_workload(config, batch, seq), "spyre", chips=1, **options)


def _device_kernels(program: Program):
    if program.backend != "spyre":
        raise DFAError(f"graphview reads spyre programs; this one is for {program.backend!r}")
    return [k for k in program.kernels if k.kind != "fallback"]


def tensor_labels(program: Program) -> dict[str, str]:
    """Readable names of the graph's parameters: fx placeholder -> module attribute, e.g. ``q_proj.weight``
    (the ``block.`` prefix of ``attention_workload``'s wrapper dropped)."""
    return {node: src.split(".", 1)[-1] if src.startswith("block.") else src
            for k in program.kernels for op in k.ops for node, src in zip(op.param_inputs, op.params, strict=False)}


def fusion_table(program: Program) -> pd.DataFrame:
    """One row per op (program order): kernel, position, whether the compiler inserted it (an op of the tile
    stage, absent from the ``decompose`` stage: a restickify), the attention pattern it belongs to, its
    lowering (decomposition / custom op) and the core split of its plan."""
    _device_kernels(program)
    decomposed = {o.name for o in program.stages.get("decompose", [])}
    rows = []
    for k in program.kernels:
        plans = k.tiling.get("sdsc", [{}] * len(k.ops))
        for i, (op, plan) in enumerate(zip(k.ops, plans, strict=True)):
            rows.append({"op": op.name, "aten": op.op, "kernel": k.name, "kernel_kind": k.kind, "position": i,
                         "ops_in_kernel": len(k.ops), "inserted": op.name not in decomposed,
                         "pattern": op.pattern, "lowering": plan.get("lowering", "host"),
                         "cores_used": plan.get("cores_used", 0), "split": plan.get("split", "host")})
    return pd.DataFrame(rows)


def dma_edges(program: Program) -> pd.DataFrame:
    """Every transfer that crosses LPDDR5 <-> LX or host <-> LPDDR5 (``kind`` pcie). ``kind`` input: a tensor
    from outside the bundle; output: read by another bundle or a graph output; spill: an intermediate of the
    bundle that did not fit LX, written out and read back.

    bytes of a read = device bytes x passes (a matmul operand re-read once per tile); a residual between the
    plan's ``lpddr_read``/``lpddr_write`` and its edges is a spilled internal intermediate (``<op>.internal``)."""
    device = _device_kernels(program)
    sb, rows = stick_bytes(program), []

    def add(k, op, tensor, direction, kind, nbytes):
        rows.append({"kernel": k.name, "op": op, "tensor": tensor, "direction": direction, "kind": kind,
                     "bytes": float(nbytes), "sticks": -(-int(nbytes) // sb)})
    for k in program.kernels:
        if k not in device:
            for p, b in k.inputs.items():
                add(k, k.ops[0].name, p, "LPDDR5->host", "pcie", b)
            for p, b in k.outputs.items():
                add(k, k.ops[0].name, p, "host->LPDDR5", "pcie", b)
            continue
        mine = {o.name for o in k.ops}
        for op, plan in zip(k.ops, k.tiling["sdsc"], strict=True):
            read = 0.0
            for p, (nbytes, passes) in plan["reads"].items():
                if plan["inputs_from"][p] == "LPDDR5":
                    add(k, op.name, p, "LPDDR5->LX", "spill" if p in mine else "input", nbytes * passes)
                    read += nbytes * passes
            if plan["lpddr_read"] - read > 0:
                add(k, op.name, f"{op.name}.internal", "LPDDR5->LX", "spill", plan["lpddr_read"] - read)
            written = plan["out_device_bytes"] if op.name in k.outputs else 0.0
            if written:
                add(k, op.name, op.name, "LX->LPDDR5", "output", written)
            if plan["lpddr_write"] - written > 0:
                add(k, op.name, op.name, "LX->LPDDR5", "spill", plan["lpddr_write"] - written)
    return pd.DataFrame(rows, columns=["kernel", "op", "tensor", "direction", "kind", "bytes", "sticks"])


def restickify_edges(program: Program) -> pd.DataFrame:
    """One row per inserted ``spyre.restickify``: the source tensor as it is stored (``stored_shape``, sticks
    along its last dim), the view the consumer reads it through before the transpose (``read_as``), the
    transposed view it needs (``view_shape``: sticks along the other dim), stick counts before/after
    (``sticks_in``, ``sticks_out``), the copy's device bytes and its consumers in the bundle."""
    produced = {pl["name"]: tuple(pl["shape"]) for k in _device_kernels(program) for pl in k.tiling["sdsc"]}
    rows = []
    for k in _device_kernels(program):
        for op, plan in zip(k.ops, k.tiling["sdsc"], strict=True):
            if op.op != "spyre.restickify":
                continue
            src = next(iter(op.in_bytes))
            consumers = [o.name for o in k.ops if op.name in o.in_bytes]
            read_as = tuple(op.in_shapes[src])
            rows.append({"restickify": op.name, "kernel": k.name, "source": src, "consumers": ", ".join(consumers),
                         "stored_shape": produced.get(src, read_as), "read_as": read_as,
                         "view_shape": tuple(op.shape), "sticks_in": plan["tensors"][src]["sticks"],
                         "sticks_out": plan["sticks"], "bytes": float(plan["out_device_bytes"]),
                         "pattern": op.pattern})
    return pd.DataFrame(rows, columns=["restickify", "kernel", "source", "consumers", "stored_shape", "read_as",
                                       "view_shape", "sticks_in", "sticks_out", "bytes", "pattern"])


def core_work(report: Report) -> pd.DataFrame:
    """Per core (0..n-1 of the chip): busy seconds, ops, FLOPs (padded, the work done) and sticks, from the
    compute events on the "cores" engine: an event that used k cores adds duration, padded FLOPs / k and
    sticks / k to each of cores 0..k-1."""
    _device_kernels(report.programs[0])  # a spyre report
    n = get_chip(report.chip).compute_units
    rows = [{"core": c, "ops": 0, "busy_s": 0.0, "flops": 0.0, "sticks": 0.0} for c in range(n)]
    for e in report.events:
        if e.kind != "compute" or e.engine != "cores":
            continue
        k = int(e.detail["cores_used"])
        for row in rows[:k]:
            row["ops"] += 1
            row["busy_s"] += e.duration
            row["flops"] += e.detail["padded_flops"] / k
            row["sticks"] += e.detail["sticks"] / k
    return pd.DataFrame(rows)


def lpddr_arena(program: Program) -> pd.DataFrame:
    """Offsets in LPDDR5 for every tensor a DMA edge moves: first use first, each at a stick boundary.
    offset_i = offset_{i-1} + ceil(bytes_{i-1} / stick) x stick."""
    sb, edges = stick_bytes(program), dma_edges(program)
    edges = edges[~edges["tensor"].str.endswith(".internal")]  # parts of one op streamed through LPDDR5
    sizes = {}
    for t, b in zip(edges["tensor"], edges["bytes"], strict=True):  # device bytes, not bytes x passes
        sizes.setdefault(t, _device_bytes(program, t) or b)
    offsets, end = [], 0
    for b in sizes.values():
        offsets.append(end)
        end += -(-int(b) // sb) * sb
    sizes = pd.Series(sizes, dtype=float)
    return pd.DataFrame({"tensor": sizes.index, "offset": offsets, "bytes": sizes.to_numpy()})


def _device_bytes(program: Program, tensor: str) -> float:
    """Device bytes of a tensor as a plan records it (its own producer's plan first)."""
    found = 0.0
    for k in _device_kernels(program):
        for plan in k.tiling["sdsc"]:
            if plan["name"] == tensor:
                return float(plan["out_device_bytes"])
            if tensor in plan["reads"]:
                found = found or float(plan["reads"][tensor][0])
    return found


def trace_tensor(program: Program, tensor: str) -> pd.DataFrame:
    """The life of one tensor, step by step: produced (in LX), written LX -> LPDDR5, DMA'd LPDDR5 -> LX for
    each consumer or read where it stayed (LX), restickified. Per step: sticks, bytes, and per core
    bytes / cores used by that op; LPDDR5 steps carry the tensor's ``lpddr_arena`` offset."""
    sb, arena = stick_bytes(program), lpddr_arena(program).set_index("tensor")
    rows = []

    def add(step, kernel, op, where, layout, nbytes, cores):
        addr = int(arena.loc[tensor, "offset"]) if where == "LPDDR5" and tensor in arena.index else None
        rows.append({"step": step, "kernel": kernel, "op": op, "where": where, "device_shape": layout,
                     "sticks": -(-int(nbytes) // sb), "bytes": float(nbytes), "cores": cores,
                     "bytes_per_core": nbytes / cores if cores else float(nbytes), "lpddr_offset": addr})
    for k in program.kernels:
        if k.kind == "fallback":
            if tensor in k.outputs:
                add("host -> LPDDR5 (PCIe)", k.name, k.ops[0].name, "LPDDR5", None, k.outputs[tensor], 0)
            continue
        for op, plan in zip(k.ops, k.tiling["sdsc"], strict=True):
            cores, lay = plan["cores_used"], plan["tensors"]
            if tensor in plan["reads"]:
                nbytes, passes = plan["reads"][tensor]
                if plan["inputs_from"][tensor] == "LPDDR5":
                    add(f"DMA LPDDR5 -> LX ({passes} pass{'es' * (passes > 1)})", k.name, op.name, "LPDDR5",
                        lay[tensor]["device_shape"], nbytes * passes, cores)
                else:
                    add("read in LX (resident)", k.name, op.name, "LX", lay[tensor]["device_shape"], nbytes, cores)
                if op.op == "spyre.restickify":
                    add(f"restickify -> {op.name}", k.name, op.name, "LX", plan["device_shape"],
                        plan["out_device_bytes"], cores)
            if op.name == tensor:
                add("produced in LX", k.name, op.name, "LX", plan["device_shape"], plan["out_device_bytes"], cores)
                if op.name in k.outputs or plan["output_to"] == "LPDDR5":
                    add("DMA LX -> LPDDR5", k.name, op.name, "LPDDR5", plan["device_shape"],
                        plan["out_device_bytes"], cores)
    if not rows:
        names = sorted({p for k in _device_kernels(program) for pl in k.tiling["sdsc"] for p in pl["tensors"]})
        raise unknown("tensor", tensor, names)
    return pd.DataFrame(rows)


def draw_program(program: Program, ax=None, *, title: str | None = None):  # noqa: C901 (one drawing pass)
    """The program as a graph in three lanes: LPDDR5 (tensors that live there), the cores (ops, one shaded box
    per bundle; an edge inside a bundle stays in LX) and the host (CPU fallbacks). Edge colours: grey LX,
    blue DMA, purple spill, red into/out of a restickify, green PCIe."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    ops = [(k, op) for k in program.kernels for op in k.ops]
    if ax is None:
        _, ax = plt.subplots(figsize=(max(10.0, 0.95 * len(ops) + 2), 5.6), layout="constrained")
    x = {op.name: float(i) for i, (_, op) in enumerate(ops)}
    lane = {op.name: LANES["host" if k.kind == "fallback" else "cores"] for k, op in ops}
    edges = dma_edges(program)
    mem = {}  # tensor -> x of its LPDDR5 node: its producer's x, else its first reader's
    for t, op in zip(edges["tensor"], edges["op"], strict=True):
        if not t.endswith(".internal"):
            mem.setdefault(t, x.get(t, x[op]))
    for base in set(mem.values()):  # several tensors at one x (a weight and its bias): spread them apart
        same = [t for t in mem if mem[t] == base]
        for j, t in enumerate(same):
            mem[t] = base + 0.34 * (j - (len(same) - 1) / 2)
    names = tensor_labels(program)
    for k in program.kernels:
        xs = [x[o.name] for o in k.ops]
        y = LANES["host" if k.kind == "fallback" else "cores"]
        ax.add_patch(FancyBboxPatch((min(xs) - 0.42, y - 0.3), max(xs) - min(xs) + 0.84, 0.6,
                                    boxstyle="round,pad=0.02", fc=tint(SEQUENCE[1] if k.kind != "fallback"
                                                                       else SEQUENCE[2], 0.12),
                                    ec="#777777", lw=1, ls="-" if k.kind != "fallback" else "--"))
        ax.text((min(xs) + max(xs)) / 2, y + 0.34, f"{k.name} ({k.kind}, {len(k.ops)} ops)", ha="center",
                fontsize=7, color="#444444")

    def arrow(x0, y0, x1, y1, color, style="-", rad=0.0):
        ax.annotate("", (x1, y1), (x0, y0), arrowprops=dict(arrowstyle="-|>", color=color, lw=1.1, ls=style,
                                                            shrinkA=9, shrinkB=9, connectionstyle=f"arc3,rad={rad}"))
    came_from = {pl["name"]: pl["inputs_from"] for k in _device_kernels(program) for pl in k.tiling["sdsc"]}
    for _k, op in ops:  # on-chip edges: the consumer read the producer's output where it stayed, in LX
        for p in op.in_bytes:
            if came_from.get(op.name, {}).get(p) == "LX" and p in x:
                red = "restickify" in p or op.op == "spyre.restickify"
                kind = "restickify" if red else "LX"
                arrow(x[p], lane[p], x[op.name], lane[op.name], EDGE_COLORS[kind], EDGE_STYLE[kind].dash,
                      rad=-0.35 if x[op.name] - x[p] > 1 else 0.0)
    for e in edges.itertuples():
        if e.kind == "pcie":
            src, dst = (x[e.op], mem.get(e.tensor, x[e.op])) if e.direction == "host->LPDDR5" else \
                (mem.get(e.tensor, x[e.op]), x[e.op])
            ys = (LANES["host"], LANES["LPDDR5"]) if e.direction == "host->LPDDR5" else (LANES["LPDDR5"], LANES["host"])
            arrow(src, ys[0], dst, ys[1], EDGE_COLORS["pcie"], EDGE_STYLE["pcie"].dash)
        elif not e.tensor.endswith(".internal"):
            color, dash = EDGE_STYLE["spill" if e.kind == "spill" else "dma"]
            if e.direction == "LPDDR5->LX":  # a load; a store points the other way (the arrow says which)
                arrow(mem[e.tensor], LANES["LPDDR5"], x[e.op], LANES["cores"], color, dash)
            else:
                arrow(x[e.op], LANES["cores"], mem[e.tensor], LANES["LPDDR5"], color, dash)
    for k, op in ops:
        restick, host = op.op == "spyre.restickify", k.kind == "fallback"  # shape as well as fill says which
        color = tint(EDGE_COLORS["restickify"], 0.35) if restick else tint(SEQUENCE[2], 0.3) if host else "#ffffff"
        ax.plot(x[op.name], lane[op.name], "D" if restick else "s" if host else "o", ms=15, mfc=color, mec="#555555")
        ax.text(x[op.name], lane[op.name] - 0.2, f"{op.name}\n{'x'.join(map(str, op.shape))}", ha="center",
                va="top", fontsize=6.5)
    for t, xm in mem.items():
        ax.plot(xm, LANES["LPDDR5"], "s", ms=9, mfc=tint(EDGE_COLORS["dma"], 0.2), mec=EDGE_COLORS["dma"])
        ax.text(xm, LANES["LPDDR5"] + 0.08, names.get(t, t), ha="left", va="bottom", fontsize=6.5, rotation=40)
    ax.set_yticks(list(LANES.values()), ["LPDDR5", f"{program.chip} cores\n(LX scratchpads)", "host CPU"])
    ax.set_xticks([])
    ax.set_ylim(-1.6, 1.6)
    ax.set_xlim(-1, len(ops))
    for s in ("top", "right", "bottom"):
        ax.spines[s].set_visible(False)
    handles = [plt.Line2D([], [], color=EDGE_STYLE[k].colour, ls=EDGE_STYLE[k].dash, lw=2, label=n) for n, k in
               (("in LX (fused)", "LX"), ("DMA LPDDR5<->LX", "dma"), ("spill", "spill"),
                ("restickify", "restickify"), ("PCIe (fallback)", "pcie"))]
    ax.legend(handles=handles, loc="lower right", fontsize=7, ncol=5)
    ax.set_title(title or f"SIMULATED {program.summary()}", fontsize=9)
    return ax


__all__ = ["attention_report", "attention_workload", "core_work", "dma_edges", "draw_program", "fusion_table",
           "lpddr_arena", "restickify_edges", "stick_bytes", "tensor_labels", "trace_tensor"]
