"""IBM Spyre policy: a model of torch-spyre's compiler passes on one 32-core card (or up to 48 over PCIe).

Stages (each decision lands in ``kernel.tiling``; per-op records in ``kernel.tiling["sdsc"]``):

* coverage   four layers as torch-spyre documents them: native OpFuncs (custom ``spyre::`` ops counted native),
             decompositions, and CPU fallback. A fallback is a graph break: device -> host over PCIe, the op on
             the CPU, host -> device. ``strict=True`` turns a fallback into an error naming the nearest native op.
* fuse       every contiguous run of device ops becomes one SuperDSC bundle, broken only at fallbacks.
* layout     tensors live in sticks of ``stick_bytes`` (128 B = 64 fp16) along the innermost dimension; a
             partial stick is padded: device bytes = rows x ceil(n / 64) x 128. An activation read through a
             transposed view has its stick on the wrong dimension, so a ``spyre.restickify`` copy is inserted.
* work split an op's output is split across cores so that each core gets the same number of sticks: every
             dimension takes the largest divisor of its size that fits the cores left (rows; for matmuls batch
             and M, then N in sticks when M is small, as in decode). compute rate = peak x cores_used / 32.
* matmul     per core, output tiles that fit the LX left over, chosen for the least LPDDR5 re-reads.
* LX plan    an intermediate stays in its core's LX when its per-core slice fits the budget left by the tensors
             already resident (in-place reuse: dying inputs are freed first); otherwise it spills to LPDDR5
             (one extra write + one read per consumer). Multi-use bundle inputs are pinned likewise. A decomposed
             row reduction (softmax) whose slice does not fit runs over row tiles of each core's rows
             (torch-spyre's softmax_row_tiling), so its intermediates stay in LX: no spill.
* schedule   (``common.sim.machines.spyre_timing``, with the costs and the counters) per bundle one host launch
             (``kernel_launch_s``), then its ops in order on "cores"; a "dma" lane shows each op's LPDDR5 <-> LX
             transfer. Every op event lasts
             max(padded FLOPs / (peak x cores/32 x eff), LPDDR5 time, LX bytes / LX bw(cores)), with
             torch-spyre's cost-model constants: peak 1536 MAC/ns/core, eff 1140/1536 for matmuls and 160/1536
             for a default-layout bmm of two activations; LPDDR5 time = (R + W) / 150 GB/s + turnaround x min(R, W).

Options (the compiler knobs labs turn): ``cores`` (1..32), ``lx_budget_bytes`` (LX per core the planner may
use; a soft limit: when even the smallest matmul tile, one stick deep, does not fit, that tile still runs and
the op's ``ws_bytes_per_core`` exceeds the budget, as a compiler with no smaller tile would have to), ``coarse_tiles``
(force at least this many row tiles per matmul), ``strict`` (fallbacks are errors).
Counters (``report.counters``): LPDDR5 <-> LX bytes, LX spills, restickifies, fallbacks, host round-trip bytes.
"""
from __future__ import annotations

import itertools
import math

import torch

from common.chips import DTYPE_BYTES, canonical_dtype, get_chip
from common.errors import DFAError
from common.sim.machines.spyre_timing import SpyreTiming
from common.sim.policy import Policy
from common.sim.program import Kernel, Op

# ---- op coverage (torch-spyre docs: getting_started/how_torch_spyre_works.md, "Challenge 4: op coverage") ----
NATIVE = {f"aten.{n}" for n in (
    "add", "sub", "mul", "div", "relu", "sigmoid", "abs", "neg", "exp", "log", "sqrt", "rsqrt", "reciprocal",
    "tanh", "floor", "eq", "ne", "ge", "le", "lt", "gt", "pow", "square", "where", "logical_and", "logical_not",
    "sum", "mean", "amax", "amin", "max", "min", "mm", "bmm", "clone", "copy_", "copy", "_to_copy", "contiguous",
    "full", "scalar_tensor", "embedding", "index_select", "index", "index_put", "index_put_", "slice_scatter",
    "gelu", "silu", "softplus", "clamp", "native_layer_norm", "rms_norm", "topk")}
