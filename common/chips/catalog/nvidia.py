"""NVIDIA GPUs: T4, L4, A100-40GB/80GB, H100-SXM, H200 (dense tensor-core peaks; fp32 = CUDA cores)."""
from __future__ import annotations

from common.chips.types import GB, MB, TB, Estimate, KiB, MemoryLevel, MiB, T, make_chip

CUDA_SMEM = ("CUDA C++ Programming Guide, 'Shared Memory': 32 banks x 4 B per clock per SM = 128 B/clk/SM; "
             "aggregate = 128 B x SMs x boost clock (derived)")
T4_SRC = "NVIDIA T4 datasheet (2019); T4 deviceQuery (gist Terminus-IMRC/5e4b7782c27106dec287050b323cd059)"
A100_SRC = "NVIDIA A100 datasheet (2021) and 'NVIDIA A100 Tensor Core GPU Architecture' whitepaper (2020)"
H100_SRC = "NVIDIA H100 datasheet and 'NVIDIA H100 Tensor Core GPU Architecture' whitepaper (2022)"
H200_SRC = "NVIDIA H200 datasheet (2024): 141 GB HBM3e at 4.8 TB/s; compute as H100 SXM"
# L4 (Ada Lovelace, AD104). The datasheet prints tensor-core peaks with 2:4 sparsity and says the dense ones are
# one half: 242 -> 121 TFLOP/s fp16/bf16, 120 -> 60 tf32, 485 -> 242.5 fp8 and int8. It gives no SM count, clock
# or L2; those come from TechPowerUp's database and are checked against the datasheet's own peaks (below).
L4_SRC = ("NVIDIA L4 Tensor Core GPU datasheet (2023, nvidia.com/en-us/data-center/l4): FP32 30.3 TFLOPS; TF32 120, "
          "FP16/BF16 242, FP8 485 TFLOPS, INT8 485 TOPS with sparsity, 'one-half lower without sparsity'; 24 GB GDDR6 "
          "at 300 GB/s; 72 W; PCIe Gen4 x16 64 GB/s")
L4_UNITS = ("TechPowerUp GPU database, 'NVIDIA L4' (techpowerup.com/gpu-specs): 58 SMs, 232 tensor cores, boost "
            "2040 MHz, 48 MB L2; consistent with the datasheet: 58 SM x 128 FP32 lanes x 2 x 2.04 GHz = 30.3 TFLOP/s "
            "fp32, 232 TC x 128 FMA x 2 x 2.04 GHz = 121 TFLOP/s = 242 / 2 fp16")
L4_SMEM = ("CUDA C++ Programming Guide, 'Technical Specifications per Compute Capability': compute capability 8.9 "
           "(NVIDIA CUDA GPUs list, developer.nvidia.com/cuda-gpus) has at most 100 KB shared memory per SM")
# Compute capability, per part: NVIDIA's 'CUDA GPUs - Compute Capability' list (developer.nvidia.com/cuda-gpus).
# common.measure.devices matches a GPU outside the catalog to a part of its own generation with it.
CC_SRC = "NVIDIA 'CUDA GPUs - Compute Capability' (developer.nvidia.com/cuda-gpus)"


