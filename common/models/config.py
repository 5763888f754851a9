"""Architecture numbers for the reference decoder LM, and where they come from.

A ``ModelConfig`` holds only what the ops and shapes depend on. Named dense configurations copy the public
Hugging Face ``config.json`` of each model field by field; the mixture-of-experts ones (Mixtral-8x7B,
gpt-oss-120b, Qwen3-30B-A3B) are kept as their config.json dicts (``common.models.hf_configs``) and read by
``config_from_hf`` (``common.models.hf``), which refuses any field it does not know.
Not modelled (they change values, not ops or shapes): Llama 3.1's ``rope_scaling`` frequency remap and
Qwen2's sliding window (off in these checkpoints). Features that do change cost but are not modelled (e.g.
gpt-oss's sliding-window layers) are listed in ``ModelConfig.unmodelled`` and printed with every report.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from common.errors import DFAError, unknown


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """A decoder-only LM: embedding, ``n_layers`` x [RMSNorm, GQA+RoPE attention, RMSNorm, SwiGLU or a
    mixture of experts (``n_experts`` > 0: router + top-k of E SwiGLU experts + optional shared expert)], head."""

    name: str
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int | None = None  # None -> n_heads (plain multi-head attention)
    head_dim: int | None = None  # None -> d_model // n_heads
    ffn_dim: int
    max_seq_len: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    qkv_bias: bool = False  # biases on q/k/v projections only (Qwen2); o_proj and MLP never have one
    qk_norm: bool = False  # RMSNorm over head_dim on q and k before RoPE (Qwen3)
    # Mixture of experts (common/models/moe.py): 0 experts = a dense SwiGLU MLP in every layer.
    n_experts: int = 0  # routed experts per layer (E)
    top_k: int = 0  # experts each token is routed to (k)
    expert_ffn_dim: int | None = None  # one expert's SwiGLU width; None -> ffn_dim (Mixtral, gpt-oss)
    shared_ffn_dim: int = 0  # width of the always-on shared expert MLP (DeepSeek, Qwen2-MoE); 0 = none
    expert_bias: bool = False  # biases on the experts' three projections (gpt-oss)
    router_bias: bool = False  # bias on the router (gpt-oss)
    source: str = ""
    # Known features that change cost but are not modelled (one sentence each); shown in every report's notes.
    unmodelled: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        # frozen: fill the defaults through object.__setattr__
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.d_model // max(self.n_heads, 1))
        for attr in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim",
                     "max_seq_len"):
            value = getattr(self, attr)
            if not isinstance(value, int) or value <= 0:
                raise DFAError(f"model {self.name!r}: {attr} must be a positive int, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise DFAError(f"model {self.name!r}: n_heads={self.n_heads} is not a multiple of "
                           f"n_kv_heads={self.n_kv_heads}")
        if self.head_dim % 2:
            raise DFAError(f"model {self.name!r}: head_dim={self.head_dim} must be even for RoPE")
        self._check_experts()

    def _check_experts(self) -> None:
        e, k = self.n_experts, self.top_k
        if e == 0:
            if k or self.shared_ffn_dim or self.expert_bias or self.router_bias or self.expert_ffn_dim:
                raise DFAError(f"model {self.name!r}: top_k, shared_ffn_dim, expert_ffn_dim and expert/router "
                               f"biases need n_experts > 0 (a mixture of experts); got n_experts=0")
            return
        if not isinstance(e, int) or e < 0 or not isinstance(k, int) or not 0 < k <= e:
            raise DFAError(f"model {self.name!r}: a mixture of experts needs 0 < top_k <= n_experts, got "
                           f"top_k={k!r}, n_experts={e!r}")
        for name in ("moe_ffn_dim", "shared_ffn_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < (1 if name == "moe_ffn_dim" else 0):
                raise DFAError(f"model {self.name!r}: {name} must be a positive int, got {value!r}")

    @property
    def group(self) -> int:
        """Query heads per K/V head: g = n_heads / n_kv_heads."""
        return self.n_heads // self.n_kv_heads

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def moe_ffn_dim(self) -> int:
        """One routed expert's SwiGLU width (F_e)."""
        return self.expert_ffn_dim or self.ffn_dim

    def expert_params(self) -> int:
        """Parameters of one routed expert: 3 C F_e (+ 2 F_e + C biases)."""
        c, f = self.d_model, self.moe_ffn_dim
        return 3 * c * f + ((2 * f + c) if self.expert_bias else 0)

    def _layer_params(self, experts: int) -> int:
        """One decoder layer with ``experts`` routed experts counted (all E for the total, k for the active):
        C H hd + 2 C KV hd + H hd C (+ H hd + 2 KV hd biases) (+ 2 hd q/k norms) + 2 C norms, then the MLP:
        dense 3 C F, or router C E (+ E) + experts x expert_params + shared 3 C F_s."""
        c, q, kv = self.d_model, self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        attn = c * q + 2 * c * kv + q * c + ((q + 2 * kv) if self.qkv_bias else 0)
        attn += 2 * self.head_dim if self.qk_norm else 0
        if not self.is_moe:
            return attn + 3 * c * self.ffn_dim + 2 * c
        router = c * self.n_experts + (self.n_experts if self.router_bias else 0)
        return attn + router + experts * self.expert_params() + 3 * c * self.shared_ffn_dim + 2 * c

    @property
    def n_params(self) -> int:
        """Exact parameter count of ``DecoderLM(self)`` (tied head counted once), every expert included.

        V*C (embedding) + L * layer(all E experts) + C (final norm) + V*C (head, unless tied).
        """
        c = self.d_model
        head = 0 if self.tie_embeddings else self.vocab_size * c
        return self.vocab_size * c + self.n_layers * self._layer_params(self.n_experts) + c + head

    @property
    def n_active_params(self) -> int:
        """Parameters one token uses: as ``n_params`` with k routed experts per layer instead of E (router and
        shared expert included, embedding and head counted whole: the Mixtral paper's 12.9B convention)."""
        if not self.is_moe:
            return self.n_params
        return self.n_params - self.n_layers * (self.n_experts - self.top_k) * self.expert_params()

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token adds: 2 (K and V) * n_layers * n_kv_heads * head_dim * dtype_bytes."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * dtype_bytes


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


