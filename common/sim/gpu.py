"""GPU policy: a host launches kernels onto a stream (dynamic scheduling), Inductor-like fusion, tensor cores.

* Fusion: pointwise, reduction and copy ops fuse into one generated kernel (Inductor); matmuls go to cuBLAS
  without epilogues; a bmm -> softmax -> bmm chain becomes one flash-attention kernel (Inductor rewrites that
  pattern to SDPA).
* Tiling: 128x128 thread-block tiles; a matmul's tiles run in waves of one tile per SM, so the last partial
  wave wastes SMs (wave quantisation).
* Schedule: the host spends ``kernel_launch_s`` per launch; a kernel starts when the stream is free *and* it
  has been launched, so short kernels leave the GPU idle (launch-bound). ``graphs=True`` models CUDA graphs:
  one launch, then only the device-side ``kernel_gap_s`` between kernels.
"""
from __future__ import annotations

from common.sim.policy import Policy
from common.sim.program import Event, Kernel

TILE = 128  # thread-block tile edge (CUTLASS/cuBLAS default for large GEMMs)


class GPUPolicy(Policy):
    name = "gpu"
    kind = "gpu"
    default_chip = "h100-sxm"
    critical_engine = "stream"
    max_chips = 8  # one NVLink node

    def native_dtype(self) -> str:
        return "bf16" if self.chip.supports("bf16") else "fp16"

    def can_fuse(self, kernel: Kernel, op) -> bool:
        if op.pattern and op.pattern == kernel.ops[0].pattern and self.options.get("fuse_attention", True):
            return True
        if kernel.kind in ("matmul", "attention"):
            return False
        return op.kind in ("pointwise", "reduction", "copy", "gather")

    def tile(self, kernel: Kernel) -> None:
        sms = self.chip.compute_units
        mm = [o for o in kernel.ops if o.mnk]
        if not mm:
            return super().tile(kernel)
        b, m, _, n = mm[0].mnk
        tiles = b * -(-m // TILE) * -(-n // TILE)
        waves = -(-tiles // sms)
        eff = tiles / (waves * sms)
        kernel.tiling = {"tile": f"{TILE}x{TILE}", "tiles": tiles, "waves": waves, "efficiency": eff}
        kernel.padded_flops = kernel.flops / eff

    def schedule(self, kernels, start: float = 0.0):
        launch = self.chip.estimate("kernel_launch_s")
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