def _gpu_estimates(copy: tuple[float, str] | None, matmul: dict, mma_sync: tuple[float, str] | None = None) -> dict:
    """Launch costs, achievable DRAM bandwidth and achievable tensor-core rate per dtype: what the GPU simulator
    needs beyond the datasheet. CALIBRATION INPUTS: each is a microbenchmark measurement (a copy, a GEMM), never
    an end-to-end serving figure (those are the test figures in benchmarks/fidelity.py)."""
    out = {
        "kernel_launch_s": Estimate(4e-6, "s", "host-side cost of one eager kernel launch through PyTorch "
                                    "(cudaLaunchKernel plus dispatcher): a few microseconds in Nsight traces; "
                                    "order of magnitude, not a vendor figure"),
        "kernel_gap_s": Estimate(1e-6, "s", "device-side gap between dependent kernels replayed from a CUDA "
                                 "graph (grid drain + next grid start), ~1 us; order of magnitude"),
    }
    if copy is not None:  # None: no copy measurement published for the part
        out["achievable_bandwidth_fraction"] = Estimate(copy[0], "fraction of spec DRAM bandwidth", copy[1])
    for dtype, (value, src) in matmul.items():
        out[f"matmul_efficiency_{dtype}"] = Estimate(value, "fraction of the dense tensor-core peak", src)
    if mma_sync is not None:  # a part whose own tensor-core instruction is newer than mma.sync (Hopper: wgmma)
        out["mma_sync_peak_fraction"] = Estimate(mma_sync[0], "fraction of the dense tensor-core peak", mma_sync[1])
        for dtype in ("bf16", "fp16"):  # the source compares 16-bit rates; SM80's 16-bit ceiling is the A100's
            out[f"mma_sync_matmul_efficiency_{dtype}"] = Estimate(
                mma_sync[0] * A100_MM[0], "fraction of the dense tensor-core peak",
                f"derived: an SM80 (mma.sync) GEMM kernel on this part reaches the mma.sync rate x the fraction of "
                f"that rate such kernels reach on their own architecture = {mma_sync[0]:.3f} x {A100_MM[0]} = "
                f"{mma_sync[0] * A100_MM[0]:.3f}. mma.sync rate: {mma_sync[1]}. Own-architecture fraction: the "
                f"A100's measured matmul ceiling (on SM80 mma.sync is the native instruction and its rate the "
                f"datasheet peak): {A100_MM[1]}. Not this part's own ceiling ({matmul[dtype][0]}): that was measured "
                f"on wgmma kernels (a different kernel family); min(rate, own ceiling) would assume an SM80 kernel "
                f"loses nothing to its instruction's rate, which the A100 contradicts")
    return out


# Maximum achievable matmul FLOPS (MAMF): the best mean TFLOP/s over a brute-force search of GEMM shapes
# (torch.matmul, 50 warm-up + 100 timed iterations), per accelerator and dtype, in stas00/ml-engineering.
# URL: https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md
#      #maximum-achievable-matmul-flops-comparison-table
MAMF = ("github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md, section 'Maximum Achievable "
        "Matmul FLOPS comparison table'")
# fp16 and bf16 share the tensor-core datapath and peak on A100/H100/H200: the bf16 row stands for both.
A100_MM = (0.869, f"{MAMF}: A100 SXM bf16 MAMF 271.2 of 312 TFLOP/s = 86.9 % (best shape 1024x10240x5120, "
                  "torch 2.6.0+cu126); fp16 shares the datapath")
H100_MM = (0.803, f"{MAMF}: H100 SXM bf16 MAMF 794.5 of 989 TFLOP/s = 80.3 % (best shape 2048x2048x13312, "
                  "torch 2.7.0+cu126); fp16 shares the datapath")
H100_FP8 = (0.709, f"{MAMF}: H100 SXM fp8 (float8_e4m3fn) MAMF 1402.6 of 1979 TFLOP/s = 70.9 % (1024x9216x14336, "
                   "torch 2.7.0+cu126): fp8 gains 1.77x over the bf16 MAMF, not 2x")
H200_MM = (0.803, f"{MAMF}: the H100 SXM bf16 row (794.5 of 989 = 80.3 %), which the table notes 'H200 is the "
                  "same'; fp16 shares the datapath")
# Hopper's dense tensor-core peak is reached through wgmma (warpgroup, asynchronous); a kernel written for SM80
# issues the older warp-level mma.sync, which the Hopper tensor cores execute at a lower rate. Set on the Hopper
# parts only: on an A100, mma.sync is the native instruction and its rate the datasheet peak.
HOPPER_MMA_SYNC = (2 / 3, "FlashAttention-3 blog post by its authors (J. Shah, G. Bikshandi, Y. Zhang, V. Thakkar, "
                          "P. Ramani, T. Dao), PyTorch blog 2024-07-11, https://pytorch.org/blog/flashattention-3/ "
                          "(pytorch/pytorch.github.io _posts/2024-07-11-flashattention-3.md), note 1: 'Without the "
                          "wgmma instruction, the older mma.sync instruction can only reach about \u2154 the peak "
                          "throughput of Hopper Tensor Cores', citing Luo et al., 'Benchmarking and Dissecting the "
                          "Nvidia Hopper GPU Architecture', https://arxiv.org/abs/2402.13499v1 (H800 "
                          "microbenchmarks; the paper's own table not read here); 'about 2/3' taken as 2/3")
