"""Mixture-of-experts feed-forward block (Mixtral, gpt-oss, Qwen3-MoE style) and its expected routing load.

``MoE(x)``: a router GEMM gives each token E logits; the token goes to its top-k experts, whose SwiGLU outputs
are summed with weights softmax(top-k logits):  y = sum_{e in topk(x W_r)} softmax(topk)_e * SwiGLU_e(x),
plus an always-on shared expert where the config has one (DeepSeek, Qwen2-MoE). (Qwen3's softmax over all E
then renormalising the top k gives the same weights.)

Two ways to run the same block, chosen by ``MoE.set_plan``:

* ``plan is None`` (real runs, ``torch.compile``): every expert is applied to every token and the outputs are
  combined with a (tokens, E) weight matrix that is zero outside each token's top k. Numerically the routed
  block, with static shapes; the work is that of all E experts.
* ``set_plan(ExpectedLoad(...))`` (the simulator's fake-tensor capture): only ``experts`` experts are
  applied, each to ``rows`` token rows, the shapes a grouped GEMM sees under the expected routing. The row
  indices are stand-ins (routing is data-dependent; costs depend only on shapes). Weights are sliced
  ``w[:experts]``: the graph reads the touched experts' bytes while the parameter - all E experts - is what
  stays resident.

Expected load: if each of N tokens picks k distinct experts of E uniformly and independently, an expert is
missed by one token with probability 1 - k/E, so the expected number of distinct experts touched is
``D(N) = E (1 - (1 - k/E)^N)`` (D(1) = k; D -> E as N grows) and each gets ``N k / D`` rows on average.

Imbalance: the captured expert GEMM is a batched GEMM, one M for all D experts, so its M is the MOST loaded
expert's rows - the slowest expert sets the time and the others pad to it (the capacity a static-shape MoE kernel
sizes its buffers to). Estimate (no published per-step load statistic is used): with m = N k copies thrown
uniformly on D experts, the expected maximum load is m/D + sqrt(2 (m/D) ln D) (the balls-into-bins maximum,
Raab & Steger, "Balls into Bins - A Simple and Tight Analysis", RANDOM 1998, for m >= D ln D), capped at N (a
token picks distinct experts). Trained routers are less even than uniform, so this is the least imbalance.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
from torch import nn

from common.errors import DFAError
from common.models.ffn import ACT_FNS, SwiGLU


def max_load_rows(tokens: int, top_k: int, experts: int) -> int:
    """ceil(min(N, m/D + sqrt(2 (m/D) ln D))), m = N k: the expected rows of the most loaded of D experts."""
    mean = tokens * top_k / experts
    return max(1, min(tokens, math.ceil(mean + math.sqrt(2.0 * mean * math.log(experts)) - 1e-9)))


def expected_experts(n_experts: int, top_k: int, tokens: int) -> float:
    """E (1 - (1 - k/E)^N): expected distinct experts that N tokens, each routed to k of E, touch."""
    if not 0 < top_k <= n_experts or tokens < 1:
        raise DFAError(
            f"expected_experts needs 0 < top_k <= n_experts and tokens >= 1, got top_k={top_k}, "
            f"n_experts={n_experts}, tokens={tokens}"
        )
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** tokens)


@dataclass(frozen=True)
class ExpectedLoad:
    """What the simulated grouped GEMM computes: ``experts`` experts, ``rows`` token rows each.

    ``expected`` is the exact expectation D(N); ``experts`` = D rounded half up (a GEMM has whole experts),
    clipped to [k, E]; ``mean_rows`` = ceil(N k / experts); ``rows`` = the most loaded expert's rows
    (``max_load_rows``), which every expert of the batched GEMM pads to; ``imbalance`` = rows / (N k / experts).
    """

    tokens: int
    experts: int
    rows: int
    expected: float
    mean_rows: int = 0
    imbalance: float = 1.0

    @classmethod
    def of(cls, n_experts: int, top_k: int, tokens: int) -> ExpectedLoad:
        d = expected_experts(n_experts, top_k, tokens)
        used = min(n_experts, max(top_k, math.floor(d + 0.5)))
        rows = max(math.ceil(tokens * top_k / used), max_load_rows(tokens, top_k, used))
        return cls(tokens, used, rows, d, math.ceil(tokens * top_k / used), rows * used / (tokens * top_k))


class Experts(nn.Module):
    """E MLP experts stored stacked, as grouped-GEMM kernels hold them: w1, w3 (E, C, F) gate and up,
    w2 (E, F, C) down; optional biases (gpt-oss). ``forward(x (D, n, C), d)`` applies the first d experts to
    their n rows each: down(act(x w1 + b1) * (x w3 + b3)) + b2, three batched matmuls; ungated (``gated``
    False: no w3) down(act(x w1 + b1)) + b2, two. ``act`` is an ``ACT_FNS`` name (silu: SwiGLU experts)."""

    def __init__(self, n_experts: int, d_model: int, ffn_dim: int, bias: bool, dtype: torch.dtype | None = None,
                 act: str = "silu", gated: bool = True):
        super().__init__()
        self.act = ACT_FNS[act]
        self.w1 = nn.Parameter(torch.empty(n_experts, d_model, ffn_dim, dtype=dtype))
        self.w3 = nn.Parameter(torch.empty(n_experts, d_model, ffn_dim, dtype=dtype)) if gated else None
        self.w2 = nn.Parameter(torch.empty(n_experts, ffn_dim, d_model, dtype=dtype))
        if bias:
            self.b1 = nn.Parameter(torch.zeros(n_experts, ffn_dim, dtype=dtype))
            self.b3 = nn.Parameter(torch.zeros(n_experts, ffn_dim, dtype=dtype)) if gated else None
            self.b2 = nn.Parameter(torch.zeros(n_experts, d_model, dtype=dtype))
        else:
            self.b1 = self.b3 = self.b2 = None

    def reset_parameters(self, std: float = 0.02) -> None:
        for w in (self.w1, self.w3, self.w2):
            if w is not None:
                nn.init.normal_(w, mean=0.0, std=std)
        for b in (self.b1, self.b3, self.b2):
            if b is not None:
                nn.init.zeros_(b)

    def forward(self, x: torch.Tensor, d: int) -> torch.Tensor:
        gate = torch.bmm(x, self.w1[:d])  # (d, n, F)
        up = None if self.w3 is None else torch.bmm(x, self.w3[:d])  # (d, n, F)
        if self.b1 is not None:
            gate = gate + self.b1[:d].unsqueeze(1)
            up = None if up is None else up + self.b3[:d].unsqueeze(1)
        hidden = self.act(gate) if up is None else self.act(gate) * up
        y = torch.bmm(hidden, self.w2[:d])  # (d, n, C)
        return y + self.b2[:d].unsqueeze(1) if self.b2 is not None else y


class MoE(nn.Module):
    """Router (Linear C -> E) + top-k routed ``Experts`` (+ a shared SwiGLU expert). (B, T, C) -> (B, T, C)."""

    def __init__(self, config, dtype: torch.dtype | None = None):
        super().__init__()
        self.n_experts, self.top_k = config.n_experts, config.top_k
        self.router = nn.Linear(config.d_model, config.n_experts, bias=config.router_bias, dtype=dtype)
        self.experts = Experts(config.n_experts, config.d_model, config.moe_ffn_dim, config.expert_bias, dtype,
                               config.activation, config.gated_mlp)
        self.shared_expert = SwiGLU(config, dtype, width=config.shared_ffn_dim) if config.shared_ffn_dim else None
        self.register_buffer("slot_rows", None, persistent=False)  # (experts x rows,) token row of each slot
        self.register_buffer("slot_weights", None, persistent=False)  # (experts x rows,) its routing weight
        self.plan: ExpectedLoad | None = None  # set_plan (by the simulator, common/sim/moe.py) before a capture

    def set_plan(self, plan: ExpectedLoad | None) -> None:
        """Route by ``plan`` from now on (None: every expert, exactly). The stand-in indices are buffers made
        with the parameters' device (and fake mode, for a fake model): a factory call such as arange inside
        forward would become a real constant when a fake graph is replayed."""
        self.plan = plan
        if plan is None:
            self.slot_rows = self.slot_weights = None
            return
        mode = getattr(self.router.weight, "fake_mode", None)
        with mode if mode is not None else contextlib.nullcontext():
            slots = torch.arange(plan.experts * plan.rows, device=self.router.weight.device)
            self.slot_rows, self.slot_weights = slots % plan.tokens, slots % (plan.tokens * self.top_k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        x2 = x.reshape(b * t, c)  # (N, C)
        top = torch.topk(self.router(x2), self.top_k, dim=-1)  # router GEMM (N, E), then k of E per token
        weights = torch.softmax(top.values, dim=-1)  # (N, k)
        if self.plan is None:  # every expert on every token, weights zero outside the top k
            gates = torch.zeros(b * t, self.n_experts, dtype=x.dtype, device=x.device)
            gates = gates.scatter(1, top.indices, weights)  # (N, E)
            y = self.experts(x2.unsqueeze(0).expand(self.n_experts, -1, -1), self.n_experts)  # (E, N, C)
            out = (y * gates.t().unsqueeze(-1)).sum(0)  # (N, C)
        else:  # the expected load: plan.experts experts x plan.rows rows (stand-in row indices: shapes only)
            d, n = self.plan.experts, self.plan.rows
            if isinstance(b * t, int) and b * t != self.plan.tokens:
                raise DFAError(f"MoE planned for {self.plan.tokens} token rows got {b * t}; call set_plan again")
            xd = x2.index_select(0, self.slot_rows).view(d, n, c)  # dispatch: gather the routed rows
            y = self.experts(xd, d).reshape(d * n, c)  # (d*n, C)
            w = weights.flatten().index_select(0, self.slot_weights)  # (d*n,) routing weight of each slot
            out = torch.zeros_like(x2).index_add(0, self.slot_rows, y * w.unsqueeze(-1))  # combine
        if self.shared_expert is not None:
            out = out + self.shared_expert(x2)
        return out.view(b, t, c)
