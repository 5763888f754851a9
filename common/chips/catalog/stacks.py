"""Serving stacks (software generations): what a published tokens/s figure paid beyond the hardware.

A hardware-only simulation cannot match two figures measured on the same chips a few weeks apart (Cerebras,
Llama-3.1-70B: 450 tok/s in Aug 2024, 2,100 in Oct 2024 after rewritten kernels, asynchronous wafer I/O and
speculative decoding). A ``Stack`` names the software a figure assumes, each of its costs a sourced term:

* ``step_host_s``        fixed host time per decode step (scheduling, sampling, detokenising) the device waits
                         for;
* ``step_host_fraction`` host time per step as a fraction of the device step (where a profile reports shares);
* ``kv_reread``          decode attention that reads each KV head once per query head sharing it (a grouped-
                         query model on a kernel with one thread block per query head): the extra
                         (q heads / kv heads - 1) x KV-cache bytes per step, times the fraction of them that
                         reach memory (1.0: no cache reuse, the bound);
* ``speculative``        speculative decoding: a draft model proposes ``draft_tokens`` tokens, the target
                         verifies them in one step; ``acceptance`` = accepted / drafted tokens, so a round yields
                         1 + acceptance x draft_tokens tokens (``common.sim.serving``).

All are CALIBRATION INPUTS (profiles, release notes, microbenchmarks), never fitted to the end-to-end test
figures in benchmarks/fidelity.py. A term nobody publishes is absent and the report says so:

* ``not_published``  first-order costs the stack surely pays that nobody publishes. They are not modelled and
                     never fitted; the stack's result is then a BOUND (``bound``: "upper" = the simulated speed
                     is at most what the stack reaches), with ``bound_reason`` saying why;
* ``second_order``   unpublished costs judged small against the step, each with the reason (noted only);
* ``deployment``     (chips, source) of the largest published deployment, where no model's own chip count is
                     published: a model then gets a band from the fewest chips that hold it to that many;
* ``options``        simulator options the stack implies, as (name, value) pairs: ``graphs`` (decode replayed
                     from a CUDA graph: one launch per step), ``fuse`` (False: eager PyTorch, one kernel per op
                     beside the fused attention kernel);
* ``launch_s``       host time per launched kernel where the stack's launch path costs more than the chip's
                     ``kernel_launch_s`` (eager Python);
* ``ttft_wait_steps`` decode steps a new request waits on average before its prefill runs (a scheduler that
                     runs several decode steps per scheduling round); charged to time to first token;
* ``Speculative.models``  the targets the vendor says it speculates for; any other model gets the hardware
                     figure, with the speculative one as an explicit what-if (``common.sim.serving``);
* ``moe``            how the stack runs a mixture-of-experts layer (``MoEPath``), applied to the expert GEMMs of
                     MoE layers only: ``expert_dtype``, the dtype its expert GEMMs run in where the stack's MoE
                     kernels lack the step's dtype (TensorRT-LLM v0.9 had no fp8 Mixtral path: its expert GEMMs
                     ran in fp16 while the rest of the engine ran fp8; they then compute at that dtype's peak and
                     read 2 bytes per expert weight, ``common.sim.policy``); ``parallel``, the stack's expert
                     placement on several chips ("tensor": every expert's GEMMs split over the chips, no
                     all-to-all; "expert": experts spread over the chips, two all-to-alls a layer;
                     ``common.sim.moe``); ``expert_mma``, the tensor-core instruction its expert GEMM kernels
                     issue where older than the chip's own ("mma.sync": TensorRT-LLM v0.9 ran its SM80 grouped
                     GEMM on Hopper; they then run at the chip's ``mma_sync_matmul_efficiency_<dtype>``,
                     ``common.sim.machines.gpu``). A caller's own ``moe_expert_dtype`` / ``moe_parallel`` /
                     ``moe_expert_mma`` wins.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.chips.types import Estimate


@dataclass(frozen=True)
class Speculative:
    draft_model: str
    draft_tokens: int
    acceptance: float  # accepted / drafted tokens
    source: str
    models: tuple[str, ...] = ()  # targets the vendor says it speculates for (elsewhere: a what-if only)


@dataclass(frozen=True)
class MoEPath:
    """How a stack runs a mixture-of-experts layer; None fields: the simulator's default."""
    expert_dtype: str | None  # the dtype of its expert GEMMs where not the step's (e.g. fp16 under an fp8 engine)
    parallel: str | None  # "expert" | "tensor" on several chips
    source: str
    expert_mma: str | None = None  # "mma.sync": its expert GEMMs are SM80 kernels, whatever the chip's newer MMA


