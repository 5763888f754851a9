"""The eight-layer failure taxonomy of Course 5, as data.

A failure on an accelerator stack shows up far from its cause. We sort causes by the compiler/runtime layer
that produced them, front end first:

    capture -> lowering -> coverage -> layout -> codegen -> memory -> schedule -> numerics

Each ``Layer`` says what fails there, the symptom a learner sees, the tool that localises it, and one
``Example`` per system (GPU/CUDA+Inductor, TPU/XLA, Cerebras WSE, Groq LPU, IBM Spyre/torch-spyre). An
example's ``source`` is a public issue or document it is taken from; examples marked ``illustrative`` are
written by us to match the documented architecture, with the document that describes the mechanism.

``REPORTS`` is a pool of failure reports (error messages, timelines, wrong outputs) for the classification
exercise, with neutral ids and no layer (the answer key is grader side); ``draw_reports(seed, n)`` picks a
per-learner subset.

A hang is sorted by what the stuck work was waiting for, not by who reported it (a watchdog only reports):
a transfer that never completes is ``memory`` (a DMA timeout), work waiting on other work (a cycle of
waits, ranks in different collectives) is ``schedule``.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import pandas as pd

from common.errors import DFAError, unknown

SYSTEMS = ("GPU", "TPU", "WSE", "LPU", "Spyre")
STACKS = {"GPU": "CUDA + TorchInductor", "TPU": "PyTorch/XLA or JAX", "WSE": "Cerebras PyTorch (cstorch)",
          "LPU": "GroqFlow / Groq compiler", "Spyre": "torch-spyre (Inductor back end)"}
PT_DEBUG = "https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html"
XLA_DEBUG = "https://github.com/pytorch/xla/blob/master/TROUBLESHOOTING.md"
TPU_PERF = "https://cloud.google.com/tpu/docs/performance-guide"
CEREBRAS = "https://training-docs.cerebras.ai/"
GROQ_ISCA20 = "Abts et al., 'Think Fast: A Tensor Streaming Processor for accelerating deep learning', ISCA 2020"
GROQ_ISCA22 = "Abts et al., 'A software-defined tensor streaming multiprocessor for large-scale ML', ISCA 2022"
SPYRE = "https://github.com/torch-spyre/torch-spyre/issues/"


@dataclass(frozen=True)
class Example:
    text: str
    source: str  # a URL or citation
    kind: str = "issue"  # issue | doc | illustrative


@dataclass(frozen=True)
class Layer:
    key: str
    name: str
    what_fails: str
    symptom: str
    tool: str
    examples: dict = field(default_factory=dict)  # system -> Example

    def example(self, system: str) -> Example:
        if system not in self.examples:
            raise unknown("system", system, SYSTEMS)
        return self.examples[system]


def _ex(text, source, kind="issue"):
    return Example(text, source, kind)


LAYERS: tuple[Layer, ...] = (
    Layer("capture", "Graph capture (Dynamo)",
          "turning Python into a graph: data-dependent control flow, .item(), unsupported Python constructs",
          "graph breaks (several small graphs), recompilations, a trace error naming a Python line",
          "torch._dynamo.explain / TORCH_LOGS=graph_breaks,recompiles; common.capture.explain_dynamo", {
              "GPU": _ex("`if x.sum() > 0:` in forward: Dynamo breaks the graph at the branch; explain() lists "
                         "'generic_jump TensorVariable()' and two graphs run with a host round trip between them",
                         PT_DEBUG, "doc"),
              "TPU": _ex("input lengths change every step, so the lazy-tensor graph is re-traced and XLA recompiles "
                         "(metrics: UncachedCompile grows); fix: pad to a few bucket lengths",
                         "https://github.com/pytorch/xla/issues/1509"),
              "WSE": _ex("a Python loop whose trip count depends on a tensor value cannot be traced into the single "
                         "compiled wafer program; the compile stops naming the traced op", CEREBRAS, "illustrative"),
              "LPU": _ex("export of a model with a data-dependent `torch.nonzero` branch fails: the whole program "
                         "must be a static graph before the compiler can schedule it", GROQ_ISCA20, "illustrative"),
              "Spyre": _ex("an `.item()` in model code splits the Dynamo graph; each piece becomes its own set of "
                           "bundles with a device-to-host sync in between", PT_DEBUG, "illustrative"),
          }),
    Layer("lowering", "Lowering and decomposition (AOTAutograd)",
          "functionalisation, decompositions and the lowering of aten ops to the back end's IR",
          "BackendCompilerFailed / lowering errors naming an aten op and dtype; a custom op without a fake kernel",
          "make_fx / backend='aot_eager' bisection, TORCH_LOGS=aot_graphs, the aten graph (common.capture)", {
              "GPU": _ex("a custom op without a FakeTensor (meta) implementation fails during AOTAutograd tracing "
                         "with 'no fake impl or Meta kernel registered'", "https://pytorch.org/docs/stable/library.html",
                         "doc"),
              "TPU": _ex("HLO shape inference aborts with 'LLVM ERROR ... inferConcatenateOp' when a bounded dynamic "
                         "shape reaches a concat", "https://github.com/pytorch/xla/issues/6413"),
              "WSE": _ex("an aten op with no lowering to the wafer IR stops the compile at the lowering step "
                         "with the op's name", CEREBRAS, "illustrative"),
              "LPU": _ex("an ONNX opset conversion emits an op the Groq compiler cannot lower; compile fails "
                         "before scheduling", GROQ_ISCA20, "illustrative"),
              "Spyre": _ex("torch.mean on an fp32 tensor fails inside Inductor's loop-body lowering: 'not supported "
                           "for IEEE_FP32 data format'", SPYRE + "1945"),
          }),
    Layer("coverage", "Operator coverage and fallback",
          "an op with no device kernel: it runs on the host (fallback) or the compile refuses it",
          "slow step with host round trips, FallbackWarning, 'not implemented for device', counters of host ops",
          "fallback counters and strict mode (report.counters['fallback_count'], strict=True); XLA metrics aten:: "
          "counters", {
              "GPU": _ex("Inductor has no lowering for an op and calls the aten kernel as an extern 'fallback "
                         "kernel': correct, but it breaks fusion around it", PT_DEBUG, "doc"),
              "TPU": _ex("the XLA metrics report shows `aten::_local_scalar_dense` and `xla::` counters: ops run "
                         "on the CPU and force a device sync", "https://github.com/pytorch/xla/issues/1522"),
              "WSE": _ex("no host fallback inside the wafer program: an unsupported op is a compile error, the "
                         "model must be rewritten", CEREBRAS, "illustrative"),
              "LPU": _ex("statically scheduled: an unsupported op cannot fall back at run time, so the compile "
                         "fails and the op must be replaced", GROQ_ISCA20, "illustrative"),
              "Spyre": _ex("`input_ids.ne(padding_idx)` fails with NotImplementedError until a CPU fallback for "
                           "aten::ne.Scalar is registered; each fallback is a host sync", SPYRE + "1981"),
          }),
    Layer("layout", "Layout and tiling (sticks, padding)",
          "how tensors are laid out on the device: sticks, tiles, padding, transposes and the copies between them",
          "wrong values with the right shape (a transposed read), stride assertions, memory or time inflated by "
          "padding",
          "layout dumps (common.sim.spyre.stick_layout), restickify counters, strides in the compiled graph", {
              "GPU": _ex("generated wrapper code asserts `assert_size_stride(...)` and fails when an op returns a "
                         "tensor with unexpected strides (e.g. channels-last)", PT_DEBUG, "illustrative"),
              "TPU": _ex("a dimension of 129 is padded to 256 lanes of the (8, 128) tile: twice the memory and "
                         "MXU work for that op", TPU_PERF, "doc"),
              "WSE": _ex("a tensor dimension that does not divide the processing-element grid leaves a strip of "
                         "the region idle", CEREBRAS, "illustrative"),
              "LPU": _ex("vectors are 320 elements wide: a hidden size of 330 takes two vectors per row, the "
                         "second nearly empty", GROQ_ISCA22, "illustrative"),
              "Spyre": _ex("x.transpose(0, 1).clone() on a (72, 91) fp16 tensor returns wrong values: the "
                           "restickify over-reads across stick boundaries", SPYRE + "1859"),
          }),
    Layer("codegen", "Fusion and code generation",
          "the kernel the compiler generates: loop bounds, masks, fused epilogues, index arithmetic",
          "wrong values in part of a tensor (an edge, a tail, one tile) while the data movement is correct",
          "first-divergence finder (common.debug.divergence), the minifier, the compiled kernel text", {
              "GPU": _ex("Inductor fuses an epilogue into a user Triton kernel whose output is `.T.contiguous()`: "
                         "silently wrong result", "https://github.com/pytorch/pytorch/issues/184247"),
              "TPU": _ex("a fusion whose output layout was chosen for one consumer computes wrong values at the "
                         "tile edge; disabling that fusion (XLA_FLAGS) makes it pass", XLA_DEBUG, "illustrative"),
              "WSE": _ex("a generated kernel for a fused pattern handles the region edge wrong: the last column "
                         "of PEs computes garbage", CEREBRAS, "illustrative"),
              "LPU": _ex("a scheduled instruction stream reads a stream register one cycle early: a deterministic "
                         "wrong value at one position", GROQ_ISCA20, "illustrative"),
              "Spyre": _ex("torch.clone of a 65-element fp16 tensor: the compiled copy covers only the first "
                           "64-element stick, the last element comes back wrong", SPYRE + "524"),
          }),
    Layer("memory", "Memory placement and DMA",
          "where tensors live (HBM, scratchpad, SRAM) and the transfers between levels",
          "out-of-memory at compile or run time, a transfer that never completes (a DMA timeout, whoever "
          "reports it), a buffer overwritten by a reuse, spills",
          "transfer logs and counters (LPDDR5<->LX bytes, spills), the memory plan, OOM messages", {
              "GPU": _ex("the memory planner reuses a buffer wrongly marked as mutated: an in-place lerp_ result "
                         "is overwritten by a later cast", "https://github.com/pytorch/pytorch/issues/183575"),
              "TPU": _ex("'RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem/hbm' at compile time for a "
                         "fusion or a batch that does not fit", TPU_PERF, "doc"),
              "WSE": _ex("the weights no longer fit in on-wafer SRAM: the model must run in weight-streaming mode "
                         "from MemoryX", CEREBRAS, "doc"),
              "LPU": _ex("the model does not fit the SRAM of the chips requested; the compiler asks for more chips",
                         GROQ_ISCA22, "illustrative"),
              "Spyre": _ex("CPU fallback ops fail on tensors with a sparse-stick layout when they are copied to the "
                           "host", SPYRE + "463"),
          }),
    Layer("schedule", "Scheduling and synchronisation (conflicts, deadlocks, timeouts)",
          "the order of kernels and transfers, the waits between them, collectives across chips",
          "work waiting on other work: a deadlock report naming a cycle of waits, ranks stuck in different "
          "collectives (a collective timeout), nondeterministic results",
          "timeline (Report.gantt, chrome trace), runtime watchdogs, the dependency graph (cycle check)", {
              "GPU": _ex("NCCL watchdog: 'Watchdog caught collective operation timeout' when ranks issue "
                         "collectives in different orders", "https://pytorch.org/docs/stable/distributed.html",
                         "doc"),
              "TPU": _ex("replicas trace different graphs (one recompiles) and wait in different collectives: the "
                         "job hangs until the barrier times out", XLA_DEBUG, "illustrative"),
              "WSE": _ex("a routing plan with a cycle of fabric flows that wait on each other is rejected at "
                         "compile time (the fabric has no run-time arbitration)", CEREBRAS, "illustrative"),
              "LPU": _ex("no run-time deadlock is possible (the schedule is static), so a conflict becomes a "
                         "compile-time scheduling failure", GROQ_ISCA20, "doc"),
              "Spyre": _ex("a test job sends work to the card and never gets a reply (VF mode): a 60-minute hang "
                           "until the harness kills it", SPYRE + "4712"),
          }),
    Layer("numerics", "Numerics (precision, overflow, accumulation order)",
          "finite precision: overflow, underflow, rounding of operands, accumulation order",
          "inf/NaN, results off by more than the dtype's tolerance, run-to-run differences",
          "NaN/inf checks per node (common.debug.divergence), fp32 reference, dtype sweeps", {
              "GPU": _ex("bf16/TF32 matmuls differ from fp32 eager by ~1e-3 relative; reductions in a different "
                         "order change low bits", "https://pytorch.org/docs/stable/notes/numerical_accuracy.html",
                         "doc"),
              "TPU": _ex("the MXU rounds matmul operands to bf16 by default: ~1e-2 relative error unless "
                         "precision=HIGHEST", "https://docs.jax.dev/en/latest/_autosummary/jax.lax.Precision.html",
                         "doc"),
              "WSE": _ex("fp16 training without loss scaling: gradients underflow, or overflow to inf", CEREBRAS,
                         "doc"),
              "LPU": _ex("fp16 storage with fp32 accumulation: a long dot product is exact to fp32 but the stored "
                         "result rounds to fp16", GROQ_ISCA22, "illustrative"),
              "Spyre": _ex("fp16 only (no bf16): exp(x) overflows for x > ~11 in a softmax computed without the "
                           "max subtraction, giving inf/inf = NaN", "https://github.com/torch-spyre/torch-spyre",
                           "illustrative"),
          }),
)
LAYER_KEYS = tuple(layer.key for layer in LAYERS)


def get_layer(key: str) -> Layer:
    for layer in LAYERS:
        if layer.key == key:
            return layer
    raise unknown("layer", key, LAYER_KEYS)


def frame(*, examples: bool = True) -> pd.DataFrame:
    """One row per layer: name, what fails, symptom, tool (and one column per system's example)."""
    rows = []
    for i, layer in enumerate(LAYERS, 1):
        row = {"#": i, "layer": layer.key, "name": layer.name, "what fails": layer.what_fails,
               "symptom": layer.symptom, "tool": layer.tool}
        if examples:
            row.update({s: layer.examples[s].text for s in SYSTEMS})
        rows.append(row)
    return pd.DataFrame(rows).set_index("#")


def render(system: str | None = None) -> str:
    """Markdown: the eight layers with their tool and, for ``system`` (or all), the example and its source."""
    systems = SYSTEMS if system is None else (system,)
    for s in systems:
        if s not in SYSTEMS:
            raise unknown("system", s, SYSTEMS)
    lines = []
    for i, layer in enumerate(LAYERS, 1):
        lines.append(f"**{i}. {layer.name}** (`{layer.key}`) — fails: {layer.what_fails}. "
                     f"*Symptom:* {layer.symptom}. *Tool:* {layer.tool}.")
        for s in systems:
            ex = layer.examples[s]
            lines.append(f"  - {s} ({STACKS[s]}): {ex.text} [{ex.kind}: {ex.source}]")
    return "\n".join(lines)


# ---- failure reports for the classification exercise -------------------------------------------------------
@dataclass(frozen=True)
class FailureReport:
    """A report as a learner receives it: a neutral id, the system and what was observed (no layer: the
    answer key is the lab's, grader side)."""

    id: str
    system: str
    text: str


REPORTS: tuple[FailureReport, ...] = (
    FailureReport("R01", "TPU", "metrics report: CompileTime TotalSamples 102 in 200 steps; UncachedCompile "
                  "keeps growing; input sequence length differs per batch"),
    FailureReport("R02", "GPU", "compiled result differs from eager only when the epilogue is fused "
                  "(max diff 3.1 at the last row); disabling epilogue fusion fixes it"),
    FailureReport("R03", "Spyre", "InductorError: torch.mean not supported for IEEE_FP32 data format "
                  "(raised in loop_body.py store_reduction)"),
    FailureReport("R04", "GPU", "torch._dynamo.explain: graph_count=3, graph_break_count=2, break reasons: "
                  "'Tensor.item() call' at model.py:41"),
    FailureReport("R05", "Spyre", "FallbackWarning: torch.ops.aten.cumsum is falling back to cpu; step time 3x "
                  "the estimate, timeline shows sync -> d2h -> host -> h2d in every layer"),
    FailureReport("R06", "Spyre", "Recompiling function forward: guard failed: len(L['x']) == 7; each new "
                  "prompt length triggers a new compile"),
    FailureReport("R07", "GPU", "BackendCompilerFailed: backend='inductor' raised: RuntimeError: my_ops::rope "
                  "has no fake impl or Meta kernel registered"),
    FailureReport("R08", "Spyre", "z = x.transpose(0, 1).clone() on (72, 91) fp16 returns wrong values, right "
                  "shape; restickify count 1; (64, 64) works"),
    FailureReport("R09", "Spyre", "DeadlockError: deadlock: cyclic wait k1 -> k2 -> k1 (each kernel waits for "
                  "the next to finish; none can start)"),
    FailureReport("R10", "TPU", "profile: a (4096, 129) matmul uses 2x the expected HBM and MXU time; the "
                  "operand is padded to (4096, 256)"),
    FailureReport("R11", "WSE", "outputs wrong only in the last column of every tile region; every transfer "
                  "checksum matches"),
    FailureReport("R12", "TPU", "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in "
                  "memory space vmem while allocating a fusion's operands"),
    FailureReport("R13", "GPU", "AssertionError in generated wrapper: assert_size_stride(buf3, (8, 64, 56, 56), "
                  "(200704, 1, 3584, 64)) failed: got stride (200704, 3136, 56, 1)"),
    FailureReport("R14", "WSE", "compile rejected: routing plan has a cycle of flows waiting on each other "
                  "between regions R3 and R7"),
    FailureReport("R15", "Spyre", "attention output contains NaN for long prompts; logits reach 40; CPU fp32 "
                  "output is finite; NaN first appears at the softmax node"),
    FailureReport("R16", "Spyre", "torch.clone of a (65,) fp16 tensor: out[64] = 0 instead of 0.7466; "
                  "elements 0..63 right; DMA log shows 256 bytes moved; 63 and 128 elements are right"),
    FailureReport("R17", "LPU", "compile error: operator 'Unique' is not supported by the target; no runtime "
                  "fallback is available"),
    FailureReport("R18", "GPU", "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1207, "
                  "OpType=ALLREDUCE) ran for 600000 ms before timing out"),
    FailureReport("R19", "TPU", "loss differs from the GPU run by 1.2e-2 relative from step 1; matmuls run "
                  "with default precision (bf16 operands)"),
    FailureReport("R20", "TPU", "LLVM ERROR: Expect an prototype attribute ... in mlir::hlo::inferConcatenateOp "
                  "while lowering a graph with a bounded dynamic dimension"),
    FailureReport("R21", "GPU", "in-place optimizer state m1 is wrong after compile: its buffer slot was "
                  "reused for a later bf16->fp32 cast"),
    FailureReport("R22", "Spyre", "SimTimeoutError: DMA into kernel k0 (aten.mm+aten.add, 4194304 bytes) did "
                  "not complete within 1.0 s; the runtime watchdog aborted"),
    FailureReport("R23", "TPU", "metrics: Counter aten::nonzero Value 480 - op executed on CPU, device "
                  "synchronised each step"),
    FailureReport("R24", "WSE", "training loss becomes inf at step 3400 in fp16; no loss scaling configured"),
)


def draw_reports(seed: int, n: int = 10) -> list[FailureReport]:
    """``n`` distinct reports for one learner, drawn and ordered by ``seed``."""
    if not 1 <= n <= len(REPORTS):
        raise DFAError(f"n must be between 1 and {len(REPORTS)}, got {n!r}")
    return random.Random(seed).sample(REPORTS, n)
