"""Dataflow Architectures for AI - open labs: the shared package every lab imports.

Modules, by concept: ``chips`` (hardware catalog) · ``bench`` (timing harness) · ``capture`` (FX graphs at
torch / aten / Dynamo level) · ``costs`` (FLOPs and bytes per node) · ``roofline`` · ``models`` (reference
models) · ``draw`` (graph drawings) · ``sim`` (simulated GPU/TPU/WSE/LPU/Spyre backends) · ``checks`` and
``grading`` (nbgrader tooling) · ``cli`` (the ``dfa`` command).

Importing the package first checks the installed torch (``torch_compat``, without importing torch): on one
older than the floor it stops with a one-line ``TorchVersionError`` instead of failing later, deep in Dynamo.
"""
from common import torch_compat as _torch_compat

__version__ = "0.1.0"

_torch_compat.require_torch()
