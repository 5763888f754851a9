"""GPU policy: a host launches kernels onto a stream (dynamic scheduling), Inductor-like fusion, tensor cores.

* Fusion: pointwise, reduction and copy ops fuse into one generated kernel (Inductor); matmuls go to cuBLAS
  without epilogues; a bmm -> softmax -> bmm chain becomes one flash-attention kernel (Inductor rewrites that
  pattern to SDPA).
* Tiling: 128x128 thread-block tiles; a matmul's tiles run in waves of one tile per SM, so the last partial
  wave wastes SMs (wave quantisation). Each tile walks K in slabs of ``gemm_tile_k`` through a
  ``gemm_stages``-deep copy pipeline (the GEMM library's default, catalog facts): the first stages - 1 slabs
  are loaded before the first MMA, so a tile costs ceil(K/tk) + stages - 1 slab times for ceil(K/tk) of work:
      wave eff = tiles / (waves x SMs),   K-loop eff = ceil(K/tk) / (ceil(K/tk) + stages - 1),
      padded FLOPs = FLOPs / (wave eff x K-loop eff).
  (1024^3 on an A100: 64 tiles on 108 SMs, 16 slabs + 2 = 0.59 x 0.89.) A causal flash-attention kernel skips
  the 128 x 128 score tiles above the diagonal (``Policy.skip_masked_tiles``): ~half of S^2 in a prefill.
* Grouped expert GEMM (a batched matmul reading a mixture of experts' stacked weights, ``common.sim.moe``): each
  expert is its own problem of M = its token rows, and a thread-block tile computes tm rows whatever M is
  (tm = the chip's ``grouped_gemm_tile_m``, catalog fact: the grouped MoE GEMM's thread-block M), so M is
  quantised onto the tile:  row eff = M / (ceil(M/tm) x tm)  (25 rows on 128-row tiles: 0.20), and
  padded FLOPs are further divided by it. The weight-read floor is the HBM term: each touched expert's weights
  are read once per step whatever M is. Dense GEMMs keep the wave/K-loop rule (cuBLAS picks small-M kernels for
  them; their calibration is the measured matmul ceiling), so only MoE steps change.
* Costs: a tensor-core kernel (matmul or flash attention) runs at most at the measured maximum achievable
  matmul rate, ``matmul_efficiency_<dtype>`` x peak (catalog, per part and dtype: fp8 is its own measurement,
  not 2x bf16); the floor stays FLOPs / datasheet peak. Where no measurement exists (fp32/tf32/int8) the
  datasheet peak is used and the report says so. An expert GEMM whose kernel issues an older MMA instruction
  (``moe_expert_mma``: "mma.sync", a stack's SM80 grouped GEMM on Hopper) runs at that instruction's ceiling on
  the part instead, ``mma_sync_matmul_efficiency_<dtype>`` = mma.sync rate on Hopper (2/3 of the peak) x the
  fraction of that rate SM80 kernels reach on their own architecture (the A100's measured ceiling): 0.579 of
  peak, not 0.803. DRAM runs at the part's own measured copy fraction.
* Schedule: the host spends ``kernel_launch_s`` per launch; a kernel starts when the stream is free *and* it
  has been launched, so short kernels leave the GPU idle (launch-bound). ``graphs=True`` models CUDA graphs:
  one launch, then only the device-side ``kernel_gap_s`` between kernels.
"""
from __future__ import annotations

from common.sim.policy import Policy, reads_experts
from common.sim.program import Event, Kernel

TILE = 128  # thread-block tile edge of the dense GEMMs and flash attention (CUTLASS/cuBLAS default for large GEMMs)


