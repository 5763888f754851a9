"""What a simulation may be asked, checked before torch loads: backend, model, phase, numbers, shapes, chip.

``dfa simulate`` / ``dfa op`` and the Python entry points (``common.sim.simulate_llm``, ``simulate_op``,
``simulate``, ``op_workload``, ``sweep``) call these first, so a bad value is one ``DFAError`` line naming the
argument, the value and its type, and the valid choices - within a second, never a ``TypeError`` from deep
inside torch after seconds of imports. This module imports no torch (``tests/test_sim_errors.py`` checks it):
the names below are the simulator's own (``common.sim`` reads them from here).
"""
from __future__ import annotations

import numbers
import os

from common.errors import DFAError, unknown

BACKEND_NAMES = ("gpu", "tpu", "wse", "lpu", "spyre")
# The catalog chip each backend simulates by default (its policy's ``default_chip``; a test keeps them equal).
# Each backend simulates the chips of the catalog kind of its own name (``Policy.kind``).
DEFAULT_CHIPS = {"gpu": "h100-sxm", "tpu": "tpu-v5e", "wse": "wse-3", "lpu": "groq-lpu", "spyre": "spyre"}
OPS = ("matmul", "sdpa", "softmax", "layernorm", "gelu", "add", "clone")
OP_SHAPES = {"matmul": "M K N", "sdpa": "B H S D"}  # the ops that take a fixed number of dimensions
PHASES = ("prefill", "decode")
DTYPE_CHOICES = ("bf16", "fp16", "fp8", "int8", "fp32")
# How a mixture-of-experts layer uses several tensor-parallel chips (``common.sim.moe``): "expert" spreads the
# experts over the chips (two all-to-alls a layer), "tensor" splits every expert's GEMMs (one all-reduce).
MOE_PARALLEL = ("expert", "tensor")
# The tensor-core instruction a mixture of experts' GEMM kernels issue (a stack's ``MoEPath.expert_mma``):
# "native", the chip's own (the default); "mma.sync", the SM80 warp-level MMA (``common.sim.machines.gpu``).
MOE_EXPERT_MMA = ("native", "mma.sync")


def _typed(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def positive_int(name: str, value: object) -> int:
    """``value`` as an int if it is a whole number > 0 (an int or numpy integer, not a bool or a str)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise DFAError(f"{name} must be a positive int, got {_typed(value)}")
    return int(value)


def backend_name(name: object) -> str:
    """'gpu' for 'gpu', 'GPU' or 'dfa_gpu'; an unknown name or a non-string is a DFAError listing the valid ones."""
    if not isinstance(name, str):
        raise DFAError(f"backend must be a name, got {_typed(name)}; valid: {', '.join(BACKEND_NAMES)}")
    key = name.lower().removeprefix("dfa_")
    if key not in BACKEND_NAMES:
        raise unknown("backend", name, BACKEND_NAMES)
    return key


def phase_name(phase: object) -> str:
    if not isinstance(phase, str) or phase not in PHASES:
        raise unknown("phase", phase, PHASES)
    return phase


def _option(name: str, value: object, choices: tuple[str, ...]) -> str:
    """An option of fixed ``choices``: None -> the first (the default); anything else not in them: one DFAError."""
    if value is None:
        return choices[0]
    if not isinstance(value, str) or value not in choices:
        raise unknown(name, value, choices)
    return value


def moe_parallel_name(value: object) -> str:
    """The ``moe_parallel`` option: None -> "expert" (the default)."""
    return _option("moe_parallel", value, MOE_PARALLEL)


def moe_expert_mma_name(value: object) -> str:
    """The ``moe_expert_mma`` option: None -> "native" (the chip's own instruction)."""
    return _option("moe_expert_mma", value, MOE_EXPERT_MMA)


def model_config(model: object):
    """The ``ModelConfig`` of a name, a config.json path (file or folder) or a ModelConfig (torch-free)."""
    from common.models.config import CONFIGS, ModelConfig, resolve_config
    if not isinstance(model, (str, os.PathLike, ModelConfig)):
        raise DFAError(f"model must be a configuration name, a config.json path or a ModelConfig, got "
                       f"{_typed(model)}; valid names: {', '.join(sorted(CONFIGS))}")
    return resolve_config(model)


def llm_step(model: object, phase: object, batch: object, seq: object):
    """(config, phase, batch, seq) of one LLM step, each checked; the step must fit the model's context."""
    config = model_config(model)
    phase, batch, seq = phase_name(phase), positive_int("batch", batch), positive_int("seq", seq)
    positions = seq + 1 if phase == "decode" else seq
    if positions > config.max_seq_len:
        raise DFAError(f"{phase} with seq={seq} needs {positions} positions; model {config.name!r} has "
                       f"max_seq_len={config.max_seq_len}")
    return config, phase, batch, seq


def chip_count(chips: object) -> int | None:
    return None if chips is None else positive_int("chips", chips)


def chip_for(backend: str, chip: object = None, dtype: object = None):
    """The catalog chip ``backend`` runs on (``chip`` or its default), checked against the backend's kind and,
    with ``dtype``, against the chip's datapaths. Policies repeat these checks; here they come before torch."""
    from common.chips import Chip, canonical_dtype, chips_of_kind, get_chip
    backend = backend_name(backend)
    if chip is not None and not isinstance(chip, (str, Chip)):
        raise DFAError(f"chip must be a catalog chip name, got {_typed(chip)}")
    record = get_chip(chip or DEFAULT_CHIPS[backend])
    if record.kind != backend:
        raise DFAError(f"backend {backend!r} simulates {backend} chips; {record.name!r} is a {record.kind} "
                       f"(try one of: {', '.join(c.name for c in chips_of_kind(backend))})")
    if dtype is not None:
        record.compute_peak(canonical_dtype(dtype))  # an unsupported dtype: one line naming the supported ones
    return record


def op_shape(op: object, shape: object) -> tuple[int, ...]:
    """``shape`` as a tuple of positive ints with the number of dimensions ``op`` takes."""
    if not isinstance(op, str) or op not in OPS:
        raise unknown("op", op, OPS)
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise DFAError(f"shape must be a sequence of positive ints, got {_typed(shape)}")
    dims = tuple(shape)
    if not dims:
        raise DFAError(f"shape of {op} must have at least one dimension, got {dims!r}")
    dims = tuple(positive_int(f"shape[{i}]", d) for i, d in enumerate(dims))
    want = OP_SHAPES.get(op)
    if want is not None and len(dims) != len(want.split()):
        raise DFAError(f"{op} takes shape {want} ({len(want.split())} dimensions), got {dims!r}")
    return dims
