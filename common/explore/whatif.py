"""The explorer's choices and the rows the simulators give for them, without any widget or figure.

One row per machine: ``time_s`` per step, ``tokens_per_s`` (all users), ``tokens_per_s_per_user``, the
``bottleneck`` and the share of the step's time in compute, memory, communication and scheduling (the Report's
attribution, which sums to one), the bytes each memory level moves, and the chips that hold weights + KV cache.
A machine that cannot take the choice (the model does not fit, a dtype it has no datapath for) gets its reason
in ``problem``, one line, instead of numbers: one machine's refusal never hides the other four.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

import pandas as pd

from common.errors import DFAError, unknown
from common.sim.args import BACKEND_NAMES, PHASES, moe_expert_mma_name, moe_parallel_name

SHARES = ("compute", "memory", "communication", "scheduling")
COLUMNS = ("machine", "chip", "chips", "stack", "time_s", "tokens_per_s", "tokens_per_s_per_user", "bottleneck",
           *(f"{s}_share" for s in SHARES), "bytes_by_level", "problem")


@dataclass(frozen=True)
class Choices:
    """What the learner picked. ``model``: a catalog name (``common.models.CONFIGS``) or a folder holding a Hugging
    Face ``config.json``; ``chips``/``chip_counts``: per backend, the catalog chip and how many (None: the backend's
    default part, and as many as its memory needs); ``stack``: a serving stack (``common.chips.catalog.stacks``),
    applied to the backend it serves, the others simulated on the hardware alone; ``moe_parallel``: how a
    mixture-of-experts layer uses several tensor-parallel chips (``common.sim.args.MOE_PARALLEL``; None: the
    stack's choice, else expert parallelism); ``moe_expert_mma``: the tensor-core instruction the expert GEMM
    kernels issue (``common.sim.args.MOE_EXPERT_MMA``; None: the stack's, else the chip's own)."""

    model: str = "llama-3.1-8b"
    backends: tuple[str, ...] = BACKEND_NAMES
    phase: str = "decode"
    batch: int = 1
    seq: int = 1024
    dtype: str | None = None
    stack: str | None = None
    chips: dict = field(default_factory=dict)
    chip_counts: dict = field(default_factory=dict)
    moe_parallel: str | None = None
    moe_expert_mma: str | None = None

    def checked(self) -> Choices:
        """These choices, or a one-line DFAError naming the bad value and the valid ones."""
        backends = tuple(b.removeprefix("dfa_") for b in ((self.backends,) if isinstance(self.backends, str)
                                                          else self.backends))
        for b in backends:
            if b not in BACKEND_NAMES:
                raise unknown("backend", b, BACKEND_NAMES)
        if not backends:
            raise DFAError(f"choose at least one backend of {', '.join(BACKEND_NAMES)}")
        if self.phase not in PHASES:
            raise unknown("phase", self.phase, PHASES)
        for name, value in (("batch", self.batch), ("seq", self.seq)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DFAError(f"{name} must be a whole number >= 1, got {value!r}")
        model = os.fspath(self.model) if isinstance(self.model, os.PathLike) else self.model
        if not isinstance(model, str) or not model:
            raise DFAError(f"model must be a catalog name or a folder with a config.json, got {self.model!r}")
        if self.moe_parallel is not None:
            moe_parallel_name(self.moe_parallel)
        if self.moe_expert_mma is not None:
            moe_expert_mma_name(self.moe_expert_mma)
        if self.stack is not None:
            from common.sim.serving import get_stack
            get_stack(self.stack)  # an unknown name lists the valid ones
        for label, mapping in (("chips", self.chips), ("chip_counts", self.chip_counts)):
            extra = set(mapping) - set(backends)
            if extra:
                raise DFAError(f"{label} names {sorted(extra)}, which are not among the chosen backends "
                               f"{list(backends)}")
        return dataclasses.replace(self, backends=backends, model=model)

    def changed(self, **changes) -> Choices:
        """A copy with ``changes``, checked; an unknown field is named with the valid ones."""
        bad = set(changes) - {f.name for f in dataclasses.fields(self)}
        if bad:
            raise unknown("choice", sorted(bad)[0], [f.name for f in dataclasses.fields(self)])
        return dataclasses.replace(self, **changes).checked()


def _stack_for(choices: Choices, backend: str) -> str | None:
    if choices.stack is None:
        return None
    from common.sim.serving import get_stack
    return choices.stack if get_stack(choices.stack).backend == backend else None


def machine_row(choices: Choices, backend: str) -> dict:
    """One machine's row (module docstring); a DFAError becomes its ``problem``, anything else propagates."""
    from common.sim.serving import simulate_served

    stack = _stack_for(choices, backend)
    row = {"machine": backend, "chip": choices.chips.get(backend), "chips": choices.chip_counts.get(backend),
           "stack": stack or "none (hardware only)", "problem": ""}
    try:
        r = simulate_served(choices.model, backend, stack=stack, phase=choices.phase, batch=choices.batch,
                            seq=choices.seq, chip=choices.chips.get(backend), chips=choices.chip_counts.get(backend),
                            dtype=choices.dtype,
                            **{k: v for k, v in (("moe_parallel", choices.moe_parallel),
                                                 ("moe_expert_mma", choices.moe_expert_mma)) if v is not None})
    except DFAError as exc:
        row["problem"] = str(exc).splitlines()[0]
        return row
    shares = r.attribution
    total = sum(shares.values()) or 1.0
    row.update(chip=r.chip, chips=r.chips, time_s=r.time_s, tokens_per_s=r.tokens_per_s,
               tokens_per_s_per_user=r.tokens_per_s_per_user, bottleneck=r.bottleneck,
               bytes_by_level=dict(r.bytes), **{f"{s}_share": shares.get(s, 0.0) / total for s in SHARES})
    warnings = getattr(r, "warnings", None)
    if warnings:
        row["problem"] = "warning: " + str(warnings[0]).splitlines()[0]
    return row


def machine_rows(choices: Choices) -> pd.DataFrame:
    """The rows of every chosen machine, SIMULATED (``attrs['label']`` says so, with the choices)."""
    choices = choices.checked()
    table = pd.DataFrame([machine_row(choices, b) for b in choices.backends], columns=list(COLUMNS))
    table.attrs["label"] = (f"SIMULATED: {choices.model}, {choices.phase}, batch {choices.batch}, "
                            f"seq {choices.seq}, dtype {choices.dtype or 'each chip native'}")
    return table
