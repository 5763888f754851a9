"""Serving-stack records (common.chips.catalog.stacks): every term sourced, each stack moving the result the way
its record says, and a stack refused on a backend it does not serve."""
import dataclasses
import re

import pytest

from common.chips.catalog.stacks import STACKS, MoEPath, Stack
from common.chips.types import Estimate
from common.errors import DFAError
from common.sim.serving import get_stack, simulate_served

BY_NAME = {s.name: s for s in STACKS}
# a source: a URL or web domain, a repository path or pull request, a documentation file, or a named blog post
SOURCE = re.compile(r"https?://|\b[\w-]+\.(?:com|org|ai|io)\b|\b[\w-]+/[\w.-]+ (?:PR|README|docs|benchmark)"
                    r"|PR #\d+|docs/source/|\bblog\b|\.md\b")
TERMS = ("step_host_s", "step_host_fraction", "kv_reread", "launch_s", "ttft_wait_steps")


def _problems(stack: Stack) -> list[str]:
    """Why ``stack`` is not a sourced record: a term that is not an Estimate, or whose derivation names neither a
    source nor its arithmetic; a speculative term without a source; a record with no source anywhere."""
    out = []
    for name in TERMS:
        term = getattr(stack, name)
        if term is None:
            continue
        if not isinstance(term, Estimate):
            out.append(f"{name} is a bare {type(term).__name__}, not an Estimate")
        elif not term.unit or not (SOURCE.search(term.derivation) or "=" in term.derivation):
            out.append(f"{name}: derivation names no source and no arithmetic: {term.derivation!r}")
    if stack.speculative is not None and not SOURCE.search(stack.speculative.source):
        out.append("speculative: no source")
    if stack.moe is not None and not SOURCE.search(stack.moe.source):
        out.append("moe: no source")
    text = " ".join((stack.description, *stack.second_order, *stack.not_published, stack.bound_reason,
                     *(t.derivation for t in (getattr(stack, n) for n in TERMS) if isinstance(t, Estimate)),
                     stack.speculative.source if stack.speculative else "",
                     stack.deployment[1] if stack.deployment else ""))
    if not SOURCE.search(text):
        out.append("no source anywhere in the record")
    return out


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.name)
def test_every_term_of_every_stack_is_a_sourced_estimate(stack):
    assert _problems(stack) == []


def test_the_source_check_catches_a_planted_guess():
    guess = dataclasses.replace(BY_NAME["trtllm-v0.9"], step_host_s=Estimate(1e-3, "s", "about a millisecond"),
                                second_order=())
    problems = _problems(guess)
    assert any(p.startswith("step_host_s") for p in problems)
    assert "no source anywhere in the record" in problems  # its sources were in second_order, now removed
    bare = dataclasses.replace(guess, step_host_s=1e-3)
    assert any("bare float" in p for p in _problems(bare))
    unsourced = dataclasses.replace(BY_NAME["trtllm-v0.9"], moe=MoEPath("fp16", "tensor", "it seemed slower"))
    assert "moe: no source" in _problems(unsourced)
    empty = Stack("nothing", "gpu", "2024", "a name and nothing else")
    assert _problems(empty) == ["no source anywhere in the record"]


def test_trtllm_v09_reads_each_kv_head_once_where_v06_rereads_it():
    stack = BY_NAME["trtllm-v0.9"]
    assert stack.backend == "gpu" and stack.kv_reread is None and not stack.not_published
    kw = dict(phase="decode", batch=64, seq=2048, chip="h100-sxm", chips=2, dtype="fp8")
    old = simulate_served("llama-2-70b", "gpu", stack="trtllm-v0.6", **kw)
    new = simulate_served("llama-2-70b", "gpu", stack="trtllm-v0.9", **kw)
    bare = simulate_served("llama-2-70b", "gpu", **kw)
    assert any(e.name.startswith("kv re-read") for e in old.events)
    assert not any(e.name.startswith("kv re-read") for e in new.events)
    assert new.tokens_per_s > old.tokens_per_s  # a grouped-query model: XQA skips the re-reads
    assert new.tokens_per_s == pytest.approx(bare.tokens_per_s)  # and charges nothing else (second order only)
    assert new.bound is None and any("XQA" in n for n in new.notes)
    # a model without grouped heads: the two releases agree
    mha = dict(kw, chips=1, batch=56)
    assert simulate_served("llama-2-7b", "gpu", stack="trtllm-v0.9", **mha).tokens_per_s == pytest.approx(
        simulate_served("llama-2-7b", "gpu", stack="trtllm-v0.6", **mha).tokens_per_s)


