"""Planted faults for the debugging course: each fails the way the real stack would, and is seedable.

A ``Fault`` is given to a compiled model through ``torch.compile(..., options={"faults": [Fault(...)]})`` (or
``simulate(..., faults=[...])``). ``seed`` picks which candidate node is hit, so an instructor can vary the
bug per learner; ``params={"every": True}`` plants it on every candidate instead (a grader's way to check that
a workaround fixes the faulty path rather than routing around one copy of it). Kinds, with the symptom a
learner sees (which layer of the stack each belongs to is the learner's call in Course 5, so it is not written
here):

* ``stick_copy``: a copy kernel's range is computed in whole sticks but at least one, i.e.
  ``max(1, n // stick) * stick`` elements of an n-element innermost dimension - so a 65-element fp16 clone
  returns 0 in its last element (torch-spyre issue #524), while 63, 64 and 128 elements come back right.
  The DMA log still shows every byte: the transfer was correct, the compute kernel's range was not.
* ``dma_timeout``: one kernel's input DMA never completes -> ``SimTimeoutError``.
* ``deadlock``: a wait edge from an early kernel on a later one makes the schedule cyclic ->
  ``DeadlockError`` naming the cycle (detected, never hung).
* ``layout_mismatch``: a restickify is skipped, so a transposed operand is read in its stored
  layout -> wrong values with the right shape.
* ``fp16_overflow``: softmax is computed as exp(x) / sum(exp(x)) in fp16 without subtracting the
  row max -> inf / inf = NaN for logits above ~11.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from common.errors import DFAError

FAULT_KINDS = ("stick_copy", "dma_timeout", "deadlock", "layout_mismatch", "fp16_overflow")
COPY_OPS = ("aten.clone", "aten.copy_", "aten._to_copy", "aten.copy")
STICK_BYTES_DEFAULT = 128  # only used when the backend's chip has no stick fact (non-Spyre targets)


class SimTimeoutError(RuntimeError):
    """A simulated transfer or kernel did not complete in time (the runtime's watchdog fired)."""


class DeadlockError(RuntimeError):
    """The schedule has a cycle of waits; reported instead of hanging."""


@dataclass(frozen=True)
class Fault:
    kind: str
    seed: int = 0
    target: str | None = None  # restrict to nodes whose op name contains this, e.g. "clone"
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in FAULT_KINDS:
            raise DFAError(f"unknown fault {self.kind!r}; valid: {', '.join(FAULT_KINDS)}")

    def pick(self, candidates: list):
        """The candidate this fault hits: chosen by the seed, so each learner can get a different one."""
        if not candidates:
            return None
        return candidates[random.Random(self.seed).randrange(len(candidates))]


def candidates(fault: Fault, ops) -> list:
    """Ops (``common.sim.program.Op``) a fault could be planted on."""
    want = {"stick_copy": lambda o: o.op in COPY_OPS,
            "dma_timeout": lambda o: True,
            "deadlock": lambda o: True,
            "layout_mismatch": lambda o: o.kind == "matmul" and bool(o.transposed_inputs),
            "fp16_overflow": lambda o: o.op in ("aten._softmax", "aten._safe_softmax")}[fault.kind]
    return [o for o in ops if want(o) and (fault.target is None or fault.target in o.op)]


def stick_copy_stop(n: int, elem_bytes: int, stick_bytes: int = STICK_BYTES_DEFAULT) -> int:
    """Elements the faulty copy covers along an n-element innermost dim: max(1, n // per_stick) * per_stick."""
    per_stick = stick_bytes // elem_bytes
    return min(n, max(1, n // per_stick) * per_stick)


def apply_stick_copy(src: torch.Tensor, out: torch.Tensor, stick_bytes: int) -> torch.Tensor:
    stop = stick_copy_stop(src.shape[-1] if src.dim() else 1, out.element_size(), stick_bytes)
    bad = torch.zeros_like(out)
    bad[..., :stop] = out[..., :stop]
    return bad


def softmax_without_max(x: torch.Tensor, dim: int) -> torch.Tensor:
    e = torch.exp(x.to(torch.float16))  # overflows to inf above ~11.09 in fp16
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


def check_schedule(kernels, extra_waits: list[tuple[str, str]]) -> None:
    """Raise DeadlockError if data dependencies plus ``extra_waits`` (waiter, waited-on) contain a cycle."""
    owner = {o.name: k.name for k in kernels for o in k.ops}
    waits = {k.name: {owner[p] for o in k.ops for p in o.in_bytes if p in owner and owner[p] != k.name}
             for k in kernels}
    for a, b in extra_waits:
        waits[a].add(b)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(k):
        state[k] = 1
        stack.append(k)
        for d in sorted(waits[k]):
            if state.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                raise DeadlockError("deadlock: cyclic wait " + " -> ".join(cycle)
                                    + " (each kernel waits for the next to finish; none can start)")
            if d not in state:
                visit(d)
        stack.pop()
        state[k] = 2

    for k in waits:
        if k not in state:
            visit(k)