CONFIGS: dict[str, ModelConfig] = {c.name: c for c in (
    ModelConfig(name="qwen2.5-0.5b", vocab_size=151936, d_model=896, n_layers=24, n_heads=14, n_kv_heads=2,
                ffn_dim=4864, max_seq_len=32768, rope_theta=1e6, norm_eps=1e-6, tie_embeddings=True,
                qkv_bias=True, source=_hf("Qwen/Qwen2.5-0.5B")),
    ModelConfig(name="llama-2-7b", vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32,
                ffn_dim=11008, max_seq_len=4096, rope_theta=1e4, norm_eps=1e-5,
                source=_hf("meta-llama/Llama-2-7b-hf")),
    ModelConfig(name="llama-2-70b", vocab_size=32000, d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                ffn_dim=28672, max_seq_len=4096, rope_theta=1e4, norm_eps=1e-5,
                source=_hf("meta-llama/Llama-2-70b-hf")),
    ModelConfig(name="llama-3.1-8b", vocab_size=128256, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                ffn_dim=14336, max_seq_len=131072, rope_theta=5e5, norm_eps=1e-5,
                source=_hf("meta-llama/Llama-3.1-8B") + " (rope_scaling not modelled)"),
    ModelConfig(name="llama-3.1-70b", vocab_size=128256, d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                ffn_dim=28672, max_seq_len=131072, rope_theta=5e5, norm_eps=1e-5,
                source=_hf("meta-llama/Llama-3.1-70B") + " (rope_scaling not modelled)"),
    # Small enough to run and print anything in a notebook; GQA with g=2 so grouping is visible.
    ModelConfig(name="tiny-block", vocab_size=256, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2,
                ffn_dim=256, max_seq_len=128, source="course toy: byte vocabulary, d_model 64, 2 layers"),
    # Smallest config that still exercises GQA (g=2), RoPE (hd=8) and more than one layer.
    ModelConfig(name="test", vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64,
                max_seq_len=32, source="unit tests"),
)}


def get_config(name: str) -> ModelConfig:
    """The named configuration; an unknown name is a DFAError listing the valid ones."""
    try:
        return CONFIGS[name]
    except (KeyError, TypeError):
        raise unknown("model", name, CONFIGS) from None


def resolve_config(name_or_path: str | os.PathLike | ModelConfig) -> ModelConfig:
    """A ModelConfig passes through; a known name is looked up; an existing .json file or folder is read."""
    if isinstance(name_or_path, ModelConfig):
        return name_or_path
    if isinstance(name_or_path, str) and name_or_path in CONFIGS:
        return CONFIGS[name_or_path]
    if isinstance(name_or_path, (str, os.PathLike)):
        path = os.fspath(name_or_path)
        if os.path.isfile(path) or os.path.isfile(os.path.join(path, "config.json")):
            return config_from_hf(path)
    raise unknown("model", name_or_path, CONFIGS) from None


# The mixture-of-experts configurations are read from their config.json dicts by the loader, which needs
# ModelConfig: imported last (common.models.hf imports this module).
from common.models.hf import LLM_CONFIGS, MOE_CONFIGS, config_from_hf, config_to_hf  # noqa: E402

CONFIGS.update(MOE_CONFIGS)
CONFIGS.update(LLM_CONFIGS)  # the labs' LLM (common.models.load_llm), by the same name
__all__ = ["CONFIGS", "ModelConfig", "config_from_hf", "config_to_hf", "get_config", "resolve_config"]
