"""Helpers for Course 3's look inside ``torch.compile``: Dynamo -> AOTAutograd -> a backend (Inductor).

* ``capture_with(backend, model, *args)`` - compile ``model`` with AOTAutograd around *your* backend
  (``(gm, example_inputs) -> callable``) and keep every graph it was handed: Dynamo's torch-level graph(s), the
  forward and the backward aten graphs (functionalized; decomposed with ``decompositions``).
* ``qualified_op_name(node)`` / ``decomposition_graphs(fn, args)`` - one readable name per operation node, and
  the graphs of ``fn`` before and after a decomposition table (make_fx with torch's own tables, the same tracer
  AOTAutograd uses). Counting the ops of a graph is the lab's exercise (``my_count_ops``): nothing here does it.
* ``time_backends(model, args, backends)`` - eager vs ``aot_eager`` vs ``inductor``: the first call (Dynamo
  trace + compile + one run) timed once, steady state with ``common.measure.bench.measure`` (median of blocks);
  compile time = first call - steady-state median; on CUDA every clock read waits for the device
  (``torch.cuda.synchronize``). With ``capture_code`` Inductor's generated code is kept.
* ``ops_in_kernel_name(name)`` / ``kernel_source(code, name)`` / ``code_language(code)`` - the aten ops a fused
  kernel's name lists (Inductor derives it from the ops' origins: ``cpp_fused_add_mean_mul_pow_rsqrt_0``), one
  kernel's source (C++ on a CPU, Triton on a GPU) and which of the two the code holds.
  Finding the kernels in the code is the lab's exercise (``kernel_names``).

Private torch entry points (``torch._dynamo``, ``torch._inductor``) are imported inside functions and guarded.
"""

from __future__ import annotations

import contextlib
import io
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache

import pandas as pd
import torch
import torch.fx as fx

from common import torch_compat
from common.errors import DFAError, unknown
from common.measure import bench

DECOMPOSITIONS = ("none", "core", "inductor")


def qualified_op_name(node: fx.Node) -> str:
    """'aten.add' for an aten OpOverload, 'torch.nn.functional.gelu' for a function, the class of a module,
    '.method' for a method call: one readable name per operation node."""
    t = node.target
    if node.op == "call_function":
        packet = getattr(t, "overloadpacket", None)
        if packet is not None:
            return f"{str(packet).split('.')[0]}.{packet.__name__}"  # aten.add, prims.convert_element_type
        mod = getattr(t, "__module__", None) or ""
        return f"{mod.replace('torch._C._nn', 'torch.nn.functional')}.{getattr(t, '__name__', str(t))}".lstrip(".")
    if node.op == "call_module":
        return type(node.graph.owning_module.get_submodule(t)).__name__ if node.graph.owning_module else str(t)
    if node.op == "call_method":
        return f".{t}"
    return node.op


def decomposition_table(which: str):
    """torch's decomposition tables: 'none' (AOTAutograd's default for aot_eager), 'core' (the Core ATen IR
    opset) or 'inductor' (what Inductor lowers with)."""
    if which not in DECOMPOSITIONS:
        raise unknown("decompositions", which, DECOMPOSITIONS)
    if which == "none":
        return None
    try:
        if which == "core":
            from torch._decomp import core_aten_decompositions

            return core_aten_decompositions()
        from torch._inductor.decomposition import select_decomp_table

        return select_decomp_table()
    except ImportError as exc:  # pragma: no cover
        raise DFAError(f"this torch has no {which} decomposition table ({exc})") from exc


