"""The feed-forward block every decoder here uses, dense or as a mixture of experts' shared expert.

Gated (``config.gated_mlp``): down(act(gate(x)) * up(x)), SwiGLU for silu and GeGLU for gelu (Shazeer 2020,
"GLU Variants Improve Transformer"). Ungated: down(act(up(x))) (GPT-2, Falcon, Phi). (B, T, C) -> (B, T, C).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from common.models.spec import ModelConfig


def _relu2(x: torch.Tensor) -> torch.Tensor:
    return F.relu(x).square()  # relu(x)^2 (So et al. 2021, "Primer")


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


ACT_FNS = {"silu": F.silu, "gelu": F.gelu, "gelu_tanh": _gelu_tanh, "relu": F.relu, "relu2": _relu2}


class SwiGLU(nn.Module):
    """down(act(gate(x)) * up(x)), or down(act(up(x))) without ``gated_mlp``; no biases.
    ``width`` defaults to ``config.ffn_dim``; act is ``config.activation`` (silu: SwiGLU proper)."""

    def __init__(self, config: ModelConfig, dtype: torch.dtype | None = None, width: int | None = None):
        super().__init__()
        f = width or config.ffn_dim
        self.act = ACT_FNS[config.activation]
        self.gate_proj = nn.Linear(config.d_model, f, bias=False, dtype=dtype) if config.gated_mlp else None
        self.up_proj = nn.Linear(config.d_model, f, bias=False, dtype=dtype)
        self.down_proj = nn.Linear(f, config.d_model, bias=False, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_proj is None:
            return self.down_proj(self.act(self.up_proj(x)))
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
