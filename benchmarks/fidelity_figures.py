"""The published end-to-end figures benchmarks/fidelity.py compares the simulators with (TEST FIGURES only).

Each figure names its source (URL, title, date) and its exact conditions (model, precision, batch, sequence
lengths, chips, software). None of these numbers is used by common/sim or common/catalog: the calibration inputs
(matmul ceilings, copy bandwidths, stack host costs) live in common/catalog with their own sources. Conventions:

* ``serving_tps``: a static batch served end to end = one prefill of ``prompt`` tokens, then ``output`` decode
  steps at the mean context prompt + output/2: tokens/s = batch x output / (t_prefill + output x t_decode),
  divided by the chip count where the source reports per GPU.
* ``prefill_tps``: a first-token latency L for a prompt of S tokens is compared as S / L (prompt tokens/s), so
  sim / published > 1 still means the simulator is too fast.
* A figure measured on software with no ``Stack`` in common/chips/catalog/stacks.py is simulated on the hardware
  alone (stack None) and says so in ``measured_on``. TensorRT-LLM rows run on the stack of their release
  (``trtllm-v0.5``, ``trtllm-v0.6``, ``trtllm-v0.9``).
* A figure whose stack names a first-order cost nobody publishes (``Stack.not_published``: ``groq-2024``,
  ``cerebras-2024-08``) is checked as a bound by benchmarks/fidelity.py, not against the ratio goal; the Groq
  figures' band comes from ``simulate_served`` (``report.band``: fewest chips to the largest deployment on record).
* ``proxy``: a figure measured on other software that stands in for its stack (the PyTorch blog's hand-written
  eager loop on ``hf-generate``) says why; every stack also needs a figure measured on its own software
  (tests/test_stack_records.py), e.g. hf-generate's transformers ``generate()`` rows from optimum's benchmark.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.sim import simulate_op
from common.sim.lab_figures import hf_generate_simulated
from common.sim.serving import simulate_served

REF = "shared/reference/accelerators.md"
TRT06 = ("NVIDIA TensorRT-LLM docs/source/performance.md, 'Performance of TensorRT-LLM', v0.6.1 (2023-12), "
         "https://github.com/NVIDIA/TensorRT-LLM/blob/v0.6.1/docs/source/performance.md")
TRT_LAT = f"{TRT06}, 'Low Latency' tables (marked there as TensorRT-LLM v0.5 data, 2023-10)"
TRT_SW = "TensorRT-LLM v0.6.1 gptSessionBenchmark (static batching); simulated on trtllm-v0.6"
H200_BLOG = ("NVIDIA TensorRT-LLM docs/source/blogs/H200launch.md, 'H200 achieves nearly 12,000 tokens/sec on "
             "Llama2-13B with TensorRT-LLM' (2023-11, TensorRT-LLM v0.5.0, TensorRT 9.1.0.4, 'preliminary'), "
             "https://github.com/NVIDIA/TensorRT-LLM/blob/main/docs/source/blogs/H200launch.md")
H200_SW = "TensorRT-LLM v0.5.0 (TensorRT 9.1.0.4), static batch; simulated on trtllm-v0.5"
FA3 = ("Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao, 'FlashAttention-3: Fast and Accurate Attention with Asynchrony "
       "and Low-precision' (2024-07), https://arxiv.org/abs/2407.08608, forward-speed figure 'head dim 128 "
       "(H100 80GB SXM5)', non-causal, B x S = 16k, H x D = 2048")
TRT_LAT_SW = "TensorRT-LLM v0.5 gptSessionBenchmark, batch 1; simulated on trtllm-v0.5"
JSPT = ("AI-Hypercomputer/jetstream-pytorch benchmarks/summary.md, 'Benchmark results of various models' "
        "(rows dated 2024-03-28 and 2024-04-24), "
        "https://github.com/AI-Hypercomputer/jetstream-pytorch/blob/main/benchmarks/summary.md")
JSPT_SW = ("JetStream PyTorch server + JetStream benchmark_serving.py on ShareGPT (lengths are the caps), cache "
           "2048; simulated on jetstream-2024-07 (the only JetStream stack; the rows predate it by 3-4 months)")
GROQ_TPU = ("TechPowerUp news on the Groq LPU (2024-02), citing the LLMPerf leaderboard, "
            "https://techpowerup.com/news-tags/Processor?page=3")
TRT09 = ("NVIDIA TensorRT-LLM docs/source/performance.md, 'Performance of TensorRT-LLM' ('All data was generated "
         "using version 0.9.0'; 'Peak Throughput' and 'Low Latency' tables, H100 GPUs (FP8)), "
         "https://github.com/NVIDIA/TensorRT-LLM/blob/v0.9.0/docs/source/performance.md")
TRT09_SW = "TensorRT-LLM v0.9.0 gptSessionBenchmark (static batching); simulated on trtllm-v0.9"
TRT09_DENSE_SW = "TensorRT-LLM v0.9.0 gptSessionBenchmark (static batching, XQA where it helped); on trtllm-v0.9"
CEREBRAS_AUG = ("Cerebras blog, 'Introducing Cerebras Inference: AI at Instant Speed' (2024-08-27), "
                "https://cerebras.ai/blog/introducing-cerebras-inference-ai-at-instant-speed")
CEREBRAS_OCT = ("Cerebras blog, 'Cerebras Inference now 3x faster: Llama3.1-70B breaks 2,100 tokens/s' "
                "(2024-10-24), cerebras.ai blog (the exact URL not verified here)")
GPT_FAST = ("pytorch-labs/gpt-fast README.md, benchmark tables (2023-12; A100-80GB power-limited to 330 W, batch 1, "
            "prompt of 5 tokens), https://github.com/pytorch-labs/gpt-fast")
PT_BLOG = ("'Accelerating Generative AI with PyTorch II: GPT, Fast' (PyTorch blog, 2023-11-30), 'Starting Point "
           "(25.5 tok/s)': a simple eager implementation, Llama-2-7B, A100-80GB power-limited to 330 W, batch 1, "
           "'heavily CPU overhead bound', https://pytorch.org/blog/accelerating-generative-ai-2/")
SGL_VLLM = ("sgl-project/sglang benchmark/benchmark_vllm_060/README.md (2024-09), 'Online benchmark results', "
            "Llama 3.1 8B Instruct, 1 x A100 80G, ShareGPT, 1200 prompts at 4 requests/s, "
            "https://github.com/sgl-project/sglang/tree/main/benchmark/benchmark_vllm_060")
# ShareGPT as vLLM's blog samples it (2024-09-05): 202 input and 179 output tokens on average. Concurrency from
# Little's law: users in flight = request rate x median end-to-end latency (4/s x 1.56 s = 6.3 for SGLang, 4/s x
# 1.69 s = 6.8 for vLLM); the decode context is the mean, 202 + 179 / 2 = 292.
SHAREGPT_IN, SHAREGPT_CTX = 202, 292
# transformers generate() itself, in eager PyTorch: the unquantized rows of optimum's GPTQ benchmark as of
# 2024-02-15 (the README's earlier versions ran transformers 4.32 / 4.35, whose Llama had no SDPA path).
OPTIMUM_BENCH = ("huggingface/optimum tests/benchmark/README.md, 'GPTQ benchmark', as committed in 4e98776 "
                 "(2024-02-15, PR #1695 'Add end-to-end Marlin benchmark'): 'AutoGPTQ 0.7.0, PyTorch 2.2.0, "
                 "bitsandbytes 0.42.0, transformers 4.37.2', 'a single NVIDIA A100-SXM4-80GB GPU'; rows with "
                 "quantization None = meta-llama/Llama-2-13b-chat-hf in fp16, https://github.com/huggingface/"
                 "optimum/blob/4e987762cdd33c237a63538c181b1ccfa4d7648a/tests/benchmark/README.md")
OPTIMUM_SW = ("transformers 4.37.2 model.generate() (benchmark_gptq.py at the same commit: from_pretrained("
              "torch_dtype=torch.float16), no attn_implementation, so SDPA, the default from 4.36 on torch >= 2.1.1; "
              "the default DynamicCache, which torch.cat's each layer's whole K and V every step, a copy the simulated "
              "in-place cache write does not charge (it can only add time); greedy, min_new_tokens = max_new_tokens; "
              "no torch.compile, no static cache; timed with CUDA events around generate(), mean of the batches "
              "after a warmup)")


@dataclass
class Figure:

    name: str
    published: float
    unit: str
    source: str  # URL + title + date
    conditions: str  # model, precision, batch, sequence lengths, chips
    measured_on: str  # the software stack the figure was measured on
    backend: str
    stack: str | None  # the catalog Stack it is simulated on (None: hardware alone)
    simulate: callable
    proxy: str = ""  # why a figure measured on other software stands in for ``stack`` (empty: measured on it)


def decode_tps(model, backend, chip, *, stack, batch=1, seq=1024, chips=None, dtype=None):
    r = simulate_served(model, backend, stack=stack, phase="decode", batch=batch, seq=seq, chip=chip, chips=chips,
                        dtype=dtype)
    return r.tokens_per_s_per_user, r


def serving_tps(model, backend, chip, *, stack, batch, prompt, output, chips=None, dtype=None, per_chip=False):
    """Output tokens/s of a static batch: one prefill, then ``output`` decode steps at mean context."""
    pre = simulate_served(model, backend, stack=stack, phase="prefill", batch=batch, seq=prompt, chip=chip,
                          chips=chips, dtype=dtype)
    dec = simulate_served(model, backend, stack=stack, phase="decode", batch=batch, seq=prompt + output // 2,
                          chip=chip, chips=chips, dtype=dtype)
    tps = batch * output / (pre.time_s + output * dec.time_s)
    return (tps / dec.chips if per_chip else tps), dec


def prefill_tps(model, backend, chip, *, stack, prompt, chips=None, dtype=None, batch=1):
    """Prompt tokens / time to first token (``report.ttft_s``: the prefill plus any scheduling wait)."""
    r = simulate_served(model, backend, stack=stack, phase="prefill", batch=batch, seq=prompt, chip=chip,
                        chips=chips, dtype=dtype)
    return prompt / r.ttft_s, r


def tpot_tps(model, backend, chip, *, stack, batch, seq, chips=None, dtype=None):
    """1 / time per output token (``report.tpot_s``): tokens/s per user, so sim / pub > 1 is too fast."""
    r = simulate_served(model, backend, stack=stack, phase="decode", batch=batch, seq=seq, chip=chip, chips=chips,
                        dtype=dtype)
    return 1.0 / r.tpot_s, r


def attention_tflops(chip, shape=(16, 16, 8192, 128)):
    r = simulate_op("sdpa", shape, "gpu", chip=chip, dtype="fp16")
    return r.achieved_flops / 1e12, r


GPUS = {"h100-sxm": "H100 SXM 80GB", "a100-80gb": "A100 80GB", "h200": "H200 SXM 141GB"}


def _trt(model, chip, dtype, batch, prompt, output, published, chips=1, per_gpu=None, source=TRT06, sw=TRT_SW,
         stack="trtllm-v0.6", version=""):
    """A TensorRT-LLM static-batch row; ``per_gpu``: the source reports tok/s per GPU (default: when TP > 1);
    ``version``: named in the figure's name where two releases publish the same configuration."""
    per_gpu = chips > 1 if per_gpu is None else per_gpu
    tp = f", TP{chips}" if chips > 1 else ""
    gpu = GPUS[chip]
    name = f"TensorRT-LLM{version}, {model} {dtype}, batch {batch}, {prompt} in / {output} out, {gpu}{tp}"
    cond = (f"{model} (LLaMA {'7B' if '7b' in model else '70B'} in the source), {dtype} weights"
            f"{' and KV cache' if dtype == 'fp8' else ''}, batch {batch}, input {prompt}, output {output}, "
            f"{chips} x {gpu}, output tok/s{' per GPU' if per_gpu else ''}")
    return Figure(name, published, "tok/s" + ("/GPU" if per_gpu else ""), source, cond, sw, "gpu", stack,
                  lambda: serving_tps(model, "gpu", chip, stack=stack, batch=batch, prompt=prompt, output=output,
                                      chips=chips, dtype=dtype, per_chip=per_gpu))


