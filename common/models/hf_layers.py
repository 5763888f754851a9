"""Which layers of a Hugging Face config are of which kind: dense among experts, sliding-window among full.

Read by ``common.models.hf.config_from_hf`` into ``ModelConfig.dense_layers`` / ``sliding_layers``; every
family's spelling of the pattern (``hf_fields.DENSE_LAYER_KEYS``, ``layer_types``, GPT-Neo's
``attention_layers``, Qwen2's ``max_window_layers``) gives layer indices.
"""

from __future__ import annotations

from common.errors import DFAError
from common.models import hf_fields as hff


def get(raw: dict, keys: tuple[str, ...], used: set[str]):
    """The first of ``keys`` present with a value (None counts as absent), marking all present ones read."""
    found = None
    for k in keys:
        if k in raw:
            used.add(k)
            if found is None and raw[k] is not None:
                found = raw[k]
    return found


def dense_layers(raw: dict, n_layers: int, used: set[str]) -> tuple[int, ...]:
    """The layers of a mixture-of-experts model whose MLP is dense, from whichever fields say so."""
    used.update(k for k in hff.DENSE_LAYER_KEYS if k in raw)
    dense: set[int] = set()
    if isinstance(raw.get("mlp_layer_types"), list):
        dense |= {i for i, kind in enumerate(raw["mlp_layer_types"]) if kind == "dense"}
    if isinstance(raw.get("moe_layers"), list):
        dense |= set(range(n_layers)) - set(raw["moe_layers"])
    if isinstance(raw.get("mlp_only_layers"), list):
        dense |= set(raw["mlp_only_layers"])
    first = next((raw[k] for k in ("first_k_dense_replace", "num_dense_layers", "num_dense_blocks",
                                   "moe_layer_start_index") if isinstance(raw.get(k), int)), 0)
    dense |= set(range(min(max(first, 0), n_layers)))
    for key in ("decoder_sparse_step", "moe_layer_interval"):  # layer i is sparse when (i + 1) % step == 0
        step = raw.get(key)
        if isinstance(step, int) and step > 1:
            dense |= {i for i in range(n_layers) if (i + 1) % step}
    step = raw.get("moe_layer_freq")  # DeepSeek: layer i (past the dense prefix) is sparse when i % freq == 0
    if isinstance(step, int) and step > 1:
        dense |= {i for i in range(n_layers) if i % step}
    return tuple(sorted(i for i in dense if 0 <= i < n_layers))


def sliding(raw: dict, n_layers: int, max_seq: int, where: str, used: set[str]) -> tuple[dict, list[str]]:
    """sliding_window and sliding_layers from layer_types (or GPT-Neo's attention_layers, or Qwen2's
    max_window_layers, or every layer where only a window is given); the notes on what is approximated."""
    types = raw.get("layer_types") or []
    if not types and isinstance(raw.get("attention_layers"), list):  # GPT-Neo: "global" / "local"
        types = ["sliding_attention" if t == "local" else "full_attention" for t in raw["attention_layers"]]
        used.update(("attention_layers", "attention_types"))
    bad = sorted({t for t in types if t not in hff.LAYER_TYPES_OK})
    if bad:
        raise DFAError(f"{where}: layer_types {bad[0]!r} is not modelled; valid: {', '.join(hff.LAYER_TYPES_OK)}")
    window = get(raw, hff.SLIDING_KEYS, used)
    if raw.get("use_sliding_window") is False or not isinstance(window, int) or not 0 < window < max_seq:
        return {}, []
    if types:
        layers = tuple(i for i, t in enumerate(types[:n_layers]) if t != "full_attention")
    else:  # Qwen2: layers from max_window_layers on slide; Mistral v0.1: all
        first = raw.get("max_window_layers") if raw.get("use_sliding_window") else 0
        layers = tuple(range(first if isinstance(first, int) else 0, n_layers))
    if not layers:
        return {}, []
    notes = [f"prefill of the {len(layers)} sliding-window layers (window {window}): query blocks of {window} over "
             f"at most {2 * window} keys, the band's masked corners still computed (a windowed kernel's granularity)"]
    if "chunked_attention" in types:
        notes.append(f"chunked attention (chunks of {window}) is simulated as a sliding window of {window}: "
                     f"the most keys a chunk's query sees, an upper bound")
    return {"sliding_window": window, "sliding_layers": layers}, notes
