"""run_each: one Dynamo trace, every simulated backend, the same outputs and reports as five torch.compile calls."""
from __future__ import annotations

import torch

from common.errors import DFAError
from common.models import build_model, step_inputs
from common.sim import BACKEND_NAMES, last_report
from common.sim.each_backend import run_each


def test_run_each_matches_one_torch_compile_per_backend():
    model = build_model("tiny-block").eval()
    args, kwargs = step_inputs(model, "prefill", 2, 8)
    with torch.no_grad():
        shared = run_each(model, args, kwargs)
        shared_reports = {b: last_report(b) for b in BACKEND_NAMES}
        for backend in BACKEND_NAMES:
            torch.compiler.reset()
            alone = torch.compile(model, backend=f"dfa_{backend}")(*args, **kwargs)
            assert torch.equal(shared[backend], alone), backend
            assert last_report(backend).time_s == shared_reports[backend].time_s, backend
            assert [e.name for e in last_report(backend).events] == [e.name for e in shared_reports[backend].events]
    torch.compiler.reset()


def test_a_backend_that_refuses_the_graph_maps_to_its_error_and_the_others_still_run(monkeypatch):
    from common.sim import each_backend

    real = each_backend.make_backend

    def refusing(name):
        if name == "tpu":
            def backend(gm, example_inputs):
                raise DFAError("tpu: refused on purpose")
            return backend
        return real(name)

    monkeypatch.setattr(each_backend, "make_backend", refusing)
    model = build_model("tiny-block").eval()
    args, kwargs = step_inputs(model, "prefill", 1, 4)
    with torch.no_grad():
        outputs = run_each(model, args, kwargs, backends=("gpu", "tpu", "lpu"))
    assert isinstance(outputs["tpu"], DFAError) and "on purpose" in str(outputs["tpu"])
    assert isinstance(outputs["gpu"], torch.Tensor) and isinstance(outputs["lpu"], torch.Tensor)
