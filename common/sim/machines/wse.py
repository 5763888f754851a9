"""Cerebras WSE policy: every layer gets its own rectangle of PEs; a token flows through them over the fabric.

* Fuse: as on the LPU (``spatial.one_matmul_per_kernel``): vector work stays in the PEs that produced it; a
  kernel is one matmul (or one attention chain) with its vector ops. All data lives in PE SRAM, so a kernel's
  intermediates are written and read there too (place: outside bytes + 2 x intermediates).
* Place: one region per segment instance (prologue, each layer, epilogue), its PE count in proportion to the
  bytes it holds (weights + that layer's KV cache), never more than its largest matrix has elements (a PE
  with no element to hold has nothing to do), never fewer than ``ceil(bytes / 48 KB)``. A region is a near-square
  R x C rectangle of the 2-D mesh (side ~ sqrt(PEs)); consecutive regions sit side by side.
* Tile (per region): a matmul (b, M, K, N) keeps its stationary operand - the weight, or the KV cache inside
  attention - in (bK/R') x (N/C') tiles on R' = min(R, bK) x C' = min(C, N) PEs. Each moving row's slice of
  bK/R' values streams along a PE row; the N/C' fp32 partial sums of each PE reduce down its column:
      padded FLOPs = 2 M R' kt C' nt  (kt = ceil(bK/R'), nt = ceil(N/C')),  efficiency = FLOPs / padded,
      fabric streaming = M max(kt x operand bytes, nt x 4 B) / (fabric_bytes_per_cycle_per_link x clock).
* Cost: a kernel occupies its region for max(compute on its PEs, SRAM bytes / the region's SRAM bandwidth,
  fabric streaming) and then pays wavelet latency, a named "sync" event: hops x fabric_hop_cycles / clock, with
  R' + C' hops per matmul (broadcast along rows, reduce down columns) and 2 (R + C) per reduction (reduce to one
  PE, broadcast back). Region to region: the live activations cross the shared edge over min(R_a, R_b) links
  ("comm", with its first hop), then the rest of the ceil((C_a + C_b) / 2) hops of latency. Wafer to wafer: the
  12 x 100 GbE system I/O, one direction (link_bandwidth / 2), after one network hop's latency (Cerebras
  publishes none: ``common.chips.catalog.links`` takes NCCL's figure for a network hop, an estimate).
* Schedule: layer-per-region pipeline (``spatial.lay_out``). At batch 1 decode the token visits the regions one
  after another; a prompt or a batch streams through in microbatches (the compiler's best size, one row in
  practice) and overlaps: pipeline fill and drain are named scheduling time.
* More than one wafer: ``fit`` picks the fewest wafers that hold weights + KV cache, whole layers per wafer in
  order. Weight streaming from MemoryX (Cerebras's training mode) is not modelled for inference: over the same
  150 GB/s a 70B fp16 model would take ~1 s per token; a model whose single layer exceeds a wafer is a DFAError.
"""
from __future__ import annotations

import math

from common.chips import DTYPE_BYTES
from common.errors import DFAError
from common.sim import spatial
from common.sim.policy import Policy
from common.sim.program import Event, Kernel

ENGINE = "wafer"


