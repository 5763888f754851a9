"""Run one model through the real CPU ``torch.compile`` stack one layer at a time, and in fp64 as the truth.

``torch.compile(model, backend=B)`` stops the stack at a chosen depth (names from ``torch._dynamo.list_backends``
and the torch.compile docs)::

    "eager"       Dynamo captures an FX graph and runs it as it is          (capture)
    "aot_eager"   + AOTAutograd: functionalised aten graph, decompositions (lowering)
    "inductor"    + Inductor: fused loops, generated C++/OpenMP on a CPU,  (codegen)
                  Triton kernels on a GPU

A backend may also be any callable ``backend(gm, example_inputs) -> callable``, as torch.compile accepts.
Every run here starts from ``torch.compiler.reset()`` (no compiled code is reused across backends) and seeds the
global RNG just before the call, so a random op draws the same numbers in every run that uses the same
generator. These helpers run things; deciding what a difference means is the learner's work (Lab 5, Part 3). They run
where the model and inputs are (``common.measure.lab_device`` picks the GPU when there is one).

    out = stack_run(model, (x,), "inductor", seed=0)   # the first tensor output
    truth = fp64_reference(model, (x,), seed=0)         # a float64 copy of model and inputs, same seed
"""
from __future__ import annotations

import copy

import torch

__all__ = ["STACK", "backend_label", "fp64_draws_alike", "fp64_reference", "stack_run"]

STACK = ("eager", "aot_eager", "inductor")


def backend_label(backend) -> str:
    """A backend's name: the string itself, or a callable's ``__name__``."""
    return backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)


def _first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    if isinstance(out, dict) and out:
        return _first_tensor(next(iter(out.values())))
    raise TypeError(f"the model returned {type(out).__name__}; expected a tensor, or a tuple/list/dict of them")


def stack_run(model: torch.nn.Module, args: tuple, backend=None, seed: int = 0) -> torch.Tensor:
    """The model's first tensor output: plain eager when ``backend`` is None, else through torch.compile."""
    fn = model
    if backend is not None:
        torch.compiler.reset()
        fn = torch.compile(model, backend=backend)
    torch.manual_seed(seed)
    with torch.no_grad():
        return _first_tensor(fn(*args)).detach()


def fp64_reference(model: torch.nn.Module, args: tuple, seed: int = 0) -> torch.Tensor:
    """The truth to judge rounding against: a float64 copy of the model run eagerly on float64 inputs.

    Floating inputs and parameters become float64; integer inputs (indices) stay as they are. On the CPU a
    random op draws the same values for float32 and float64 under the same seed, so dropout masks agree.
    """
    model64 = copy.deepcopy(model).double()
    args64 = tuple(a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
    return stack_run(model64, args64, None, seed)


def fp64_draws_alike(device: str | torch.device, shape: tuple[int, ...], p: float = 0.5, seed: int = 0) -> bool:
    """Whether dropout on ``device`` drops the same elements of a float32 and a float64 tensor of ``shape`` under
    one seed: only then is ``fp64_reference`` a truth for a random model there. The CPU's generator draws
    element by element in both dtypes; a GPU kernel's draws may depend on the dtype, so ask. The global RNG
    state is left as it was."""
    dev = torch.device(device)
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else [], device_type=dev.type):
        kept = []
        for dtype in (torch.float32, torch.float64):
            torch.manual_seed(seed)
            ones = torch.ones(shape, dtype=dtype, device=dev)
            kept.append(torch.nn.functional.dropout(ones, p, training=True) != 0)
    return torch.equal(kept[0], kept[1])