def _trt_ttft(model, chip, dtype, prompt, ms, chips=1, source=TRT_LAT, sw=TRT_LAT_SW, stack="trtllm-v0.5",
              version=""):
    gpu = GPUS[chip]
    tp = f", TP{chips}" if chips > 1 else ""
    name = f"TensorRT-LLM{version} first token {ms} ms, {model} {dtype}, batch 1, {prompt} in, {gpu}{tp}"
    cond = f"{model}, {dtype}, batch 1, input {prompt}, 1 output token, {chips} x {gpu}; compared as {prompt}/{ms} ms"
    return Figure(name, round(prompt / (ms / 1e3)), "prompt tok/s", source, cond, sw, "gpu", stack,
                  lambda: prefill_tps(model, "gpu", chip, stack=stack, prompt=prompt, chips=chips, dtype=dtype))


def _trt09():
    """Dense rows of the v0.9.0 tables (H100 and H200, FP8 weights and KV cache), on the trtllm-v0.9 stack."""
    kw = dict(source=TRT09, sw=TRT09_DENSE_SW, stack="trtllm-v0.9", version=" v0.9")
    rows = [("llama-2-7b", "h100-sxm", 896, 128, 128, 19854, 1), ("llama-2-7b", "h100-sxm", 120, 128, 2048, 6944, 1),
            ("llama-2-7b", "h100-sxm", 84, 2048, 128, 2163, 1), ("llama-2-7b", "h100-sxm", 56, 2048, 2048, 2826, 1),
            ("llama-2-70b", "h100-sxm", 1024, 128, 128, 3214, 2), ("llama-2-70b", "h100-sxm", 96, 2048, 128, 346, 2),
            ("llama-2-70b", "h100-sxm", 64, 2048, 2048, 1011, 2), ("llama-2-70b", "h200", 1024, 128, 128, 3989, 1),
            ("llama-2-70b", "h200", 64, 2048, 2048, 1458, 1)]
    return [_trt(m, chip, "fp8", b, i, o, pub, chips=tp, per_gpu=True, **kw) for m, chip, b, i, o, pub, tp in rows] + [
        _trt_ttft("llama-2-7b", "h100-sxm", "fp8", 2048, 30.8, **kw),
        _trt_ttft("llama-2-70b", "h100-sxm", "fp8", 2048, 85.1, chips=8, **kw)]


