"""One GPT-style transformer block, every op spelled out, small enough to read as a graph.

y = x + Attn(LN1(x));  out = y + MLP(LN2(y)),  MLP(z) = W2 GELU(W1 z + b1) + b2.
``torch.fx.symbolic_trace`` accepts it: no data-dependent Python control flow, and the only shape read
(T, for the causal mask) becomes a traced node.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from common.errors import DFAError


class TinyTransformerBlock(nn.Module):
    """Pre-norm block: LayerNorm -> causal multi-head self-attention -> residual -> LayerNorm -> GELU MLP
    -> residual. Input and output (B, T, d_model)."""

    def __init__(self, d_model: int, n_heads: int, ffn_dim: int | None = None, causal: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise DFAError(f"d_model={d_model} is not a multiple of n_heads={n_heads}")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.ffn_dim = ffn_dim or 4 * d_model
        self.causal = causal
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.ln1 = nn.LayerNorm(d_model)
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.o_proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, self.ffn_dim)
        self.fc2 = nn.Linear(self.ffn_dim, d_model)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        """softmax(Q K^T * scale + causal mask) V, per head, then the output projection."""
        h, hd = self.n_heads, self.head_dim
        q = self.q_proj(x).unflatten(-1, (h, hd)).transpose(1, 2)  # (B, H, T, hd)
        k = self.k_proj(x).unflatten(-1, (h, hd)).transpose(1, 2)  # (B, H, T, hd)
        v = self.v_proj(x).unflatten(-1, (h, hd)).transpose(1, 2)  # (B, H, T, hd)
        scores = (q @ k.transpose(-2, -1)) * self.scale  # (B, H, T, T)
        if self.causal:  # a constructor flag, not data: fine for symbolic_trace
            t = x.shape[1]
            pos = torch.arange(t, device=x.device)  # (T,)
            future = pos.unsqueeze(0) > pos.unsqueeze(1)  # (T, T): True where key comes after query
            scores = scores.masked_fill(future, float("-inf"))
        probs = torch.softmax(scores, dim=-1)  # (B, H, T, T)
        y = probs @ v  # (B, H, T, hd)
        y = y.transpose(1, 2).flatten(2)  # (B, T, H*hd)
        return self.o_proj(y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
