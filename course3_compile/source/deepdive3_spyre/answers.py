"""Grader-side answers of the Course 3 Deep Dive (instructor edition only: ``source/`` is never released or
published). Hidden tests import from here (``from answers import device_layout as _ref``).

* ``device_layout(shape, dtype, dim=-1, stick_bytes=128)`` — sticks of ``stick_bytes`` along dimension ``dim``
  (a 0-d shape is (1,)): per = stick_bytes // element bytes; per_row = ceil(shape[dim] / per); sticks = per_row x
  product of the other dims; device_shape = (per_row, *other dims in order, per); padding = sticks x stick_bytes -
  numel x element bytes. (``common.sim.spyre.stick_layout`` is the simulator's own: 128-B sticks, innermost dim
  only.)
* ``divide_work(dims, cores, forced=None)`` — the ``forced`` pieces first; then, with cores // prod(forced) cores,
  every order of the other dims of size > 1, each taking its largest divisor that fits the cores left; the order
  using most cores wins, ties keep the listed priority; the result holds forced and chosen pieces > 1.
* ``variant(name)`` — a seed per offering and learner (from the offering's secret), for fresh hidden inputs.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os

from common.chips import DTYPE_BYTES

SALT = globals().get("GRADER_SALT") or os.environ.get("DFA_SALT", "local-dev-salt")
STUDENT = globals().get("GRADER_STUDENT", "local")


def variant(name: str, modulo: int = 2**31) -> int:
    """A seed for the hidden input ``name``: differs per offering (secret salt) and per learner."""
    return int(hashlib.sha256(f"{SALT}|{STUDENT}|deepdive3|{name}".encode()).hexdigest()[:12], 16) % modulo


def device_layout(shape, dtype="fp16", dim=-1, stick_bytes=128) -> dict:
    shape = tuple(int(s) for s in shape) or (1,)
    d = dim % len(shape)
    elem = DTYPE_BYTES[dtype]
    per = stick_bytes // elem
    per_row = -(-shape[d] // per)
    others = shape[:d] + shape[d + 1 :]
    sticks = math.prod(others) * per_row
    return {
        "device_shape": (per_row, *others, per),
        "sticks": sticks,
        "padding_bytes": sticks * stick_bytes - math.prod(shape) * elem,
    }


def divide_work(dims, cores, forced=None) -> dict:
    forced = {label: int(n) for label, n in (forced or {}).items() if int(n) > 1}
    free0 = cores // math.prod(forced.values())
    dims = [(label, int(size)) for label, size in dims if int(size) > 1 and label not in forced]
    best_used, best = 1, {}
    for order in itertools.permutations(dims):
        free, used, parts = free0, 1, {}
        for label, size in order:
            d = max(x for x in range(1, min(size, free) + 1) if size % x == 0)
            if d > 1:
                used, free, parts[label] = used * d, free // d, d
        if used > best_used:
            best_used, best = used, parts
    return {**forced, **best}
