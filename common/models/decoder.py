"""A Llama/Qwen2-style decoder-only LM with grouped-query attention, RoPE and a KV cache.

Every op is explicit (matmul, softmax, masked_fill; no fused SDPA) so each simulated backend sees them.
Module names follow Hugging Face's Llama (``layers.0.self_attn.q_proj`` ...) so graphs read the same.

GQA without repeating K/V: the g = n_heads / n_kv_heads query heads that share one K/V head are stacked
along the row axis, Q: (B, n_kv, g*T, hd), so one batched matmul with K^T: (B, n_kv, hd, S) serves the
whole group. Row r of a group is query head r // T at position start_pos + r % T; the mask follows that.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from common.errors import DFAError
from common.models.config import ModelConfig
from common.models.ffn import SwiGLU
from common.models.moe import Experts, MoE


@dataclass(eq=False)  # == on lists of tensors is ambiguous; identity is what matters
class KVCache:
    """Preallocated keys and values: ``k[i]``, ``v[i]`` of shape (B, n_kv_heads, max_seq, head_dim) per layer;
    a sliding-window layer's hold min(max_seq, window) positions, a rolling buffer (position p in slot p % n).

    The model writes positions [start_pos, start_pos+T) in place and reads [0, start_pos+T). A pytree node
    (registered below), so make_fx / functional_call see its tensors as inputs rather than constants.
    """

    k: list[torch.Tensor]
    v: list[torch.Tensor]

    def __post_init__(self) -> None:
        if len(self.k) != len(self.v) or not self.k:
            raise DFAError(f"KVCache needs as many k as v tensors (at least one); got {len(self.k)} and "
                           f"{len(self.v)}")
        self.k, self.v = list(self.k), list(self.v)

    @classmethod
    def empty(cls, config: ModelConfig, batch: int, max_seq: int, *, dtype: torch.dtype = torch.float32,
              device: torch.device | str = "cpu") -> KVCache:
        """A zero-filled cache for ``config``: n_layers x 2 tensors (batch, n_kv_heads, positions, head_dim),
        positions = max_seq, or min(max_seq, window) for a sliding-window layer."""
        shapes = [(batch, config.n_kv_heads, config.kv_positions(i, max_seq), config.head_dim)
                  for i in range(config.n_layers)]
        return cls([torch.zeros(s, dtype=dtype, device=device) for s in shapes],
                   [torch.zeros(s, dtype=dtype, device=device) for s in shapes])

    def __len__(self) -> int:
        return len(self.k)

    @property
    def batch(self) -> int:
        return self.k[0].shape[0]

    @property
    def max_seq(self) -> int:
        """The longest layer's positions (a full-attention layer's, where the model has one)."""
        return max(t.shape[2] for t in self.k)

    @property
    def nbytes(self) -> int:
        """Bytes held: 2 * n_layers * B * n_kv * max_seq * hd * element size."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)


try:  # public API since torch 2.2; without it a KVCache is a pytree leaf and tracers see constants
    torch.export.register_dataclass(KVCache, serialized_type_name="common.models.KVCache")
except (AttributeError, ImportError, TypeError, ValueError):  # pragma: no cover - old torch / re-import
    pass


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2, last dim) + eps) * weight."""

    def __init__(self, dim: int, eps: float, dtype: torch.dtype | None = None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim: int, max_seq: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of angle[p, i] = p * theta^(-2i/hd), each (max_seq, hd/2); fp32 like Hugging Face."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)
    angle = torch.outer(torch.arange(max_seq, dtype=torch.float32), inv_freq)  # (max_seq, hd/2)
    return angle.cos(), angle.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[i], x[i + hd/2]) by the position's angle ("rotate half" layout, as in HF Llama).

    x: (..., T, hd); cos, sin: (T, hd/2).
    """
    x1, x2 = x.chunk(2, dim=-1)  # (..., T, hd/2) each
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (..., T, hd)


