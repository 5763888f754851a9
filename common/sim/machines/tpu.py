"""TPU policy: XLA compiles the whole step into fusions that one TensorCore runs in a static order.

* Fuse (XLA): producer -> consumer chains of elementwise, reduction, copy and gather ops become one loop/input
  fusion. An elementwise epilogue (bias or residual add, scale, mask, activation) that consumes the result of
  a matmul joins it (output fusion). Two matmuls never share a fusion, except a bmm -> softmax -> bmm chain,
  which a Pallas flash-attention kernel implements (option ``flash_attention``, default True); causal, it skips
  the mxu x mxu score blocks above the diagonal (``Policy.skip_masked_tiles``): ~half of S^2 in a prefill.
* Tile (MXU): a matmul (b, M, K, N) holds mxu x mxu weight tiles in the systolic array while LHS rows stream
  through in groups of one sublane tile. So K and N pad to the MXU edge and M to the sublane tile:
      padded FLOPs = 2 b M' K' N',   MXU passes = b ceil(K/mxu) ceil(N/mxu),   efficiency = FLOPs / padded.
  v5e (128x128): K = 129 -> 256, 257 -> 384; v6e (256x256): 129 -> 256, 257 -> 512.
* Layout ((8,128) tiles): XLA stores an array in HBM as tiles over its two minor dimensions: the last dim
  pads to 128 lanes, the second-to-last to 8 sublanes (32 for 8-bit types, which pack 4 rows per sublane).
  f32[.., 100, 300] occupies [.., 104, 384]. Size-1 dims are skipped (layout assignment keeps them out of the
  minor positions); a transposed operand is padded in its stored order; an array read through a view is
  charged the tiles of the view's shape. HBM traffic counts padded bytes; the roofline floor only useful ones.
* Place: a fusion's inputs and outputs live in HBM; its intermediates in VMEM (written once, read once).
* Schedule: static, compile-time, on one TensorCore ("tensorcore"): fusions back to back, HBM <-> VMEM DMA
  overlapped with compute (each fusion takes the max of its MXU, HBM and VMEM terms). Named overheads: one
  MXU fill/drain bubble per matmul fusion (catalog estimate; none where the clock is not published) and, with
  tensor parallelism, a ring all-reduce over ICI after each row-parallel matmul.
"""
from __future__ import annotations

import math

from common.chips import DTYPE_BYTES, get_chip
from common.sim.policy import Policy
from common.sim.program import Event, Kernel

ENGINE = "tensorcore"
# Elementwise ops XLA folds into the output of the matmul that feeds them (bias/residual add, scaling,
# masking, activations). Others (pow, rsqrt, exp, ...) start normalisations or softmaxes: they go with the
# reduction that follows them, in a fusion of their own.
EPILOGUE_OPS = {"aten.add", "aten.sub", "aten.mul", "aten.div", "aten.masked_fill", "aten.where", "aten.gelu",
                "aten.silu", "aten.relu", "aten.sigmoid", "aten.tanh"}