def test_a_stack_on_a_backend_it_does_not_serve_is_refused_in_one_line():
    tpu_stacks = ", ".join(s.name for s in STACKS if s.backend == "tpu")
    with pytest.raises(DFAError) as err:
        simulate_served("llama-2-7b", "tpu", stack="trtllm-v0.9")
    message = str(err.value)
    assert "\n" not in message and "'trtllm-v0.9' serves on the gpu backend, not tpu" in message
    assert message.endswith(f"valid for tpu: {tpu_stacks}")
    with pytest.raises(DFAError, match=r"^unknown stack 'trtllm-v9'; valid: .*trtllm-v0\.9"):
        get_stack("trtllm-v9", "gpu")


def test_the_cli_and_the_explorer_take_the_new_stack_from_the_catalog():
    from common.cli import build_parser
    from common.cli.simulate import _check_stack
    from common.explore.whatif import Choices
    _check_stack("trtllm-v0.9", "gpu")  # accepted
    with pytest.raises(DFAError, match=r"valid for tpu: jetstream"):
        _check_stack("trtllm-v0.9", "tpu")
    sub = next(a for a in build_parser()._actions if a.choices and "simulate" in a.choices).choices["simulate"]
    help_text = " ".join(next(a for a in sub._actions if "--stack" in a.option_strings).help.split())
    assert all(f"{s.name} ({s.backend})" in help_text for s in STACKS)  # the help lists the catalog
    Choices(model="llama-2-7b", stack="trtllm-v0.9").checked()  # the explorer checks it with get_stack
    with pytest.raises(DFAError, match=r"^unknown stack 'trtllm-v9'"):
        Choices(model="llama-2-7b", stack="trtllm-v9").checked()


def test_every_trtllm_v09_figure_cites_the_v090_tables():
    from benchmarks.fidelity_figures import FIGURES
    rows = [f for f in FIGURES if f.stack == "trtllm-v0.9"]
    dense = [f for f in rows if "mixtral" not in f.name]
    assert len(dense) >= 2 and all("v0.9.0/docs/source/performance.md" in f.source for f in rows)
    assert {f.unit for f in dense} == {"tok/s/GPU", "prompt tok/s"}  # throughput and first-token rows


def _stacks_without_own_figure(figures) -> list[str]:
    """Stacks no sourced figure measured on the stack's own software checks (a ``Figure.proxy``, measured on
    other software standing in for the stack, does not count)."""
    own = {f.stack for f in figures if f.stack and not f.proxy and SOURCE.search(f.source)}
    return [s.name for s in STACKS if s.name not in own]


def test_every_stack_is_checked_by_a_published_figure_measured_on_it():
    from benchmarks.fidelity_figures import FIGURES
    assert _stacks_without_own_figure(FIGURES) == []
    # the check can fail: hf-generate's transformers figures removed, its proxy (an eager loop) does not count
    proxies_only = [f for f in FIGURES if f.stack != "hf-generate" or f.proxy]
    assert any(f.stack == "hf-generate" for f in proxies_only)
    assert _stacks_without_own_figure(proxies_only) == ["hf-generate"]
    unsourced = [dataclasses.replace(f, source="a colleague's number") if f.stack == "gpt-fast" else f for f in FIGURES]
    assert _stacks_without_own_figure(unsourced) == ["gpt-fast"]