# Not a figure here: the JetStream-MaxText recipe for Llama-2-7B (AI-Hypercomputer/tpu-recipes,
# inference/v5e/JetStream-Maxtext/Llama2-7B/README.md: 3,061.78 output tok/s, 995 OpenOrca requests, per-device batch
# 11, bf16) prints its result as an example ("something like"), the same block appears verbatim in the Trillium
# recipe, and no chip count is given; v5e-4 and v5e-8 would both hold it, so picking one would be fitting.
def _jetstream(model, label, dtype, batch, published):
    cond = (f"{model} ({label} in the source), {dtype} weights and KV cache, batch {batch}, max 1024 in / 1024 out, "
            "TPU v5e-8 (8 chips)")
    return Figure(f"JetStream PyTorch, {label} {dtype}, batch {batch}, 1k in / 1k out, TPU v5e-8", published,
                  "tok/s", JSPT, cond, JSPT_SW, "tpu", "jetstream-2024-07",
                  lambda: serving_tps(model, "tpu", "tpu-v5e", stack="jetstream-2024-07", batch=batch, prompt=1024,
                                      output=1024, chips=8, dtype=dtype))


def _groq(name, model, seq, published, cond, source=f"{REF} (Groq)"):
    return Figure(name, published, "tok/s", source, cond, "GroqCloud (2024)", "lpu", "groq-2024",
                  lambda: decode_tps(model, "lpu", "groq-lpu", stack="groq-2024", seq=seq))


