"""Dataflow Architectures for AI - open labs: the shared package every lab imports.

Modules, by concept: ``chips`` (hardware catalog) · ``bench`` (timing harness) · ``capture`` (FX graphs at
torch / aten / Dynamo level) · ``costs`` (FLOPs and bytes per node) · ``roofline`` · ``models`` (reference
models) · ``draw`` (graph drawings) · ``sim`` (simulated GPU/TPU/WSE/LPU/Spyre backends) · ``checks`` and
``grading`` (nbgrader tooling) · ``cli`` (the ``dfa`` command).
"""
__version__ = "0.1.0"
