"""Numerics events of a compiled graph run with a target's precision rules: overflow, underflow, NaN.

A simulated backend really runs its graph on the CPU, rounding values where the target would
(``common.sim.compile.TargetInterpreter``): every stored tensor to ``policy.storage_dtype``, matmul operands to
``policy.matmul_operand_dtype``. A rounding can change a value's kind, and that must never pass silently:

* overflow   a finite value becomes +-inf when stored (fp16 holds at most 65504);
* underflow  a nonzero value becomes 0 when stored (below fp16's smallest subnormal, ~6e-8);
* nan        an op returns NaN from NaN-free inputs that descend from such an event (inf - inf, 0 / 0).

Checks are vectorised and run on each op's output only (inputs once per run); the common all-finite case costs
one comparison pass. Each event is counted in ``report.counters`` ("overflow", "underflow", "nan": op events,
summed over runs), listed in ``report.numerics`` (one ``NumericsEvent`` per node, kind and rule), and the first
run that has any warns once per compiled graph with a ``NumericsWarning`` naming the op and the rule.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

KINDS = ("overflow", "underflow", "nan")
_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


class NumericsWarning(UserWarning):
    """A simulated target's precision rule turned finite values into inf, nonzero values into 0, or made NaN."""


@dataclass
class NumericsEvent:
    node: str  # the fx node whose value changed (an input is named as read by its first consumer)
    op: str
    kind: str  # overflow | underflow | nan
    rule: str  # e.g. "storage_dtype=fp16", or "follows overflow at sum (storage_dtype=fp16)"
    elements: int  # elements affected in the first run that had the event
    exact: float = float("nan")  # overflow: the largest |exact value| that became inf; underflow: the smallest
    runs: int = 1

    def __str__(self) -> str:
        value = "" if self.exact != self.exact else \
            f", |exact| {'up to' if self.kind == 'overflow' else 'down to'} {self.exact:g}"
        runs = f", in {self.runs} runs" if self.runs > 1 else ""
        return f"{self.kind} in {self.op} (node {self.node}, {self.elements} element(s){value}{runs}) under {self.rule}"


def rule_text(policy, rule: str) -> str:
    """'storage_dtype=fp16' for a policy attribute, the form used in events and warnings."""
    return f"{rule}={getattr(policy, rule)}"


class NumericsMonitor:
    """Collects the events of one compiled graph over its runs and writes them into its report."""

    def __init__(self, report, policy, region: str):
        self.report, self.policy, self.region = report, policy, region
        self.warned = False
        self._events: dict[tuple[str, str, str], NumericsEvent] = {}
        for kind in KINDS:
            report.counters.setdefault(kind, 0)
        report.numerics = []
        self.start_run()

    def start_run(self) -> None:
        self.new: list[NumericsEvent] = []
        self.tainted: dict[str, str] = {}  # node -> the event its value descends from

    # ---- checks (called by the interpreter) -------------------------------------------------------------
    def rounded(self, node: str, op: str, rule: str, exact: torch.Tensor, stored: torch.Tensor) -> None:
        """``exact`` (the model's dtype) was stored as ``stored`` under ``rule``: finite -> inf, nonzero -> 0."""
        if not exact.is_floating_point() or exact.numel() == 0:
            return
        exact, stored = exact.detach(), stored.detach()  # checks are not part of the model's autograd graph
        zero = stored == 0
        if bool(zero.any()):  # common case: no zeros, no finite check beyond one pass each
            under = zero & (exact != 0)
            if bool(under.any()):
                self._add(node, op, "underflow", rule_text(self.policy, rule), int(under.sum()),
                          float(exact[under].abs().min()))
        if not bool(torch.isfinite(stored).all()):
            over = torch.isinf(stored) & torch.isfinite(exact)
            if bool(over.any()):
                self._add(node, op, "overflow", rule_text(self.policy, rule), int(over.sum()),
                          float(exact[over].abs().max()))

    def produced(self, node: str, op: str, out, inputs: list[str], input_values: list) -> None:
        """An op's output: NaN (or inf) made from inputs free of it (``input_values``: as the op read them,
        after rounding), where an input descends from an event (``inputs``: the input nodes' names)."""
        roots = [self.tainted[i] for i in inputs if i in self.tainted]
        if roots and node not in self.tainted:
            self.tainted[node] = roots[0]
        if not roots or not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return
        out = out.detach()
        if bool(torch.isfinite(out).all()):
            return
        floats = [v for v in input_values if isinstance(v, torch.Tensor) and v.is_floating_point()]
        for kind, test in (("nan", torch.isnan), ("overflow", torch.isinf)):
            hits = int(test(out).sum())
            if hits and not any(bool(test(v).any()) for v in floats):
                self._add(node, op, kind, f"follows {roots[0]}", hits)

    def _add(self, node: str, op: str, kind: str, rule: str, elements: int, exact: float = float("nan")) -> None:
        self.tainted.setdefault(node, f"{kind} at {node} ({rule})")
        key = (node, kind, rule)
        event = self._events.get(key)
        if event is None:
            event = self._events[key] = NumericsEvent(node, op, kind, rule, elements, exact, runs=0)
            self.report.numerics.append(event)
        event.runs += 1
        self.report.counters[kind] += 1
        self.new.append(event)

    # ---- after a run --------------------------------------------------------------------------------------
    def finish_run(self) -> None:
        if not self.new or self.warned:
            return
        self.warned = True
        counts = ", ".join(f"{sum(e.kind == k for e in self.new)} {k}" for k in KINDS)
        first = self.new[0]
        rule, _, dtype = first.rule.partition("=")
        source = getattr(self.policy, "precision_sources", {}).get(rule, "")
        limit = ""
        if dtype in _DTYPES:
            info = torch.finfo(_DTYPES[dtype])
            limit = (f" ({dtype} holds at most {info.max:g})" if first.kind == "overflow" else
                     f" ({dtype}'s smallest subnormal is {info.smallest_normal * info.eps:.2g})")
        warnings.warn(NumericsWarning(
            f"dfa_{self.policy.name} {self.region}: {first}{limit}"
            + (f" [rule: {source}]" if source else "")
            + f"; this run: {counts} (ops). report.numerics lists every event, report.counters counts them; "
              "this warning is shown once per compiled graph"), stacklevel=4)


def numerics_line(report) -> str:
    """One line: the counters, and the first events."""
    counts = {k: report.counters.get(k, 0) for k in KINDS}
    if not any(counts.values()):
        return ("numerics: no overflow, underflow or NaN from the precision rules so far" if "overflow" in
                report.counters else "numerics: not checked (a cost-only simulation computes no values)")
    shown = "; ".join(str(e) for e in report.numerics[:3])
    more = f" (+{len(report.numerics) - 3} more)" if len(report.numerics) > 3 else ""
    return (f"numerics (op events, all runs): {counts['overflow']} overflow, {counts['underflow']} underflow, "
            f"{counts['nan']} NaN; {shown}{more}")
