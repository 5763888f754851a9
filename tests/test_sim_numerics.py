"""Models nobody tuned the simulated backends for (issue #16, part 4): twelve small models, each with an op,
dtype or output structure the reference models lack, through all five ``torch.compile`` backends. Each must
run on the simulated device (a report with work in it), keep eager's output structure, match eager within
the backend's documented ``rtol_vs_eager`` on float outputs and exactly on integer ones. An op no cost rule
covers is refused with a clear error instead of being timed as free."""

from __future__ import annotations

import pytest
import torch
from fixtures.unseen_models import unseen_models
from torch.utils import _pytree as pytree

import common.sim as sim
from common.sim.compile import clear_reports, reports

BACKENDS = list(sim.BACKEND_NAMES)
MODELS = unseen_models()


@pytest.fixture(autouse=True)
def _trace_recurrent_layers(monkeypatch):
    # Dynamo runs nn.GRU / nn.LSTM eagerly unless told otherwise; then no backend would see them.
    monkeypatch.setattr(torch._dynamo.config, "allow_rnn", True, raising=False)


def _max_rel_err(out, ref) -> float:
    worst = 0.0
    for o, r in zip(pytree.tree_leaves(out), pytree.tree_leaves(ref), strict=True):
        assert o.shape == r.shape and o.dtype == r.dtype, f"{tuple(o.shape)} {o.dtype} vs {tuple(r.shape)} {r.dtype}"
        if r.is_floating_point():
            worst = max(worst, ((o.double() - r.double()).abs().max() / r.double().abs().max()).item())
        else:
            assert torch.equal(o, r), "an integer output differs from eager"
    return worst


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(MODELS))
def test_unseen_model_matches_eager_on_every_backend(name, backend):
    model, args = MODELS[name]
    model.eval()
    torch._dynamo.reset()
    clear_reports()
    with torch.no_grad():
        ref = model(*args)
        out = torch.compile(model, backend=f"dfa_{backend}")(*args)
    assert pytree.tree_structure(out) == pytree.tree_structure(ref)
    assert _max_rel_err(out, ref) <= sim.get_backend(backend).rtol_vs_eager
    compiled = reports(backend)
    assert compiled, "nothing was compiled for the backend: the model ran eagerly"
    assert sum(e.flops for r in compiled for e in r.events) > 0 and all(r.time_s > 0 for r in compiled)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_op_without_a_cost_rule_is_refused_with_its_name(backend):
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"dfa_\w+ cannot time aten\.sort \(node sort\).*common/costs\.py"):
        torch.compile(lambda x: torch.sort(x, dim=-1)[0], backend=f"dfa_{backend}")(torch.randn(4, 8))


def test_recurrent_layers_lower_to_matmuls_not_a_cpu_library_kernel():
    model, args = MODELS["lstm"]
    torch._dynamo.reset()
    clear_reports()
    torch.compile(model, backend="dfa_tpu")(*args)
    ops = {op for r in reports("tpu") for e in r.events for op in e.detail.get("ops", [])}
    assert "aten.mm" in ops or "aten.addmm" in ops
    assert not any("mkldnn" in op for op in ops)


def test_cpu_attention_kernel_is_charged_its_flops():
    from common.capture import capture_aten
    from common.costs import annotate

    model, args = MODELS["embed_sdpa_cumsum"]  # B=2, H=4, S=8, D=8
    gm = capture_aten(model, args)
    annotate(gm, *gm.meta["example_inputs"])
    attention = [n for n in gm.graph.nodes if "scaled_dot_product" in str(n.target)]
    assert attention, "the CPU attention op was not captured"
    assert sum(n.meta["cost"].flops for n in attention) == 4 * 2 * 4 * 8 * 8 * 8  # QK^T and PV, 2 FLOPs a MAC
