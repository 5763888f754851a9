"""The eight-layer failure taxonomy of Course 5, as data.

A failure on an accelerator stack shows up far from its cause. We sort causes by the compiler/runtime layer
that produced them, front end first:

    capture -> lowering -> coverage -> layout -> codegen -> memory -> schedule -> numerics

Each ``Layer`` says what fails there, the symptom a learner sees, the tool that localises it, and one
``Example`` per system (GPU/CUDA+Inductor, TPU/XLA, Cerebras WSE, Groq LPU, IBM Spyre/torch-spyre). An
example's ``source`` is a public issue or document it is taken from; examples marked ``illustrative`` are
written by us to match the documented architecture, with the document that describes the mechanism.

``draw_reports(seed, n)`` writes ``n`` failure reports for the classification exercise, seeded per learner:
a symptom and a chronological log of numbered entries (trace, lowering, kernels, transfers, waits, values),
each with the numbers that say whether it went right. Every report names several stages of the stack, so the
words do not give the layer away: the entry whose numbers first go wrong does. A report carries only its id,
system and text (no layer, no entry): the reading is the learner's, the key is grader side.

A hang is sorted by what the stuck work was waiting for, not by who reported it (a watchdog only reports):
a transfer that never completes is ``memory`` (a DMA timeout), work waiting on other work (a cycle of
waits, ranks in different collectives) is ``schedule``.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import pandas as pd

from common.chips import DTYPE_BYTES, get_chip
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
          "torch._dynamo.explain / TORCH_LOGS=graph_breaks,recompiles; common.graph.capture.explain_dynamo", {
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
          "make_fx / backend='aot_eager' bisection, TORCH_LOGS=aot_graphs, the aten graph (common.graph.capture)", {
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
          "layout dumps (common.sim.machines.spyre.stick_layout), restickify counters, strides in the compiled graph", {
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
              "Spyre": _ex("with automatic span-overflow tiling, only the first tile of the generated kernel's "
                           "output is written back right; the later tiles differ from the CPU", SPYRE + "3166"),
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
    """A report as a learner receives it: a neutral id, the system and its text (a symptom, then the log)."""

    id: str
    system: str
    text: str


_OPS = ("clone", "mm", "add", "softmax", "mean", "cumsum", "gelu", "bmm")
_FAULTY = {  # the symptom each kind of first fault shows (kinds are private: a report carries none)
    "trace_breaks": "slow", "trace_recompiles": "slow", "no_lowering": "compile", "host_op": "slow",
    "no_kernel": "compile", "restick": "wrong", "padding": "slow", "plan_full": "compile", "dma_short": "hang",
    "buffer_reuse": "wrong", "kernel_tail": "wrong", "kernel_unwritten": "nan", "wait_cycle": "hang",
    "collectives": "hang", "overflow": "nan",
}
_SYMPTOM = {"slow": "the step is {r:.1f}x slower than the estimate", "compile": "the compile does not finish",
            "wrong": "wrong values in the output, right shape ({m} of {n} elements)",
            "hang": "the run never returns: the runtime watchdog aborted it after {t:.0f} s",
            "nan": "NaN in the output ({m} of {n} elements)"}
_STATIC = ("WSE", "LPU")  # no host to fall back to, no run-time waits


def _entries(rng: random.Random, system: str, fault: str) -> list[str]:
    """The log of one report, in run order; the stage that holds ``fault`` is written with wrong numbers, every
    stage before it with right ones, the stages after it as not reached or right on what they received."""
    op, k, steps = rng.choice(_OPS), rng.randrange(9, 40), rng.choice((100, 200, 500))
    stick_bytes = int(get_chip("spyre").fact("stick_bytes"))
    e = stick_bytes // DTYPE_BYTES["fp16"]  # fp16 elements per Spyre stick (catalog)
    n, kid = rng.choice((65, 97, 130, 200)), rng.randrange(1, 6)
    nbytes = stick_bytes * -(-n // e) * rng.choice((4, 8, 16))
    stages = {  # stage -> (its faults, the right line, the wrong line for each fault)
        "trace": (("trace_breaks", "trace_recompiles"),
                  f"Dynamo trace: 1 graph(s), 0 graph break(s); compiled 1 time(s) in {steps} steps",
                  {"trace_breaks": f"Dynamo trace: {(g := rng.randrange(2, 5))} graph(s), {g - 1} graph break(s) "
                                   f"at Tensor.item() (model.py:{rng.randrange(20, 90)}); compiled 1 time(s) in "
                                   f"{steps} steps",
                   "trace_recompiles": f"Dynamo trace: 1 graph(s), 0 graph break(s); compiled "
                                       f"{rng.randrange(20, 60)} time(s) in {steps} steps (guard on len(x))"}),
        "aot": (("no_lowering",), f"AOTAutograd: {k} aten ops after decomposition; device IR produced for {k} of {k}",
                {"no_lowering": f"AOTAutograd: {k} aten ops after decomposition; device IR produced for "
                                f"{rng.randrange(1, k)} of {k}, then stopped at aten.{op} (fp32): "
                                f"{rng.choice(('no rule for this dtype', 'no fake (meta) kernel registered'))}"}),
        "kernels": (("host_op", "no_kernel"), f"device kernels: {k} of {k} ops; host ops: none",
                    {"host_op": f"device kernels: {k - 1} of {k} ops; host ops: aten.{op} (sync, copy to host, "
                                f"run, copy back)",
                     "no_kernel": f"device kernels: {k - 1} of {k} ops; aten.{op}: none, and no host path"}),
        "format": (("restick", "padding"),  # Spyre's sticks: the only stack whose format these logs show
                   f"stick format: x ({n},) fp16 in {-(-n // e)} stick(s), readback equals x at {n} of {n}",
                   {"restick": f"stick format: x.transpose(0, 1) ({n}, {n - 19}) fp16 re-stuck, readback "
                               f"equals x at {n * (n - 19) - rng.randrange(20, 200)} of {n * (n - 19)}",
                    "padding": f"stick format: a ({n * 32}, {n}) operand stored as ({n * 32}, {-(-n // e) * e}); "
                               f"the op moves and computes {-(-n // e) * e / n:.2f}x its bytes"}),
        "plan": (("plan_full",), f"scratchpad plan: kernel k{kid} needs {(have := rng.choice((32, 48))) // 2 - 3} "
                                 f"MiB of {have} MiB",
                 {"plan_full": f"scratchpad plan: kernel k{kid} needs {have + rng.randrange(4, 40)} MiB of "
                               f"{have} MiB"}),
        "dma": (("dma_short", "buffer_reuse"),
                f"DMA in: {nbytes} of {nbytes} bytes to buffer b{kid}; readback equals the host copy",
                {"dma_short": f"DMA in: {nbytes - 128 * rng.randrange(1, nbytes // 128)} of {nbytes} bytes to "
                              f"buffer b{kid}, then no progress",
                 "buffer_reuse": f"DMA in: {nbytes} of {nbytes} bytes to buffer b{kid}; readback before "
                                 f"kernel k{kid} starts equals the host copy at {nbytes // 2 - rng.randrange(8, 60)} "
                                 f"of {nbytes // 2} values (b{kid - 1 if kid > 1 else kid + 1} shares its offset)"}),
        "kernel": (("kernel_tail", "kernel_unwritten"),
                   f"kernel k{kid} (aten.{op}) on the inputs it received: max |diff| vs the CPU "
                   f"{rng.uniform(1, 9):.0f}e-04 (fp16 tolerance 5e-03); non-finite outputs: 0",
                   {"kernel_tail": f"kernel k{kid} (aten.{op}) on the inputs it received: max |diff| vs the CPU "
                                   f"{rng.uniform(1, 9):.1f}e-01 (fp16 tolerance 5e-03) at elements "
                                   f"{(a := e * rng.randrange(1, -(-n // e)))}..{n - 1} of each row; "
                                   f"non-finite outputs: 0",
                    "kernel_unwritten": f"kernel k{kid} (aten.{op}) on the inputs it received: max |diff| vs the "
                                        f"CPU nan (fp16 tolerance 5e-03); non-finite outputs: {n - a} per row, "
                                        f"elements {a}..{n - 1} never written"}),
        "waits": (("wait_cycle", "collectives"),
                  f"dependencies: k{kid + 1} waits for k{kid}; k{kid} finished at {rng.uniform(0.1, 3):.2f} ms",
                  {"wait_cycle": f"dependencies: k{kid + 1} waits for k{kid + 2}; k{kid + 2} waits for k{kid + 1}",
                   "collectives": f"dependencies: rank 0 is in all_reduce #{(c := rng.randrange(100, 2000))}, "
                                  f"rank {rng.randrange(1, 8)} in all_gather #{c}"}),
        "values": (("overflow",), f"value check: largest |value| {rng.uniform(2, 12):.1f} (fp16 max 65504); "
                                  f"non-finite values: 0",
                   {"overflow": f"value check: softmax input reaches {rng.randrange(30, 60)}, exp() of it exceeds "
                                f"fp16 max 65504; non-finite values: {rng.randrange(8, 64)} (fp32 CPU run: 0)"}),
    }
    if system != "Spyre":
        del stages["format"]
    order = list(stages)
    at = next(i for i, s in enumerate(order) if fault in stages[s][0])
    lines = [stages[s][1] for s in order[:at] if rng.random() < 0.6] + [stages[order[at]][2][fault]]
    symptom = _FAULTY[fault]
    for s in order[at + 1:]:
        if fault == "kernel_unwritten" and s == "values":
            continue  # it would only repeat the kernel's NaN
        reached = symptom in ("slow", "wrong", "nan") and s not in ("trace", "aot", "kernels", "plan")
        if rng.random() < (0.6 if reached else 0.3):
            lines.append(stages[s][1] if reached else f"{stages[s][1].split(':')[0]}: not reached")
    return lines


def _report(rng: random.Random, rid: str) -> FailureReport:
    fault = rng.choice(tuple(_FAULTY))
    systems = _STATIC if fault == "no_kernel" else tuple(s for s in SYSTEMS if s not in _STATIC
                                                         or _FAULTY[fault] in ("compile", "wrong", "nan"))
    if fault in ("restick", "padding"):
        systems = ("Spyre",)
    elif fault in ("collectives", "host_op"):
        systems = ("GPU", "TPU", "Spyre")
    system = rng.choice(systems)
    n = rng.choice((256, 1024, 4096))
    head = _SYMPTOM[_FAULTY[fault]].format(r=rng.uniform(1.6, 4.0), m=rng.randrange(1, n // 4), n=n,
                                           t=rng.choice((1, 60, 600)))
    log = "\n".join(f"  e{i} {line}" for i, line in enumerate(_entries(rng, system, fault), 1))
    return FailureReport(rid, system, f"{head}\n{log}")


def draw_reports(seed: int, n: int = 10) -> list[FailureReport]:
    """``n`` failure reports for one learner, written from ``seed`` (ids R01, R02, ... in order)."""
    if not isinstance(n, int) or not 1 <= n <= 40:
        raise DFAError(f"n must be between 1 and 40, got {n!r}")
    rng = random.Random(f"reports:{seed}")
    return [_report(rng, f"R{i:02d}") for i in range(1, n + 1)]