class WSEPolicy(Policy):
    name = "wse"
    kind = "wse"
    default_chip = "wse-3"
    critical_engine = ENGINE
    parallelism = "pipeline"
    max_chips = 64  # the simulator's cap on a wafer pipeline (2.8 TB of SRAM on WSE-3), not a product limit
    # PEs multiply 16-bit operands (fp16, or bf16 / cb16) and accumulate in fp32; activations stay 16-bit in SRAM,
    # in the run's dtype (bf16 by default). Measured max|compiled - eager| / max|eager| on tests/test_sim_compile.py's
    # models ('test' LM prefill and decode, seeds 0-2, TinyTransformerBlock, convnet): bf16 <= 7.1e-3 (fp16 <= 9.6e-4);
    # 1.5e-2 leaves a 2x margin over bf16.
    matmul_operand_dtype = "fp16"
    storage_dtype = "fp16"
    rtol_vs_eager = 1.5e-2
    precision_sources = {
        "matmul_operand_dtype": "estimate: the PE datapath is a 16-bit FMAC (catalog matrix_unit; the Cerebras SDK's "
                                "CSL float types are f16 and f32), so operands are rounded to the run's 16-bit dtype",
        "storage_dtype": "estimate: activations held in 48 KB of PE SRAM in the run's 16-bit dtype, as the wafer's "
                         "16-bit datapath implies; Cerebras publishes no per-tensor storage rule",
        "accumulation_dtype": "estimate: fp32, as in mixed-precision training generally; Cerebras publishes no "
                              "accumulator width",
    }
    # Non-float dtypes the wafer computes in (torch names) -> source. Anything else (int64, complex) runs on the
    # host: a CPU fallback over the system I/O (catalog link_bandwidth), with the shared host estimates.
    computes_in = {
        "int16": "Cerebras SDK, CSL language reference: i16 / u16 types and 16-bit integer DSD operations",
        "int32": "Cerebras SDK, CSL language reference: i32 / u32 scalar types on the PE",
        "bool": "Cerebras SDK, CSL language reference: bool type (a PE-local mask)",
    }
    host_link = "link_bandwidth"

    def __init__(self, chip=None, n_chips=None, dtype=None, **options):
        super().__init__(chip, n_chips, dtype, **options)
        if self.dtype in ("fp16", "bf16"):
            self.matmul_operand_dtype = self.storage_dtype = self.dtype
        self.pes = self.chip.compute_units
        self.clock = self.chip.estimate("clock_hz")
        self.side = math.isqrt(self.pes)

    # ---- fuse / tile / place ---------------------------------------------------------------------------
    def can_fuse(self, kernel: Kernel, op) -> bool:
        return spatial.one_matmul_per_kernel(kernel, op)

    def tile(self, kernel: Kernel) -> None:
        """Region-independent part; ``run`` fills in the region (R x C), PE tiles and padding per instance."""
        kernel.padded_flops = kernel.flops
        kernel.tiling = {"unit": "PE SIMD", "efficiency": 1.0}

    def place(self, kernel: Kernel) -> None:
        internal = sum(o.out_bytes for o in kernel.ops) - sum(kernel.outputs.values())
        kernel.bytes = {"SRAM": sum(kernel.inputs.values()) + sum(kernel.outputs.values()) + 2 * max(internal, 0.0)}

    # ---- costs on a region -----------------------------------------------------------------------------
    def region_cost(self, kernel: Kernel, rows: int, cols: int, q: float = 1.0) -> dict:
        """One kernel on an R x C region for a ``q`` fraction of its rows (see the module docstring)."""
        p1 = self.peak / self.pes  # FLOP/s of one PE
        bpc = self.chip.estimate("fabric_bytes_per_cycle_per_link")
        eb = DTYPE_BYTES[self.dtype]
        compute = stream = padded = hops = 0.0
        tiling: dict = {"region": f"{rows}x{cols}", "pes": rows * cols}
        for o in kernel.ops:
            if o.kind == "matmul" and o.mnk:
                b, m, k, n = (int(x) for x in o.mnk)
                r2, c2 = min(rows, b * k), min(cols, n)
                kt, nt = math.ceil(b * k / r2), math.ceil(n / c2)
                compute += 2 * m * kt * nt * q / p1
                padded += 2 * m * r2 * kt * c2 * nt * q
                stream += m * q * max(kt * eb, nt * 4) / bpc / self.clock
                hops += r2 + c2
                if "pe_tile" not in tiling:  # the first matmul's mapping; efficiency below is the kernel's
                    tiling.update(pe_tile=f"{kt}x{nt}", pes_used=r2 * c2)
            else:
                compute += o.flops * q / (rows * cols * p1)
                padded += o.flops * q
                hops += 2 * (rows + cols) if o.kind == "reduction" else 0
        sram = kernel.bytes["SRAM"] * q / (self.chip.level("SRAM").bandwidth * rows * cols / self.pes)
        terms = {"compute_s": compute, "SRAM_s": sram, "fabric_s": stream}
        bound = {"compute_s": "compute", "SRAM_s": "memory", "fabric_s": "communication"}[max(terms, key=terms.get)]
        phi = rows * cols / self.pes
        floor = max(kernel.flops * q / (self.peak * phi), sram)
        latency = hops * self.chip.estimate("fabric_hop_cycles") / self.clock
        tiling.update(efficiency=kernel.flops * q / padded if padded else 1.0, hops=int(hops))
        return dict(duration=max(terms.values()), bound=bound, floor=floor, terms=terms, latency=latency,
                    padded=padded, tiling=tiling)

    # ---- placement -------------------------------------------------------------------------------------
    def regions(self, sizes: list[float], useful: list[float] | None = None) -> list[tuple[int, int]] | None:
        """R x C of each region on one wafer (PEs in proportion to bytes, see the module docstring); None when
        they do not fit."""
        cap_pe = self.chip.level("SRAM").capacity
        total = sum(sizes)
        out = []
        for i, b in enumerate(sizes):
            share = self.pes * (b / total if total > 0 else 1 / len(sizes))
            want = min(math.floor(share), int(useful[i]) if useful else self.pes)
            p = max(1, math.ceil(b / cap_pe), want)
            r = min(self.side, math.isqrt(p))
            c = p // r
            if r * c * cap_pe < b:
                c += 1
            out.append((r, c))
        return out if sum(r * c for r, c in out) <= self.pes else None

    def _wafers(self, sizes: list[float], n: int) -> list[int] | None:
        wafer = spatial.pack_whole(sizes, n)
        for w in set(wafer):
            if self.regions([s for s, x in zip(sizes, wafer, strict=True) if x == w]) is None:
                return None
        return wafer

    def fit(self, workload) -> None:
        """The fewest wafers that hold weights + KV cache with whole layers per wafer."""
        sizes = spatial.resident_sizes(workload)
        total, cap = sum(sizes), self.chip.main_memory.total_capacity
        if sizes and max(sizes) > cap:
            raise DFAError(f"one segment of {workload.name} needs {max(sizes) / 1e9:.1f} GB, more than a "
                           f"{self.chip.name} holds ({cap / 1e9:.1f} GB); weight streaming is not modelled")
        need = max(1, math.ceil(total / cap))
        while need <= min(self.max_chips, len(sizes)) and self._wafers(sizes, need) is None:
            need += 1
        spatial.too_big(workload, self, need, total, "wafers")
        if self._wafers(sizes, self.n_chips) is None:
            raise DFAError(f"{workload.name} does not fit {self.n_chips}x {self.chip.name} with whole layers per "
                           f"wafer; try --chips {need}")

    # ---- the pipelined run -----------------------------------------------------------------------------
    def run(self, programs, workload) -> list[Event]:
        steps = spatial.flow(programs, workload)
        n_stages = steps[-1].stage + 1 if steps else 0
        sizes, useful, label = [0.0] * n_stages, [1.0] * n_stages, [""] * n_stages
        for s in steps:
            sizes[s.stage] += s.resident
            useful[s.stage] = max(useful[s.stage], *(_stationary(o) for o in s.kernel.ops))
            seg = workload.segments[s.segment]
            label[s.stage] = f"{seg.name} {s.name.split('.')[0][1:]}" if seg.repeat > 1 else seg.name
        wafer = self._wafers(sizes, self.n_chips) or [0] * n_stages
        shape = [None] * n_stages
        for w in set(wafer):
            idx = [i for i in range(n_stages) if wafer[i] == w]
            for i, rc in zip(idx, self.regions([sizes[i] for i in idx], [useful[i] for i in idx]), strict=True):
                shape[i] = rc
        rows = max(1, int(workload.tokens or 1))
        # microbatch sizes compared on durations alone, then the chosen one built with every event
        n_mb, stages = spatial.best_microbatches(
            rows, lambda q: self._stages(steps, shape, wafer, label, q, tally=rows > 1))
        if rows > 1:
            stages = self._stages(steps, shape, wafer, label, 1.0 / n_mb)
        placement = []
        for i in range(n_stages):
            r, c = shape[i]
            placement.append({"region": label[i], "wafer": wafer[i], "R": r, "C": c, "pes": r * c,
                              "resident_bytes": sizes[i], "bytes_per_pe": sizes[i] / (r * c)})
        done = set()
        for s in steps:  # each compiled kernel shows the tiling of its first placement
            if id(s.kernel) not in done:
                done.add(id(s.kernel))
                cost = self.region_cost(s.kernel, *shape[s.stage])
                s.kernel.tiling, s.kernel.padded_flops = cost["tiling"], cost["padded"]
        for p in programs:
            p.stages["placement"] = placement
            p.notes.append(f"{self.chip.name}: {n_stages} regions on {self.n_chips} wafer(s), {rows} rows in {n_mb} "
                           f"microbatch(es); clock, fabric width and hop latency are catalog estimates")
        return spatial.lay_out(stages, n_mb, ENGINE)

    def _stages(self, steps, shape, wafer, label, q: float, tally: bool = False) -> list:
        """Region and hop stages in pipeline order for microbatches of a ``q`` fraction of the rows. ``tally``:
        each stage as ``spatial.step_time`` reads it (a ``spatial.Tally`` of durations), no events kept."""
        stages: list = []
        current, width = -1, len(str(len(shape) - 1))  # zero-padded region numbers sort in pipeline order
        costs: dict = {}  # (kernel, region shape) -> its cost, computed once for all repeats of a layer
        for s in steps:
            if s.stage != current:
                if stages:
                    hop = self._hop(s, shape, wafer, label, q)
                    stages.append(_tally(hop) if tally else hop)
                stages.append(spatial.Tally() if tally else
                              spatial.Stage(label[s.stage], wafer[s.stage], f"region {s.stage:0{width}d}"))
                current = s.stage
            r, c = shape[s.stage]
            known = costs.get((id(s.kernel), r, c))
            if known is None:
                cost = self.region_cost(s.kernel, r, c, q)
                detail = dict(cost["terms"], ops=s.kernel.op_names, **cost["tiling"])
                duration, floor = self.at_least_one_cycle(cost["duration"], cost["floor"], detail)
                terms = spatial.Tally()  # what the kernel adds to a tally: itself, then its wavelets in flight
                terms.add(duration)
                if cost["latency"] > 0:
                    terms.add(cost["latency"], latency=True)
                known = costs[id(s.kernel), r, c] = (cost, detail, duration, floor, s.kernel.flops * q, terms)
            cost, detail, duration, floor, flops, terms = known
            st = stages[-1]
            if tally:
                st.held += terms.held
                st.passed += terms.passed
                continue
            st.events.append(Event(s.name, "compute", ENGINE, 0.0, duration, st.chip, flops,
                                   {"SRAM": s.kernel.bytes["SRAM"] * q}, cost["bound"], s.kernel.name,
                                   floor, dict(detail)))
            if cost["latency"] > 0:
                st.events.append(Event(f"{s.name} wavelets", "sync", ENGINE, 0.0, cost["latency"], st.chip,
                                       bound="communication", kernel=s.kernel.name, floor=cost["latency"],
                                       detail={"latency": True, "hops": cost["tiling"]["hops"]}))
        return stages

    def _hop(self, s, shape, wafer, label, q: float) -> spatial.Stage:
        """The live activations entering region ``s.stage``: over the shared edge, or from the previous wafer."""
        src, dst, nbytes = s.stage - 1, s.stage, s.live_in * q
        hop = spatial.Stage(f"{label[src]} -> {label[dst]}", wafer[src], "fabric")
        if wafer[src] != wafer[dst]:  # the system I/O: its hop latency (common.chips.catalog.links), then the bytes
            latency = self.link_latency_s()
            t = latency + nbytes / (self.chip.link_bandwidth / 2)
            hop.events.append(Event(f"wafer {wafer[src]}->{wafer[dst]}", "comm", ENGINE, 0.0, t, wafer[src], 0.0,
                                    {"link": nbytes}, "communication", floor=t,
                                    detail={"bytes": nbytes, "latency_s": latency}))
            return hop
        (ra, ca), (rb, cb) = shape[src], shape[dst]
        links = min(ra, rb)
        one_hop = self.chip.estimate("fabric_hop_cycles") / self.clock
        # the edge crossing: its first hop, then the bytes spread over the shared edge's links
        t = one_hop + nbytes / (links * self.chip.estimate("fabric_bytes_per_cycle_per_link") * self.clock)
        hop.events.append(Event(f"fabric {src}->{dst}", "comm", ENGINE, 0.0, t, wafer[src], 0.0,
                                {"fabric": nbytes}, "communication", floor=t, detail={"bytes": nbytes, "links": links}))
        hops = math.ceil((ca + cb) / 2) - 1  # the rest of the way to the middle of the next region
        if hops > 0:
            lat = hops * one_hop
            hop.events.append(Event(f"fabric {src}->{dst} wavelets", "sync", ENGINE, 0.0, lat, wafer[src],
                                    bound="communication", floor=lat, detail={"latency": True, "hops": hops}))
        return hop


def _tally(stage: spatial.Stage) -> spatial.Tally:
    out = spatial.Tally()
    for e in stage.events:
        out.add(e.duration, e.detail.get("overlap_s", 0.0), bool(e.detail.get("latency")))
    return out


def _stationary(o) -> float:
    """Elements of the operand a matmul keeps in place (its weight or KV cache); 1 for other ops."""
    if o.kind == "matmul" and o.mnk:
        b, _, k, n = o.mnk
        return float(b * k * n)
    return 1.0
