"""One LLM step as a named serving stack runs it: the hardware step plus the stack's own costs.

``simulate_served(model, backend, stack=...)`` runs ``simulate_llm`` and adds what the stack
(``common.catalog.stacks``) pays on top, as named events after the device work of the step:

* per-step host time (``step_host_s`` + ``step_host_fraction`` x device step) on the critical engine, a
  "host" event bounded by scheduling: the device waits for it;
* KV re-reads (decode only, ``kv_reread``): a grouped-query model's KV heads are read once per query head
  sharing them, (n_heads / n_kv_heads - 1) x the step's KV-cache bytes more per chip, times the fraction
  reaching memory, at the achievable main-memory bandwidth; a "memory" event after the device work;
* speculative decoding (decode only, draft model smaller than the target): one round is ``draft_tokens``
  draft decode steps, then one target step verifying draft_tokens + 1 tokens per user (simulated as a decode
  step of batch x (draft_tokens + 1) rows), then the host time. The round yields
  1 + acceptance x draft_tokens tokens per user, so
      tokens/s per user = (1 + a k) / (k t_draft + t_verify + t_host).

``stack=None`` is the hardware alone. The report's notes and ``report.stack`` say which stack was assumed and
which of its costs nobody publishes.
"""
from __future__ import annotations

import dataclasses

from common.catalog.stacks import STACKS, Stack
from common.errors import DFAError, unknown
from common.sim.program import Event
from common.sim.report import Report
from common.sim.run import simulate_llm

STACK_NAMES = tuple(s.name for s in STACKS)


def get_stack(name: str, backend: str | None = None) -> Stack:
    """The stack called ``name``; a one-line DFAError naming the valid ones (for ``backend``, if given)."""
    by_name = {s.name: s for s in STACKS}
    if name not in by_name:
        valid = [s.name for s in STACKS if backend is None or s.backend == backend] or STACK_NAMES
        raise unknown("stack", name, valid)
    stack = by_name[name]
    if backend is not None and stack.backend != backend:
        valid = ", ".join(s.name for s in STACKS if s.backend == backend) or "none"
        raise DFAError(f"stack {name!r} serves on the {stack.backend} backend, not {backend}; valid for {backend}: "
                       f"{valid}")
    return stack


def simulate_served(model: str, backend: str, *, stack: str | None = None, phase: str = "decode", batch: int = 1,
                    seq: int = 1024, chip=None, chips: int | None = None, dtype: str | None = None,
                    **options) -> Report:
    """``simulate_llm`` plus the per-step costs of ``stack`` (see the module docstring)."""
    kw = dict(chip=chip, chips=chips, dtype=dtype, **options)
    if stack is None:
        report = simulate_llm(model, backend, phase=phase, batch=batch, seq=seq, **kw)
        report.stack = None
        report.notes.append("stack: none (hardware only; no serving-stack costs)")
        return report
    st = get_stack(stack, backend)
    spec = st.speculative if phase == "decode" else None
    report = simulate_llm(model, backend, phase=phase, batch=batch, seq=seq, **kw)
    notes = [f"stack: {st.name} ({st.released}): {st.description}"]
    if spec is not None:
        report, note = _speculative_round(report, model, backend, spec, batch, seq, kw)
        notes.append(note)
    if st.kv_reread is not None and phase == "decode":
        notes.append(_kv_reread(report, model, st))
    device = report.time_s
    host = (st.step_host_s.value if st.step_host_s else 0.0) + \
        (st.step_host_fraction.value * device if st.step_host_fraction else 0.0)
    if host > 0:
        how = "; ".join(e.derivation for e in (st.step_host_s, st.step_host_fraction) if e)
        report.events.append(Event(f"host step ({st.name})", "host", report.critical_engine, device, host,
                                   bound="scheduling", floor=0.0, detail={"stack": st.name, "source": how}))
        notes.append(f"per-step host time {host * 1e3:.3f} ms: {how}")
    notes += [f"{st.name}: not published, not modelled: {what}" for what in st.not_published]
    report.notes.extend(notes)
    report.stack = st.name
    return report


def _kv_reread(report: Report, model: str, st: Stack) -> str:
    """Append the extra KV-cache reads of one decode step (module docstring); returns the note."""
    from common.chips import DTYPE_BYTES
    from common.models import resolve_config
    from common.sim.run import make_policy
    config = resolve_config(model)
    group = config.n_heads // config.n_kv_heads
    if group == 1:
        return f"{st.name}: KV re-reads: none ({config.name} has as many KV heads as query heads)"
    kv = config.kv_bytes_per_token(DTYPE_BYTES[report.dtype]) * report.batch * (report.seq + 1) / report.chips
    extra = (group - 1) * kv * st.kv_reread.value
    policy = make_policy(report.backend, report.chip, report.chips, report.dtype)
    level = policy.main_level
    seconds = extra / policy.bandwidth(level)
    report.events.append(Event(f"kv re-read ({st.name})", "dma", report.critical_engine, report.time_s, seconds,
                               bytes={level: extra}, bound="memory", floor=seconds,
                               detail={"stack": st.name, "group": group, "source": st.kv_reread.derivation}))
    return (f"{st.name}: each KV head read by {group} query heads: +{extra / 1e9:.2f} GB per chip per step "
            f"({seconds * 1e3:.3f} ms): {st.kv_reread.derivation}")


def _speculative_round(target: Report, model: str, backend: str, spec, batch: int, seq: int, kw: dict):
    """One speculative round: k draft steps, one verify step of k + 1 tokens per user (module docstring)."""
    from common.models import resolve_config
    if resolve_config(spec.draft_model).n_params >= resolve_config(model).n_params:
        return target, (f"speculative decoding skipped: the draft {spec.draft_model} is not smaller than "
                        f"{target.workload}")
    k = spec.draft_tokens
    draft = simulate_llm(spec.draft_model, backend, phase="decode", batch=batch, seq=seq,
                         **{**kw, "chips": None})
    verify = simulate_llm(model, backend, phase="decode", batch=batch * (k + 1), seq=seq, **kw)
    events, t = [], 0.0
    for i in range(k):
        events += [dataclasses.replace(e, name=f"draft{i}.{e.name}", start=e.start + t) for e in draft.events]
        t += draft.time_s
    events += [dataclasses.replace(e, name=f"verify.{e.name}", start=e.start + t) for e in verify.events]
    tokens = batch * (1 + spec.acceptance * k)
    out = dataclasses.replace(target, events=events, tokens=tokens, programs=target.programs + draft.programs)
    note = (f"speculative decoding: {k} draft steps of {spec.draft_model} ({draft.time_s * 1e3:.3f} ms each, "
            f"{draft.chips} chip(s)) + one verify step of {k + 1} tokens per user ({verify.time_s * 1e3:.3f} ms), "
            f"acceptance {spec.acceptance:g} -> {1 + spec.acceptance * k:.2f} tokens per round: {spec.source}")
    return out, note
