"""Simulated accelerator backends: one shared compiler pipeline, one policy module per architecture.

``BACKENDS`` maps a name (gpu, tpu, wse, lpu, spyre) to its policy class, found by module name like tinygrad's
``ops_<device>.py`` (``machines/``). ``simulate`` runs a workload through one of them; each is a ``torch.compile``
backend named ``dfa_<name>`` (``compile``: registered when this package's torch half first loads, or found through
the package's entry points). Importing the package imports no torch: its argument checks (``args``) answer
``dfa simulate``'s mistakes at once, and the names below load their modules, torch with them, on first use
(PEP 562 ``__getattr__``).

May import: ``chips``, ``graph``, ``models``.
"""
from __future__ import annotations

import importlib

from common.sim.args import BACKEND_NAMES  # torch-free: the CLI checks names before torch loads

# name -> the module that defines it (imported, with torch, on first access)
_LAZY = {
    "last_report": "compile", "register": "compile", "reports": "compile",
    "last_coverage": "coverage", "measure_coverage": "coverage", "run_compiled": "coverage",
    "get_backend": "machines", "NumericsWarning": "numerics",
    "simulate": "run", "simulate_llm": "run", "simulate_op": "run", "sweep": "sweeps",
}

__all__ = ["BACKEND_NAMES", *sorted(_LAZY)]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    if "register" not in globals():  # torch.compile(model, backend="dfa_gpu") works once any of them is used
        compile_module = importlib.import_module(f"{__name__}.compile")
        globals()["register"] = compile_module.register
        compile_module.register()
    globals()[name] = value  # later lookups skip this function
    return value
