"""The ``Policy`` interface every architecture implements, with the defaults most of them share.

A policy holds the chip record (from the catalog), the chip count and dtype, and answers the pipeline's
questions. Costs follow one rule everywhere (``kernel_time``): a kernel takes at least
``max(FLOPs / peak, bytes_L / bandwidth_L for every level L)`` - the roofline floor - and tiling waste
(padded FLOPs) or derated bandwidth can only make it longer. Fixed overheads are separate, named events.
"""
from __future__ import annotations

from common.chips import DTYPE_BYTES, Chip, canonical_dtype, get_chip
from common.errors import DFAError
from common.graph.costs import causal_fraction
from common.sim.args import moe_expert_mma_name
from common.sim.program import Event, Kernel


def is_expert_op(op) -> bool:
    """An op that reads a mixture of experts' stacked (E, ., .) weights (``common.models.moe`` names them
    ``...experts.<w>``)."""
    return any(".experts." in p for p in op.params)


def reads_experts(kernel: Kernel) -> bool:
    """A grouped expert GEMM: a batched matmul whose weight is a mixture of experts' stacked (E, ., .) tensor."""
    return any(o.mnk and o.mnk[0] > 1 and is_expert_op(o) for o in kernel.ops)


class Policy:
    name = "reference"
    kind = ""  # catalog kind of the chips this policy targets
    default_chip = ""
    critical_engine = "device"  # the engine whose busy/idle time is the step time
    # Op coverage. ``native=None`` means every aten op runs natively.
    native: set[str] | None = None
    decomposed: dict[str, tuple[str, ...]] = {}
    fallback: set[str] = set()
    row_parallel = ("o_proj", "down_proj", "out_proj", "fc2", "c_proj")  # tensor-parallel all-reduce points
    # Numerics when the backend really runs a model (torch.compile): matmul operands are rounded to
    # ``matmul_operand_dtype`` and accumulated in fp32; every op's output is rounded to ``storage_dtype``.
    # None = the model's own dtype (eager semantics). Values are catalog dtype names ("bf16", "fp16").
    matmul_operand_dtype: str | None = None
    storage_dtype: str | None = None
    accumulation_dtype = "fp32"  # what matmuls accumulate in; other ops compute in the model's dtype, then store
    # Where each rule above comes from, per backend: a published source, or "estimate: <reasoning>".
    precision_sources: dict[str, str] = {}
    # Documented tolerance of the compiled model vs eager fp32 (max |diff| / max |eager|) on the reference models.
    rtol_vs_eager = 1e-5

    def __init__(self, chip: str | Chip | None = None, n_chips: int | None = None, dtype: str | None = None,
                 **options):
        self.chip = get_chip(chip or self.default_chip)
        if self.kind and self.chip.kind != self.kind:
            raise DFAError(f"backend {self.name!r} simulates {self.kind} chips; {self.chip.name!r} is a "
                           f"{self.chip.kind} (try one of: {', '.join(self.chip_choices())})")
        self.dtype = canonical_dtype(dtype or self.native_dtype())
        self.peak, self.peak_is_estimate = self.chip.compute_peak(self.dtype)  # raises for unsupported dtypes
        if n_chips is not None and n_chips < 1:
            raise DFAError(f"chips must be >= 1, got {n_chips}")
        self.n_chips = n_chips or 1
        self.options = options
        if options.get("moe_expert_dtype") is not None:  # a dtype the chip has, else one line naming its dtypes
            self.chip.compute_peak(canonical_dtype(options["moe_expert_dtype"]))
        moe_expert_mma_name(options.get("moe_expert_mma"))  # a known instruction, else one line naming them

    # ---- identity -------------------------------------------------------------------------------------
    @classmethod
    def chip_choices(cls) -> list[str]:
        from common.chips import chips_of_kind
        return [c.name for c in chips_of_kind(cls.kind)]

    def native_dtype(self) -> str:
        """The 16-bit type the chip computes in natively (bf16 where supported, else fp16)."""
        return "bf16" if self.chip.supports("bf16") else "fp16"

    # ---- mixture-of-experts layers (``common.sim.moe``) --------------------------------------------------
    # why a machine without a row tile pads none (said in the report's notes)
    expert_rows_unpadded = "no published row granularity for it"

    def expert_row_tile(self) -> tuple[int, str] | None:
        """(rows, source): the row granularity of this machine's grouped expert GEMM, onto which each expert's
        token rows are padded; None where no source gives one (no padding; the report notes say so)."""
        return None

    def expert_dtype(self) -> str:
        """The dtype the expert GEMMs of MoE layers run in: the ``moe_expert_dtype`` option (a serving stack's
        ``Stack.moe_expert_dtype``, e.g. a release whose MoE kernels had no fp8 path) or the step's own."""
        return canonical_dtype(self.options.get("moe_expert_dtype") or self.dtype)

    def kernel_dtype(self, kernel: Kernel) -> str:
        """The dtype ``kernel`` computes in (checked only when an expert dtype is set: ``kernel_time`` is hot)."""
        if not self.options.get("moe_expert_dtype"):
            return self.dtype
        return self.expert_dtype() if reads_experts(kernel) else self.dtype

    def expert_mma(self) -> str | None:
        """The older MMA instruction the expert GEMM kernels issue (``moe_expert_mma``, e.g. a stack's "mma.sync"),
        None for the chip's own ("native", the default)."""
        mma = self.options.get("moe_expert_mma")
        return None if mma in (None, "native") else mma

    def expert_mma_estimate(self, dtype: str):
        """The chip's ``<moe_expert_mma>_matmul_efficiency_<dtype>`` (value and derivation), or None: no older
        instruction, or a chip on which it is the native one (an A100 runs mma.sync at its own ceiling)."""
        mma = self.expert_mma()
        return self.chip.estimates.get(f"{mma.replace('.', '_')}_matmul_efficiency_{dtype}") if mma else None

    def expert_weight_bytes(self, kernel: Kernel) -> float:
        """Bytes of stacked expert weights ``kernel`` reads (its parameter inputs whose op reads ``.experts.``)."""
        names = {p for o in kernel.ops if is_expert_op(o) for p in o.param_inputs}
        return sum(b for p, b in kernel.inputs.items() if p in names)

    def widen_expert_weights(self, kernel: Kernel) -> None:
        """After ``place``: an expert GEMM in a wider ``expert_dtype`` than the step's reads its expert weights at
        that width from main memory: + weight bytes x (width_e / width - 1)."""
        ratio = DTYPE_BYTES[self.kernel_dtype(kernel)] / DTYPE_BYTES[self.dtype] - 1
        if ratio and self.main_level in kernel.bytes:
            kernel.bytes[self.main_level] += self.expert_weight_bytes(kernel) * ratio

    def notes(self) -> list[str]:
        out = []
        if self.peak_is_estimate:
            est = self.chip.estimates[f"dense_{self.dtype}_flops"]
            out.append(f"{self.chip.name} {self.dtype} peak is an estimate: {est.derivation}")
        return out

    # ---- stage 1: decompose ----------------------------------------------------------------------------
    def coverage(self, op: str) -> tuple[str, tuple[str, ...]]:
        if op in self.fallback:
            return "fallback", ()
        if op in self.decomposed:
            return "decomposed", self.decomposed[op]
        if self.native is None or op in self.native:
            return "native", ()
        return "fallback", ()

    # ---- stage 2: fuse ---------------------------------------------------------------------------------
    def can_fuse(self, kernel: Kernel, op) -> bool:
        return False

    # ---- stage 3: tile / layout ------------------------------------------------------------------------
    def tile(self, kernel: Kernel) -> None:
        kernel.padded_flops = kernel.flops
        kernel.tiling = {"efficiency": 1.0}

    # ---- stage 4: place --------------------------------------------------------------------------------
    @property
    def main_level(self) -> str:
        return self.chip.main_memory.name

    def place(self, kernel: Kernel) -> None:
        """Default: a kernel streams its inputs and outputs from main memory; its intermediates stay on chip."""
        external = sum(kernel.inputs.values()) + sum(kernel.outputs.values())
        internal = sum(o.out_bytes for o in kernel.ops) - sum(kernel.outputs.values())
        kernel.bytes = {self.main_level: external}
        if internal > 0 and self.chip.on_chip:
            kernel.bytes[self.chip.on_chip[0].name] = 2 * internal  # written once, read once

    # ---- stage 5: costs --------------------------------------------------------------------------------
    def bandwidth(self, level: str) -> float | None:
        bw = self.chip.level(level).bandwidth
        if bw and level == self.main_level:
            bw *= self.achievable_bandwidth_fraction()
        return bw

    def achievable_bandwidth_fraction(self) -> float:
        est = self.chip.estimates.get("achievable_bandwidth_fraction")
        return est.value if est else 1.0

    # (start, t) of the queries of an LLM step (prefill: 0, seq; decode: seq, 1); t = 0: not a causal LLM step
    causal: tuple[int, int] = (0, 0)

    def note_causal(self, workload) -> None:
        """An LLM step's attention is causal: remember where its queries sit (``fit`` calls this)."""
        if getattr(workload, "config", None) is not None and workload.phase in ("prefill", "decode"):
            self.causal = (0, workload.seq) if workload.phase == "prefill" else (workload.seq, 1)

    def skip_masked_tiles(self, kernel: Kernel, block: int) -> None:
        """A fused causal attention kernel (flash attention) skips the block x block score tiles the mask hides:
        its useful FLOPs are the dense count x the kept-pair fraction, its computed (padded) FLOPs the dense
        padded count x the fraction of tiles holding a kept pair (``common.graph.costs.causal_fraction``). Prefill
        from 0 keeps (S + 1) / 2S of S^2; a decode token keeps all of its row."""
        start, t = self.causal
        if kernel.kind != "attention" or t == 0:
            return
        f, ft = causal_fraction(start, t), causal_fraction(start, t, block)
        if f >= 1.0:
            return
        padded = kernel.padded_flops
        for o in kernel.ops:
            o.flops *= f
        kernel.padded_flops = padded * ft
        kernel.tiling.update(causal_fraction=f, causal_tile_fraction=ft,
                             efficiency=kernel.flops / kernel.padded_flops)

    def kernel_time(self, kernel: Kernel, share: float = 1.0) -> tuple[float, str, float, dict]:
        """(duration, bound, floor, detail) of one kernel doing ``share`` of its work on one chip. An expert GEMM
        run in another dtype than the step's (``expert_dtype``) computes at that dtype's peak and reads its
        expert weights at that dtype's width (``widen_expert_weights``)."""
        flops = kernel.flops * share
        dt = self.kernel_dtype(kernel)
        peak = self.peak if dt == self.dtype else self.chip.compute_peak(dt)[0]
        compute = kernel.padded_flops * share / peak
        floor = flops / peak
        mem = {}
        for level, nbytes in kernel.bytes.items():
            spec_bw = self.chip.level(level).bandwidth
            bw = self.bandwidth(level)
            if bw:
                mem[level] = nbytes * share / bw
                floor = max(floor, nbytes * share / (spec_bw or bw))  # estimated levels: the estimate is the floor
        slowest = max(mem, key=mem.get) if mem else None
        duration = max([compute, *mem.values()])
        bound = "compute" if not mem or compute >= mem[slowest] else "memory"
        return duration, bound, floor, {"compute_s": compute, **{f"{k}_s": v for k, v in mem.items()}}

    def cycle_s(self) -> float:
        """One clock cycle of the chip's engines: the catalog's clock, else its estimate (Cerebras, Spyre)."""
        clock = self.chip.clock_hz or (self.chip.estimate("clock_hz") if "clock_hz" in self.chip.estimates else None)
        return 1.0 / clock if clock else 0.0

    def at_least_one_cycle(self, duration: float, floor: float, detail: dict) -> tuple[float, float]:
        """No kernel finishes in less than one cycle of its engine, however little it does (a 1-element add
        came out at 5 ps on a 1.5 GHz TPU); latencies a policy names come on top, in its kernel_time."""
        cycle = self.cycle_s()
        if duration < cycle:
            detail["one_cycle_s"] = cycle
            return cycle, max(floor, cycle)
        return duration, floor

    def kernel_event(self, kernel: Kernel, start: float, engine: str, chip: int = 0, share: float = 1.0) -> Event:
        duration, bound, floor, detail = self.kernel_time(kernel, share)
        duration, floor = self.at_least_one_cycle(duration, floor, detail)
        detail.update(ops=kernel.op_names, **{k: v for k, v in kernel.tiling.items() if not isinstance(v, dict)})
        if self.parallelism == "tensor" and self.n_chips > 1:
            detail["replicas"] = self.n_chips  # every chip runs this event on its shard
        return Event(kernel.name, "compute", engine, start, duration, chip, kernel.flops * share,
                     {k: v * share for k, v in kernel.bytes.items()}, bound, kernel.name, floor, detail)

    # ---- stage 6: schedule -----------------------------------------------------------------------------
    def schedule(self, kernels: list[Kernel], start: float = 0.0) -> list[Event]:
        """Default: a static in-order schedule on one engine; each kernel starts when the previous ends."""
        events, t = [], start
        for k in kernels:
            ev = self.kernel_event(k, t, self.critical_engine)
            events.append(ev)
            t = ev.end
        return events

    # ---- the whole run: chip count, segments x repeats, tensor parallelism ----------------------------
    max_chips = 1
    parallelism = "tensor"  # "tensor" (split every layer) or "pipeline" (layers to chips in order)

    def fit(self, workload) -> None:
        """Pick (or check) the chip count: the fewest chips whose main memory holds weights + KV cache."""
        self.note_causal(workload)
        capacity = self.chip.main_memory.total_capacity
        resident = workload.resident_bytes + self.extra_expert_bytes(workload)
        need = max(1, -(-int(resident) // int(capacity)))
        if self.parallelism == "tensor":  # tensor parallelism splits heads: keep a power of two
            need = 1 << (need - 1).bit_length()
        self.apply_chip_count(workload, need, resident)

    def extra_expert_bytes(self, workload) -> float:
        """Resident bytes the experts add when stored at ``expert_dtype`` rather than the step's dtype."""
        moe = workload.meta.get("moe") if getattr(workload, "meta", None) else None
        ratio = DTYPE_BYTES[self.expert_dtype()] / DTYPE_BYTES[self.dtype] - 1
        return moe["resident_expert_bytes"] * ratio if moe and ratio else 0.0

    def apply_chip_count(self, workload, need: int, total: float, what: str = "chips") -> None:
        """Check ``need`` chips (holding ``total`` bytes) against the limit and any --chips, then set n_chips."""
        capacity = self.chip.main_memory.total_capacity
        if need > self.max_chips:
            raise DFAError(f"{workload.name} needs {total / 1e9:.1f} GB for weights + KV cache; "
                           f"{self.max_chips}x {self.chip.name} hold {self.max_chips * capacity / 1e9:.1f} GB "
                           f"(max {what} for {self.name}: {self.max_chips})")
        if self.options.get("explicit_chips"):
            if self.n_chips < need:
                raise DFAError(f"{workload.name} needs {need}x {self.chip.name} for weights + KV cache "
                               f"({total / 1e9:.1f} GB); --chips {self.n_chips} is too few")
            if self.n_chips > self.max_chips:
                raise DFAError(f"--chips {self.n_chips} exceeds the {self.name} maximum of {self.max_chips}")
        else:
            self.n_chips = need
        self._check_head_split(workload)

    def _check_head_split(self, workload) -> None:
        """Tensor parallelism gives each chip whole attention heads: the degree must divide the query heads,
        and divide the K/V heads or be a multiple of them (each K/V head then replicated, as vLLM does)."""
        config = getattr(workload, "config", None)
        if config is None or self.parallelism != "tensor" or self.n_chips == 1:
            return

        def splits(n: int) -> bool:
            return config.n_heads % n == 0 and (config.n_kv_heads % n == 0 or n % config.n_kv_heads == 0)

        if not splits(self.n_chips):
            valid = [n for n in range(1, self.max_chips + 1) if splits(n)]
            raise DFAError(f"--chips {self.n_chips}: tensor parallelism cannot split {config.name}'s "
                           f"{config.n_heads} query / {config.n_kv_heads} K/V heads {self.n_chips} ways; "
                           f"valid for {self.name}: {', '.join(map(str, valid))}")

    def share(self, kernel: Kernel) -> float:
        """Fraction of a kernel one chip does under tensor parallelism: matmuls and attention split n ways."""
        if self.n_chips > 1 and self.parallelism == "tensor" and kernel.kind in ("matmul", "attention"):
            return 1.0 / self.n_chips
        return 1.0

    def link_latency_s(self) -> float:
        """One hop over the chip's link (``common.chips.catalog.links``): every transfer pays it before its bytes."""
        from common.chips.catalog.links import hop_latency
        return hop_latency(self.chip).value

    def allreduce_event(self, kernel: Kernel, start: float, engine: str) -> Event | None:
        """Ring all-reduce after a row-parallel matmul: 2 (n-1)/n x bytes over one direction of the links, and
        2 (n-1) ring steps, each paying one hop's latency (NCCL's model: latency x steps + bytes / bandwidth)."""
        n = self.n_chips
        if n == 1 or self.parallelism != "tensor" or not any(
                any(p in name for p in self.row_parallel) for o in kernel.ops for name in o.params):
            return None
        if not self.chip.link_bandwidth:
            raise DFAError(f"{self.chip.name} has no published chip-to-chip bandwidth; use --chips 1")
        nbytes = sum(kernel.outputs.values())
        wire = 2 * (n - 1) / n * nbytes
        hop = self.link_latency_s()
        wire_s = wire / (self.chip.link_bandwidth / 2)
        duration = 2 * (n - 1) * hop + wire_s
        return Event(f"allreduce({kernel.name})", "comm", engine, start, duration, 0, 0.0, {"link": wire},
                     "communication", kernel.name, hop + wire_s,
                     {"algorithm": "ring", "chips": n, "replicas": n, "steps": 2 * (n - 1), "hop_latency_s": hop,
                      "wire_s": wire_s})

    def run(self, programs, workload) -> list[Event]:
        """Segments in order, each repeated; a segment's schedule is computed once and shifted per repeat."""
        events, t, seen = [], 0.0, {}  # seen: repeats of each segment name so far (layer kinds count on)
        for program, segment in zip(programs, workload.segments, strict=True):
            once = self.schedule(program.kernels, 0.0)
            span = max((e.end for e in once), default=0.0)
            first = seen.get(segment.name, 0)
            seen[segment.name] = first + segment.repeat
            numbered = segment.repeat > 1 or _kinds(workload, segment.name) > 1
            for r in range(first, first + segment.repeat):
                for e in once:
                    events.append(Event(f"L{r}.{e.name}" if numbered else e.name, e.kind, e.engine,
                                        t + e.start, e.duration, e.chip, e.flops, e.bytes, e.bound, e.kernel,
                                        e.floor, e.detail))
                t += span
        return events

    def counters(self, events) -> dict:
        """Hardware-counter-like totals; Spyre overrides with its LPDDR<->LX traffic counters."""
        return {}


def _kinds(workload, name: str) -> int:
    """How many segments are called ``name`` (a model with sliding-window or dense layers has several "layer")."""
    return sum(1 for s in workload.segments if s.name == name)