@dataclass(frozen=True)
class Stack:
    name: str
    backend: str  # the simulator backend (chip kind) it serves on
    released: str  # when this generation's figures were published
    description: str
    step_host_s: Estimate | None = None
    step_host_fraction: Estimate | None = None
    kv_reread: Estimate | None = None
    speculative: Speculative | None = None
    not_published: tuple[str, ...] = ()  # first-order costs this stack surely pays that nobody has published
    second_order: tuple[str, ...] = ()  # unpublished costs judged small, each with its reason
    bound: str | None = None  # "upper" where not_published makes the simulated speed an upper bound
    bound_reason: str = ""
    deployment: tuple[int, str] | None = None  # (chips, source) of the largest published deployment
    options: tuple[tuple[str, object], ...] = ()  # simulator options the stack implies (graphs, fuse)
    launch_s: Estimate | None = None  # host time per kernel launch, where the stack's path is not the chip's
    ttft_wait_steps: Estimate | None = None  # mean decode steps a new request waits before its prefill
    moe: MoEPath | None = None  # how its mixture-of-experts layers run (expert GEMM dtype, expert placement)


VLLM_818 = ("vllm-project/vllm PR #818 (2023-08-21, 'decouple tokenizer from the main scheduling thread'): "
            "A100-40GB x TP4, Llama-70B, 500 requests: model execution 183.7 s; sampler ~8.47 %, tokenizer "
            "~1.27 %, other scheduling ~1.12 % on top")
JETSTREAM_122 = ("AI-Hypercomputer/JetStream PR #122 (2024-07-26, 'Performance optimized interleaved mode'): "
                 "'Optimized TPU duty cycle (largest gap < 4ms)', llama2-70b JetStream MaxText server on v5e-8")
CEREBRAS_OCT = ("Cerebras blog 'Cerebras Inference now 3x faster: Llama3.1-70B breaks 2,100 tokens/s' (2024-10-24): "
                "rewritten MatMul / reduce / broadcast kernels, wafer I/O asynchronous to compute, speculative "
                "decoding ('a small model and large model in tandem'); draft model and acceptance not published")
# TensorRT-LLM before v0.8 decoded with the masked multi-head attention kernel alone; XQA, its MQA/GQA generation
# kernel, came in v0.8 (docs/source/blogs/XQA-kernel.md).
TRT_MMHA = ("NVIDIA TensorRT-LLM cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/"
            "decoderMaskedMultiheadAttentionTemplate.h: grid (query head, sequence); each block reads the cache of "
            "KV head hi_kv = hi / (num_heads / num_kv_heads). Charged with no L2 reuse (the bound: a profile of the "
            "L2 hit rate is not published). For scale, not fitted to: docs/source/blogs/XQA-kernel.md (2024-01, "
            "v0.8a) measures Llama-70B on 1 x H200, 128 in / 2048 out, at 1,227 tok/s/GPU without XQA and 2,941 "
            "with it (2.4x)")
TRT_KV_REREAD = Estimate(1.0, "fraction of re-reads reaching HBM", TRT_MMHA)  # v0.5 and v0.6 alike
TRT_SECOND_ORDER = ("per-step host time of the C++ gptSessionBenchmark runtime: second order, a C++ loop over a "
                    "prebuilt engine; vLLM's Python scheduler with sampling and detokenising, the heaviest host "
                    "path profiled here (vllm-2023-08), costs 10.9 % of a step",
                    "the L2 hit rate of the masked MHA kernel's re-reads: charged at its bound (none hit L2), so "
                    "the unknown can only make a step shorter")
# TensorRT-LLM v0.8 / v0.9: XQA, the MQA/GQA generation kernel, reads each KV head once for the query heads
# sharing it; the v0.9 tables were measured with it where it helped (and Llama-2-7B has no grouped heads).
TRT09_XQA = ("NVIDIA TensorRT-LLM docs/source/performance.md at v0.9.0 (https://github.com/NVIDIA/TensorRT-LLM/blob/"
             "v0.9.0/docs/source/performance.md), 'Benchmarking per Model': the GQA (XQA) kernels are experimental "
             "and off by default (TRTLLM_ENABLE_XQA=1), and the tables' runs enabled them where they helped; "
             "docs/source/blogs/XQA-kernel.md (2024-01, v0.8): XQA is the generation-phase kernel for MQA/GQA, "
             "Llama-70B on 1 x H200 at 2.4x the masked-MHA throughput - no KV head re-read per query head is "
             "charged")