H200_FP8 = (0.734, f"{MAMF}: H200 SXM fp8 MAMF 1453.4 of 1979 TFLOP/s = 73.4 % (1280x4096x12032, torch 2.7.1+cu128)")
# No MAMF row for the T4. NVIDIA developer forum, 'About GPU peak performance' (forums.developer.nvidia.com/t/
# about-gpu-peak-performance/264462): a 4096^3 fp16 cublas GEMM, mean of 100 runs, ~24 of 65 TFLOP/s; NVIDIA's
# reply: the 70 W power cap lowers the clock under sustained matmul, expected behaviour.
T4_MM = (0.37, "NVIDIA developer forum 'About GPU peak performance' (forums.developer.nvidia.com/t/"
               "about-gpu-peak-performance/264462): cublas 4096^3 fp16 GEMM measured at ~24 of 65 TFLOP/s = 37 %, "
               "the 70 W power cap lowering the clock (NVIDIA's answer in the thread)")
# CUTLASS's default tensor-core GEMM configuration for SM80 and later (include/cutlass/gemm/device/
# default_gemm_configuration.h, DefaultGemmConfiguration<OpClassTensorOp, Sm80, ...>): ThreadblockShape
# GemmShape<128, 256, 64>, kStages = 3. K is consumed 64 at a time through a 3-stage cp.async pipeline.
CUTLASS_SM80 = ("NVIDIA/cutlass include/cutlass/gemm/device/default_gemm_configuration.h, DefaultGemmConfiguration"
                "<OpClassTensorOp, Sm80>: ThreadblockShape GemmShape<128, 256, 64>, kStages = 3")
# Turing (SM75) tensor-op default in the same file: GemmShape<128, 256, 32>, kStages = 2.
CUTLASS_SM75 = ("NVIDIA/cutlass include/cutlass/gemm/device/default_gemm_configuration.h, DefaultGemmConfiguration"
                "<OpClassTensorOp, Sm75>: ThreadblockShape GemmShape<128, 256, 32>, kStages = 2")
# Ada (SM89) has no 16-bit default of its own there: it runs the SM80 tensor-op kernels (same cp.async pipeline).
CUTLASS_SM89 = (f"assumption: Ada (SM89) runs the SM80 16-bit tensor-op configuration; {CUTLASS_SM80}")
# The grouped (mixture-of-experts) GEMM computes each expert's rows in thread-block tiles of M rows: a partly
# filled tile costs a whole one. Its 16-bit candidate tiles are the MoE GEMM heuristic's; the largest is the row
# granularity charged (an occupancy heuristic may pick a smaller tile for a small M: not modelled, so the padding
# charged is the most such a kernel pays).
MOE_GEMM_TILES = ("github.com/NVIDIA/FasterTransformer (commit df4a753) src/fastertransformer/kernels/"
                  "cutlass_kernels/cutlass_heuristic.cc, get_candidate_tiles, the "
                  "CUTLASS grouped MoE GEMM that TensorRT-LLM's MoE GEMM runner inherited: 16-bit (not "
                  "weight-only) candidates CtaShape32x128x64, CtaShape64x128x64, CtaShape128x128x64; the largest "
                  "thread-block M, 128 rows, is the granularity charged")


# Measured copy rates, one per part (none borrows another's); re-measure on a GPU with
# common.measure.bench.measure_peaks("cuda") (a large dst.copy_(src)).
H100_COPY = (0.87, f"H100 device-to-device copy measured at ~2.9 TB/s = 0.87 of the 3.35 TB/s in the {H100_SRC}")
# GPUInspector.jl docs, 'Example: Data Bandwidth', on a DGX A100 (40 GB parts, theoretical 1448.4 GiB/s = 1555 GB/s):
# memcpy peak 1225.3 GiB/s -> 1225.3 / 1448.4 = 0.846.
A100_COPY = (0.846, "GPUInspector.jl 'Example: Data Bandwidth' (pc2.github.io/GPUInspector.jl/dev/examples/"
                    "data_bandwidth/), DGX A100: memcpy peak 1225.3 GiB/s of a theoretical 1448.4 GiB/s (1555 GB/s) "
                    "= 0.846")
