"""One LLM step as a named serving stack runs it: the hardware step plus the stack's own costs.

``simulate_served(model, backend, stack=...)`` runs ``simulate_llm`` and adds what the stack
(``common.chips.catalog.stacks``) pays on top, as named events after the device work of the step:

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

``stack=None`` is the hardware alone. What a stack assumes is said, never silently applied:

* speculative decoding runs only for the targets the vendor says it speculates for (``Speculative.models``),
  and the notes name the draft and the acceptance; any other model gets the hardware figure, and the
  speculative one as a what-if (``report.what_if``; ``speculative=True`` makes it the result, labelled so);
* a stack with first-order costs nobody publishes (``Stack.not_published``) marks its result a bound
  (``report.bound``: "upper", with the reason);
* a stack whose per-model deployments are unpublished (``Stack.deployment``) gives a band (``report.band``): the
  speed on the fewest chips that hold the model (the result) down to the speed on the largest published
  deployment.

``report.stack`` names the stack and ``report.assumptions`` lists all of the above as data. A stack's simulator
options (``Stack.options``: CUDA graphs, eager one-kernel-per-op; ``Stack.launch_s``) are passed to the backend.

Latency is a result as well as throughput: a decode report has ``tpot_s`` = step time / tokens per user per
step (a speculative round: round time / (1 + a k)); a prefill report has ``ttft_s`` = the prefill step plus, for
a stack that schedules several decode steps per round (``Stack.ttft_wait_steps``), that many decode steps at
the prompt's context. ``report.warnings`` names a deployment beyond the records (``common.sim.realism``).
"""
from __future__ import annotations

import dataclasses

from common.chips.catalog.stacks import STACKS, Stack
from common.errors import DFAError, unknown
from common.sim.program import Event
from common.sim.realism import add_warnings
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
                    speculative: bool | None = None, **options) -> Report:
    """``simulate_llm`` plus the per-step costs of ``stack`` (see the module docstring). ``speculative``: None =
    as the vendor publishes (``Speculative.models``), True = apply the stack's speculation anyway (a what-if),
    False = never."""
    if speculative not in (None, True, False):
        raise DFAError(f"speculative must be None, True or False, got {speculative!r}")
    kw = dict(chip=chip, chips=chips, dtype=dtype, **options)
    if stack is None:
        if speculative:
            raise DFAError("speculative=True needs a stack with speculative decoding; valid: "
                           f"{', '.join(s.name for s in STACKS if s.speculative)}")
        report = simulate_llm(model, backend, phase=phase, batch=batch, seq=seq, **kw)
        report.stack, report.bound, report.band, report.what_if, report.assumptions = None, None, None, {}, {}
        report.notes.append("stack: none (hardware only; no serving-stack costs)")
        _latency(report, None, backend, kw)
        add_warnings(report)
        return report
    st = get_stack(stack, backend)
    moe = {k: v for k, v in (("moe_expert_dtype", st.moe.expert_dtype), ("moe_parallel", st.moe.parallel),
                             ("moe_expert_mma", st.moe.expert_mma)) if v is not None} if st.moe else {}
    kw = {**dict(st.options), **moe, **({"launch_s": st.launch_s.value} if st.launch_s else {}),
          **{k: v for k, v in kw.items() if v is not None or k not in moe}}
    spec = st.speculative if phase == "decode" else None
    published = spec is not None and _canonical(model) in spec.models
    use = spec is not None and (published if speculative is None else speculative)
    report, notes = _served(model, backend, st, phase, batch, seq, kw, spec if use else None)
    report.what_if = {}
    if spec is not None and not use:
        alt, _ = _served(model, backend, st, phase, batch, seq, kw, spec)
        report.what_if["speculative_tokens_per_s_per_user"] = alt.tokens_per_s_per_user
        why = ("speculative=False" if published else
               f"{st.name} publishes speculative decoding for {', '.join(spec.models) or 'no model'} only")
        notes.append(f"speculative decoding NOT applied ({why}): the figure is the hardware one, "
                     f"{report.tokens_per_s_per_user:,.0f} tok/s per user; what-if (speculative=True, draft "
                     f"{spec.draft_model}, acceptance {spec.acceptance:g}): {alt.tokens_per_s_per_user:,.0f}")
    elif use and not published:
        notes.append(f"WHAT-IF: speculative decoding applied to {model}, for which {st.name} publishes none "
                     f"(published for: {', '.join(spec.models) or 'no model'})")
    report.bound = {"kind": st.bound, "reason": st.bound_reason} if st.bound else None
    if report.bound:
        notes.append(f"{st.name}: an {st.bound} bound, not an estimate: {st.bound_reason}")
    report.band = _band(report, model, backend, st, phase, batch, seq, kw, spec if use else None) \
        if st.deployment and chips is None else None
    if report.band:
        lo, hi = report.band["tokens_per_s_per_user"]
        c_lo, c_hi = report.band["chips"]
        notes.append(f"{st.name}: deployment not published: {lo:,.1f}-{hi:,.1f} tok/s per user over {c_hi} "
                     f"(largest published deployment) to {c_lo} chips (the fewest that hold it); the result is "
                     f"the {c_lo}-chip end")
    notes += [f"{st.name}: not published, not modelled: {what}" for what in st.not_published]
    notes += [f"{st.name}: not published, second order: {what}" for what in st.second_order]
    report.notes.extend(notes)
    report.stack = st.name
    report.assumptions = {
        "stack": st.name, "not_published": list(st.not_published), "second_order": list(st.second_order),
        "speculative": None if spec is None else {
            "applied": use, "published_for": list(spec.models), "draft_model": spec.draft_model,
            "draft_tokens": spec.draft_tokens, "acceptance": spec.acceptance, "source": spec.source},
        "options": dict(st.options), "launch_s": st.launch_s.value if st.launch_s else None,
        "moe": None if st.moe is None else {"expert_dtype": st.moe.expert_dtype, "parallel": st.moe.parallel,
                                            "expert_mma": st.moe.expert_mma,
                                            "source": st.moe.source}}
    _latency(report, st, backend, kw)
    add_warnings(report)
    return report