TRT09_SESSION = ("the same performance.md at v0.9.0: every table row is gptSessionBenchmark (static batching, "
                 "'--paged_kv_cache disable', no '--enable_cuda_graph' in its commands), H100/H200 rows with FP8 "
                 "weights and FP8 KV cache ('quant_algo': 'FP8', 'kv_cache_quant_algo': 'FP8'); the low-latency "
                 "note says in-flight-batching latency numbers are 'soon' to come, so in-flight batching is not "
                 "what these figures measured")
# TensorRT-LLM v0.9 and Mixtral: FP8 for Mixtral came one release later, so its MoE layers ran in 16-bit.
TRT09_MOE_DTYPE = (
    "NVIDIA TensorRT-LLM v0.10.0 release notes (https://github.com/NVIDIA/TensorRT-LLM/releases/tag/v0.10.0), "
    "Key Features: 'Added FP8 quantization support for Mixtral.'; the v0.9.0 README change log "
    "(https://github.com/NVIDIA/TensorRT-LLM/blob/v0.9.0/README.md, 'Versions 0.9.0') names Mixtral only under "
    "'OOTB functionality support' and the MoE router; the TensorRT-LLM thread 'When will FP8 be available for "
    "Mixtral?' (https://github.com/NVIDIA/TensorRT-LLM/issues/1229): a maintainer, 2024-03-05, 'Mixtral with "
    "FP8 is almost done for now, will be released in version 0.9.0', and a user, 2024-04-16, 'I still can't "
    "export an fp8 quantized version of Mixtral 8x7B in version 0.9.0' (quantize.py fails). So the v0.9 "
    "Mixtral figures' expert GEMMs ran in 16-bit (the examples' --dtype float16): an inference from these "
    "records, the v0.9 MoE plugin source itself not read here; the rest of the engine as the tables' header says (fp8)")
# TensorRT-LLM v0.9's MoE GEMM runner sends Hopper to its Ampere kernels: CUTLASS 2.x grouped GEMM, mma.sync.
TRT09_MOE_SM80 = (
    "NVIDIA TensorRT-LLM cpp/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_template.h at commit "
    "250d9c293d5edbc2a45c20775b3150b1eb68b364 (the commit whose docs/source/performance.md carries the v0.9.0 "
    "tables used here), MoeGemmRunner::dispatchToArch: 'else if (sm_ >= 90) { // TODO Update the arch to Sm90 once "
    "CUTLASS hopper specialisations are available' then dispatchMoeGemmToCutlass<T, WeightType, "
    "cutlass::arch::Sm80, EpilogueTag>, i.e. the CUTLASS 2.x DefaultGemmGrouped kernel for Sm80, whose 16-bit "
    "tensor-op MMA is mma.sync (CUTLASS include/cutlass/arch/mma_sm80.h, 'mma.sync.aligned.m16n8k16')")
TRT_MOE_TP = ("NVIDIA TensorRT-LLM examples/mixtral/README.md, 'Parallelism Modes': 'In TP mode (default) expert "
              "weight matrices are sliced evenly between all GPUs, so that all GPUs work together to calculate the "
              "result for each expert'; expert parallelism only with '--moe_tp_mode 1' (default 2, tensor "
              "parallel); the v0.9.0 performance.md rows say TP 2 and no EP")
TRT09_SECOND_ORDER = (TRT_SECOND_ORDER[0], f"structure of the figures this stack is used for: {TRT09_SESSION}",
                      "XQA's own efficiency against the HBM floor: not published per shape; the blog's 2.4x is an "
                      "end-to-end ratio, not a kernel profile (a scale only, not fitted to)")
# devquasar.com 'Speculative decoding tradeoffs: GPU with large models (Llama 70B + 8B)': llama.cpp, Llama-3-70B
# Q4_K_M target, Llama-3-8B Q4_K_M draft, --draft 8, greedy: accepted rate 58.68 % (the best configuration).
# A Groq engineer's public comment (Hacker News, Feb 2024, quoted in news.ycombinator.com item 39445809): the demo
# deployment used 568 GroqChips in total. Groq has published no per-model chip count.
GROQ_568 = ("a Groq engineer's Hacker News comment (Feb 2024), quoted in news.ycombinator.com item 39445809: 568 "
            "GroqChips in total for the public demo; second-hand and not a Groq publication - the largest deployment "
            "size on public record; no per-model chip count is published")
CEREBRAS_AUG_BOUND = ("the simulated wafer runs the launch kernels at the PEs' full estimated rate and its I/O in "
                      "step with them; the October 2024 post says the launch kernels used 'only a fraction of its "
                      "peak bandwidth, compute and IO', a fraction it does not give - so the simulated speed is an "
                      "upper bound, not an estimate")
