"""``ModelConfig``: the architecture numbers the ops and shapes depend on (torch-free).

Kept apart from the named registry (``common.models.config``) so that the Hugging Face loader
(``common.models.hf``) and the registry both import it without importing each other.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from common.errors import DFAError

# The nonlinearities the MLP can apply (common/models/ffn.py): gelu_tanh is GELU's tanh approximation
# (transformers' gelu_new / gelu_pytorch_tanh), relu2 is relu(x)^2 (Primer; Nemotron).
ACTIVATIONS = ("silu", "gelu", "gelu_tanh", "relu", "relu2")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """A decoder-only LM: embedding, ``n_layers`` x [RMSNorm, GQA+RoPE attention, RMSNorm, an MLP or a
    mixture of experts (``n_experts`` > 0: router + top-k of E MLP experts + optional shared expert)], head.

    The MLP is ``down(act(gate(x)) * up(x))`` when ``gated_mlp`` (SwiGLU for silu, GeGLU for gelu), else
    ``down(act(up(x)))`` (GPT-2, Falcon, Phi); ``activation`` is one of ``ACTIVATIONS``.

    Layers of two kinds: the ``sliding_layers`` attend to the last ``sliding_window`` positions only and cache
    that many (Mistral, Gemma 2/3, gpt-oss); in a mixture of experts the ``dense_layers`` have a dense MLP of
    ``ffn_dim`` instead (DeepSeek's first_k_dense_replace). Indices at or past ``n_layers`` are dropped, so a
    cut of the model (``replace(config, n_layers=k)``) keeps its first k layers as they were."""

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
    activation: str = "silu"  # the MLP's (and experts') nonlinearity, one of ACTIVATIONS
    gated_mlp: bool = True  # gate and up projections (3 matrices) or up only (2)
    # Mixture of experts (common/models/moe.py): 0 experts = a dense SwiGLU MLP in every layer.
    n_experts: int = 0  # routed experts per layer (E)
    top_k: int = 0  # experts each token is routed to (k)
    expert_ffn_dim: int | None = None  # one expert's SwiGLU width; None -> ffn_dim (Mixtral, gpt-oss)
    shared_ffn_dim: int = 0  # width of the always-on shared expert MLP (DeepSeek, Qwen2-MoE); 0 = none
    dense_layers: tuple[int, ...] = ()  # MoE only: the layers whose MLP is dense (width ffn_dim)
    expert_bias: bool = False  # biases on the experts' three projections (gpt-oss)
    router_bias: bool = False  # bias on the router (gpt-oss)
    sliding_window: int = 0  # positions a sliding-window layer attends to (and caches); 0 = no such layers
    sliding_layers: tuple[int, ...] = ()  # the layers that use it; the others attend to every position
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
        for attr in ("sliding_layers", "dense_layers"):  # a cut of the model keeps the kinds of its first layers
            kept = tuple(sorted({int(i) for i in getattr(self, attr) if 0 <= int(i) < self.n_layers}))
            object.__setattr__(self, attr, kept)
        if not isinstance(self.sliding_window, int) or self.sliding_window < 0:
            raise DFAError(f"model {self.name!r}: sliding_window must be an int >= 0, got {self.sliding_window!r}")
        if self.sliding_layers and not self.sliding_window:
            raise DFAError(f"model {self.name!r}: sliding_layers need sliding_window > 0, got 0")
        if self.dense_layers and not self.is_moe:
            raise DFAError(f"model {self.name!r}: dense_layers needs n_experts > 0 (every layer is dense already)")
        if self.activation not in ACTIVATIONS:
            raise DFAError(f"model {self.name!r}: activation {self.activation!r} is not modelled; valid: "
                           f"{', '.join(ACTIVATIONS)}")
        self._check_experts()

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of one MLP (or expert): 3 gated (gate, up, down), 2 ungated (up, down)."""
        return 3 if self.gated_mlp else 2

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
        """Parameters of one routed expert: m C F_e (+ (m - 1) F_e + C biases), m = ``mlp_matrices``."""
        c, f, m = self.d_model, self.moe_ffn_dim, self.mlp_matrices
        return m * c * f + (((m - 1) * f + c) if self.expert_bias else 0)

    def is_sliding(self, layer: int) -> bool:
        return layer in self.sliding_layers

    def is_moe_layer(self, layer: int) -> bool:
        return self.is_moe and layer not in self.dense_layers

    @property
    def n_moe_layers(self) -> int:
        return self.n_layers - len(self.dense_layers) if self.is_moe else 0

    def layer_kinds(self) -> list[tuple[tuple[bool, bool], int]]:
        """((sliding, mixture of experts), how many layers) per kind, in order of first appearance."""
        counts: dict[tuple[bool, bool], int] = {}
        for i in range(self.n_layers):
            kind = (self.is_sliding(i), self.is_moe_layer(i))
            counts[kind] = counts.get(kind, 0) + 1
        return list(counts.items())

    def kv_positions(self, layer: int, positions: int) -> int:
        """Positions layer ``layer`` caches after ``positions`` tokens: min(P, W) if it slides, else P."""
        return min(positions, self.sliding_window) if self.is_sliding(layer) else positions

    def kv_bytes(self, positions: int, dtype_bytes: int = 2) -> int:
        """KV-cache bytes of one sequence after ``positions`` tokens: 2 n_kv hd dtype_bytes x
        (n_full P + n_sliding min(P, W)); for a model without sliding layers ``kv_bytes_per_token`` x P."""
        per = 2 * self.n_kv_heads * self.head_dim * dtype_bytes
        if not self.sliding_layers:
            return self.kv_bytes_per_token(dtype_bytes) * positions
        full = self.n_layers - len(self.sliding_layers)
        return per * (full * positions + len(self.sliding_layers) * min(positions, self.sliding_window))

    def _layer_params(self, experts: int) -> int:
        """One decoder layer with ``experts`` routed experts counted (all E for the total, k for the active):
        C H hd + 2 C KV hd + H hd C (+ H hd + 2 KV hd biases) (+ 2 hd q/k norms) + 2 C norms, then the MLP:
        dense m C F, or router C E (+ E) + experts x expert_params + shared m C F_s (m = 3 gated, 2 not)."""
        c, q, kv = self.d_model, self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        attn = c * q + 2 * c * kv + q * c + ((q + 2 * kv) if self.qkv_bias else 0)
        attn += 2 * self.head_dim if self.qk_norm else 0
        if not self.is_moe or experts < 0:  # experts < 0: a dense layer of a mixture of experts
            return attn + self.mlp_matrices * c * self.ffn_dim + 2 * c
        router = c * self.n_experts + (self.n_experts if self.router_bias else 0)
        shared = self.mlp_matrices * c * self.shared_ffn_dim
        return attn + router + experts * self.expert_params() + shared + 2 * c

    @property
    def n_params(self) -> int:
        """Exact parameter count of ``DecoderLM(self)`` (tied head counted once), every expert included.

        V*C (embedding) + L_moe * layer(all E experts) + L_dense * layer(dense MLP) + C (final norm)
        + V*C (head, unless tied: the one matrix is counted once).
        """
        c = self.d_model
        head = 0 if self.tie_embeddings else self.vocab_size * c
        layers = self.n_moe_layers * self._layer_params(self.n_experts) if self.is_moe else 0
        layers += (self.n_layers - self.n_moe_layers) * self._layer_params(-1)
        return self.vocab_size * c + layers + c + head

    @property
    def n_active_params(self) -> int:
        """Parameters one token uses: as ``n_params`` with k routed experts per layer instead of E (router and
        shared expert included, embedding and head counted whole: the Mixtral paper's 12.9B convention)."""
        if not self.is_moe:
            return self.n_params
        return self.n_params - self.n_moe_layers * (self.n_experts - self.top_k) * self.expert_params()

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token adds: 2 (K and V) * n_layers * n_kv_heads * head_dim * dtype_bytes."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * dtype_bytes
