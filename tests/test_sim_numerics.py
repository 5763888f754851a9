"""Models nobody tuned the simulated backends for: twelve small models, each with an op,
dtype or output structure the reference models lack, through all five ``torch.compile`` backends. Each must
run on the simulated device (a report with work in it), keep eager's output structure, match eager within
the backend's documented ``rtol_vs_eager`` on float outputs and exactly on integer ones. An op no cost rule
covers goes to the host (tests/test_op_coverage.py)."""

from __future__ import annotations

import warnings

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


def test_recurrent_layers_lower_to_matmuls_not_a_cpu_library_kernel():
    model, args = MODELS["lstm"]
    torch._dynamo.reset()
    clear_reports()
    torch.compile(model, backend="dfa_tpu")(*args)
    ops = {op for r in reports("tpu") for e in r.events for op in e.detail.get("ops", [])}
    assert "aten.mm" in ops or "aten.addmm" in ops
    assert not any("mkldnn" in op for op in ops)


def test_cpu_attention_kernel_is_charged_its_flops():
    from common.graph.capture import capture_aten
    from common.graph.costs import annotate

    model, args = MODELS["embed_sdpa_cumsum"]  # B=2, H=4, S=8, D=8
    gm = capture_aten(model, args)
    annotate(gm, *gm.meta["example_inputs"])
    attention = [n for n in gm.graph.nodes if "scaled_dot_product" in str(n.target)]
    assert attention, "the CPU attention op was not captured"
    assert sum(n.meta["cost"].flops for n in attention) == 4 * 2 * 4 * 8 * 8 * 8  # QK^T and PV, 2 FLOPs a MAC


# ---- numerics events: a precision rule that changes a value's kind is never silent ----------
def _compile(fn, backend):
    torch._dynamo.reset()
    clear_reports()
    return torch.compile(fn, backend=f"dfa_{backend}")


def test_fp16_storage_overflow_warns_once_names_the_op_and_rule_and_counts_every_run():
    x = torch.ones(70_000)  # the fp32 sum, 70000, is above fp16's largest finite value (65504)
    f = _compile(lambda t: t.sum(-1), "spyre")
    with pytest.warns(sim.NumericsWarning, match=r"overflow in aten\.sum .*storage_dtype=fp16 \(fp16 holds at most"):
        out = f(x)
    assert torch.isinf(out)  # the value is what fp16 storage gives; the warning labels it
    with warnings.catch_warnings():
        warnings.simplefilter("error", sim.NumericsWarning)  # once per compiled graph: the second run is quiet
        f(x)
    report = sim.last_report("spyre")
    assert report.counters["overflow"] == 2 and report.counters["underflow"] == report.counters["nan"] == 0
    (event,) = report.numerics
    assert (event.op, event.kind, event.rule, event.elements, event.runs) == ("aten.sum", "overflow",
                                                                             "storage_dtype=fp16", 1, 2)
    assert event.exact == 70_000
    assert "2 overflow, 0 underflow, 0 NaN; overflow in aten.sum" in report.numerics_line()


def test_without_a_storage_rule_the_same_sum_is_exact_and_no_event():
    with warnings.catch_warnings():
        warnings.simplefilter("error", sim.NumericsWarning)
        out = _compile(lambda t: t.sum(-1), "gpu")(torch.ones(70_000))
    assert out.item() == 70_000 and sim.last_report("gpu").counters["overflow"] == 0


def test_underflow_to_zero_is_counted_with_the_exact_value():
    x = torch.full((16,), 1e-4)
    with pytest.warns(sim.NumericsWarning, match=r"underflow in aten\.mul .*smallest subnormal"):
        out = _compile(lambda t: t * t, "lpu")(x)  # 1e-8 is below fp16's smallest subnormal (~6e-8)
    assert torch.all(out == 0)
    report = sim.last_report("lpu")
    assert report.counters["underflow"] == 1
    event = report.numerics[0]
    assert event.elements == 16 and event.exact == pytest.approx(1e-8, rel=1e-3)  # the square of fp16's 1e-4


def test_nan_made_from_an_overflowed_input_is_traced_to_it():
    x = torch.tensor([1e5, 1.0])  # 1e5 does not fit fp16: the input itself overflows when the chip stores it
    with pytest.warns(sim.NumericsWarning, match=r"overflow in input read by"):
        out = _compile(lambda t: t * 0 + 1, "spyre")(x)
    assert torch.isnan(out[0]) and out[1] == 1
    report = sim.last_report("spyre")
    assert report.counters["overflow"] == 1 and report.counters["nan"] == 1
    nan = next(e for e in report.numerics if e.kind == "nan")
    assert nan.op == "aten.mul" and nan.rule.startswith("follows overflow at")


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_precision_rule_cites_a_source_or_says_estimate(backend):
    policy = sim.get_backend(backend)
    for rule in ("matmul_operand_dtype", "storage_dtype", "accumulation_dtype"):
        text = policy.precision_sources.get(rule, "")
        assert len(text) > 30, f"{backend}.{rule} has no source"
        assert text.startswith("estimate") or any(w in text for w in ("docs", "blog", "brief", "PyTorch", "eager"))


def test_an_overflow_is_counted_where_it_happens_not_again_downstream():
    x = torch.tensor([1e5, 1.0])  # overflows when stored; the ops after it only carry the inf along
    with pytest.warns(sim.NumericsWarning):
        out = _compile(lambda t: (t * 2 + 1).abs(), "spyre")(x)
    assert torch.isinf(out[0])
    report = sim.last_report("spyre")
    assert report.counters["overflow"] == 1 and report.counters["nan"] == 0
    assert report.numerics[0].op.startswith("input read by")
