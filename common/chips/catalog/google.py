"""Google TPUs, per chip: v4, v5e, v5p, v6e."""
from __future__ import annotations

from common.chips.types import GB, Estimate, GiB, MemoryLevel, MiB, T, make_chip

JAX_TPU = "jax-ml/jax jax/_src/pallas/mosaic/tpu_info.py (per-TensorCore VMEM, MXU size and count)"
GCLOUD = "cloud.google.com/tpu/docs/{}"
SCALING_BOOK = "jax-ml/scaling-book 'How to Think About TPUs' (tpus.md)"
ICI_LINKS = (f"{SCALING_BOOK}: ICI links a chip to its 4 nearest neighbours (2D torus) on v5e and v6e, to 6 "
             "(3D torus) on v4 and v5p")
# jax-ml/scaling-book @0819a7d, sharding.md 'A note on ICI latency': "Each hop over an ICI link has some intrinsic
# overhead regardless of the data volume. This is typically around 1us"; tpus.md Question 5 uses 1 us per hop on v5e.
ICI_HOP = ("jax-ml/scaling-book sharding.md, 'A note on ICI latency': each hop over an ICI link has an intrinsic "
           "overhead of typically ~1 us regardless of data volume (also tpus.md, Question 5, v5e)")
# jax-ml/scaling-book tpus.md ICI table: TPU v4p one-way 4.5e10 B/s per link, bidi 9e10; v4 has 6 links (3D torus).
V4_ICI = ("jax-ml/scaling-book tpus.md, ICI bandwidth table: TPU v4p 4.5e10 B/s one way (9e10 bidi) per link; "
          "x 6 links (3D torus) = 540 GB/s per chip over both directions")
SUBLANE_PACKING = ("jax-ml/jax tpu_info.py get_sublane_tiling: before TPU7x XLA tiles 16- and 32-bit arrays "
                   "(8,128) and packs 8-bit arrays 32/8 = 4 rows per sublane, i.e. (32,128) tiles")


def _estimates(mxu: int, clock, hbm_bw: float, vmem_ratio: float | None) -> dict:
    """Numbers the TPU simulator needs that Google does not publish (see ``common.sim.machines.tpu``)."""
    out = {"ici_hop_latency_s": Estimate(1e-6, "s", ICI_HOP)}
    if clock:  # no published clock (v5p, v6e): no fill/drain time can be derived
        out["mxu_fill_drain_s"] = Estimate(
            2 * mxu / clock[0], "s",
            f"{SCALING_BOOK}, appendix B: a pipelined matmul pays one initial bubble while weights and activations "
            f"enter the systolic array, then none; in a {mxu}x{mxu} array operands cross {mxu} cells and partial "
            f"sums {mxu} more before the first result leaves, so ~2 x {mxu} = {2 * mxu} cycles per matmul fusion, "
            f"at the {clock[0] / 1e9:.2f} GHz clock")
    if vmem_ratio:
        out["vmem_bandwidth"] = Estimate(
            vmem_ratio * hbm_bw, "bytes/s",
            f"{SCALING_BOOK}: 'VMEM bandwidth is around 22x higher than HBM bandwidth' (stated for TPU v5e); "
            f"{vmem_ratio:g} x {hbm_bw / 1e9:g} GB/s")
    return out


def _tpu(version, *, bf16, int8, fp8=None, tcs, mxus, mxu, clock, vmem, hbm, hbm_bw, ici, links, power=None,
         cmem=None, vmem_ratio=None, doc):
    src = GCLOUD.format(doc)
    peaks = {"bf16": bf16, "int8": int8, **({"fp8": fp8} if fp8 else {})}
    levels = [MemoryLevel("VMEM", vmem, None, count=tcs, note="vector memory per TensorCore (software-managed)")]
    if cmem:
        levels.append(MemoryLevel("CMEM", cmem, None, note="common memory shared by the TensorCores"))
    sources = {**{f"peak_flops.{d}": src for d in peaks}, "compute_units": f"{src}; {JAX_TPU}",
               "memory.VMEM": JAX_TPU, "memory.CMEM": JAX_TPU, "memory.HBM": src,
               "link_bandwidth": V4_ICI if version == "v4" else src}
    if clock:
        sources["clock_hz"] = clock[1]
    return make_chip(
        name=f"tpu-{version}", vendor="Google", kind="tpu", peak_flops=peaks,
        matrix_unit=f"{mxus} MXU x {mxu}x{mxu} systolic per TensorCore, bf16 in / fp32 accumulate",
        compute_units=tcs, compute_unit_name="TensorCores", clock_hz=clock[0] if clock else None,
        on_chip=tuple(levels), off_chip=MemoryLevel("HBM", hbm, hbm_bw),
        link_bandwidth=ici, link_name="ICI (bidirectional, per chip)", power_w=power,
        facts={"mxu_dim": mxu, "mxus_per_core": mxus, "sublanes": 8, "lanes": 128, "ici_links": links,
               "sublane_packing_8bit": 4},
        sources={**sources, **{f"facts.{k}": JAX_TPU + " (NUM_SUBLANES=8, NUM_LANES=128: the (8,128) tile)"
                               for k in ("mxu_dim", "mxus_per_core", "sublanes", "lanes")},
                 "facts.ici_links": ICI_LINKS, "facts.sublane_packing_8bit": SUBLANE_PACKING},
        estimates=_estimates(mxu, clock, hbm_bw, vmem_ratio),
        aliases=(f"v{version[1:]}" if version.startswith("v") else version, f"tpu{version}"),
    )


CHIPS = (
    # ---- Google TPUs, per chip. ----
    _tpu("v4", bf16=275 * T, int8=275 * T, tcs=2, mxus=4, mxu=128,
         clock=(1.05e9, "Jouppi et al., 'TPU v4', ISCA 2023 (1050 MHz); = 275 TF / (8 MXU x 128^2 x 2)"),
         vmem=16 * MiB, cmem=128 * MiB, hbm=32 * GiB, hbm_bw=1200 * GB, ici=6 * 2 * 4.5e10, links=6, doc="v4"),
    _tpu("v5e", bf16=197 * T, int8=393 * T, tcs=1, mxus=4, mxu=128,
         clock=(1.5e9, "jax-ml/scaling-book 'tpus.md' (~1.5 GHz); = 197 TF / (4 MXU x 128^2 x 2)"),
         vmem=128 * MiB, hbm=16 * GB, hbm_bw=819 * GB, ici=400 * GB, links=4, vmem_ratio=22, doc="v5e"),
    _tpu("v5p", bf16=459 * T, int8=918 * T, tcs=2, mxus=4, mxu=128, clock=None,
         vmem=64 * MiB, hbm=95 * GB, hbm_bw=2765 * GB, ici=4800e9 / 8, links=6, doc="v5p-training"),
    _tpu("v6e", bf16=918 * T, int8=1836 * T, fp8=918 * T, tcs=1, mxus=2, mxu=256, clock=None,
         vmem=128 * MiB, hbm=32 * GB, hbm_bw=1638 * GB, ici=800 * GB, links=4, doc="v6e"),
)
