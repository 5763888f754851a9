"""Groq LPU policy: SRAM only, one compile-time schedule, the model pipelined over many chips.

* Fuse: the compiler emits one static program, so nothing is launched. Vector ops (norms, RoPE, activations,
  softmax) chain onto the matmul they feed or follow: their values stream between the MEM, VXM and MXM slices
  without a trip to SRAM. A kernel is one MXM operation with its vector work (or one attention chain); values
  passed *between* kernels are written to and read from SRAM, the only storage there is.
* Tile (MXM, ``mxm_dim`` = 320): weights are installed 320 x 320 at a time and LHS rows stream through, so K
  and N pad to 320 while M does not:
      passes = b ceil(K/320) ceil(N/320),   padded FLOPs = 2 b M K' N',   efficiency = FLOPs / padded FLOPs.
  (100, 300, 70) -> one pass at (300 x 70) / (320 x 320) = 20.5 %.
* Place (fewest chips): ``fit`` picks ceil(resident / SRAM capacity) chips, resident = weights + KV cache (no
  power of two: nothing is split by heads). ``run`` cuts the step's resident-byte stream - prologue, layer
  0..L-1, epilogue, kernel by kernel in program order - into equal consecutive pieces, one per chip. A kernel
  whose weights straddle a cut (a Llama-2-70B layer is 1.7 GB, 7.5 chips) is split *sequentially*: each chip
  multiplies by its slice of the weights and the token moves on. We do not make tensor-parallel chip groups:
  groups would round every layer up to whole chips (more than the fewest), and the schedule is built for a
  full pipeline - one token in flight per chip, many users at once - where throughput is set by each chip's
  work and all-reduces over the C2C links only add traffic. The price is batch-1 latency: a token visits the
  chips one after another (``attribution["memory"]`` ~ weights / SRAM bandwidth of ONE chip).
* Schedule: deterministic; no launches, no arbitration, the SRAM streams at its full bandwidth. Each kernel
  takes ``max(MXM FLOPs / peak, vector FLOPs / (vxm_alus x clock), SRAM bytes / bandwidth)``. When the token
  leaves a chip a "comm" event carries the next kernel's input activations over *one* C2C link in one direction
  (link_bandwidth / (2 x c2c_links)): consecutive pipeline chips are neighbours joined by a direct link, and
  striping over the others would need multi-hop routes through other chips. Inside a split kernel that input
  already existed, so its transfer starts under the sender's last kernel (``overlap_s``). Every hop also pays
  the network's per-hop latency (``c2c_hop_latency_s``, 722 ns in ISCA 2022):
      hop = c2c_hop_latency_s + activation bytes / one link's bandwidth.
  At batch 1 a token crosses n_chips - 1 of them: 63 x 0.72 us = 45 us for a 64-chip 7B. With more
  rows (batch or prompt) they flow in microbatches (``spatial.best_microbatches``) and the chips overlap:
  pipeline fill and drain are named scheduling time (``spatial.lay_out``).
"""
from __future__ import annotations

import math

from common.sim import spatial
from common.sim.policy import Policy
from common.sim.program import Event, Kernel

ENGINE = "TSP"


