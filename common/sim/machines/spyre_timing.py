"""IBM Spyre policy, stages 5 and 6: the costs of a compiled bundle, the schedule, and the hardware counters.

``SpyrePolicy`` (``common.sim.machines.spyre``: coverage, fusion, layout, work split, matmul tiling and LX plan) takes
these methods from ``SpyreTiming``; the formulas are in that module's docstring ("schedule") and below.
"""
from __future__ import annotations

from common.sim.program import Event, Kernel


class SpyreTiming:
    """Per-op event times with torch-spyre's cost-model constants, the launch/DMA/host timeline, the counters.

    A mixin of ``SpyrePolicy``: it reads the policy's chip, cores, dtype, peak, bandwidths and parallelism."""

    # ---- stage 5: costs --------------------------------------------------------------------------------
    def kernel_time(self, kernel: Kernel, share: float = 1.0):
        """max(padded FLOPs / (peak x k/32 x eff), LPDDR5 time, LX / (LX bw x k/32)) for k cores used, with
        eff = 1 (vector ops), matmul_efficiency_fp16 (1140 of 1536 MAC/ns/core sustained) or, for a batched
        matmul of two activations in the default layout, bmm_default_layout_efficiency (160 of 1536), and
        LPDDR5 time = (R + W) / (150 GB/s) + turnaround x min(R, W) (torch-spyre's cost model). The floor uses
        the whole chip at the datasheet rate and spec LPDDR5 bandwidth."""
        frac = kernel.tiling.get("cores_used", self.cores) / self.units
        lx_bw = self.chip.estimate("lx_bandwidth")
        lp, lx = kernel.bytes.get(self.main_level, 0.0) * share, kernel.bytes.get("LX", 0.0) * share
        eff = self.compute_efficiency(kernel)
        terms = {"compute_s": kernel.padded_flops * share / (self.peak * frac * eff),
                 f"{self.main_level}_s": self.lpddr_time(kernel.tiling, lp, share), "LX_s": lx / (lx_bw * frac)}
        floor = max(kernel.flops * share / self.peak, lp / self.chip.main_memory.bandwidth, lx / lx_bw)
        duration = max(terms.values())
        bound = "compute" if terms["compute_s"] >= duration else "memory"
        return duration, bound, floor, {**terms, "compute_efficiency": eff}

    def compute_efficiency(self, kernel: Kernel) -> float:
        """Sustained fraction of the datasheet MAC rate (module docstring of ``kernel_time``)."""
        mm = [o for o in kernel.ops if o.kind == "matmul" and o.mnk]
        if not mm or self.dtype != "fp16":
            return 1.0
        c, o = self.chip, mm[0]
        if (o.op == "aten.bmm" and not o.param_inputs and o.mnk[0] >= c.fact("bmm_default_min_batch")
                and kernel.tiling.get("cores_used", self.cores) >= c.fact("bmm_default_min_cores")):
            return c.estimate("bmm_default_layout_efficiency")
        return c.estimate("matmul_efficiency_fp16")

    def lpddr_time(self, tiling: dict, nbytes: float, share: float = 1.0) -> float:
        """DMA latency + (R + W) / one-directional bw + turnaround x min(R, W): the shared bus turns around
        between reads and writes, so a balanced copy runs at ~105 GB/s and a read-only stream at ~150 GB/s. An
        op's transfer pays ``lpddr_dma_latency_s`` once (its later tiles are double-buffered under it)."""
        if nbytes <= 0:
            return 0.0
        r, w = tiling.get("lpddr_read"), tiling.get("lpddr_write")
        overlap = min(r, w) * share if r is not None and w is not None else 0.0
        return (self.chip.estimate("lpddr_dma_latency_s") + nbytes / self.bandwidth(self.main_level)
                + overlap * self.chip.estimate("lpddr_turnaround_s_per_byte"))

    def share(self, kernel: Kernel) -> float:
        """Tensor parallel over cards: matmuls and the attention ops between them split by heads/columns."""
        attn = any(o.pattern.startswith("attention") for o in kernel.ops)
        if self.n_chips > 1 and self.parallelism == "tensor" and (kernel.kind == "matmul" or attn):
            return 1.0 / self.n_chips
        return 1.0

    # ---- stage 6: schedule -----------------------------------------------------------------------------
    def schedule(self, kernels, start: float = 0.0):
        launch = self.chip.estimate("kernel_launch_s")
        events, host, cores = [], start, start
        for k in kernels:
            if k.kind == "fallback":
                host = cores = self._host_roundtrip(k, events, max(host, cores))
                continue
            events.append(Event(f"launch {k.name}", "launch", "host", host, launch, bound="scheduling",
                                kernel=k.name, detail={"sdsc_ops": len(k.ops)}))
            host += launch
            t = max(cores, host)
            for i, (op, plan) in enumerate(zip(k.ops, k.tiling["sdsc"], strict=True)):
                label = f"restickify({next(iter(op.in_bytes))})" if plan["sdsc_kind"] == "restickify" else \
                    op.op.replace("aten.", "")
                sub = Kernel(f"{k.name}.{i} {label}", "copy" if plan["sdsc_kind"] == "restickify" else op.kind,
                             [op], {key: v for key, v in plan.items() if key != "reads"},
                             {self.main_level: plan["lpddr_read"] + plan["lpddr_write"], "LX": plan["lx_bytes"]},
                             outputs={op.name: op.out_bytes}, padded_flops=plan["padded_flops"], layer=k.layer)
                share = self.share(sub)
                ev = self.kernel_event(sub, t, "cores", share=share)
                ev.kernel = k.name
                ev.detail.update(lpddr_read=plan["lpddr_read"] * share, lpddr_write=plan["lpddr_write"] * share)
                events.append(ev)
                lp = (plan["lpddr_read"] + plan["lpddr_write"]) * share
                if lp > 0:  # the DMA lane: the transfer overlaps the op's compute (double-buffered)
                    events.append(Event(f"dma {sub.name}", "dma", "dma", t, self.lpddr_time(plan, lp, share),
                                        bound="memory", kernel=k.name,
                                        floor=self.chip.estimate("lpddr_dma_latency_s") +
                                        lp / self.chip.main_memory.bandwidth,
                                        detail={"lpddr_read": ev.detail["lpddr_read"],
                                                "lpddr_write": ev.detail["lpddr_write"]}))
                t = ev.end
                comm = self.allreduce_event(sub, t, "cores")
                if comm:
                    events.append(comm)
                    t = comm.end
            cores = t
        return events

    def _pcie(self, name: str, nbytes: float, t: float, k: Kernel, direction: str) -> Event:
        """One PCIe transfer: the link's hop latency (``common.chips.catalog.links``), then the bytes one way."""
        latency = self.link_latency_s()
        d = latency + nbytes / (self.chip.link_bandwidth / 2)
        return Event(f"{name} {k.name}", "dma", "pcie", t, d, bytes={"PCIe": nbytes}, bound="communication",
                     kernel=k.name, floor=d, detail={"direction": direction, "latency_s": latency})

    def _host_roundtrip(self, k: Kernel, events: list, t: float) -> float:
        """A CPU fallback: wait for the device, copy inputs to the host, run the op there, copy outputs back.
        The host op lasts max(FLOPs / host rate, bytes / host bandwidth) and never less than one cycle."""
        sync = self.chip.estimate("host_sync_s")
        events.append(Event(f"sync {k.name}", "sync", "host", t, sync, bound="scheduling", kernel=k.name,
                            detail={"graph_break": k.tiling["fallback"]}))
        t += sync
        d2h, h2d = k.tiling["d2h_bytes"], k.tiling["h2d_bytes"]
        if d2h:
            events.append(self._pcie("d2h", d2h, t, k, "device->host"))
            t = events[-1].end
        cpu = max(k.flops / self.chip.estimate("host_cpu_flops"), (d2h + h2d) / self.chip.estimate(
            "host_cpu_bytes_per_s"), self.cycle_s())
        events.append(Event(f"host {k.tiling['fallback']}", "host", "host", t, cpu, flops=k.flops,
                            bound="scheduling", kernel=k.name, floor=cpu, detail={"fallback": k.tiling["fallback"]}))
        t += cpu
        if h2d:
            events.append(self._pcie("h2d", h2d, t, k, "host->device"))
            t = events[-1].end
        return t

    # ---- hardware counters -----------------------------------------------------------------------------
    def counters(self, events) -> dict:
        """Totals over all cards, as Spyre's profiler would count them, read back from the events (summed in
        locals, in event order: a step has thousands of events)."""
        lpddr_in = lpddr_out = lx = spill = restick = restick_bytes = fallbacks = pcie = launches = 0
        for e in events:
            kind = e.kind
            if kind == "compute" and e.engine == "cores":
                d = e.detail
                r = d.get("replicas", 1)
                lpddr_in += d["lpddr_read"] * r
                lpddr_out += d["lpddr_write"] * r
                lx += e.bytes.get("LX", 0.0) * r
                spill += d["spill_bytes"] * r
                if d["sdsc_kind"] == "restickify":
                    restick += r
                    restick_bytes += d["out_device_bytes"] * r
            elif kind == "host":
                fallbacks += 1
            elif kind == "launch":
                launches += 1
            pcie += e.bytes.get("PCIe", 0.0)
        return {"lpddr_to_lx_bytes": lpddr_in, "lx_to_lpddr_bytes": lpddr_out, "lx_bytes": lx,
                "lx_spill_bytes": spill, "restickify_count": restick, "restickify_bytes": restick_bytes,
                "fallback_count": fallbacks, "host_roundtrip_bytes": pcie, "bundle_launches": launches}