def decomposition_graphs(fn, args, tables=DECOMPOSITIONS) -> dict[str, fx.GraphModule]:
    """``{table: aten graph}`` of ``fn(*args)`` traced by make_fx with each decomposition table, after
    functionalization (``torch.func.functionalize``, as AOTAutograd does): in-place ops become out-of-place
    ones."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return {
        which: make_fx(torch.func.functionalize(fn), decomposition_table=decomposition_table(which))(*args)
        for which in tables
    }


@dataclass
class Captured:
    """Every graph one compilation handed to the backends, in order."""

    dynamo: list[fx.GraphModule] = field(default_factory=list)  # torch-level, one per graph Dynamo cut
    forward: list[fx.GraphModule] = field(default_factory=list)  # aten, functionalized
    backward: list[fx.GraphModule] = field(default_factory=list)
    output: object = None

    def table(self, counter) -> pd.DataFrame:
        """Op counts per stage as ``counter(graph)`` gives them (a ``{op: count}`` mapping: the lab's
        ``my_count_ops``): one row per op, a column per captured graph (dynamo_0, forward_0, backward_0)."""
        cols = {
            f"{stage}_{i}": counter(g)
            for stage in ("dynamo", "forward", "backward")
            for i, g in enumerate(getattr(self, stage))
        }
        return pd.DataFrame(cols).fillna(0).astype(int).sort_index()


def capture_with(backend, model, *args, backward: bool = True, decompositions: str = "none") -> Captured:
    """Compile ``model`` with AOTAutograd whose forward and backward compiler is ``backend(gm, example_inputs)``
    (it must return a callable), run it once on ``args`` (and backward through ``output.sum()``) and return
    the graphs. ``decompositions``: 'none', 'core' or 'inductor' (see ``decomposition_table``)."""
    try:
        import torch._dynamo as dynamo
        from torch._dynamo.backends.common import aot_autograd
    except ImportError as exc:  # pragma: no cover
        raise DFAError(
            f"this torch has no torch._dynamo / aot_autograd ({exc}); install {torch_compat.requirement()}"
        ) from exc
    got = Captured()

    def stage(name):
        def compiler(gm, example_inputs):
            getattr(got, name).append(gm)
            fn = backend(gm, example_inputs)
            if not callable(fn):
                raise DFAError(f"your backend returned {type(fn).__name__}, not a callable (return gm.forward)")
            return _boxed(fn)

        return compiler

    aot = aot_autograd(
        fw_compiler=stage("forward"), bw_compiler=stage("backward"), decompositions=decomposition_table(decompositions)
    )

    def dynamo_backend(gm, example_inputs):
        got.dynamo.append(gm)
        return aot(gm, example_inputs)

    dynamo.reset()
    compiled = torch.compile(model, backend=dynamo_backend)
    with contextlib.nullcontext() if backward else torch.no_grad():
        got.output = compiled(*args)
        if backward:
            outs = [
                o
                for o in torch.utils._pytree.tree_leaves(got.output)
                if isinstance(o, torch.Tensor) and o.requires_grad
            ]
            if not outs:
                raise DFAError("no output requires grad: nothing to differentiate (pass backward=False)")
            sum(o.float().sum() for o in outs).backward()
    return got


def _boxed(fn):
    """AOTAutograd calls its compilers' results with one list of inputs ("boxed", so it can free them early);
    wrap a plain ``fn(*args)`` the way ``functorch.compile.make_boxed_func`` does."""
    if getattr(fn, "_boxed_call", False):
        return fn
    try:
        from functorch.compile import make_boxed_func

        return make_boxed_func(fn)
    except ImportError:  # pragma: no cover

        def boxed(args):
            return fn(*args)

        boxed._boxed_call = True
        return boxed


# ---- eager vs aot_eager vs inductor ---------------------------------------------------------------------------
def run_and_get_code(fn, *args) -> tuple[object, list[str]]:
    """Run ``fn(*args)`` (a torch.compile'd callable on its first call) and return (result, Inductor's generated
    wrapper modules). Uses ``torch._inductor.utils.run_and_get_code``; without it, the ``output_code`` log."""
    try:
        from torch._inductor.utils import run_and_get_code as _rag
    except ImportError:  # pragma: no cover - older or newer torch: fall back to the public log
        _rag = None
    if _rag is not None:
        return _rag(fn, *args)
    buf = io.StringIO()  # pragma: no cover
    with contextlib.redirect_stderr(buf):  # set_logs creates its handler on the (redirected) stderr
        torch._logging.set_logs(output_code=True)
        try:
            out = fn(*args)
        finally:
            torch._logging.set_logs()
    return out, [buf.getvalue()]


@dataclass
class BackendTiming:
    backend: str
    first_call_s: float  # Dynamo trace + compile + one run
    median_s: float  # steady state (common.measure.bench.measure)
    iqr_s: float
    code: str = ""  # Inductor's generated code (inductor only, with capture_code)

    @property
    def compile_s(self) -> float:
        return max(self.first_call_s - self.median_s, 0.0)


def _device_of(model, args) -> torch.device:
    """The device of the first tensor in ``args`` or ``model``'s parameters (the CPU if none)."""
    t = next(bench._tensors(args, model), None)
    return t.device if t is not None else torch.device("cpu")


