"""Deployments on record and the precisions vendors serve in: what a simulated deployment is checked against.

``LARGEST_DEPLOYMENT[chip]`` = (chips, source): the largest deployment of that chip any source records; a
simulation on more chips is of a machine nobody has built, and says so (``common.sim.realism``).
``SERVED_DTYPES[chip]`` = (dtypes, source): the precisions the vendor says it serves models in; a simulation in
another precision is of a configuration the vendor does not run. Chips without a record are not checked.
"""
from __future__ import annotations

from common.chips.catalog.stacks import GROQ_568

CONDOR_GALAXY = ("Cerebras and G42 press release 'Cerebras and G42 Unveil World's Largest Supercomputer for AI "
                 "Training with 4 exaFLOPS to Fuel a New Era of Innovation' (2023-07-20): Condor Galaxy 1, 64 "
                 "CS-2 systems; the largest wafer deployment on record (CS-3 systems of the same scale announced "
                 "for Condor Galaxy 3, 2024-03: 64 CS-3)")
GROQ_TRUEPOINT = ("Groq blog 'Inside the LPU: Deconstructing Groq's Speed' (2025-08-01): TruePoint numerics store "
                  "weights and activations at lower precision - 'FP8 storage for activations in error-tolerant "
                  "layers', block floating point for MoE weights, FP32 attention logits - with 100-bit "
                  "accumulation; 16-bit and int8 from the GroqChip product brief")
CEREBRAS_16BIT = ("Cerebras blog 'Introducing Cerebras Inference: AI at Instant Speed' (2024-08-27): models served "
                  "with Meta's original 16-bit weights")

LARGEST_DEPLOYMENT: dict[str, tuple[int, str]] = {
    "groq-lpu": (568, GROQ_568),
    "wse-2": (64, CONDOR_GALAXY),
    "wse-3": (64, CONDOR_GALAXY),
}

SERVED_DTYPES: dict[str, tuple[tuple[str, ...], str]] = {
    "groq-lpu": (("fp16", "int8", "fp8"), GROQ_TRUEPOINT),
    "wse-3": (("fp16", "bf16"), CEREBRAS_16BIT),
}