A100_80_COPY = (0.846, "no published copy measurement for the 80 GB part found: the A100-40GB measurement (0.846, "
                       "GPUInspector.jl on a DGX A100) for the same GA100 memory controllers with HBM2e instead of "
                       "HBM2; an assumption within the A100 family")
# The T4's GDDR6 under a 70 W cap: no public copy benchmark found. A T4 GEMV measured as a calibration
# microbenchmark, not an end-to-end figure) reached 36 % of the 320 GB/s spec; the 70 W power cap that lowers the
# GEMM clock (T4_MM above) is the likely cause.
T4_COPY = (0.36, "a T4 GEMV measured as a calibration microbenchmark reached 36 % of the 320 GB/s GDDR6 spec "
                 "(no public copy benchmark for the T4 found; 70 W power cap); re-measure with "
                 "common.measure.bench.measure_peaks")


def _gpu(name, src, *, peaks, tc, sms, clock, smem_per_sm, l2, dram, dram_bw, dram_name, link, link_name, power,
         copy, matmul, cc, gemm=(64, 3, CUTLASS_SM80), aliases=(), extra_sources=None, mma_sync=None):
    """A GPU record: register file excluded; smem bandwidth derived from the CUDA bank structure. ``copy`` is the
    measured (fraction, source) of DRAM bandwidth (None: no measurement published, the simulator uses the spec),
    ``matmul`` {dtype: (fraction, source)} the measured GEMM ceiling, ``cc`` the CUDA compute capability,
    ``gemm`` (tile K, pipeline stages, source) the GEMM library's default mainloop, ``mma_sync`` the (fraction,
    source) of the dense peak the SM80 mma.sync instruction reaches on a part whose own instruction is newer."""
    tile_k, stages, gemm_src = gemm
    return make_chip(
        estimates=_gpu_estimates(copy, matmul, mma_sync),
        facts={"gemm_tile_k": tile_k, "gemm_stages": stages, "compute_capability": cc, "grouped_gemm_tile_m": 128},
        name=name, vendor="NVIDIA", kind="gpu", peak_flops=peaks,
        matrix_unit=tc, compute_units=sms, compute_unit_name="SMs", clock_hz=clock,
        on_chip=(MemoryLevel("SMEM", smem_per_sm, 128 * sms * clock, count=sms, note="shared memory / L1 per SM"),
                 MemoryLevel("L2", l2, None, note="bandwidth not published by NVIDIA")),
        off_chip=MemoryLevel(dram_name, dram, dram_bw),
        link_bandwidth=link, link_name=link_name, power_w=power, aliases=aliases,
        sources={**{f"peak_flops.{d}": src for d in peaks}, "compute_units": src, "clock_hz": src,
                 "memory.SMEM": f"capacity: {src}; bandwidth: {CUDA_SMEM}", "memory.L2": src,
                 f"memory.{dram_name}": src, "link_bandwidth": src, "power_w": src,
                 "facts.gemm_tile_k": gemm_src, "facts.gemm_stages": gemm_src, "facts.compute_capability": CC_SRC,
                 "facts.grouped_gemm_tile_m": MOE_GEMM_TILES,
                 **(extra_sources or {})},
    )


