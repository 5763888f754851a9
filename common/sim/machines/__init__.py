"""The five simulated machines, one policy module each, found by name like tinygrad's ``ops_<device>.py``: ``gpu``
(an NVIDIA GPU: kernels launched one by one from the host), ``tpu`` (a TPU: XLA-fused HLO on a systolic array),
``wse`` (a Cerebras wafer: layers placed spatially across the cores), ``lpu`` (a Groq LPU: a statically scheduled
pipeline across chips, SRAM only), ``spyre`` (IBM Spyre: sticks and tiles in scratchpad, LPDDR5 behind it;
``spyre_timing`` holds its op-time model). A sixth machine is one new module here plus its chip records.
"""
from __future__ import annotations

import importlib

from common.sim.args import backend_name


def get_backend(name: str):
    """The policy class of backend ``name`` ('gpu' or 'dfa_gpu'): the class in ``common.sim.machines.<name>``
    whose ``name`` is that backend."""
    key = backend_name(name)
    module = importlib.import_module(f"common.sim.machines.{key}")
    return next(v for v in vars(module).values()
                if isinstance(v, type) and getattr(v, "name", None) == key and v.__module__ == module.__name__)
