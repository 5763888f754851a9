"""The gated feed-forward block every decoder here uses, dense or as a mixture of experts' shared expert:
SwiGLU(x) = down(silu(gate(x)) * up(x)) (Shazeer 2020, "GLU Variants Improve Transformer"). (B, T, C) -> (B, T, C)."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from common.models.spec import ModelConfig


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)); no biases. ``width`` defaults to ``config.ffn_dim``."""

    def __init__(self, config: ModelConfig, dtype: torch.dtype | None = None, width: int | None = None):
        super().__init__()
        f = width or config.ffn_dim
        self.gate_proj = nn.Linear(config.d_model, f, bias=False, dtype=dtype)
        self.up_proj = nn.Linear(config.d_model, f, bias=False, dtype=dtype)
        self.down_proj = nn.Linear(f, config.d_model, bias=False, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
