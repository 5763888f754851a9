"""Course 3 on the real LLM (``common.models.load_llm``): what ``torch.compile`` can take of a transformers model.

* ``Prefill(model)`` - the forward pass over a prompt (no KV cache): ``forward(ids) -> logits``.
* ``DecodeStep(model, prompt_ids)`` - one decode step on a ``DynamicCache`` holding the prompt (filled eagerly
  once): ``forward(ids) -> logits`` appends one position; ``reset()`` crops the cache back to the prompt, so
  every timed call is the same step (the crop is a slice: a view, no copy).
* ``CompileLog`` - a Dynamo backend that records every graph it is handed (the call that compiled it, its
  input shapes with symbolic sizes as their names) and runs the graph unchanged: where recompiles happen.
* ``decode_compiles(model, prompt_ids, steps)`` - ``steps`` greedy decode steps on a growing ``DynamicCache``
  (the prompt prefilled eagerly) through one ``torch.compile``: the ``CompileLog`` entries, one per graph.
* ``inputs_summary(shapes)`` - one line for a log entry's input shapes (48 KV tensors of one shape counted once).
* ``device_and_dtype()`` - the GPU in fp16 when torch sees one, else the CPU in fp32 (Lab 1's choice).
"""
from __future__ import annotations

import inspect

import torch
from torch import nn

from common.errors import DFAError


def device_and_dtype() -> tuple[str, torch.dtype]:
    """('cuda', float16) when torch sees a GPU, else ('cpu', float32)."""
    return ("cuda", torch.float16) if torch.cuda.is_available() else ("cpu", torch.float32)


def _cache(model):
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)  # transformers 5
    except TypeError:  # pragma: no cover - transformers 4.x
        return DynamicCache()


def _cache_kw(model) -> str:
    """The forward's name for the KV cache: ``cache`` (transformers >= 5.25) or ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class Prefill(nn.Module):
    """The forward pass over a prompt, without a KV cache: ids (B, T) -> logits (B, T, vocab)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids, use_cache=False).logits


class DecodeStep(nn.Module):
    """One decode step after ``prompt_ids``: ids (B, 1) -> logits (B, 1, vocab), reading and appending to a
    DynamicCache that ``reset()`` crops back to the prompt. ``next_ids`` is the prompt's greedy next token."""

    def __init__(self, model: nn.Module, prompt_ids: torch.Tensor):
        super().__init__()
        if prompt_ids.dim() != 2 or prompt_ids.shape[1] < 1:
            raise DFAError(f"prompt_ids must be (batch, tokens) with tokens >= 1, got shape {tuple(prompt_ids.shape)}")
        self.model, self.prompt_len = model, int(prompt_ids.shape[1])
        self.cache, self._kw = _cache(model), _cache_kw(model)
        with torch.no_grad():  # the prefill that fills the cache runs eagerly, once
            logits = model(prompt_ids, use_cache=True, **{self._kw: self.cache}).logits
        self.next_ids = logits[:, -1:].argmax(-1)  # (B, 1)

    def forward(self, ids):
        return self.model(ids, use_cache=True, **{self._kw: self.cache}).logits

    def reset(self) -> None:
        """Crop the cache back to the prompt (what the steps appended is dropped)."""
        extra = self.cache_len - self.prompt_len
        if extra > 0:  # a negative count removes that many positions in transformers 4 and 5 alike
            self.cache.crop(-extra)

    @property
    def cache_len(self) -> int:
        return int(self.cache.get_seq_length())


def _dims(value) -> list:
    """A tensor's sizes as ints, symbolic ones by name ('s53')."""
    return [d if isinstance(d, int) else str(d) for d in value.shape]


class CompileLog:
    """A Dynamo backend: each graph it is handed appends ``{"call", "graph", "inputs", "ops", "dynamic"}``
    (the call that compiled it, 0-based; the graph's index; the shapes of its inputs other than ``model``'s
    weights and buffers; its
    call_function nodes; whether any input size is symbolic) to ``entries``, then runs unchanged."""

    def __init__(self, model: nn.Module | None = None):
        self.entries: list[dict] = []
        self.call = 0
        self._state = set() if model is None else {id(t) for t in (*model.parameters(), *model.buffers())}

    def __call__(self, gm, example_inputs):
        shapes = []
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for node, real in zip(placeholders, example_inputs, strict=False):
            if id(real) in self._state or isinstance(real, nn.Parameter) or not isinstance(real, torch.Tensor):
                continue  # weights, buffers, and symbolic sizes passed as their own inputs
            fake = node.meta.get("example_value", real)  # Dynamo's fake tensor: its sizes may be symbols
            shapes.append(_dims(fake if isinstance(fake, torch.Tensor) else real))
        self.entries.append({"call": self.call, "graph": len(self.entries), "inputs": shapes,
                             "ops": sum(n.op == "call_function" for n in gm.graph.nodes),
                             "dynamic": any(isinstance(d, str) for s in shapes for d in s)})
        return gm.forward


def inputs_summary(shapes: list[list]) -> str:
    """'[1, 1] + 48 x [1, 2, s, 64] (48 symbols)': a CompileLog entry's input shapes, equal ones counted once
    (every symbolic size written 's'), in order of first appearance."""
    counts: dict[str, int] = {}
    symbols = set()
    for shape in shapes:
        symbols |= {d for d in shape if isinstance(d, str)}
        key = "[" + ", ".join("s" if isinstance(d, str) else str(d) for d in shape) + "]"
        counts[key] = counts.get(key, 0) + 1
    text = " + ".join(k if n == 1 else f"{n} x {k}" for k, n in counts.items())
    return text + (f" ({len(symbols)} symbol{'' if len(symbols) == 1 else 's'})" if symbols else "")


def decode_compiles(model: nn.Module, prompt_ids: torch.Tensor, steps: int = 3) -> list[dict]:
    """Prefill ``prompt_ids`` eagerly into a DynamicCache, then run ``steps`` greedy decode steps on that growing
    cache through ``torch.compile(model, backend=CompileLog(model))``: the log's entries (calls 1..steps)."""
    import torch._dynamo as dynamo

    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise DFAError(f"steps must be an int >= 1, got {steps!r}")
    log = CompileLog(model)
    dynamo.reset()
    compiled = torch.compile(model, backend=log)
    kw = {_cache_kw(model): _cache(model)}
    with torch.no_grad():
        ids = model(prompt_ids, use_cache=True, **kw).logits[:, -1:].argmax(-1)  # (B, 1)
        for call in range(1, steps + 1):
            log.call = call
            ids = compiled(ids, use_cache=True, **kw).logits[:, -1:].argmax(-1)  # (B, 1): the next token
    dynamo.reset()
    return log.entries