def round_up(x: int, m: int) -> int:
    return -(-int(x) // int(m)) * int(m)


def padded_shape(shape, sublanes: int, lanes: int) -> tuple:
    """``shape`` in (sublanes, lanes) tiles: the innermost dim of size > 1 pads to ``lanes``, the next one to
    ``sublanes``; size-1 dims and outer dims are unchanged. (100, 300) -> (104, 384) with (8, 128) tiles."""
    out = [int(d) for d in shape]
    minor = [i for i, d in enumerate(out) if d > 1][-2:]
    if minor:
        out[minor[-1]] = round_up(out[minor[-1]], lanes)
    if len(minor) == 2:
        out[minor[0]] = round_up(out[minor[0]], sublanes)
    return tuple(out)


class TPUPolicy(Policy):
    name = "tpu"
    kind = "tpu"
    default_chip = "tpu-v5e"
    critical_engine = ENGINE
    max_chips = 256  # one v5e pod: a 16 x 16 ICI torus
    # XLA's default precision on TPU multiplies f32 matmul operands as bf16 with fp32 accumulation. Measured
    # max|compiled - eager| / max|eager| on tiny-block and the 'test' LM (prefill and decode, seeds 0-4) and
    # the TinyTransformerBlock: <= 4.9e-3, about 2.5 bf16 unit roundoffs (2^-9); 1e-2 leaves a 2x margin.
    matmul_operand_dtype = "bf16"
    rtol_vs_eager = 1e-2
    precision_sources = {
        "matmul_operand_dtype": "Cloud TPU docs, 'Improve your model's performance with bfloat16' "
                                "(cloud.google.com/tpu/docs/bfloat16): by default TPUs multiply matrices with "
                                "bfloat16 values and accumulate in IEEE float32",
        "storage_dtype": "Cloud TPU docs, bfloat16 page: f32 arrays stay f32 unless the model casts them (storing "
                         "bf16 is the user's explicit choice); so no storage rounding",
        "accumulation_dtype": "Cloud TPU docs, bfloat16 page: accumulations in IEEE float32",
    }
    # Non-float dtypes the machine computes in (torch names) -> source. Anything else goes to the host.
    computes_in = {
        "int32": "XLA's TPU backend computes S32 natively on the vector unit (32-bit lanes, jax tpu_info.py "
                 "NUM_LANES = 128 x 32 bit)",
        "bool": "XLA PRED, computed on the vector unit as 32-bit masks",
        "int8": "int8 MXU path (catalog peak_flops.int8)", "uint8": "int8 MXU path (catalog peak_flops.int8)",
        "int64": "estimate: XLA:TPU has no 64-bit lanes and emulates S64 as pairs of 32-bit words (slower, "
                 "not modelled); JAX keeps x64 off by default for that reason",
        "complex64": "XLA supports C64 on TPU (pairs of f32; FFTs and complex matmuls)",
    }
    host_link = None  # no published host interface figure: an op with no cost rule is a one-line error here

    def native_dtype(self) -> str:
        return "bf16"

    # ---- stage 2: fuse ---------------------------------------------------------------------------------
    def can_fuse(self, kernel: Kernel, op) -> bool:
        if op.pattern and op.pattern == kernel.ops[0].pattern and self.options.get("flash_attention", True):
            return True  # the whole bmm -> softmax -> bmm chain is one Pallas flash-attention kernel
        if op.kind == "matmul":
            return False  # each matmul is the root of its own fusion
        if kernel.kind in ("matmul", "attention"):
            # output fusion: an elementwise epilogue of the value the fusion just produced (a chain, not a tree)
            inside = [p for p in op.in_bytes if any(o.name == p for o in kernel.ops)]
            return op.op in EPILOGUE_OPS and inside == [kernel.ops[-1].name]
        return op.kind in ("pointwise", "reduction", "copy", "gather")  # loop and input (reduction) fusions

    # ---- stage 3: tile / layout ------------------------------------------------------------------------
    def tile_fact(self, key: str) -> int:
        """A tile size (MXU edge, sublanes, lanes) from the catalog, looked up by the chip's name: a Chip copied
        with another MXU (dataclasses.replace) still gets its catalog's, so the simulated compiler never plans an
        array of one's choosing (Lab 2's mxu_plan exercise; its answer key holds that arithmetic)."""
        return int(get_chip(self.chip.name).fact(key))

    @property
    def sublane_tile(self) -> int:
        """Rows per (sublanes, 128) tile: 8 for 16- and 32-bit types; 8-bit types pack rows into sublanes."""
        rows = self.tile_fact("sublanes")
        return rows * self.tile_fact("sublane_packing_8bit") if DTYPE_BYTES[self.dtype] == 1 else rows

    def expert_row_tile(self) -> tuple[int, str] | None:
        """Each expert of the batched expert GEMM is its own (rows, K) operand: ``tile`` pads its rows onto the
        sublane tile (its K and N onto the MXU edge); the MXU is weight-stationary, its rows stream through."""
        return self.sublane_tile, f"the (sublanes, lanes) tile: {self.chip.sources['facts.sublanes']}"

    def layout(self, shape, nbytes: float, transposed: bool = False) -> tuple[tuple, tuple, float]:
        """(stored shape, padded shape, padded bytes) of an array of ``nbytes`` read through view ``shape``."""
        stored = tuple(int(d) for d in shape)
        if transposed and len(stored) >= 2:  # a transposed view of an array stored in the other order
            stored = (*stored[:-2], stored[-1], stored[-2])
        padded = padded_shape(stored, self.sublane_tile, self.tile_fact("lanes"))
        ratio = math.prod(padded) / math.prod(stored) if math.prod(stored) else 1.0
        return stored, padded, nbytes * ratio

    def tile(self, kernel: Kernel) -> None:
        mxu, rows = self.tile_fact("mxu_dim"), self.sublane_tile
        tiling: dict = {"mxu": f"{mxu}x{mxu}", "layout": f"({rows},{self.tile_fact('lanes')})"}
        matmuls = [o for o in kernel.ops if o.mnk]
        padded_flops, passes, shapes = kernel.flops, 0, []
        for i, o in enumerate(matmuls):
            b, m, k, n = (int(x) for x in o.mnk)
            mp, kp, np_ = round_up(m, rows), round_up(k, mxu), round_up(n, mxu)
            padded_flops += 2 * b * (mp * kp * np_ - m * k * n)  # addmm's bias FLOPs stay as counted
            passes += b * (kp // mxu) * (np_ // mxu)
            shapes.append(f"{b}x{m}x{k}x{n}->{b}x{mp}x{kp}x{np_}")
            if i == 0:
                tiling.update(batch=b, M=m, K=k, N=n, M_padded=mp, K_padded=kp, N_padded=np_)
        if matmuls:
            mxus = int(self.chip.fact("mxus_per_core"))
            tiling.update(matmuls=len(matmuls), bmkn="; ".join(shapes), mxu_passes=passes, mxus=mxus,
                          passes_per_mxu=-(-passes // mxus))
        kernel.padded_flops = padded_flops
        tiling["efficiency"] = kernel.flops / padded_flops if padded_flops else 1.0
        tiling.update(self._layouts(kernel))
        kernel.tiling = tiling
        self.skip_masked_tiles(kernel, mxu)  # the flash kernel skips causal-masked mxu x mxu blocks

    def _layouts(self, kernel: Kernel) -> dict:
        """Padded bytes of every array the fusion reads or writes in HBM, and of its VMEM intermediates."""
        by_name = {o.name: o for o in kernel.ops}
        raw = padded = 0.0
        ins, outs = [], []
        for p, nbytes in kernel.inputs.items():
            reader = next((o for o in kernel.ops if p in o.in_shapes), None)
            shape, transposed = (reader.in_shapes[p], p in reader.transposed_inputs) if reader else ((), False)
            if reader is not None and reader.kind == "gather" and p in reader.param_inputs:
                nbytes, shape = min(nbytes, reader.out_bytes), reader.shape  # a lookup DMAs only its rows
            stored, pad, pb = self.layout(shape, nbytes, transposed)
            raw, padded = raw + nbytes, padded + pb
            ins.append(f"{p}{list(stored)}->{list(pad)}")
        for name, nbytes in kernel.outputs.items():
            stored, pad, pb = self.layout(by_name[name].shape, nbytes)
            raw, padded = raw + nbytes, padded + pb
            outs.append(f"{name}{list(stored)}->{list(pad)}")
        vmem = sum(self.layout(o.shape, o.out_bytes)[2] for o in kernel.ops if o.name not in kernel.outputs)
        return {"hbm_bytes": padded, "hbm_bytes_unpadded": raw, "hbm_padding_bytes": padded - raw,
                "layout_efficiency": raw / padded if padded else 1.0, "vmem_bytes": 2 * vmem,
                "padded_inputs": "; ".join(ins), "padded_outputs": "; ".join(outs)}

    # ---- stage 4: place --------------------------------------------------------------------------------
    def place(self, kernel: Kernel) -> None:
        """Fusion inputs and outputs stream from HBM (padded bytes); intermediates stay in VMEM."""
        kernel.bytes = {self.main_level: kernel.tiling["hbm_bytes"]}
        if kernel.tiling["vmem_bytes"] > 0:
            kernel.bytes["VMEM"] = kernel.tiling["vmem_bytes"]

    # ---- stage 5: costs --------------------------------------------------------------------------------
    def bandwidth(self, level: str) -> float | None:
        """VMEM bandwidth is not published: the catalog's estimate where there is one, else no VMEM term."""
        if level.upper() == "VMEM":
            est = self.chip.estimates.get("vmem_bandwidth")
            return est.value if est else None
        return super().bandwidth(level)

    def kernel_time(self, kernel: Kernel, share: float = 1.0) -> tuple[float, str, float, dict]:
        """The base max-of-terms rule on padded FLOPs and padded bytes; the floor counts only useful work:
        max(FLOPs / peak, unpadded HBM bytes / spec HBM bandwidth)."""
        duration, bound, _, detail = super().kernel_time(kernel, share)
        useful = kernel.tiling.get("hbm_bytes_unpadded", kernel.bytes.get(self.main_level, 0.0))
        floor = max(kernel.flops * share / self.peak, useful * share / self.chip.main_memory.bandwidth)
        return duration, bound, floor, detail

    # ---- stage 6: schedule -----------------------------------------------------------------------------
    def schedule(self, kernels, start: float = 0.0) -> list[Event]:
        """Static order on one TensorCore: [fill/drain] fusion [all-reduce], each starting when the last ends."""
        fill = self.chip.estimates.get("mxu_fill_drain_s")
        events, t = [], start
        for k in kernels:
            if fill and any(o.mnk for o in k.ops):
                events.append(Event(f"mxu fill/drain {k.name}", "sync", ENGINE, t, fill.value, bound="scheduling",
                                    kernel=k.name, detail={"cycles": round(fill.value * self.chip.clock_hz)}))
                t += fill.value
            ev = self.kernel_event(k, t, ENGINE, share=self.share(k))
            events.append(ev)
            t = ev.end
            comm = self.allreduce_event(k, t, ENGINE)
            if comm:
                events.append(comm)
                t = comm.end
        return events

    @property
    def ring_links(self) -> int:
        """ICI links per chip a ring uses: its two neighbours, or the one link between a pair of chips."""
        return 1 if self.n_chips == 2 else 2

    def allreduce_event(self, kernel: Kernel, start: float, engine: str) -> Event | None:
        """Bidirectional ring all-reduce over ICI. The catalog's ICI figure is per chip, both directions, over
        all ``ici_links`` links, so one link carries link_bandwidth / (2 links) per direction. A ring embedded
        in the slice uses 2 of them per chip (1 for a pair of chips), sending half the data each way round:
        wire time = 2 (n-1)/n x bytes / (links used x one-way link bandwidth). Each hop also has a fixed ICI
        latency (``ici_hop_latency_s``, ~1 us): a bidirectional reduce-scatter + all-gather makes n/2 + n/2 = n
        hops, each paying it before its bytes (the alpha-beta model; the scaling book's max(wire, n x hop) is
        its large-message limit): time = n x hop latency + wire time; the floor is one hop + the wire time."""
        ev = super().allreduce_event(kernel, start, engine)
        if ev is None:
            return None
        one_way = self.chip.link_bandwidth / (2 * int(self.chip.fact("ici_links")))
        used = self.ring_links
        wire = ev.bytes["link"] / (used * one_way)
        hop = self.link_latency_s()
        latency = self.n_chips * hop
        ev.floor, ev.duration = hop + wire, latency + wire
        ev.detail.update(algorithm="bidirectional ring", links_used=used, link_one_way_Bps=one_way, wire_s=wire,
                         hops=self.n_chips, steps=self.n_chips, hop_latency_s=hop, latency_s=latency)
        return ev

    def notes(self) -> list[str]:
        out = super().notes()
        chip = self.chip
        vmem = chip.estimates.get("vmem_bandwidth")
        out.append(f"{chip.name} VMEM bandwidth is an estimate: {vmem.derivation}" if vmem else
                   f"{chip.name} VMEM bandwidth is not published: VMEM bytes are counted but set no time")
        fill = chip.estimates.get("mxu_fill_drain_s")
        out.append(f"MXU fill/drain per matmul fusion is an estimate: {fill.derivation}" if fill else
                   f"{chip.name} clock is not published: no MXU fill/drain time is modelled")
        if "achievable_bandwidth_fraction" not in chip.estimates:
            out.append("HBM runs at its spec bandwidth: Google publishes no achievable fraction")
        out.append("one compiled XLA program per step: no per-fusion launch; the host dispatch cost is not "
                   "published and not modelled")
        if self.n_chips > 1:
            hop = chip.estimates["ici_hop_latency_s"]
            out.append(f"tensor parallel over {self.n_chips} chips: bidirectional ring all-reduce on "
                       f"{self.ring_links} of {int(chip.fact('ici_links'))} ICI links per chip: the wire time plus "
                       f"{self.n_chips} hops x {hop.value * 1e6:g} us ({hop.derivation})")
        return out