class Attention(nn.Module):
    """Causal GQA self-attention with RoPE: softmax(Q K^T / sqrt(hd) + mask) V, then o_proj.
    With ``config.qk_norm`` (Qwen3) q and k are RMS-normalised over head_dim before RoPE. ``sliding``: the
    layer attends to the last ``config.sliding_window`` positions (the mask it is given says which) and its
    cache is a rolling buffer of that many slots; the order of keys in it does not change attention."""

    def __init__(self, config: ModelConfig, dtype: torch.dtype | None = None, sliding: bool = False):
        super().__init__()
        self.window = config.sliding_window if sliding else 0
        c, hd = config.d_model, config.head_dim
        self.n_kv, self.group, self.head_dim = config.n_kv_heads, config.group, hd
        self.scale = 1.0 / math.sqrt(hd)
        self.q_proj = nn.Linear(c, config.n_heads * hd, bias=config.qkv_bias, dtype=dtype)
        self.k_proj = nn.Linear(c, config.n_kv_heads * hd, bias=config.qkv_bias, dtype=dtype)
        self.v_proj = nn.Linear(c, config.n_kv_heads * hd, bias=config.qkv_bias, dtype=dtype)
        self.o_proj = nn.Linear(config.n_heads * hd, c, bias=False, dtype=dtype)
        if config.qk_norm:
            self.q_norm = RMSNorm(hd, config.norm_eps, dtype)
            self.k_norm = RMSNorm(hd, config.norm_eps, dtype)
        else:
            self.q_norm = self.k_norm = None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
                kv_cache: tuple[torch.Tensor, torch.Tensor] | None = None,
                start_pos: int = 0) -> torch.Tensor:
        """x: (B, T, C); cos, sin: (T, hd/2); mask: (g*T, S) bool, True = hidden. Returns (B, T, C)."""
        kv, g, hd = self.n_kv, self.group, self.head_dim
        # query head h = kv_head * g + j (the order repeat_interleave would give), so split H as (n_kv, g)
        q = self.q_proj(x).unflatten(-1, (kv, g, hd))  # (B, T, n_kv, g, hd)
        q = q if self.q_norm is None else self.q_norm(q)
        q = apply_rope(q.permute(0, 2, 3, 1, 4), cos, sin)  # (B, n_kv, g, T, hd)
        q = q.flatten(2, 3)  # (B, n_kv, g*T, hd)
        k = self.k_proj(x).unflatten(-1, (kv, hd))  # (B, T, n_kv, hd)
        k = (k if self.k_norm is None else self.k_norm(k)).transpose(1, 2)  # (B, n_kv, T, hd)
        v = self.v_proj(x).unflatten(-1, (kv, hd)).transpose(1, 2)  # (B, n_kv, T, hd)
        k = apply_rope(k, cos, sin)  # (B, n_kv, T, hd)
        if kv_cache is not None:
            k, v, mask = self._cached(k, v, mask, kv_cache, start_pos)
        t = x.shape[1]
        if self.window and isinstance(t, int) and start_pos == 0 and k.shape[2] == t > 2 * self.window:
            return self.o_proj(self._banded(q, k, v, mask, t))  # a long prompt: only the blocks in the band
        scores = (q @ k.transpose(-2, -1)) * self.scale  # (B, n_kv, g*T, S)
        scores = scores.masked_fill(mask, float("-inf"))  # (B, n_kv, g*T, S)
        y = torch.softmax(scores, dim=-1) @ v  # (B, n_kv, g*T, hd)
        y = y.unflatten(2, (g, -1))  # (B, n_kv, g, T, hd)
        y = y.permute(0, 3, 1, 2, 4).flatten(2)  # (B, T, n_kv*g*hd) = (B, T, H*hd)
        return self.o_proj(y)  # (B, T, C)


    def _banded(self, q, k, v, mask, t: int) -> torch.Tensor:
        """Sliding-window attention over a prompt in query blocks of W: block [t0, t1) attends to keys
        [t0 - W, t1) (at most 2W), the only ones its band reaches, as a windowed kernel skips the blocks outside
        it: T x 2W scores instead of T x T. q: (B, n_kv, g*T, hd); mask: (g*T, T). Returns (B, T, H*hd)."""
        w, g = self.window, self.group
        qs, ms, out = q.unflatten(2, (g, t)), mask.unflatten(0, (g, t)), []
        for t0 in range(0, t, w):
            t1, k0 = min(t, t0 + w), max(0, t0 - w)
            qb = qs[:, :, :, t0:t1].flatten(2, 3)  # (B, n_kv, g*tb, hd)
            scores = (qb @ k[:, :, k0:t1].transpose(-2, -1)) * self.scale  # (B, n_kv, g*tb, kb)
            scores = scores.masked_fill(ms[:, t0:t1, k0:t1].flatten(0, 1), float("-inf"))
            out.append((torch.softmax(scores, dim=-1) @ v[:, :, k0:t1]).unflatten(2, (g, -1)))  # (B,kv,g,tb,hd)
        return torch.cat(out, dim=3).permute(0, 3, 1, 2, 4).flatten(2)  # (B, T, n_kv*g*hd)

    def _cached(self, k, v, mask, kv_cache, start_pos: int):
        """Write the T new positions into the cache; the keys, values and mask attention then reads."""
        k_cache, v_cache = kv_cache  # (B, n_kv, n, hd) each: n = max_seq, or the window's slots
        t, n = k.shape[2], k_cache.shape[2]
        end = start_pos + t
        if not isinstance(end, int) or end <= n:  # every position has its own slot (a full-attention layer)
            # Slice copy_: an aten capture shows T positions written, not a whole-cache copy.
            k_cache[:, :, start_pos:end].copy_(k)
            v_cache[:, :, start_pos:end].copy_(v)
            return k_cache[:, :, :end], v_cache[:, :, :end], mask  # (B, n_kv, S, hd), S = start_pos + T
        if t == 1:  # decode past the window: overwrite the oldest slot, attend to all n = the last n positions
            slot = start_pos % n
            k_cache[:, :, slot:slot + 1].copy_(k)
            v_cache[:, :, slot:slot + 1].copy_(v)
            return k_cache, v_cache, mask[:, end - n:]  # (B, n_kv, n, hd); the mask's last n columns
        if start_pos == 0:  # a prompt longer than the window: attend over it (band mask), keep its last n
            first = (t - n) % n  # the slot of position t - n
            for cache, new in ((k_cache, k), (v_cache, v)):
                cache[:, :, first:].copy_(new[:, :, t - n:t - first])
                cache[:, :, :first].copy_(new[:, :, t - first:])
            return k, v, mask
        raise DFAError(f"a sliding-window layer (window {self.window}) takes one token per step once its cache "
                       f"is full; got {t} tokens at position {start_pos}")