def _cerebras(name, model, published, stack, source):
    cond = f"{model}, 16-bit weights, one user (batch 1), context 1024 assumed (not published), CS-3 systems"
    return Figure(name, published, "tok/s", source, cond, f"Cerebras Inference ({stack})", "wse", stack,
                  lambda: decode_tps(model, "wse", "wse-3", stack=stack))


def _trt_moe():
    """Mixtral-8x7B (mixture of experts) rows of the TensorRT-LLM v0.9 tables, H100 FP8, TP2. The stack's MoE path
    (``Stack.moe``) runs the expert GEMMs in fp16 (v0.9 had no FP8 Mixtral) and splits every expert over both
    GPUs (TensorRT-LLM's default MoE tensor parallelism) as SM80 mma.sync kernels (v0.9 dispatched Hopper to them)."""
    cond = ("mixtral-8x7b, fp8 (expert GEMMs fp16 SM80 mma.sync kernels, tensor-parallel experts: the stack's MoE "
            "path), 2 x H100 SXM (TP2)")
    return [
        Figure("TensorRT-LLM v0.9, mixtral-8x7b (MoE) fp8, batch 64, 2048 in / 128 out, H100 SXM TP2", 588,
               "tok/s/GPU", TRT09, f"{cond}, batch 64, input 2048, output 128, output tok/s per GPU", TRT09_SW,
               "gpu", "trtllm-v0.9",
               lambda: serving_tps("mixtral-8x7b", "gpu", "h100-sxm", stack="trtllm-v0.9", batch=64, prompt=2048,
                                   output=128, chips=2, dtype="fp8", per_chip=True)),
        Figure("TensorRT-LLM v0.9 first token 89.5 ms, mixtral-8x7b (MoE) fp8, batch 1, 2048 in, H100 SXM TP2",
               round(2048 / 0.0895), "prompt tok/s", TRT09, f"{cond}, batch 1, input 2048; compared as 2048/89.5 ms",
               TRT09_SW, "gpu", "trtllm-v0.9",
               lambda: prefill_tps("mixtral-8x7b", "gpu", "h100-sxm", stack="trtllm-v0.9", prompt=2048, chips=2,
                                   dtype="fp8")),
    ]