class LPUPolicy(Policy):
    name = "lpu"
    kind = "lpu"
    default_chip = "groq-lpu"
    critical_engine = ENGINE
    expert_rows_unpadded = ("activation rows stream one vector at a time through the weight-stationary MXM "
                            "(K and N pad onto its edge), so no row tile applies")
    parallelism = "pipeline"
    # The MXM multiplies fp16 (or int8) operands with fp32 accumulation; values live in SRAM as fp16. Measured
    # max|compiled - eager| / max|eager| on tests/test_sim_compile.py's models (the 'test' LM prefill and decode
    # with seeds 0-2, TinyTransformerBlock, the convnet): <= 9.6e-4, about 2 fp16 unit roundoffs; 3e-3 = 3x margin.
    matmul_operand_dtype = "fp16"
    storage_dtype = "fp16"
    rtol_vs_eager = 3e-3
    precision_sources = {
        "matmul_operand_dtype": "Groq GroqChip product brief (the MXM multiplies fp16 or int8; catalog groq.py)",
        "storage_dtype": "estimate: fp16 everywhere; Groq's blog 'Inside the LPU: Deconstructing Groq's Speed' "
                         "(2025-08-01, TruePoint numerics) says the compiler picks storage per layer (FP32 attention "
                         "logits, FP8 activations in error-tolerant layers), which this simulator does not model",
        "accumulation_dtype": "fp32 here, a lower bound: Groq's blog 'Inside the LPU' (2025-08-01) says "
                              "TruePoint keeps 100 bits of intermediate accumulation (lossless for the inputs' width)",
    }
    # Non-float dtypes the TSP computes in (torch names) -> source. int64 and complex have no datapath: such an op
    # runs on the host (CPU fallback over the card's PCIe link, catalog fact host_link_bandwidth).
    computes_in = {
        "int8": "MXM int8 (catalog peak_flops.int8, Groq product brief)",
        "uint8": "MXM int8 (catalog peak_flops.int8, Groq product brief)",
        "int16": "Abts et al., 'Think Fast', ISCA 2020: the VXM's ALUs operate on int8/int16/int32 and fp16/fp32",
        "int32": "Abts et al., 'Think Fast', ISCA 2020: the VXM's ALUs operate on int8/int16/int32 and fp16/fp32",
        "bool": "estimate: a mask held as int8 bytes on the VXM (no separate boolean type is published)",
    }
    host_link = "host_link_bandwidth"

    def __init__(self, chip=None, n_chips=None, dtype=None, **options):
        super().__init__(chip, n_chips, dtype, **options)
        # Largest published system (ISCA 2022 Dragonfly); Groq's Llama-2-70B deployment was reported at 576.
        self.max_chips = int(self.chip.fact("max_system_chips"))

    def native_dtype(self) -> str:
        return "fp16"  # the Groq record has no bf16 datapath: asking for bf16 is a DFAError from the catalog

    # ---- fuse / tile / place ---------------------------------------------------------------------------
    def can_fuse(self, kernel: Kernel, op) -> bool:
        return spatial.one_matmul_per_kernel(kernel, op)

    def tile(self, kernel: Kernel) -> None:
        d = int(self.chip.fact("mxm_dim"))
        mm = [o for o in kernel.ops if o.kind == "matmul"]
        if not mm:
            kernel.padded_flops = kernel.flops
            kernel.tiling = {"unit": "VXM", "efficiency": 1.0}
            return
        passes, padded, rows = 0, kernel.flops - sum(o.flops for o in mm), 0
        for o in mm:
            if not o.mnk:  # a convolution: no (b, M, K, N) recorded, counted unpadded
                padded += o.flops
                continue
            b, m, k, n = (int(x) for x in o.mnk)
            passes += b * math.ceil(k / d) * math.ceil(n / d)
            padded += o.flops * (math.ceil(k / d) * d * math.ceil(n / d) * d) / (k * n)
            rows = max(rows, m)
        kernel.padded_flops = padded
        kernel.tiling = {"unit": "MXM", "mxm": f"{d}x{d}", "passes": passes, "rows_streamed": rows,
                         "efficiency": kernel.flops / padded if padded else 1.0}
        first = next((o for o in mm if o.mnk), None)
        if first:
            _, _, k, n = (int(x) for x in first.mnk)
            kernel.tiling.update(K=k, N=n, padded_K=math.ceil(k / d) * d, padded_N=math.ceil(n / d) * d)

    def place(self, kernel: Kernel) -> None:
        """SRAM traffic: weights read (an embedding lookup reads its rows), activations and KV cache read from
        outside the kernel, results written for later kernels. Intermediates stream between slices: none.
        (A chip holding a column slice of a split kernel is charged its share of the activations too.)"""
        params = {p for o in kernel.ops for p in o.param_inputs}
        acts = sum(b for p, b in kernel.inputs.items() if p not in params)
        kernel.bytes = {"SRAM": spatial.weight_traffic(kernel) + acts + sum(kernel.outputs.values())}

    # ---- costs -----------------------------------------------------------------------------------------
    def kernel_time(self, kernel: Kernel, share: float = 1.0, rows: float = 1.0):
        """``share`` of the kernel's weights (a chip's slice) applied to a ``rows`` fraction of its rows: the
        weight slice is read once per microbatch, everything else scales with the rows."""
        mxm_s, vec_s, sram_s, mxm_floor = self._seconds(kernel, share, rows)
        terms = {"compute_s": max(mxm_s, vec_s), "SRAM_s": sram_s}
        floor = max(mxm_floor, vec_s, sram_s)
        duration = max(terms.values())
        return duration, ("compute" if terms["compute_s"] >= terms["SRAM_s"] else "memory"), floor, terms

    def _seconds(self, kernel: Kernel, share: float, rows: float) -> tuple[float, float, float, float]:
        """(padded MXM, VXM, SRAM, unpadded MXM) seconds of ``kernel_time``; ``_tally`` reads only these."""
        mm_flops, flops, w = self._totals(kernel)
        vec_flops = (flops - mm_flops) * share * rows
        pad = kernel.padded_flops / flops if flops else 1.0
        sram = share * (w + rows * (kernel.bytes["SRAM"] - w))
        bw, vxm = self._rates()
        return (mm_flops * share * rows * pad / self.peak, vec_flops / vxm, sram / bw,
                mm_flops * share * rows / self.peak)

    def _rates(self) -> tuple[float, float]:
        """(SRAM bytes/s, VXM FLOP/s) of one chip, read from the catalog once: ``kernel_time`` runs for every
        kernel slice of every microbatch size compared."""
        rates = self.__dict__.get("_rates_known")
        if rates is None:
            rates = self._rates_known = (self.chip.level("SRAM").bandwidth,
                                         self.chip.fact("vxm_alus") * self.chip.clock_hz)
        return rates

    def _totals(self, kernel: Kernel) -> tuple[float, float, float]:
        """(matmul FLOPs, FLOPs, weight bytes) of a kernel: sums over its ops, which every layer repeat, chip
        slice and microbatch candidate of a ``run`` reads again; kept for that run only (``run`` clears them)."""
        known = self.__dict__.setdefault("_run_totals", {}).get(id(kernel))
        if known is None or known[0] is not kernel:
            known = self._run_totals[id(kernel)] = (
                kernel, sum(o.flops for o in kernel.ops if o.kind == "matmul"), kernel.flops,
                spatial.weight_traffic(kernel))
        return known[1:]

    def _event(self, kernel: Kernel, name: str, chip: int, share: float, rows: float) -> Event:
        duration, bound, floor, detail = self.kernel_time(kernel, share, rows)
        duration, floor = self.at_least_one_cycle(duration, floor, detail)
        detail.update(ops=kernel.op_names, share=share, **{k: v for k, v in kernel.tiling.items()})
        _, flops, w = self._totals(kernel)
        sram = share * (w + rows * (kernel.bytes["SRAM"] - w))
        return Event(name, "compute", ENGINE, 0.0, duration, chip, flops * share * rows, {"SRAM": sram},
                     bound, kernel.name, floor, detail)

    def _per_link(self) -> float:
        """One C2C link, one direction: the catalog's total over 16 links and both directions / 32."""
        return self.chip.link_bandwidth / (2 * self.chip.fact("c2c_links"))

    def _hop(self, src: int, nbytes: float, under: float) -> Event:
        """The activations a chip hands to the next over one link; ``under``: seconds of the sender's last piece
        the transfer may run beneath (its data existed before that piece started)."""
        latency = self.chip.fact("c2c_hop_latency_s")
        t = latency + nbytes / self._per_link()
        return Event(f"c2c {src}->{src + 1}", "comm", ENGINE, 0.0, t, src, 0.0, {"link": nbytes},
                     "communication", floor=t, detail={"links": 1, "bytes": nbytes, "to_chip": src + 1,
                                                       "latency_s": latency, "overlap_s": min(t, under)})

    # ---- chips and the pipelined run --------------------------------------------------------------------
    def fit(self, workload) -> None:
        """The fewest chips whose SRAM holds weights + KV cache (``spatial.resident_sizes``), no power of two."""
        total = sum(spatial.resident_sizes(workload))
        need = max(1, math.ceil(total / self.chip.main_memory.total_capacity))
        spatial.too_big(workload, self, need, total, "chips")

    def run(self, programs, workload) -> list[Event]:
        steps = spatial.flow(programs, workload)
        pieces = spatial.pack_even([s.resident for s in steps], self.n_chips)
        rows = max(1, int(workload.tokens or 1))
        self._run_totals = {}
        try:  # microbatch sizes compared on durations alone (``_tally``), then the chosen one built with every event
            walk = self._walk(steps, pieces) if rows > 1 else []
            n_mb, stages = spatial.best_microbatches(
                rows, lambda q: self._tally(walk, q) if rows > 1 else self._stages(steps, pieces, q))
            if rows > 1:
                stages = self._stages(steps, pieces, 1.0 / n_mb)
        finally:
            self._run_totals = {}  # the kernels may go
        placement = [{"kernel": ev.name, "chip": ev.chip, "share": ev.detail["share"]}
                     for st in stages for ev in st.events if ev.kind == "compute"]
        for p in programs:
            p.stages["placement"] = placement
            p.notes.append(f"{self.n_chips} chips, {rows} rows in {n_mb} microbatch(es); each C2C hop: "
                           f"{self.chip.fact('c2c_hop_latency_s') * 1e9:.0f} ns latency + serialisation over one "
                           f"{self._per_link() / 1e9:.0f} GB/s link")
        return spatial.lay_out(stages, n_mb, ENGINE)

    def _stages(self, steps, pieces, q: float) -> list[spatial.Stage]:
        """Chip and link stages in pipeline order for microbatches of a ``q`` fraction of the rows."""
        chips = [spatial.Stage(f"chip {c}", c, ENGINE + " (pipelined)") for c in range(self.n_chips)]
        links = [spatial.Stage(f"c2c {c}->{c + 1}", c, "C2C (pipelined)") for c in range(self.n_chips)]
        chip = pieces[0][0][0] if pieces else 0
        made: dict = {}  # (kernel, share) -> its first event: every repeat of a layer costs the same
        for step, parts in zip(steps, pieces, strict=True):
            for i, (c, f) in enumerate(parts):
                if c != chip:  # the next chip needs this kernel's input activations before it can start
                    under = chips[chip].events[-1].duration if i > 0 else 0.0
                    links[chip].events.append(self._hop(chip, q * step.needs, under))
                    chip = c
                name = step.name if len(parts) == 1 else f"{step.name}[{i + 1}/{len(parts)}]"
                e = made.get((id(step.kernel), f))
                if e is None:
                    e = made[id(step.kernel), f] = self._event(step.kernel, name, c, f, q)
                else:  # the same costs under this instance's name and chip
                    e = e.copy(name=name, chip=c, bytes=dict(e.bytes), detail=dict(e.detail))
                chips[c].events.append(e)
        return [s for pair in zip(chips, links, strict=True) for s in pair]

    def _walk(self, steps, pieces) -> list[tuple]:
        """``_stages``' walk over kernel slices, which no microbatch size changes: for each slice its chip, its
        (kernel, share) key, kernel, share, and the hop before it (sender, activation bytes, whether the sender's
        last piece is a slice of the same kernel) or None."""
        out, chip = [], pieces[0][0][0] if pieces else 0
        for step, parts in zip(steps, pieces, strict=True):
            kid = id(step.kernel)
            for i, (c, f) in enumerate(parts):
                hop = None
                if c != chip:
                    hop, chip = (chip, step.needs, i > 0), c
                out.append((c, (kid, f), step.kernel, f, hop))
        return out

    def _tally(self, walk: list[tuple], q: float) -> list[spatial.Tally]:
        """``_stages`` as ``spatial.step_time`` reads it (each event's duration, each hop's overlap), the same
        walk (``_walk``) and the same arithmetic; compared for every microbatch size, so no events are made."""
        durations: list[list[float]] = [[] for _ in range(self.n_chips)]  # a chip's compute, in order
        links = [spatial.Tally() for _ in range(self.n_chips)]
        latency, per_link = self.chip.fact("c2c_hop_latency_s"), self._per_link()  # as in ``_hop``
        made: dict = {}  # (kernel, share) -> its duration
        scratch: dict = {}  # the one-cycle rule's note goes nowhere: no event is made
        for c, key, kernel, f, hop in walk:
            if hop is not None:
                src, needs, split = hop
                under = durations[src][-1] if split else 0.0
                t = latency + q * needs / per_link
                links[src].add(t, min(t, under))
            d = made.get(key)
            if d is None:  # kernel_time's duration (the larger of its two terms), held to one cycle
                mxm_s, vec_s, sram_s, _ = self._seconds(kernel, f, q)
                d = made[key] = self.at_least_one_cycle(max(max(mxm_s, vec_s), sram_s), 0.0, scratch)[0]
            durations[c].append(d)
        chips = []
        for ds in durations:  # compute holds its chip, overlaps nothing: held and passed are the same terms
            t = spatial.Tally()
            t.held = t.passed = ds
            chips.append(t)
        return [s for pair in zip(chips, links, strict=True) for s in pair]