class DecoderLayer(nn.Module):
    """x + Attn(RMSNorm(x)), then + SwiGLU(RMSNorm(.)), or + MoE(RMSNorm(.)) for a mixture of experts.
    ``index``: which layer of ``config`` it is (sliding window or not, dense or expert MLP)."""

    def __init__(self, config: ModelConfig, dtype: torch.dtype | None = None, index: int = 0):
        super().__init__()
        self.input_layernorm = RMSNorm(config.d_model, config.norm_eps, dtype)
        self.self_attn = Attention(config, dtype, sliding=config.is_sliding(index))
        self.post_attention_layernorm = RMSNorm(config.d_model, config.norm_eps, dtype)
        self.mlp = MoE(config, dtype) if config.is_moe_layer(index) else SwiGLU(config, dtype)

    def forward(self, x, cos, sin, mask, kv_cache=None, start_pos: int = 0):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, kv_cache, start_pos)
        return x + self.mlp(self.post_attention_layernorm(x))


class DecoderLM(nn.Module):
    """tokens (B, T) -> logits (B, T, vocab). Weights ~ N(0, 0.02), biases 0, norms 1 (GPT-2 style).

    ``dtype`` (default: torch's default dtype) is the dtype of parameters and RoPE tables.

    ``forward(tokens, cache=None, start_pos=0)``: with a ``KVCache`` the T new tokens sit at positions
    [start_pos, start_pos+T) and attend to everything cached before them. For ``torch.fx.symbolic_trace``
    pass ``concrete_args={"cache": None, "start_pos": 0}``.
    """

    def __init__(self, config: ModelConfig, dtype: torch.dtype | None = None):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model, dtype=dtype)
        self.layers = nn.ModuleList(DecoderLayer(config, dtype, i) for i in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps, dtype)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False, dtype=dtype)
        cos, sin = rope_tables(config.head_dim, config.max_seq_len, config.rope_theta)
        cos, sin = cos.to(self.norm.weight.dtype), sin.to(self.norm.weight.dtype)  # fp32 math, model dtype
        # non-persistent: derived from the config, so not part of the state dict
        self.register_buffer("rope_cos", cos, persistent=False)  # (max_seq_len, hd/2)
        self.register_buffer("rope_sin", sin, persistent=False)  # (max_seq_len, hd/2)
        positions = torch.arange(config.max_seq_len)  # (max_seq_len,): source of the causal mask's indices
        self.register_buffer("positions", positions, persistent=False)
        self.apply(self._init_weights)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, Experts):
            module.reset_parameters(std=0.02)

    def causal_mask(self, t, start_pos: int = 0, window: int = 0) -> torch.Tensor:
        """(g*T, S) bool, True where key position > query position (or, with a ``window``, <= query position
        - window: the band a sliding-window layer sees); grouped row r is position r % T."""
        q_pos = self.positions.narrow(0, start_pos, t).repeat(self.config.group)  # (g*T,)
        k_pos = self.positions.narrow(0, 0, start_pos + t)  # (S,)
        hidden = k_pos.unsqueeze(0) > q_pos.unsqueeze(1)  # (g*T, S)
        if window:
            hidden = hidden | (k_pos.unsqueeze(0) <= q_pos.unsqueeze(1) - window)  # older than the window
        return hidden

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None, start_pos: int = 0) -> torch.Tensor:
        b, t = tokens.shape[0], tokens.shape[1]
        # Checks only on concrete ints: under symbolic_trace t is a Proxy and must not reach an `if`.
        if isinstance(start_pos, int) and start_pos < 0:
            raise DFAError(f"start_pos must be >= 0, got {start_pos}")
        if isinstance(t, int) and start_pos + t > self.config.max_seq_len:
            raise DFAError(f"positions {start_pos}..{start_pos + t - 1} exceed max_seq_len="
                           f"{self.config.max_seq_len} of model {self.config.name!r}")
        if cache is not None:
            if len(cache) != self.config.n_layers:
                raise DFAError(f"KVCache has {len(cache)} layers; model {self.config.name!r} has "
                               f"{self.config.n_layers}")
            full = [c.shape[2] for i, c in enumerate(cache.k) if not self.config.is_sliding(i)]
            if isinstance(t, int) and full and start_pos + t > min(full):
                raise DFAError(f"KVCache holds {min(full)} positions; need {start_pos + t}")
            if isinstance(b, int) and b != cache.batch:
                raise DFAError(f"KVCache batch {cache.batch} != tokens batch {b}")
        # narrow, not [a:b]: a buffer sliced by a traced length must go through a torch call
        cos = self.rope_cos.narrow(0, start_pos, t)  # (T, hd/2)
        sin = self.rope_sin.narrow(0, start_pos, t)  # (T, hd/2)
        mask = self.causal_mask(t, start_pos)  # (g*T, S)
        band = self.causal_mask(t, start_pos, self.config.sliding_window) if self.config.sliding_layers else None
        x = self.embed_tokens(tokens)  # (B, T, C)
        for i, layer in enumerate(self.layers):
            kv = None if cache is None else (cache.k[i], cache.v[i])
            x = layer(x, cos, sin, band if self.config.is_sliding(i) else mask, kv, start_pos)
        return self.lm_head(self.norm(x))  # (B, T, vocab)