def _gpt_fast(model, published, chips=1, dtype="bf16"):
    cond = (f"{model} (Llama-2-{'7B' if '7b' in model else '70B'}), {dtype}, batch 1, context 5 + generated "
            f"(simulated at 128), {chips} x A100-80GB (power-limited to 330 W in the source; simulated at spec)")
    return Figure(f"gpt-fast, {model} {dtype}, batch 1 decode, {chips} x A100-80GB", published, "tok/s", GPT_FAST,
                  cond, "gpt-fast (torch.compile reduce-overhead, CUDA graphs)", "gpu", "gpt-fast",
                  lambda: decode_tps(model, "gpu", "a100-80gb", stack="gpt-fast", seq=128, chips=chips,
                                     dtype=dtype))


def _online(engine, stack, batch, tpot_ms, ttft_ms):
    """A TPOT row and a TTFT row of one online run (module comment above: ShareGPT lengths, Little's law)."""
    cond = (f"llama-3.1-8b bf16, 1 x A100 80G, 4 req/s ShareGPT: {batch} users in flight (Little's law), context "
            f"{SHAREGPT_CTX}")
    sw = f"{engine} (benchmark_vllm_060); simulated on {stack}"
    return [Figure(f"{engine}, Llama-3.1-8B, median TPOT {tpot_ms} ms, 4 req/s, A100 80G", round(1e3 / tpot_ms, 1),
                   "tok/s per user (1/TPOT)", SGL_VLLM, cond + f"; compared as 1 / {tpot_ms} ms", sw, "gpu", stack,
                   lambda: tpot_tps("llama-3.1-8b", "gpu", "a100-80gb", stack=stack, batch=batch,
                                    seq=SHAREGPT_CTX)),
            Figure(f"{engine}, Llama-3.1-8B, median TTFT {ttft_ms} ms, 4 req/s, A100 80G",
                   round(SHAREGPT_IN / (ttft_ms / 1e3)), "prompt tok/s", SGL_VLLM,
                   f"llama-3.1-8b bf16, 1 x A100 80G, one {SHAREGPT_IN}-token prompt (ShareGPT mean); compared as "
                   f"{SHAREGPT_IN} / {ttft_ms} ms (queueing behind other prefills not simulated)", sw, "gpu",
                   stack, lambda: prefill_tps("llama-3.1-8b", "gpu", "a100-80gb", stack=stack,
                                              prompt=SHAREGPT_IN))]



