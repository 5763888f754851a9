"""The simulated figure a lab sets beside what the learner measured: the labs' own model under the labs' own stack.

``hf_generate_simulated()`` simulates ``generate()`` of the labs' model (``common.models.DEFAULT_LLM``,
Qwen2.5-0.5B-Instruct) on a GPU under the ``hf-generate`` stack (eager PyTorch, one kernel per op, no CUDA
graph; ``common.chips.catalog.stacks``): generating N new tokens = one prefill of the prompt (time to first token)
then N - 1 decode steps at the mean context, so
    generate_s = ttft_s + (N - 1) x tpot_s,   tokens_per_s = batch x N / generate_s.
The stack is an upper bound (``Stack.bound``): the result says so, and names the stack, so a lab never shows a
simulated number without the software it assumes.
"""
from __future__ import annotations

from dataclasses import replace

from common.errors import DFAError
from common.sim.serving import simulate_served

LAB_STACK = "hf-generate"


def hf_generate_simulated(model=None, chip: str = "t4", *, prompt: int = 32, new_tokens: int = 16,
                          batch: int = 1, layers: int | None = None, dtype: str | None = None) -> dict:
    """Simulated ``model.generate(max_new_tokens=new_tokens)`` on ``chip`` under hf-generate (module docstring).
    ``model``: a catalog name or a ``ModelConfig`` (a lab's ``llm.config``, as loaded); ``layers``: a cut of the
    model, as ``load_llm(layers=...)`` loads it."""
    from common.models import ModelConfig, get_config
    from common.models.llm import DEFAULT_LLM
    if new_tokens < 1:
        raise DFAError(f"new_tokens must be >= 1, got {new_tokens!r}")
    base = model if isinstance(model, ModelConfig) else get_config(model or DEFAULT_LLM)
    name = base.name if isinstance(model, ModelConfig) else (model or DEFAULT_LLM)
    config = replace(base, n_layers=int(layers)) if layers is not None else base
    kw = dict(stack=LAB_STACK, batch=batch, chip=chip, dtype=dtype)
    pre = simulate_served(config, "gpu", phase="prefill", seq=prompt, **kw)
    dec = simulate_served(config, "gpu", phase="decode", seq=prompt + new_tokens // 2, **kw)
    total = pre.ttft_s + (new_tokens - 1) * dec.tpot_s
    return {"model": name, "layers": layers, "chip": dec.chip, "dtype": dec.dtype, "stack": LAB_STACK,
            "batch": batch, "prompt": prompt, "new_tokens": new_tokens,
            "ttft_s": pre.ttft_s, "tpot_s": dec.tpot_s, "generate_s": total,
            "tokens_per_s": batch * new_tokens / total, "bound": dec.bound,
            "label": f"SIMULATED on the {LAB_STACK} stack ({dec.chip}, {dec.dtype}): "
                     f"{'an upper bound: ' + dec.bound['reason'] if dec.bound else 'an estimate'}",
            "warnings": pre.warnings + [w for w in dec.warnings if w not in pre.warnings]}