CUSTOM_OPS = {"aten.gelu": "spyre::gelu", "aten.silu": "spyre::silu", "aten.softplus": "spyre::softplus",
              "aten.clamp": "spyre::clamp", "aten.native_layer_norm": "spyre::layer_norm",
              "aten.rms_norm": "spyre::rms_norm", "aten.topk": "spyre::topkvalue+spyre::topkindex"}
DECOMPOSED = {
    "aten._softmax": ("aten.amax", "aten.sub", "aten.exp", "aten.sum", "aten.div"),  # the cost-model listing
    "aten._log_softmax": ("aten.amax", "aten.sub", "aten.exp", "aten.sum", "aten.log", "aten.sub"),
    "aten.addmm": ("aten.mm", "aten.mul", "aten.add"), "aten.linear": ("aten.mm", "aten.add"),
    "aten.matmul": ("aten.bmm",), "aten.masked_fill": ("aten.where",),
    "aten.cat": ("spyre::overwrite",), "aten.constant_pad_nd": ("spyre::overwrite",), "aten.rsub": ("aten.sub",),
    **{f"aten.{n}": ("aten.full",) for n in ("ones", "new_ones", "zeros", "new_zeros", "ones_like", "zeros_like")},
    "aten._scaled_dot_product_flash_attention_for_cpu": ("aten.bmm", "aten._softmax", "aten.bmm"),
    "aten._scaled_dot_product_efficient_attention": ("aten.bmm", "aten._softmax", "aten.bmm"),
    "aten._scaled_dot_product_flash_attention": ("aten.bmm", "aten._softmax", "aten.bmm"),
}
# Documented CPU fallbacks, plus (our judgement) sort, nonzero, gather and convolution, which appear in no native
# or decomposition list. Any op in none of the three tables falls back too (PyTorch's fallback dispatch).
NEAREST_NATIVE = {
    "aten.cumsum": "aten.sum", "aten.arange": "a precomputed constant input", "aten.repeat": "aten.expand (a view)",
    "aten.sin": "a precomputed table (aten.index_select)", "aten.cos": "a precomputed table (aten.index_select)",
    "aten.tril": "aten.where with a precomputed mask", "aten.triu": "aten.where with a precomputed mask",
    "aten.isin": "aten.eq", "aten.index_copy": "aten.index_put", "aten.any": "aten.amax",
    "aten.argmax": "aten.max", "aten.argmin": "aten.min", "aten.bitwise_or": "aten.logical_and",
    "aten.bitwise_xor": "aten.ne", "aten.normal_": "a host-generated input", "aten.random_": "a host-generated input",
    "aten.sort": "aten.topk", "aten.nonzero": "aten.where", "aten.gather": "aten.index_select",
    "aten.convolution": "aten.mm (im2col)",
}

# Full-size intermediates a decomposition creates (softmax: sub and exp; amax and sum are one value per row);
# other decompositions create len(parts) - 1.
FULL_SIZE_INTERMEDIATES = {"aten._softmax": 2, "aten._log_softmax": 2}


def _prod(xs) -> int:
    return math.prod(int(x) for x in xs)


