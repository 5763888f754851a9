"""The graph every analysis reads: a PyTorch model captured as an FX graph (``capture``: symbolic_trace at torch
level, make_fx on FakeTensors at aten level, Dynamo's explain; ``meta_capture``: an LLM step traced on meta
tensors without importing Dynamo, which ``lazy_dynamo`` defers), every aten op's kind and FLOP rule from torch's
own metadata (``op_kinds``), FLOPs and bytes per node stored in ``node.meta["cost"]`` by an ``fx.Interpreter``
(``costs``), and graph drawings (``draw``).

May import: ``chips``.
"""