LLAMA_SPEC = ("devquasar.com 'Speculative Decoding tradeoffs GPU with large models (Llama 70B & 8B)': llama.cpp, "
              "Llama-3-70B target, Llama-3-8B draft (Q4_K_M), 8 draft tokens, accepted rate 58.68 % - the only "
              "published 70B/8B Llama acceptance found; Cerebras's own draft and acceptance are not published")

# ---- GPU stacks of 2023-2024 that learners compare: eager PyTorch, gpt-fast, vLLM >= 0.6, SGLang ----
# Eager PyTorch (transformers' generate(), or any Python decode loop): one kernel per aten op (SDPA's attention is
# one kernel), each launched from Python, no CUDA graph.
EAGER_OP = ("github.com/pytorch/pytorch/issues/41383 ('Large overhead (7 microseconds) for PyTorch operation', 2020): "
            "a maintainer (ngimel) measures x*x at ~2 us a call, about half of it Python argument parsing (the C++ "
            "call ~1 us); on top of the chip's kernel_launch_s (cudaLaunchKernel plus dispatcher)")
HF_NOT_PUBLISHED = ("Python time per nn.Module call and per generate() step (logits processors, stopping "
                    "criteria, the cache update) on top of each op's dispatch; nobody publishes it for a GPU",)
HF_BOUND = ("the host time charged per launched op is the dispatcher's and Python's argument parsing only; the "
            "nn.Module and generate() Python around each op is unpublished and can only add time, so the "
            "simulated speed is an upper bound")
GPT_FAST = ("pytorch-labs/gpt-fast README and 'Accelerating Generative AI with PyTorch II: GPT, Fast' (PyTorch "
            "blog, 2023-11-30): decode_one_token compiled with torch.compile(mode='reduce-overhead', "
            "fullgraph=True), a static KV cache, sampling inside the compiled step: one CUDA-graph replay per "
            "token")
GPT_FAST_SECOND = ("the Python loop around the compiled step (one call and one index update per token): one "
                   "Python call per token against a multi-millisecond step",)
VLLM_060 = ("vLLM blog 'vLLM v0.6.0: 2.7x Throughput Improvement and 5x Latency Reduction' (2024-09-05): "
            "profiled on v0.5.3, Llama-3-8B, 1 x H100: HTTP API server 33 %, scheduling and input preparation 29 %, "
            "GPU execution 38 % of the time; v0.6.0 moves the API server to its own process (PR #6883), schedules "
            "once per --num-scheduler-steps n steps (PR #7000; n = 10 in the blog's benchmarks) and processes "
            "outputs asynchronously (PR #7049)")
VLLM_GRAPHS = ("vLLM engine arguments, --enforce-eager: off by default, so decode batches run from captured CUDA "
               "graphs (eager only where a batch size has no graph)")
SGLANG_030 = ("sgl-project/sglang benchmark/benchmark_vllm_060/README.md (SGLang v0.3.0, 2024-09): launched "
              "with --enable-torch-compile (torch.compile + CUDA graphs for decode)")
SGLANG_NOT_PUBLISHED = ("the per-step CPU scheduling time of v0.3 (batch scheduling, memory allocation, radix "
                        "cache): the v0.4 post (lmsys.org, 2024-12-04) says an unoptimised engine 'can spend as "
                        "much as half of its time on CPU overhead' and that v0.4 overlaps it, but gives no figure "
                        "for v0.3",)