class GPUPolicy(Policy):
    name = "gpu"
    kind = "gpu"
    default_chip = "h100-sxm"
    critical_engine = "stream"
    max_chips = 8  # one NVLink node
    # Numerics as eager CUDA PyTorch: no operand or storage rounding (matmul_operand_dtype = storage_dtype = None).
    precision_sources = {
        "matmul_operand_dtype": "PyTorch docs, CUDA semantics, 'TensorFloat-32 (TF32) on Ampere (and later) "
                                "devices': float32 matmuls run in full fp32 unless allow_tf32 / "
                                "set_float32_matmul_precision('high') is set (off by default)",
        "storage_dtype": "eager semantics: every tensor is stored in its own dtype (no rounding)",
        "accumulation_dtype": "fp32: PyTorch calls cuBLAS with an fp32 compute type for fp16 / bf16 GEMMs "
                              "(aten CUDABlas.cpp, quoted in pytorch/pytorch#123157); the reduced-precision split-K "
                              "reductions allow_fp16_reduced_precision_reduction permits are not modelled",
    }
    # Non-float dtypes the machine computes in (torch names) -> source; None: all of them. A CUDA GPU runs every
    # PyTorch dtype on its CUDA cores (integer, bool, complex64/128: PyTorch ships CUDA kernels for each), so no op
    # leaves it for its dtype. No host link is recorded: an op with no cost rule is a one-line error here.
    computes_in = None
    host_link = None

    def native_dtype(self) -> str:
        return "bf16" if self.chip.supports("bf16") else "fp16"

    def can_fuse(self, kernel: Kernel, op) -> bool:
        if op.pattern and op.pattern == kernel.ops[0].pattern and self.options.get("fuse_attention", True):
            return True
        if kernel.kind in ("matmul", "attention") or not self.options.get("fuse", True):
            return False  # fuse=False: eager PyTorch, one kernel per op (attention's fused kernel aside)
        return op.kind in ("pointwise", "reduction", "copy", "gather")

    def tile(self, kernel: Kernel) -> None:
        sms = self.chip.compute_units
        mm = [o for o in kernel.ops if o.mnk]
        if not mm:
            return super().tile(kernel)
        b, m, k, n = mm[0].mnk
        tiles = b * -(-m // TILE) * -(-n // TILE)
        waves = -(-tiles // sms)
        wave_eff = tiles / (waves * sms)
        tk, stages = int(self.chip.fact("gemm_tile_k")), int(self.chip.fact("gemm_stages"))
        # a GEMM's tile loops over K; a flash-attention tile over the keys (N of Q K^T) in TILE-wide blocks
        slabs = -(-int(k) // tk) if kernel.kind != "attention" else -(-int(n) // TILE)
        k_eff = slabs / (slabs + stages - 1)
        kernel.tiling = {"tile": f"{TILE}x{TILE}x{tk}", "tiles": tiles, "waves": waves, "wave_efficiency": wave_eff,
                         "k_slabs": slabs, "stages": stages, "k_loop_efficiency": k_eff,
                         "efficiency": wave_eff * k_eff}
        tm = self.expert_row_tile()[0] if reads_experts(kernel) else 0  # grouped GEMM: M per expert on tm rows
        row_eff = m / (-(-m // tm) * tm) if tm else 1.0
        if row_eff < 1.0:
            kernel.tiling.update(row_tile=tm, row_tile_efficiency=row_eff, efficiency=wave_eff * k_eff * row_eff)
        kernel.padded_flops = kernel.flops / (wave_eff * k_eff * row_eff)
        self.skip_masked_tiles(kernel, TILE)  # flash attention skips the causal mask's upper tiles

    def expert_row_tile(self) -> tuple[int, str] | None:
        return int(self.chip.fact("grouped_gemm_tile_m")), self.chip.sources["facts.grouped_gemm_tile_m"]

    def matmul_efficiency(self, dtype: str | None = None) -> float:
        """Measured maximum achievable tensor-core rate / datasheet peak for this part and dtype (1.0 if none)."""
        est = self.chip.estimates.get(f"matmul_efficiency_{dtype or self.dtype}")
        return est.value if est else 1.0

    def kernel_time(self, kernel: Kernel, share: float = 1.0):
        """The base max-of-terms rule, the compute term of a tensor-core kernel at the measured matmul ceiling:
        padded FLOPs / (peak x matmul_efficiency); an expert GEMM of an older MMA instruction (``expert_mma``) at
        that instruction's ceiling on the part (``expert_mma_estimate``). The floor (FLOPs / peak) is unchanged."""
        duration, bound, floor, detail = super().kernel_time(kernel, share)
        if kernel.kind in ("matmul", "attention"):
            dt = self.kernel_dtype(kernel)
            est = self.expert_mma_estimate(dt) if self.expert_mma() and reads_experts(kernel) else None
            eff = est.value if est else self.matmul_efficiency(dt)
            detail["compute_s"] /= eff
            detail["matmul_efficiency"] = eff
            mem = max((v for key, v in detail.items() if key.endswith("_s") and key != "compute_s"), default=0.0)
            duration = max(detail["compute_s"], mem)
            bound = "compute" if detail["compute_s"] >= mem else "memory"
        return duration, bound, floor, detail

    def notes(self) -> list[str]:
        out = super().notes()
        est = self.chip.estimates.get(f"matmul_efficiency_{self.dtype}")
        out.append(f"tensor-core kernels at {est.value:.3f} of the {self.dtype} peak: {est.derivation}" if est else
                   f"no measured {self.dtype} matmul ceiling for {self.chip.name}: tensor-core kernels at the "
                   "datasheet peak")
        bw = self.chip.estimates.get("achievable_bandwidth_fraction")
        if bw:
            out.append(f"{self.chip.main_memory.name} at {bw.value:.3f} of spec: {bw.derivation}")
        return out

    def schedule(self, kernels, start: float = 0.0):
        launch = self.options.get("launch_s") or self.chip.estimate("kernel_launch_s")  # a stack's own path
        gap = self.chip.estimate("kernel_gap_s")
        graphs = self.options.get("graphs", False)
        events, host, stream = [], start, start
        if graphs:
            events.append(Event("graph launch", "launch", "host", host, launch, bound="scheduling", floor=0.0))
            host += launch
        for k in kernels:
            if not graphs:
                events.append(Event(f"launch {k.name}", "launch", "host", host, launch, bound="scheduling",
                                     kernel=k.name))
                host += launch
                ready = max(stream, host)
            else:
                ready = max(stream + (gap if events[-1].engine == "stream" else 0.0), host)
            ev = self.kernel_event(k, ready, "stream", share=self.share(k))
            events.append(ev)
            stream = ev.end
            comm = self.allreduce_event(k, stream, "stream")
            if comm:
                events.append(comm)
                stream = comm.end
        return events
