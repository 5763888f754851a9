"""Run one model through every simulated backend with a single TorchDynamo capture.

``torch.compile(model, backend=b)`` does two things: Dynamo traces the Python into FX graph(s), then hands each
graph and its example inputs to ``b(gm, example_inputs)``. Compiling for five backends with five
``torch.compile`` calls repeats the first step five times (about 1 s each for Course 1's decoder, most of the
cell). ``run_each`` traces once: its Dynamo backend hands every captured graph to each simulated backend, then
returns a callable that runs the compiled graph of the backend currently chosen. Each backend sees exactly the
graph and inputs ``torch.compile(model, backend=f"dfa_{name}")`` would give it, so its outputs and its report
(``last_report``) are the same.

    outputs = run_each(model, args, kwargs)   # {"gpu": logits, ..., "spyre": DFAError(...)}
"""
from __future__ import annotations

import torch

from common.sim.args import BACKEND_NAMES
from common.sim.compile import make_backend


def run_each(model, args=(), kwargs=None, backends=BACKEND_NAMES) -> dict:
    """``{backend: model(*args, **kwargs) compiled for it}``; a backend that raises maps to its exception."""
    kwargs = kwargs or {}
    compiled: list[dict] = []  # one {backend: callable or exception} per Dynamo graph
    chosen = [backends[0]]

    def fan_out(gm, example_inputs):
        per_backend = {}
        for name in backends:
            try:
                per_backend[name] = make_backend(name)(gm, example_inputs)
            except Exception as exc:  # this backend refuses the graph: reported when it is chosen
                per_backend[name] = exc
        compiled.append(per_backend)

        def run(*inputs):
            fn = per_backend[chosen[0]]
            if isinstance(fn, Exception):
                raise fn
            return fn(*inputs)

        return run

    torch.compiler.reset()  # a fresh trace: no graph cached for another backend
    try:
        step = torch.compile(model, backend=fan_out)
        outputs = {}
        for name in backends:
            chosen[0] = name
            try:
                outputs[name] = step(*args, **kwargs)
            except Exception as exc:
                outputs[name] = exc
        return outputs
    finally:
        torch.compiler.reset()