STACKS = (
    Stack("vllm-2023-08", "gpu", "2023-08", "vLLM with sampling and detokenising on the scheduling thread",
          step_host_fraction=Estimate(0.1086, "fraction of the device step", f"{VLLM_818}: 8.47 + 1.27 + 1.12 "
                                      "= 10.86 % of model execution, paid serially each step")),
    Stack("trtllm-v0.5", "gpu", "2023-10", "TensorRT-LLM v0.5 (gptSessionBenchmark, static batching), masked MHA "
          "decode attention (no XQA)", kv_reread=TRT_KV_REREAD,
          second_order=TRT_SECOND_ORDER),
    Stack("trtllm-v0.6", "gpu", "2023-12", "TensorRT-LLM v0.6.1 (gptSessionBenchmark, static batching), masked MHA "
          "decode attention (no XQA)", kv_reread=TRT_KV_REREAD,
          second_order=TRT_SECOND_ORDER),
    Stack("trtllm-v0.9", "gpu", "2024-04", "TensorRT-LLM v0.9.0 (gptSessionBenchmark, static batching), XQA "
          "generation kernel for grouped-query models (each KV head read once per group), FP8 weights and KV cache "
          "on Hopper", second_order=TRT09_SECOND_ORDER + (f"KV re-reads: none charged: {TRT09_XQA}",),
          moe=MoEPath("fp16", "tensor", f"expert GEMMs in fp16: {TRT09_MOE_DTYPE}; tensor-parallel experts: "
                      f"{TRT_MOE_TP}; SM80 (mma.sync) expert kernels on Hopper: {TRT09_MOE_SM80}",
                      expert_mma="mma.sync")),
    Stack("jetstream-2024-07", "tpu", "2024-07", "JetStream interleaved server (prefill and generate on one slice), "
          "as profiled on the MaxText engine",
          step_host_s=Estimate(4e-3, "s", f"{JETSTREAM_122}: the TPU waits for the host up to 4 ms between steps "
                               "after that optimisation; charged at the bound (an upper bound, no mean published)")),
    Stack("groq-2024", "lpu", "2024", "GroqCloud (deterministic static schedule)",
          not_published=("per-token host / sampling cost (API server, sampling, detokenising)",
                         "the chip count of each model's deployment"),
          bound="upper", bound_reason="no host, sampling or detokenising time is charged per token (Groq "
          "publishes none), so the simulated speed at a given chip count is an upper bound",
          deployment=(568, GROQ_568)),
    Stack("cerebras-2024-08", "wse", "2024-08-27", "Cerebras Inference at launch ('Introducing Cerebras "
          "Inference', https://cerebras.ai/blog/introducing-cerebras-inference-ai-at-instant-speed): one token per "
          "target step, wafer I/O synchronous with compute",
          not_published=("the launch kernels' utilisation ('only a fraction of its peak bandwidth, compute and IO' "
                         "in the October post)",),
          bound="upper", bound_reason=CEREBRAS_AUG_BOUND),
    Stack("cerebras-2024-10", "wse", "2024-10-24", "Cerebras Inference after the October 2024 release: rewritten "
          "kernels, asynchronous wafer I/O, speculative decoding",
          speculative=Speculative("llama-3.1-8b", 8, 0.5868, f"{CEREBRAS_OCT}; draft tokens and acceptance from "
                                  f"{LLAMA_SPEC}; the draft model is assumed to be Llama-3.1-8B",
                                  models=("llama-3.1-70b",))),  # the post's speculative result is its 70B one
    Stack("hf-generate", "gpu", "2024", "Hugging Face transformers generate() in eager PyTorch (the labs' own "
          "stack): one kernel per op, launched from Python, no CUDA graph, SDPA attention",
          options=(("graphs", False), ("fuse", False)),
          launch_s=Estimate(4e-6 + 1e-6, "s per launched op", f"{EAGER_OP}: 4 us (catalog kernel_launch_s) + 1 us "
                            "of Python argument parsing"),
          not_published=HF_NOT_PUBLISHED, bound="upper", bound_reason=HF_BOUND),
    Stack("gpt-fast", "gpu", "2023-11", "gpt-fast: torch.compile(mode='reduce-overhead'), Inductor-fused kernels "
          "replayed from a CUDA graph, static KV cache", options=(("graphs", True),),
          second_order=GPT_FAST_SECOND + (f"source of the stack's structure: {GPT_FAST}",)),
    Stack("vllm-v0.6", "gpu", "2024-09", "vLLM v0.6.0 with --num-scheduler-steps 10: API server in its own process, "
          "multi-step scheduling, asynchronous output processing, CUDA-graph decode",
          options=(("graphs", True),),
          step_host_fraction=Estimate(0.29 / 0.38 / 10, "fraction of the device step",
                                      f"{VLLM_060}: scheduling = 29 / 38 = 0.763 x the GPU time of a step, paid once "
                                      "per 10 steps (the API server and output processing now overlap the GPU); "
                                      f"{VLLM_GRAPHS}"),
          ttft_wait_steps=Estimate((10 - 1) / 2, "decode steps", f"{VLLM_060}: a request arriving during a "
                                   "10-step round waits for the round to end before its prefill is scheduled: "
                                   "(10 - 1) / 2 = 4.5 steps on average for arrivals spread evenly over a round")),
    Stack("sglang-v0.3", "gpu", "2024-09", "SGLang v0.3.0 with --enable-torch-compile (CUDA-graph decode), before "
          "v0.4's overlapped scheduler", options=(("graphs", True),),
          not_published=SGLANG_NOT_PUBLISHED, bound="upper",
          bound_reason="no per-step CPU scheduling time is charged (none published for v0.3), so the simulated "
          f"speed is an upper bound; {SGLANG_030}"),
)
