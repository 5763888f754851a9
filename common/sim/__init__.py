"""Simulated accelerator backends: one shared compiler pipeline, one policy module per architecture.

``BACKENDS`` maps a name (gpu, tpu, wse, lpu, spyre) to its policy class, found by module name like tinygrad's
``ops_<device>.py``. ``simulate`` runs a workload through one of them; importing ``common`` registers each as
a ``torch.compile`` backend named ``dfa_<name>`` (see ``common.sim.compile``).
"""
from __future__ import annotations

import importlib

from common.sim_args import BACKEND_NAMES, backend_name  # torch-free: the CLI checks names before torch loads


def get_backend(name: str):
    """The policy class of backend ``name`` ('gpu' or 'dfa_gpu')."""
    key = backend_name(name)
    module = importlib.import_module(f"common.sim.{key}")
    return next(v for v in vars(module).values()
                if isinstance(v, type) and getattr(v, "name", None) == key and v.__module__ == module.__name__)


from common.sim.compile import last_report, register, reports  # noqa: E402
from common.sim.coverage import last_coverage, measure_coverage, run_compiled  # noqa: E402
from common.sim.numerics import NumericsWarning  # noqa: E402
from common.sim.run import simulate, simulate_llm, simulate_op  # noqa: E402
from common.sim.sweeps import sweep  # noqa: E402

register()  # torch.compile(model, backend="dfa_gpu") works once common.sim is imported (or via entry points)

__all__ = ["BACKEND_NAMES", "NumericsWarning", "get_backend", "last_coverage", "last_report", "measure_coverage",
           "reports", "run_compiled", "simulate", "simulate_llm", "simulate_op", "sweep"]