CHIPS = (
    # ---- NVIDIA GPUs. Dense tensor-core peaks; fp32 is the CUDA-core (non-tensor) rate. ----
    _gpu("t4", T4_SRC,
         peaks={"fp32": 8.1 * T, "fp16": 65 * T, "int8": 130 * T},  # Turing: no tf32/bf16 tensor cores
         tc="320 tensor cores (Turing), 4x4x4 fp16 FMA per clock each", sms=40, clock=1.59e9,
         smem_per_sm=64 * KiB, l2=4 * MiB, dram=16 * GB, dram_bw=320 * GB, dram_name="GDDR6",
         link=2 * 15.75 * GB, link_name="PCIe 3.0 x16 (both directions)", power=70, aliases=("tesla-t4",),
         copy=T4_COPY, matmul={"fp16": T4_MM}, cc=7.5, gemm=(32, 2, CUTLASS_SM75)),
    _gpu("l4", L4_SRC,
         # dense = half the datasheet's sparse figures; fp32 is the CUDA-core rate
         peaks={"fp32": 30.3 * T, "tf32": 60 * T, "bf16": 121 * T, "fp16": 121 * T, "fp8": 242.5 * T,
                "int8": 242.5 * T},
         tc="232 4th-gen tensor cores (Ada), 128 fp16 FMA per clock each", sms=58, clock=2.04e9,
         smem_per_sm=100 * KiB, l2=48 * MB, dram=24 * GB, dram_bw=300 * GB, dram_name="GDDR6",
         link=64 * GB, link_name="PCIe 4.0 x16 (both directions)", power=72, aliases=("nvidia-l4",),
         copy=None, matmul={}, cc=8.9, gemm=(64, 3, CUTLASS_SM89),
         extra_sources={"compute_units": L4_UNITS, "clock_hz": L4_UNITS, "memory.L2": L4_UNITS,
                        "memory.SMEM": f"capacity: {L4_SMEM}; bandwidth: {CUDA_SMEM}"}),
    _gpu("a100-40gb", A100_SRC,
         peaks={"fp32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T, "fp16": 312 * T, "int8": 624 * T},
         tc="432 3rd-gen tensor cores, 256 fp16 FMA per clock each", sms=108, clock=1.41e9,
         smem_per_sm=164 * KiB, l2=40 * MB, dram=40 * GB, dram_bw=1555 * GB, dram_name="HBM",
         link=600 * GB, link_name="NVLink 3 (12 links, both directions)", power=400, aliases=("a100",),
         copy=A100_COPY, matmul={"bf16": A100_MM, "fp16": A100_MM}, cc=8.0),
    _gpu("a100-80gb", A100_SRC,
         peaks={"fp32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T, "fp16": 312 * T, "int8": 624 * T},
         tc="432 3rd-gen tensor cores, 256 fp16 FMA per clock each", sms=108, clock=1.41e9,
         smem_per_sm=164 * KiB, l2=40 * MB, dram=80 * GB, dram_bw=2039 * GB, dram_name="HBM",
         link=600 * GB, link_name="NVLink 3 (12 links, both directions)", power=400,
         copy=A100_80_COPY, matmul={"bf16": A100_MM, "fp16": A100_MM}, cc=8.0),
    _gpu("h100-sxm", H100_SRC,
         # 2:4-sparse figures (2x these) appear on the datasheet and are not used.
         peaks={"fp32": 66.9 * T, "tf32": 494.7 * T, "bf16": 989.4 * T, "fp16": 989.4 * T,
                "fp8": 1978.9 * T, "int8": 1978.9 * T},
         tc="528 4th-gen tensor cores, 512 fp16 FMA per clock each", sms=132, clock=1.83e9,
         smem_per_sm=228 * KiB, l2=50 * MB, dram=80 * GB, dram_bw=3.35 * TB, dram_name="HBM",
         link=900 * GB, link_name="NVLink 4 (18 links, both directions)", power=700, aliases=("h100",),
         copy=H100_COPY, matmul={"bf16": H100_MM, "fp16": H100_MM, "fp8": H100_FP8}, cc=9.0,
         mma_sync=HOPPER_MMA_SYNC,
         extra_sources={"clock_hz": f"derived from the {H100_SRC}: 989.4 TF dense bf16 = 528 TC x 512 FMA x 2 x f, "
                                    "so f = 1.83 GHz"}),
    _gpu("h200", H200_SRC,
         peaks={"fp32": 66.9 * T, "tf32": 494.7 * T, "bf16": 989.4 * T, "fp16": 989.4 * T,
                "fp8": 1978.9 * T, "int8": 1978.9 * T},
         tc="528 4th-gen tensor cores, 512 fp16 FMA per clock each", sms=132, clock=1.83e9,
         smem_per_sm=228 * KiB, l2=50 * MB, dram=141 * GB, dram_bw=4.8 * TB, dram_name="HBM",
         link=900 * GB, link_name="NVLink 4 (18 links, both directions)", power=700, aliases=("h200-sxm",),
         matmul={"bf16": H200_MM, "fp16": H200_MM, "fp8": H200_FP8}, cc=9.0, mma_sync=HOPPER_MMA_SYNC,
         copy=(0.896, "H200 device copy measured through PyTorch at ~4.3 TB/s = 0.896 of the 4.8 TB/s in the "
                     "NVIDIA H200 datasheet (2024)")),
)