def _latency(report: Report, st: Stack | None, backend: str, kw: dict) -> None:
    """``tpot_s`` (decode) or ``ttft_s`` (prefill), as the module docstring says."""
    report.tpot_s = report.ttft_s = None
    if report.phase == "decode":
        per_user = report.tokens / max(report.batch, 1)
        report.tpot_s = report.time_s / per_user if per_user else None
        return
    report.ttft_s = report.time_s
    if st is not None and st.ttft_wait_steps is not None:
        step = simulate_llm(report.workload, backend, phase="decode", batch=report.batch, seq=report.seq,
                            **{k: v for k, v in kw.items()})
        wait = st.ttft_wait_steps.value * step.time_s
        report.ttft_s += wait
        report.notes.append(f"time to first token {report.ttft_s * 1e3:.3f} ms = prefill {report.time_s * 1e3:.3f} "
                            f"ms + {st.ttft_wait_steps.value:g} decode steps of {step.time_s * 1e3:.3f} ms waited: "
                            f"{st.ttft_wait_steps.derivation}")


def _canonical(model: str) -> str:
    from common.models import resolve_config
    try:
        return resolve_config(model).name
    except DFAError:
        return model


def _served(model, backend, st: Stack, phase, batch, seq, kw, spec) -> tuple[Report, list[str]]:
    """The step on the hardware plus ``st``'s costs, speculating with ``spec`` (None: one token per step)."""
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
    return report, notes


def _band(report: Report, model, backend, st: Stack, phase, batch, seq, kw, spec) -> dict | None:
    """Speed on the fewest chips (``report``) and on the stack's largest published deployment."""
    most, source = st.deployment
    if report.chips >= most:
        report.notes.append(f"{st.name}: the fewest chips that hold {model} ({report.chips}) are not below the "
                            f"largest published deployment ({most}): no band")
        return None
    far, _ = _served(model, backend, st, phase, batch, seq, {**kw, "chips": most}, spec)
    return {"chips": (report.chips, most), "source": source,
            "tokens_per_s_per_user": (far.tokens_per_s_per_user, report.tokens_per_s_per_user),
            "tokens_per_s": (far.tokens_per_s, report.tokens_per_s)}


def _kv_reread(report: Report, model: str, st: Stack) -> str:
    """Append the extra KV-cache reads of one decode step (module docstring); returns the note."""
    from common.chips import DTYPE_BYTES
    from common.models import resolve_config
    from common.sim.run import make_policy
    config = resolve_config(model)
    group = config.n_heads // config.n_kv_heads
    if group == 1:
        return f"{st.name}: KV re-reads: none ({config.name} has as many KV heads as query heads)"
    if config.sliding_layers:  # a sliding-window layer holds min(P, W) positions
        kv = config.kv_bytes(report.seq + 1, DTYPE_BYTES[report.dtype]) * report.batch / report.chips
    else:
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
