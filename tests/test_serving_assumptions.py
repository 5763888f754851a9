"""Serving stacks say what they assume: speculation only where the vendor publishes it, bounds where a
first-order cost is unpublished, a band where the deployment is unpublished (common.sim.serving)."""
import pytest

from common.chips.catalog.stacks import STACKS
from common.errors import DFAError
from common.sim import simulate_llm
from common.sim.serving import simulate_served

BY_NAME = {s.name: s for s in STACKS}


def test_speculation_only_for_the_models_the_vendor_names():
    spec = BY_NAME["cerebras-2024-10"].speculative
    assert spec.models == ("llama-3.1-70b",)
    seventy = simulate_served("llama-3.1-70b", "wse", stack="cerebras-2024-10")
    assert seventy.assumptions["speculative"]["applied"] and any(e.name.startswith("draft") for e in seventy.events)
    assert any(f"{spec.draft_tokens} draft steps of {spec.draft_model}" in n and f"acceptance {spec.acceptance:g}"
               in n for n in seventy.notes)
    # a model Cerebras publishes no draft for: the hardware figure, the speculative one only as a what-if
    qwen = simulate_served("qwen3-30b-a3b", "wse", stack="cerebras-2024-10")
    hardware = simulate_llm("qwen3-30b-a3b", "wse", phase="decode", batch=1, seq=1024)
    assert not qwen.assumptions["speculative"]["applied"] and not any(e.name.startswith("draft") for e in qwen.events)
    assert qwen.tokens_per_s_per_user == pytest.approx(hardware.tokens_per_s_per_user)
    what_if = qwen.what_if["speculative_tokens_per_s_per_user"]
    assert what_if > qwen.tokens_per_s_per_user
    assert any("NOT applied" in n and "llama-3.1-70b only" in n for n in qwen.notes)
    forced = simulate_served("qwen3-30b-a3b", "wse", stack="cerebras-2024-10", speculative=True)
    assert forced.tokens_per_s_per_user == pytest.approx(what_if)
    assert any(n.startswith("WHAT-IF") for n in forced.notes)
    off = simulate_served("llama-3.1-70b", "wse", stack="cerebras-2024-10", speculative=False)
    assert off.tokens_per_s_per_user < seventy.tokens_per_s_per_user
    with pytest.raises(DFAError, match=r"^speculative must be None, True or False, got 'yes'$"):
        simulate_served("llama-3.1-70b", "wse", stack="cerebras-2024-10", speculative="yes")
    with pytest.raises(DFAError, match=r"^speculative=True needs a stack"):
        simulate_served("llama-3.1-70b", "wse", speculative=True)


def test_unpublished_first_order_costs_make_the_result_an_upper_bound():
    aug = simulate_served("llama-3.1-8b", "wse", stack="cerebras-2024-08")
    assert aug.bound["kind"] == "upper" and "only a fraction" in aug.bound["reason"]
    assert any("an upper bound, not an estimate" in n for n in aug.notes)
    # a stack whose unpublished costs are second order (charged at a bound, or small) gives an estimate
    trt = simulate_served("llama-2-7b", "gpu", stack="trtllm-v0.6", batch=8)
    assert trt.bound is None and any("second order" in n for n in trt.notes)
    assert all(s.bound for s in STACKS if s.not_published)  # every first-order unknown makes a bound


def test_groq_names_its_unknowns_and_gives_a_deployment_band():
    groq = BY_NAME["groq-2024"]
    assert any("host" in w for w in groq.not_published) and any("chip count" in w for w in groq.not_published)
    most = groq.deployment[0]
    r = simulate_served("llama-2-7b", "lpu", stack="groq-2024", seq=2048)
    lo, hi = r.band["tokens_per_s_per_user"]
    assert r.band["chips"] == (r.chips, most) and r.chips < most
    assert hi == pytest.approx(r.tokens_per_s_per_user) and lo < hi  # more chips, more hops: slower per user
    far = simulate_llm("llama-2-7b", "lpu", phase="decode", batch=1, seq=2048, chips=most)
    assert lo == pytest.approx(far.tokens_per_s_per_user)
    assert r.bound["kind"] == "upper"
    # the user's own chip count: no band
    assert simulate_served("llama-2-7b", "lpu", stack="groq-2024", seq=2048, chips=64).band is None