def generate_tps(model, chip, *, batch, prompt, new_tokens, dtype):
    """Output tokens/s of one ``model.generate(max_new_tokens=new_tokens)`` as the labs simulate it on hf-generate
    (``common.sim.lab_figures.hf_generate_simulated``: ttft + (new_tokens - 1) x tpot at the mean context)."""
    r = hf_generate_simulated(model, chip, prompt=prompt, new_tokens=new_tokens, batch=batch, dtype=dtype)
    dec = simulate_served(model, "gpu", stack="hf-generate", phase="decode", batch=batch,
                          seq=prompt + new_tokens // 2, chip=chip, dtype=dtype)
    return r["tokens_per_s"], dec


def _hf_generate():
    """optimum's decode rows (a 1-token prompt, 512 generated: 'essentially measuring the decode step'; the
    README's throughput = batch / per-token latency = batch x 512 / generate time) and its prefill row (a
    512-token prompt, max_new_tokens = 1: the first token), Llama-2-13B fp16 on one A100-SXM4-80GB."""
    cond = "llama-2-13b (Llama-2-13b-chat-hf), fp16, 1 x A100-SXM4-80GB"
    rows = [Figure(f"transformers generate(), Llama-2-13B fp16, batch {b}, 1 in / 512 out, A100 80GB", pub, "tok/s",
                   OPTIMUM_BENCH, f"{cond}, batch {b}, prompt 1, 512 new tokens, 'Decode benchmark' table, "
                   f"per-token latency {ms} ms", OPTIMUM_SW, "gpu", "hf-generate",
                   lambda b=b: generate_tps("llama-2-13b", "a100-80gb", batch=b, prompt=1, new_tokens=512,
                                            dtype="fp16"))
            for b, ms, pub in ((1, 30.43, 32.86), (16, 40.24, 397.61))]
    rows.append(Figure("transformers generate() first token 98.89 ms, Llama-2-13B fp16, batch 1, 512 in, A100 80GB",
                       round(512 / 0.09889), "prompt tok/s", OPTIMUM_BENCH,
                       f"{cond}, batch 1, prompt 512, max_new_tokens 1, 'Prefill benchmark' table; compared as "
                       "512 / 98.89 ms", OPTIMUM_SW, "gpu", "hf-generate",
                       lambda: prefill_tps("llama-2-13b", "gpu", "a100-80gb", stack="hf-generate", prompt=512,
                                           dtype="fp16")))
    return rows


FIGURES = [
    Figure("vLLM, Llama-3.1-8B bf16, batch 1 decode, A100-40GB", 75, "tok/s", f"{REF} (vLLM)",
           "llama-3.1-8b, bf16, batch 1, context 1024, 1 x A100-40GB", "vLLM (2023-08 generation)", "gpu",
           "vllm-2023-08", lambda: decode_tps("llama-3.1-8b", "gpu", "a100-40gb", stack="vllm-2023-08")),
    _trt("llama-2-7b", "h100-sxm", "fp8", 768, 128, 128, 19694),
    _trt("llama-2-7b", "h100-sxm", "fp8", 112, 128, 2048, 6818),
    _trt("llama-2-7b", "h100-sxm", "fp8", 48, 2048, 2048, 2740),
    _trt("llama-2-70b", "h100-sxm", "fp8", 64, 2048, 2048, 547, chips=2),
    _trt("llama-2-7b", "a100-80gb", "fp16", 384, 128, 128, 5586),
    _trt("llama-2-7b", "a100-80gb", "fp16", 60, 128, 2048, 1928),
    _trt("llama-2-7b", "a100-80gb", "fp16", 52, 2048, 128, 591),
    _trt("llama-2-70b", "h200", "fp8", 512, 128, 128, 3014, per_gpu=True, source=H200_BLOG, sw=H200_SW,
         stack="trtllm-v0.5"),
    _trt("llama-2-70b", "h200", "fp8", 64, 2048, 128, 341, per_gpu=True, source=H200_BLOG, sw=H200_SW,
         stack="trtllm-v0.5"),
    _trt_ttft("llama-2-7b", "h100-sxm", "fp8", 2048, 36),
    _trt_ttft("llama-2-70b", "h100-sxm", "fp8", 2048, 109, chips=4),
    _trt_ttft("llama-2-7b", "a100-80gb", "fp16", 2048, 133),
    _trt_ttft("llama-2-70b", "a100-80gb", "fp16", 2048, 377, chips=4),
    Figure("FlashAttention-3 forward, fp16, H100 SXM", 740, "TFLOP/s", f"{REF} (FlashAttention-3 paper)",
           "attention forward, fp16; the abstract's 'up to 740' gives no shape (simulated at B16 H16 S8192 D128)",
           "FlashAttention-3 kernel", "gpu", None, lambda: attention_tflops("h100-sxm")),
    Figure("FlashAttention-3 forward, fp16, head dim 128, seq 16k, non-causal, H100 SXM", 648, "TFLOP/s", FA3,
           "attention forward, fp16, non-causal, B 1, H 16, S 16384, D 128, 1 x H100 SXM5 80GB",
           "FlashAttention-3 kernel (paper's release)", "gpu", None,
           lambda: attention_tflops("h100-sxm", (1, 16, 16384, 128))),
    _jetstream("llama-3.1-8b", "Llama-3-8B", "bf16", 128, 8249),
    _jetstream("llama-3.1-8b", "Llama-3-8B", "int8", 256, 10873),
    _jetstream("llama-2-7b", "Llama-2-7B", "bf16", 96, 3663),
    _jetstream("llama-2-7b", "Llama-2-7B", "int8", 96, 4783),
    _groq("Groq LPU, Llama-2-70B, 4k context, per user", "llama-2-70b", 4095, 300,
          "llama-2-70b, fp16, one user, 4k context (simulated at 4095 = model max)", f"{REF} (Groq); {GROQ_TPU}"),
    _groq("Groq LPU, Llama-2-7B, 2k context, per user", "llama-2-7b", 2048, 750,
          "llama-2-7b, one user, 2048 context", GROQ_TPU),
    _groq("Groq LPU, Mixtral-8x7B (MoE), per user", "mixtral-8x7b", 1024, 480,
          "mixtral-8x7b, one user, context not published (1024 assumed)", GROQ_TPU),
    _cerebras("Cerebras inference, Llama-3.1-8B, per user", "llama-3.1-8b", 1800, "cerebras-2024-08", CEREBRAS_AUG),
    _cerebras("Cerebras inference, Llama-3.1-70B, per user", "llama-3.1-70b", 450, "cerebras-2024-08", CEREBRAS_AUG),
    _cerebras("Cerebras inference (Oct 2024 release), Llama-3.1-70B, per user", "llama-3.1-70b", 2100,
              "cerebras-2024-10", CEREBRAS_OCT),
    *_trt_moe(),
    *_trt09(),
    _gpt_fast("llama-2-7b", 104.9),
    _gpt_fast("llama-2-7b", 328.43, chips=8),
    _gpt_fast("llama-2-70b", 62.50, chips=8),
    Figure("Eager PyTorch decode loop, Llama-2-7B bf16, batch 1, A100-80GB", 25.5, "tok/s", PT_BLOG,
           "llama-2-7b, bf16, batch 1, context 128 assumed, 1 x A100-80GB (330 W limit in the source)",
           "eager PyTorch (the blog's starting point, not transformers itself: the same eager launch path)", "gpu",
           "hf-generate", lambda: decode_tps("llama-2-7b", "gpu", "a100-80gb", stack="hf-generate", seq=128),
           proxy="a hand-written eager decode loop, not transformers: the same one-kernel-per-op launch path "
           "with less Python per token, so still an upper-bound check of hf-generate"),
    *_hf_generate(),
    *_online("vLLM v0.6.0", "vllm-v0.6", 7, 14.14, 100.48),
    *_online("SGLang v0.3.0", "sglang-v0.3", 6, 13.17, 31.98),
]