def time_backends(
    model,
    args: tuple,
    backends=("eager", "aot_eager", "inductor"),
    *,
    capture_code: bool = True,
    min_run_time: float = 0.2,
    warmup: int = 2,
    device: str | torch.device | None = None,
    after_call=None,
) -> tuple[pd.DataFrame, dict[str, BackendTiming]]:
    """Time ``model(*args)`` under no_grad with each backend (one fresh compile each, ``torch._dynamo.reset``
    first). Returns a table (backend, first call, compile, steady-state median and IQR, speedup vs eager) and
    the ``BackendTiming`` records (Inductor's generated code in ``.code``).

    ``device`` (default: that of the first tensor in ``args`` or ``model``): on CUDA the first call is
    bracketed by ``torch.cuda.synchronize`` and ``common.measure.bench.measure`` syncs before every clock read, so both
    times include the kernels, not just their launches. ``after_call()`` runs after every call, outside the
    compiled region and inside the timing (e.g. cropping a KV cache back to the prompt: a view)."""
    import torch._dynamo as dynamo

    dev = bench._device(device if device is not None else _device_of(model, args))
    results: dict[str, BackendTiming] = {}
    for b in backends:
        dynamo.reset()
        compiled = model if b == "eager" else torch.compile(model, backend=b)
        fn = compiled if after_call is None else _then(compiled, after_call)
        code = ""
        with torch.no_grad():
            bench._sync(dev)  # nothing queued from before may count towards the first call
            t0 = time.perf_counter()
            if b == "inductor" and capture_code:
                _, codes = run_and_get_code(fn, *args)
                code = "\n".join(codes)
            else:
                fn(*args)
            bench._sync(dev)
            first = time.perf_counter() - t0
            m = bench.measure(fn, *args, label=b, warmup=warmup, min_run_time=min_run_time, device=dev)
        results[b] = BackendTiming(b, first, m.median_s, m.iqr_s, code)
    eager = results["eager"].median_s if "eager" in results else None
    df = pd.DataFrame(
        [
            {
                "backend": r.backend,
                "first_call_s": r.first_call_s,
                "compile_s": r.compile_s,
                "median_s": r.median_s,
                "iqr_s": r.iqr_s,
                "speedup_vs_eager": eager / r.median_s if eager else float("nan"),
            }
            for r in results.values()
        ]
    )
    return df, results


def _then(fn, after):
    def call(*args):
        out = fn(*args)
        after()
        return out

    return call


class DecoderFFN(torch.nn.Module):
    """The second half of a reference decoder layer: [x +] SwiGLU(RMSNorm(x)), sharing the layer's weights."""

    def __init__(self, layer, residual: bool = True):
        super().__init__()
        self.norm, self.mlp, self.residual = layer.post_attention_layernorm, layer.mlp, residual

    def forward(self, x):  # x: (B, T, C)
        y = self.mlp(self.norm(x))
        return x + y if self.residual else y


# ---- reading Inductor's output code -------------------------------------------------------------------------
_KERNEL_NAME = re.compile(r"^(?:cpp|triton|[a-z]+)_(?:[a-z]+_)*?fused_(\w+?)_(\d+)$")


@lru_cache(maxsize=4096)
def _is_aten_op(name: str) -> bool:
    try:
        return bool(name) and hasattr(torch.ops.aten, name)
    except Exception:  # lazily resolved namespaces raise on odd names
        return False


def ops_in_kernel_name(name: str) -> list[str]:
    """Aten ops a fused kernel's name lists: Inductor names a fused kernel ``<prefix>_fused_<op>_<op>..._<n>``
    from the sorted origins of its nodes (``descriptive_names="original_aten"``). The op part is split into
    aten op names (longest names first): 'cpp_fused__unsafe_view_mul_silu_1' -> ['aten._unsafe_view',
    'aten.mul', 'aten.silu']. A name that is not a fused kernel gives []."""
    m = _KERNEL_NAME.match(name)
    if not m:
        return []
    tokens = m.group(1).split("_")
    best: dict[int, list[str] | None] = {0: []}  # tokens consumed -> fewest-op split so far
    for i in range(len(tokens)):
        if best.get(i) is None:
            continue
        for j in range(len(tokens), i, -1):
            cand = "_".join(tokens[i:j])
            if _is_aten_op(cand) and (best.get(j) is None or len(best[j]) > len(best[i]) + 1):
                best[j] = best[i] + [f"aten.{cand}"]
    return best.get(len(tokens)) or []


def kernel_source(code: str, name: str) -> str:
    """The source of one generated kernel: its definition line through the end of its C++ (CPU) or Triton (GPU)
    text, the first triple-quoted string after the name."""
    start = code.find(f"{name} = async_compile")
    if start < 0:
        raise DFAError(f"no kernel {name!r} is defined in this code (a line '{name} = async_compile...')")
    opening = code.find("'''", start)
    closing = code.find("'''", opening + 3) if opening >= 0 else -1
    if closing < 0:
        return code[start:]
    end = code.find("\n", closing)
    return code[start : end if end >= 0 else len(code)]


def code_language(code: str) -> str:
    """What Inductor generated: 'Triton' (GPU kernels), 'C++' (CPU kernels) or 'none' (no fused kernel)."""
    if "async_compile.triton(" in code:
        return "Triton"
    if "async_compile.cpp" in code:
        return "C++"
    return "none"
