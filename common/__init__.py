"""Dataflow Architectures for AI - open labs: the shared package every lab imports.

Packages, in the order a model flows through them: ``chips`` (every hardware number, with its source) ·
``models`` (reference models and the labs' LLM) · ``graph`` (FX capture, op kinds, FLOPs and bytes per node) ·
``sim`` (the five simulated machines) · ``measure`` (this machine, measured) · ``roofline`` (model and charts).
Each course's own tools: ``landscape`` (1) · ``dataflow`` (2) · ``compile`` (3) · ``memory`` (4) · ``debug`` (5) ·
``roofline`` (6); ``explore`` (what-if explorers); ``grading`` and ``site`` (instructors); ``cli`` (``dfa``).
Base modules everything may use: ``errors``, ``checks``, ``torch_compat``, ``palette``. Each package's
``__init__`` says what it owns and what it may import (tests/test_layout.py holds every import to it).

Importing the package first checks the installed torch (``torch_compat``, without importing torch): on one
older than the floor it stops with a one-line ``TorchVersionError`` instead of failing later, deep in Dynamo.
"""
from common import torch_compat as _torch_compat

__version__ = "0.1.0"

_torch_compat.require_torch()