def _layout(shape, elem_bytes: int, chip="spyre") -> dict:
    """Stick layout of a row-major tensor on ``chip`` (its catalog stick): innermost dim padded to whole sticks,
    device shape (sticks, *outer, epc). The stick comes from the chip, never a free parameter: a stick width of
    one's choosing is the Deep Dives' exercise (their answer keys hold it, not the student package)."""
    # looked up by name: a Chip copied with another stick (dataclasses.replace) still gets the catalog's
    stick_bytes = int(get_chip(getattr(chip, "name", chip)).fact("stick_bytes"))
    shape = tuple(int(s) for s in shape) or (1,)
    epc = max(1, stick_bytes // elem_bytes)  # elements per stick
    per_row = -(-shape[-1] // epc)
    rows = _prod(shape[:-1])
    sticks = rows * per_row
    logical = _prod(shape) * elem_bytes
    return {"shape": shape, "elem_bytes": elem_bytes, "elements_per_stick": epc, "sticks_per_row": per_row,
            "rows": rows, "sticks": sticks, "padded_shape": (*shape[:-1], per_row * epc),
            "device_shape": (per_row, *shape[:-1], epc), "bytes": logical, "device_bytes": sticks * stick_bytes,
            "padding_bytes": sticks * stick_bytes - logical}


def stick_layout(shape, dtype: str = "fp16") -> dict:
    """How Spyre stores ``shape``: sticks of 128 B on the innermost dim (150 fp16 -> 3 sticks, 192 slots).

    >>> stick_layout((1024, 256))["device_shape"]
    (4, 1024, 64)
    """
    if not all(isinstance(s, int) and s >= 0 for s in tuple(shape)):
        raise DFAError(f"shape must be non-negative integers, got {shape!r}")
    return _layout(shape, DTYPE_BYTES[canonical_dtype(dtype)])


def _itemsize(dtype: str) -> int:
    t = getattr(torch, str(dtype).replace("torch.", ""), None)
    return t.itemsize if isinstance(t, torch.dtype) else 2


class SpyrePolicy(SpyreTiming, Policy):
    name = "spyre"
    kind = "spyre"
    default_chip = "spyre"
    critical_engine = "cores"
    # a matmul's rows are not on sticks (A sticks on K, B and C on N) and are split over the cores
    expert_rows_unpadded = ("a matmul's A operand lies in 128-byte sticks along K and its rows are split over the "
                            "cores (torch-spyre), so no row tile is published")
    native = NATIVE
    decomposed = DECOMPOSED
    fallback = set(NEAREST_NATIVE)
    # Spyre computes and stores in fp16 (torch-spyre supports no bf16 today). fp16 keeps 11 bits of mantissa
    # (unit roundoff 4.9e-4); rounding every stored tensor, matmuls accumulating in fp32, measured 4e-4 to 1e-3
    # (max |diff| / max |eager|) on the reference decoder, block, convnet and a KV-cache decode step: 5x headroom.
    storage_dtype = "fp16"
    matmul_operand_dtype = "fp16"
    rtol_vs_eager = 5e-3
    precision_sources = {
        "matmul_operand_dtype": "torch-spyre docs, getting_started/key_concepts.md section 8: Spyre's default "
                                "compute dtype is torch.float16 (a 128-byte stick holds 64 fp16 elements)",
        "storage_dtype": "torch-spyre docs, key_concepts.md section 8: other dtypes have narrower coverage on the "
                         "compiled path, where explicit fp32<->fp16 casts convert them; so every stored tensor is fp16",
        "accumulation_dtype": "estimate: fp32; IBM publishes no accumulator width for the PE arrays",
    }
    # Non-float dtypes the card computes in (torch names) -> source. int64 and complex have no datapath: such an op
    # runs on the host, as torch-spyre's CPU fallback (spyre_timing schedules the PCIe round trip itself).
    computes_in = {
        "int8": "Spyre's int8 datapath (catalog peak_flops.int8, '300 TOPS')",
        "int32": "torch-spyre stores int64 index tensors as int32 on the device (the layout this policy uses)",
        "bool": "torch-spyre's native op list has logical_and / logical_not / where on masks",
    }
    schedules_host_fallbacks = True
    narrows_int64_in_layout = True  # _input_layout stores an int64 index tensor as int32 sticks itself
    host_link = "link_bandwidth"

    def __init__(self, chip=None, n_chips=None, dtype=None, **options):
        super().__init__(chip, n_chips, dtype, **options)
        c = self.chip
        self.max_chips = int(c.fact("max_cards_per_system"))
        self.stick = int(c.fact("stick_bytes"))
        self.elem = DTYPE_BYTES[self.dtype]
        self.units = c.compute_units
        self.cores = options["cores"] if options.get("cores") is not None else self.units
        if not isinstance(self.cores, int) or not 1 <= self.cores <= self.units:
            raise DFAError(f"cores must be an integer in 1..{self.units}, got {self.cores!r}")
        lx = c.level("LX").capacity
        # Usable LX per core as torch-spyre computes it: (capacity - 64 KB program/debug) x (1 - 20 % that the
        # backend keeps for itself; DeepTools does the double-buffered LPDDR<->LX staging in that share).
        default = (lx - c.fact("lx_reserved_bytes")) * (1 - c.fact("lx_backend_reserved_fraction"))
        self.lx_budget = options.get("lx_budget_bytes")
        if self.lx_budget is None:
            self.lx_budget = int(default) // self.stick * self.stick
        if not isinstance(self.lx_budget, (int, float)) or not 32 * 1024 <= self.lx_budget <= lx:
            raise DFAError(f"lx_budget_bytes must be between 32768 and {lx:.0f}, got {self.lx_budget!r}")
        self.coarse_tiles = options["coarse_tiles"] if options.get("coarse_tiles") is not None else 1
        if not isinstance(self.coarse_tiles, int) or self.coarse_tiles < 1:
            raise DFAError(f"coarse_tiles must be a positive integer, got {self.coarse_tiles!r}")

    def notes(self) -> list[str]:
        est = self.chip.estimates
        return super().notes() + [
            f"LPDDR5 runs at {est['achievable_bandwidth_fraction'].value:.2f} of 204.8 GB/s (estimate: "
            f"{est['achievable_bandwidth_fraction'].derivation})",
            f"LX bandwidth is an estimate: {est['lx_bandwidth'].derivation}",
            f"bundle launch {est['kernel_launch_s'].value * 1e6:.0f} us is an estimate: "
            f"{est['kernel_launch_s'].derivation}",
            f"each op's LPDDR5 <-> LX transfer pays {est['lpddr_dma_latency_s'].value * 1e9:.0f} ns of DMA latency "
            f"(estimate: {est['lpddr_dma_latency_s'].derivation})",
            f"{self.cores} of {self.units} cores, LX budget {self.lx_budget / 1e6:.2f} MB per core; weights are laid "
            "out in sticks at load time, so only activations read through transposed views are restickified"]

    # ---- stage 1: coverage ----------------------------------------------------------------------------
    def coverage(self, op: str):
        cov, parts = super().coverage(op)
        if cov == "fallback" and self.options.get("strict"):
            raise DFAError(f"{op} falls back to the CPU on spyre; nearest native: {self.nearest_native(op)}")
        return cov, parts

    def nearest_native(self, op: str) -> str:
        return NEAREST_NATIVE.get(op, "none known")

    # ---- stage 2: fuse - one bundle per run of device ops (the shared pass never fuses fallbacks) ---------
    def can_fuse(self, kernel: Kernel, op) -> bool:
        return True

    # ---- stage 3: layout, restickify, work division, matmul tiles -------------------------------------
    def tile(self, kernel: Kernel) -> None:
        if kernel.kind == "fallback":
            op = kernel.ops[0]
            kernel.padded_flops = kernel.flops
            kernel.tiling = {"fallback": op.op, "nearest_native": self.nearest_native(op.op),
                             "d2h_bytes": sum(kernel.inputs.values()), "h2d_bytes": sum(kernel.outputs.values())}
            return
        self._insert_restickify(kernel)
        stored: dict[str, dict] = {}  # tensor name -> stored device layout (bundle ops and external inputs)
        plans = [self._plan(op, stored) for op in kernel.ops]
        kernel.padded_flops = sum(p["padded_flops"] for p in plans)
        kernel.tiling = {"sdsc_ops": len(plans), "restickify": sum(p["sdsc_kind"] == "restickify" for p in plans),
                         "cores_used": max(p["cores_used"] for p in plans),
                         "cores_min": min(p["cores_used"] for p in plans),
                         "sticks": sum(p["sticks"] for p in plans),
                         "padding_bytes": sum(p["padding_bytes"] for p in plans),
                         "efficiency": kernel.flops / kernel.padded_flops if kernel.padded_flops else 1.0,
                         "lx_budget_bytes": self.lx_budget, "sdsc": plans}

    def _insert_restickify(self, kernel: Kernel) -> None:
        """A consumer reading an activation through a transposed view needs its sticks on the other dimension:
        insert a ``spyre.restickify`` copy before it. Weights (``param_inputs``) were laid out for their matmul
        when the model was loaded, so they never need one at run time."""
        done: dict[str, str] = {}
        ops: list[Op] = []
        for op in kernel.ops:
            for p in op.transposed_inputs:
                if p in op.param_inputs or p not in op.in_bytes:
                    continue
                if p not in done:
                    view = op.in_shapes.get(p, ())
                    stored = (*view[:-2], view[-1], view[-2]) if len(view) >= 2 else view
                    r = Op(f"restickify_{p}", "spyre.restickify", "copy", "native", 0.0, op.in_bytes[p],
                           {p: op.in_bytes[p]}, view, op.dtype, in_shapes={p: stored}, pattern=op.pattern)
                    done[p] = r.name
                    ops.append(r)
                op.in_bytes = {done[p] if k == p else k: v for k, v in op.in_bytes.items()}
                op.in_shapes = {done[p] if k == p else k: v for k, v in op.in_shapes.items()}
            op.transposed_inputs = tuple(p for p in op.transposed_inputs if p not in done)
            ops.append(op)
        kernel.ops[:] = ops

    def _input_layout(self, op: Op, p: str, stored: dict) -> dict:
        """Stored layout of an input: a bundle op's output, else from the view shape and the bytes it touches."""
        if p in stored:
            return stored[p]
        shape = tuple(op.in_shapes.get(p, ())) or (1,)
        numel, nbytes = _prod(shape), op.in_bytes[p]
        if nbytes in (numel, 2 * numel, 4 * numel, 8 * numel):  # the whole view: a mask, an activation, indices
            elems = numel
        else:  # a broadcast view touches fewer elements than its shape
            elems = max(1, round(nbytes / _itemsize(op.dtype)))
            shape = (elems // shape[-1], shape[-1]) if elems % shape[-1] == 0 else (elems,)
        # Every tensor is stored in the compute dtype, except int64 indices: int32 on the device
        stored[p] = _layout(shape, 4 if nbytes == 8 * numel else self.elem, self.chip)
        return stored[p]

    def _divide(self, dims: list[tuple[str, int]]) -> tuple[int, str, dict]:
        """Cores per dimension so that every core gets the same number of sticks (torch-spyre's work_distribution
        rule): each dimension takes the largest divisor of its size that fits the cores left. Of the orders in
        which the dimensions can be taken, the one using most cores wins; ties keep the listed priority.
        Returns (cores used, "M/32", {"M": 32})."""
        dims = [(label, units) for label, units in dims if units > 1]
        best = (1, {})
        for order in itertools.permutations(dims):
            left, used, parts = self.cores, 1, {}
            for label, units in order:
                d = max(x for x in range(1, min(units, left) + 1) if units % x == 0)
                if d > 1:
                    used, left, parts[label] = used * d, left // d, d
            if used > best[0]:
                best = (used, parts)
        used, parts = best
        return used, " ".join(f"{k}/{v}" for k, v in parts.items()) or "none", parts

    def _plan(self, op: Op, stored: dict) -> dict:
        out = _layout(op.shape, self.elem, self.chip)
        ins = {p: self._input_layout(op, p, stored) for p in op.in_bytes}
        stored[op.name] = out
        kind = "restickify" if op.op == "spyre.restickify" else op.kind
        plan = {"name": op.name, "op": op.op, "sdsc_kind": kind, "coverage": op.coverage,
                "lowering": CUSTOM_OPS.get(op.op) or "+".join(op.decomposed_into) or op.op,
                "shape": out["shape"], "padded_shape": out["padded_shape"], "device_shape": out["device_shape"],
                "sticks": out["sticks"], "padding_bytes": out["padding_bytes"], "out_device_bytes": out["device_bytes"],
                "tensors": {n: {k: lay[k] for k in ("device_shape", "sticks", "padding_bytes")}
                            for n, lay in (*ins.items(), (op.name, out))},
                "coarse_tiles": self.coarse_tiles, "flops": op.flops, "ws_bytes_per_core": 0.0}
        # reads: producer -> [device bytes, passes]; a gather reads only the rows it selects from its table
        reads = {p: [lay["device_bytes"], 1] for p, lay in ins.items()}
        if op.kind == "gather" and reads:
            reads[max(reads, key=lambda p: reads[p][0])][0] = out["device_bytes"]
        plan["reads"] = reads
        if op.kind == "matmul" and op.mnk:
            self._split_matmul(op, plan, ins)
        else:
            main = out
            if op.kind == "reduction" and ins:  # assumed to reduce the innermost (stick) dimension
                main = max(ins.values(), key=lambda lay: lay["device_bytes"])
                dims = [(f"d{i}", s) for i, s in enumerate(main["shape"][:-1])]
            else:
                dims = [(f"d{i}", s) for i, s in enumerate(out["shape"][:-1])]
                if op.kind != "gather":  # a gather never splits its shared table's data dims
                    dims.append(("stick", out["sticks_per_row"]))
            plan["cores_used"], plan["split"], _ = self._divide(dims)
            logical = max(main["bytes"] / main["elem_bytes"], 1)
            pad = main["sticks"] * main["elements_per_stick"] / logical if main["sticks"] else 1.0
            plan["padded_flops"] = op.flops * pad
            full = FULL_SIZE_INTERMEDIATES.get(op.op, max(len(op.decomposed_into) - 1, 0))
            if full:  # the parts run back to back on one LX slice: the input (read twice) + one in-place buffer
                plan.update(internal_intermediates=full, rows_per_core=-(-main["rows"] // plan["cores_used"]),
                            ws_bytes_per_core=2 * max(
                    [out["device_bytes"], *(r[0] for r in reads.values())]) / plan["cores_used"])
        if op.kind == "copy":  # what a copy writes along the stick dim, per row; a fault would shorten it (#524)
            plan.update(copy_range_elems=(0, out["shape"][-1]), copy_range_sticks=(0, out["sticks_per_row"]),
                        copy_rows=out["rows"])
        plan["efficiency"] = op.flops / plan["padded_flops"] if plan["padded_flops"] else 1.0
        return plan

    def _split_matmul(self, op: Op, plan: dict, ins: dict) -> None:
        """A sticks on K, B and C on N (padded to whole sticks). Cores split batch and M, and N in sticks when
        M is small (decode); K is never split."""
        b, m, k, n = op.mnk
        epc = self.stick // self.elem
        kp, np_ = -(-k // epc) * epc, -(-n // epc) * epc
        plan["cores_used"], plan["split"], parts = self._divide([("B", b), ("M", m), ("N", np_ // epc)])
        cn = parts.get("N", 1)
        # operands by shape: B is (..., K, N) - a weight if there is one; A is (..., M, K); others (a bias) once
        rb = next((p for p, lay in ins.items() if lay["shape"][-2:] == (k, n) and p in op.param_inputs), None) or \
            next((p for p, lay in reversed(ins.items()) if lay["shape"][-2:] == (k, n)), None)
        ra = next((p for p, lay in ins.items() if p != rb and lay["shape"][-1] == k), None)
        plan.update(mc=-(-(b * m) // (plan["cores_used"] // cn)), nc=np_ // cn, kp=kp, a_operand=ra or "",
                    b_operand=rb or "", padded_flops=op.flops * (kp / k) * (np_ / n))

    def _tile_matmul(self, plan: dict, budget: float) -> None:
        """Per core, output tiles tm x tn (K streamed one stick at a time) that fit ``budget`` bytes of LX with the
        least LPDDR5 traffic: A is re-read once per N tile, B once per M tile (an operand every core needs is
        read once and multicast over the ring). ``coarse_tiles`` forces at least that many M tiles, like
        torch-spyre's coarse tiling of the row loop."""
        epc = self.stick // self.elem
        mc, nc, tk = plan["mc"], plan["nc"], min(plan["kp"], epc)
        a = plan["reads"][plan["a_operand"]][0] if plan["a_operand"] else 0.0
        b = plan["reads"][plan["b_operand"]][0] if plan["b_operand"] else 0.0
        elems, best, tn = budget // self.elem, None, nc
        while True:
            tm = min(mc, int((elems - tk * tn) // (tk + tn)), -(-mc // self.coarse_tiles))
            if tm >= 1:
                traffic = a * -(-nc // tn) + b * -(-mc // tm)
                if best is None or traffic < best[0]:
                    best = (traffic, tm, tn)
            if tn <= epc:
                break
            tn = max(epc, -(-tn // 2 // epc) * epc)
        _, tm, tn = best or (0, 1, min(nc, epc))  # the smallest tile always runs (in the backend's share)
        if plan["a_operand"]:
            plan["reads"][plan["a_operand"]][1] = -(-nc // tn)
        if plan["b_operand"]:
            plan["reads"][plan["b_operand"]][1] = -(-mc // tm)
        plan.update(tile=f"{tm}x{tk}x{tn}", m_tiles=-(-mc // tm), n_tiles=-(-nc // tn),
                    ws_bytes_per_core=(tm * tk + tk * tn + tm * tn) * self.elem)

    # ---- stage 4: scratchpad (LX) planning and LPDDR5 <-> LX traffic -----------------------------------
    def place(self, kernel: Kernel) -> None:
        """Walk the bundle in order. Each op first takes its own working set (matmul tiles, or a decomposed op's
        slice); an output read later in the bundle then stays in LX if its per-core slice fits what is left,
        else it spills (written, and read back by each consumer). Inputs read again later are cloned into LX
        when they fit. Tensors are freed after their last reader (in-place reuse). No eviction."""
        if kernel.kind == "fallback":
            kernel.bytes = {"PCIe": kernel.tiling["d2h_bytes"] + kernel.tiling["h2d_bytes"]}
            return
        plans = kernel.tiling["sdsc"]
        uses: dict[str, list[int]] = {}
        for i, op in enumerate(kernel.ops):
            for p in op.in_bytes:
                uses.setdefault(p, []).append(i)
        produced = {op.name for op in kernel.ops}
        resident: dict[str, float] = {}  # tensor -> bytes per core held in LX
        for i, (op, plan) in enumerate(zip(kernel.ops, plans, strict=True)):
            cores, rd, wr, spill, src = plan["cores_used"], 0.0, 0.0, 0.0, {}
            free = self.lx_budget - sum(resident.values())
            if "mc" in plan:
                self._tile_matmul(plan, free)
            ws = plan["ws_bytes_per_core"]
            if "mc" not in plan and ws > free and op.kind == "reduction" and free > 0:
                # a row-wise decomposition (softmax) whose slice does not fit: torch-spyre's softmax_row_tiling
                # runs it over row tiles of each core's rows, so its intermediates stay in LX (no spill)
                tiles = min(math.ceil(ws / free), max(1, plan.get("rows_per_core", 1)))
                if ws / tiles <= free:
                    ws = plan["ws_bytes_per_core"] = ws / tiles
                    plan["row_tiles"] = tiles
            if "mc" not in plan and ws > free:  # a decomposed op whose slice does not fit: its parts stream
                extra = plan["internal_intermediates"] * plan["out_device_bytes"]  # through LPDDR5
                rd, wr, spill, ws = rd + extra, wr + extra, spill + extra, free
            lx = 0.0
            for p, (nbytes, passes) in plan["reads"].items():
                lx += nbytes * passes
                src[p] = "LX" if p in resident else "LPDDR5"
                if p in resident:
                    continue
                rd += nbytes * passes  # an external input or a spilled intermediate
                if p not in produced and max(uses[p]) > i and nbytes / cores <= free - ws:
                    resident[p] = nbytes / cores  # read again later in the bundle: cloned into LX once
                    free -= nbytes / cores
            for p in [p for p in resident if max(uses.get(p, [-1])) <= i]:
                del resident[p]  # dead after this op: its space is reused in place
            out = plan["out_device_bytes"]
            wr += out if op.name in kernel.outputs else 0.0  # read by another bundle, or a graph output
            if any(j > i for j in uses.get(op.name, [])):
                if sum(resident.values()) + out / cores + ws <= self.lx_budget:
                    resident[op.name] = out / cores
                elif op.name not in kernel.outputs:
                    wr, spill = wr + out, spill + out
            plan.update(lpddr_read=rd, lpddr_write=wr, lx_bytes=lx + out + rd + wr, spill_bytes=spill,
                        inputs_from=src, output_to="LX" if op.name in resident else "LPDDR5",
                        lx_bytes_per_core=sum(resident.values()) + ws)
        kernel.tiling.update(lpddr_read=sum(p["lpddr_read"] for p in plans),
                             lpddr_write=sum(p["lpddr_write"] for p in plans),
                             spill_bytes=sum(p["spill_bytes"] for p in plans),
                             lx_peak_bytes_per_core=max(p["lx_bytes_per_core"] for p in plans))
        kernel.bytes = {self.main_level: kernel.tiling["lpddr_read"] + kernel.tiling["lpddr_write"],
                        "LX": sum(p["lx_bytes"] for p in plans)}
