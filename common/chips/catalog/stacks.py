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
* ``Speculative.models``  the targets the vendor says it speculates for; any other model gets the hardware
                     figure, with the speculative one as an explicit what-if (``common.sim.serving``).
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
    Stack("jetstream-2024-07", "tpu", "2024-07", "JetStream interleaved server (prefill and generate on one slice)",
          step_host_s=Estimate(4e-3, "s", f"{JETSTREAM_122}: the TPU waits for the host up to 4 ms between steps "
                               "after that optimisation; charged at the bound (an upper bound, no mean published)")),
    Stack("groq-2024", "lpu", "2024", "GroqCloud (deterministic static schedule)",
          not_published=("per-token host / sampling cost (API server, sampling, detokenising)",
                         "the chip count of each model's deployment"),
          bound="upper", bound_reason="no host, sampling or detokenising time is charged per token (Groq "
          "publishes none), so the simulated speed at a given chip count is an upper bound",
          deployment=(568, GROQ_568)),
    Stack("cerebras-2024-08", "wse", "2024-08-27", "Cerebras Inference at launch ('Introducing Cerebras "
          "Inference'): one token per target step, wafer I/O synchronous with compute",
          not_published=("the launch kernels' utilisation ('only a fraction of its peak bandwidth, compute and IO' "
                         "in the October post)",),
          bound="upper", bound_reason=CEREBRAS_AUG_BOUND),
    Stack("cerebras-2024-10", "wse", "2024-10-24", "Cerebras Inference after the October 2024 release: rewritten "
          "kernels, asynchronous wafer I/O, speculative decoding",
          speculative=Speculative("llama-3.1-8b", 8, 0.5868, f"{CEREBRAS_OCT}; draft tokens and acceptance from "
                                  f"{LLAMA_SPEC}; the draft model is assumed to be Llama-3.1-8B",
                                  models=("llama-3.1-70b",))),  # the post's speculative result is its 70B one
)
