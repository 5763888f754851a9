"""Grader-side answers of Lab 3 (instructor edition only: ``source/`` is never released or published).

Hidden tests import from here (``from answers import count_ops as _co``); nothing in ``common`` holds these.

* ``count_ops(gm)`` — Counter of ``common.compile_tools.op_name(n)`` over the call_function / call_module /
  call_method nodes, without the ``getitem`` that unpacks multi-output ops.
* ``break_even_calls(timing, backend)`` — ceil(compile_s / (median_s(eager) - median_s(backend))), at least 1;
  math.inf when the backend is not faster per call.
* ``kernel_names(code)`` — every NAME of a line ``NAME = async_compile.<x>(`` whose NAME holds "fused", in order
  of definition, once each; ``fused_kernels(code)`` — ``{name: ops_in_kernel_name(name)}`` of those.
* ``find_groups(gm)`` — maximal legal pointwise-fusion groups: union of the edges p -> n with n pointwise or a
  view, p pointwise, a view or a matmul, and users(p) == {n}; at most one matmul per group, groups with fewer
  than two compute ops dropped; each group a list of node names in graph order.
* ``bytes_saved(gm, names)`` — 2 x sum(numel x element size) over the group's compute nodes except the one whose
  value leaves the group (one write and one read saved per interior value; views move nothing).
* ``mxu_tiling(M, K, N, mxu, sublanes)`` — M padded to ``sublanes``, K and N to ``mxu``;
  passes = K'/mxu x N'/mxu; efficiency = MKN / (M'K'N').
* ``sticks(shape, elem_bytes, stick_bytes, dim=-1)`` — per = stick_bytes // elem_bytes elements per stick along
  ``dim``; per_row = ceil(shape[dim] / per); rows = product of the other dims; sticks = rows x per_row;
  device_shape = (per_row, *other dims in order, per); padding = sticks x stick_bytes - numel x elem_bytes.
* ``schedule_overhead(report)`` — on the critical engine: busy = sum of compute events, named = sum of the
  others, idle = time_s - |union of the events' intervals|, share = (named + idle) / time_s.
* ``variant(name)`` — a seed per offering and learner (from the offering's secret), for fresh hidden inputs.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections import Counter

from common.compile_tools import op_name, ops_in_kernel_name
from common.fusion import classify

SALT = globals().get("GRADER_SALT") or os.environ.get("DFA_SALT", "local-dev-salt")
STUDENT = globals().get("GRADER_STUDENT", "local")


def variant(name: str, modulo: int = 2**31) -> int:
    """A seed for the hidden input ``name``: differs per offering (secret salt) and per learner."""
    return int(hashlib.sha256(f"{SALT}|{STUDENT}|lab3|{name}".encode()).hexdigest()[:12], 16) % modulo


def count_ops(gm) -> Counter:
    ops = ("call_function", "call_module", "call_method")
    return Counter(op_name(n) for n in gm.graph.nodes if n.op in ops and getattr(n.target, "__name__", "") != "getitem")


def break_even_calls(timing, backend="inductor"):
    t = timing.set_index("backend")
    saving = t.loc["eager", "median_s"] - t.loc[backend, "median_s"]
    if saving <= 0:
        return math.inf
    return max(1, math.ceil(t.loc[backend, "compile_s"] / saving))


_KERNEL_DEF = re.compile(r"^(\w*fused\w*?)\s*=\s*async_compile\.\w+\(", re.M)


def kernel_names(code: str) -> list[str]:
    return list(dict.fromkeys(_KERNEL_DEF.findall(code)))


def fused_kernels(code: str) -> dict[str, list[str]]:
    return {name: ops_in_kernel_name(name) for name in kernel_names(code)}


def find_groups(gm) -> list[list[str]]:
    nodes = list(gm.graph.nodes)
    group = {n: {n} for n in nodes}
    for n in nodes:
        for p in n.all_input_nodes:
            if group[p] is group[n] or set(p.users) != {n}:
                continue
            if classify(n) not in ("pointwise", "view") or classify(p) not in ("pointwise", "view", "matmul"):
                continue
            merged = group[p] | group[n]
            if sum(classify(m) == "matmul" for m in merged) > 1:
                continue
            for m in merged:
                group[m] = merged
    out = {id(s): s for s in group.values()}.values()
    return [
        [m.name for m in nodes if m in s] for s in out if sum(classify(m) in ("pointwise", "matmul") for m in s) >= 2
    ]


def bytes_saved(gm, names) -> int:
    inside = {n for n in gm.graph.nodes if n.name in set(names)}
    total = 0
    for n in inside:
        leaves = not n.users or not set(n.users) <= inside
        if not leaves and classify(n) in ("pointwise", "matmul"):
            total += n.meta["val"].numel() * n.meta["val"].element_size()
    return 2 * total


def mxu_tiling(M, K, N, mxu, sublanes) -> dict:
    def up(v, m):
        return -(-v // m) * m

    mp, kp, np_ = up(M, sublanes), up(K, mxu), up(N, mxu)
    return {
        "M_padded": mp,
        "K_padded": kp,
        "N_padded": np_,
        "mxu_passes": (kp // mxu) * (np_ // mxu),
        "efficiency": (M * K * N) / (mp * kp * np_),
    }


def sticks(shape, elem_bytes, stick_bytes, dim=-1) -> dict:
    shape = tuple(int(s) for s in shape)
    d = dim % len(shape)
    per = stick_bytes // elem_bytes
    per_row = -(-shape[d] // per)
    others = shape[:d] + shape[d + 1 :]
    n = math.prod(others) * per_row
    return {
        "sticks": n,
        "device_shape": (per_row, *others, per),
        "padding_bytes": n * stick_bytes - math.prod(shape) * elem_bytes,
    }


def schedule_overhead(report) -> dict:
    evs = sorted((e for e in report.events if e.engine == report.critical_engine), key=lambda e: e.start)
    busy = sum(e.duration for e in evs if e.kind == "compute")
    named = sum(e.duration for e in evs if e.kind != "compute")
    covered, end = 0.0, 0.0
    for e in evs:
        covered += max(0.0, e.end - max(e.start, end))
        end = max(end, e.end)
    idle = report.time_s - covered
    return {"busy_s": busy, "named_s": named, "idle_s": idle, "overhead_share": (named + idle) / report.time_s}
