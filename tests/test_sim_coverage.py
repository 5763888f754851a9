"""Coverage: a report says what share of the program the simulated machine ran, and names
every graph break, eager op and CPU fallback outside it. The reference for "the whole program" is the same
function run eagerly under the same counter (common.graph.costs' rules), so no count here is typed in by hand."""
from __future__ import annotations

import math

import pytest
import torch

import common.sim as sim
from common.errors import DFAError
from common.sim.compile import clear_reports


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    clear_reports()


def _eager_total(fn, *args) -> tuple[float, float]:
    """FLOPs and bytes of ``fn`` run eagerly, counted op by op as the coverage counter counts eager ops."""
    with sim.measure_coverage("spyre") as ref:
        fn(*args)
    assert not ref.regions and ref.machine_flops == 0
    return ref.outside_flops, ref.outside_bytes


def _grow(x):
    while x.sum() < 100:  # a data-dependent loop: Dynamo cannot trace the branch
        x = x * 2
    return x


@torch.compiler.disable
def _double(x):
    return x * 2


def _grow_eager_body(x):
    while x.sum() < 100:
        x = _double(x)  # the loop body runs outside every compiled graph
    return x


def test_data_dependent_loop_names_its_graph_break_and_accounts_for_all_the_work():
    x = torch.ones(4)
    out = sim.run_compiled(_grow, x, backend="dfa_spyre")
    assert torch.equal(out, _grow(x))
    cov = sim.last_coverage()
    (brk,) = cov.graph_breaks
    assert "data-dependent branch" in brk and "while x.sum() < 100:" in brk
    flops, nbytes = _eager_total(_grow, x)
    assert cov.machine_flops + cov.outside_flops == pytest.approx(flops)
    assert cov.machine_bytes + cov.outside_bytes == pytest.approx(nbytes)
    # the branch itself is Python reading a tensor's value on the host, once per loop test (6 tests: 4 -> 128)
    assert cov.eager["aten._local_scalar_dense"].runs == 6
    line = sim.last_report("spyre").coverage_line()
    assert line == cov.line() and "1 graph break" in line and "aten._local_scalar_dense x6" in line
    assert sum(r.runs for r in cov.regions) >= 1 and all(r.report.coverage is cov for r in cov.regions)


def test_a_loop_body_run_eagerly_is_counted_outside_the_machine():
    x = torch.ones(4)
    sim.run_compiled(_grow_eager_body, x, backend="dfa_spyre")
    cov = sim.last_coverage()
    assert cov.eager["aten.mul"].runs == 5  # 4 -> 8 -> ... -> 128: five doublings, all eager
    flops, _ = _eager_total(_grow_eager_body, x)
    assert cov.machine_flops + cov.outside_flops == pytest.approx(flops)
    assert cov.outside_flops >= cov.eager["aten.mul"].flops > 0
    assert cov.flop_share == pytest.approx(cov.machine_flops / flops) and cov.flop_share < 1
    line = cov.line()
    assert "aten.mul x5" in line and "eager ops" in line
    assert f"ran {math.floor(cov.flop_share * 1000) / 10:g}% of FLOPs" in line


def test_cpu_fallbacks_inside_a_graph_run_outside_the_machine():
    def f(x):
        return torch.cumsum(x * 2, -1).sum()  # cumsum falls back to the CPU on Spyre

    x = torch.randn(4, 8)
    sim.run_compiled(f, x, backend="dfa_spyre")
    cov = sim.last_coverage()
    assert cov.fallbacks == {"aten.cumsum": 1} and not cov.graph_breaks
    flops, _ = _eager_total(f, x)
    with sim.measure_coverage() as ref:
        torch.cumsum(x * 2, -1)
    assert cov.outside_flops == pytest.approx(ref.eager["aten.cumsum"].flops)
    assert cov.machine_flops + cov.outside_flops == pytest.approx(flops)
    assert 0 < cov.flop_share < 1 and 0 < cov.byte_share < 1
    assert "1 CPU fallback (aten.cumsum x1)" in cov.line()


def test_without_a_measured_run_a_graph_says_what_it_does_not_know():
    torch.compile(_grow, backend="dfa_spyre")(torch.ones(4))
    line = sim.last_report("spyre").coverage_line()
    assert "this graph only" in line and "run_compiled" in line
    assert "graph break" in line and "while x.sum() < 100:" in line


def test_report_repr_is_a_readable_summary():
    sim.run_compiled(lambda x: torch.relu(x) + 1, torch.randn(8), backend="dfa_lpu")
    text = repr(sim.last_report("lpu"))
    assert text.startswith("<Report SIMULATED dfa_lpu") and "events=" not in text
    assert "dfa_lpu ran 100% of FLOPs, 100% of bytes" in text and "numerics:" in text


def test_a_cost_only_simulation_says_it_ran_no_program():
    report = sim.simulate_op("matmul", (64, 64, 64), "gpu")
    assert "cost-only" in report.coverage_line() and "not checked" in report.numerics_line()


def test_a_program_with_no_compiled_graph_says_it_ran_nothing_on_the_machine():
    sim.run_compiled(torch.compiler.disable(lambda x: x * 2), torch.ones(3), backend="dfa_tpu")
    cov = sim.last_coverage()
    assert cov.machine_flops == 0 and cov.flop_share == 0 and cov.eager["aten.mul"].runs == 1
    with pytest.raises(DFAError, match=r"no graph has been compiled for tpu.*dfa_tpu ran nothing.*aten\.mul x1"):
        sim.last_report("tpu")


def test_run_compiled_rejects_an_unknown_backend():
    with pytest.raises(DFAError, match=r"unknown backend 'dfa_h100'.*dfa_gpu"):
        sim.run_compiled(torch.relu, torch.randn(2), backend="dfa_h100")
