"""One real LLM for every lab: ``load_llm("qwen2.5-0.5b-instruct", layers=2)``, a transformers model.

* Online (Colab): ``from_pretrained`` downloads the published weights and tokenizer once into Hugging Face's
  own cache (``HF_HOME``); later calls, and offline machines that have them cached, read them from there.
* Offline (``offline=True``, or ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` set or the Hub not answering
  within ``HUB_TIMEOUT_S``, with nothing cached): the same transformers class built from the model's
  published ``config.json``, shipped with this package (``common/models/configs/``), with seeded random
  weights. One printed line says the weights are random. There is no tokenizer to ship, so ``tokenizer`` is
  ``TokenIdsOnly``: it refuses text with a one-line DFAError and the model takes token ids. (A byte-level
  fallback was rejected: its ids would mean nothing to the model's 151,936-token vocabulary.)

``offline=True`` never looks at the network or the cache: the choice for CI and grading, where every machine
must build the same model (the same ``seed`` gives the same weights, and the first N layers are the same for
any ``layers=``; drawn once per tensor from a private generator, the global RNG untouched). ``layers=N`` keeps
the first N decoder layers (and, for real weights, only their weights) for quick runs. ``LLM.label`` says which
model, how many layers and whether the weights are real.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from common.errors import DFAError, unknown
from common.models.config import CONFIGS, ModelConfig
from common.models.hf import bundled_config, config_from_hf
from common.models.hf_configs import LLM_HF

HUB_TIMEOUT_S = 5.0  # one metadata request: long enough for a slow link, short enough for an air-gapped laptop
_OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


@dataclass(frozen=True)
class LLMSpec:
    """A model ``load_llm`` knows by name: its Hub id and display name (config.json: ``bundled_config``)."""

    hf_id: str
    display: str


LLMS: dict[str, LLMSpec] = {name: LLMSpec(hf_id, display) for name, (hf_id, display, _file) in LLM_HF.items()}
DEFAULT_LLM = "qwen2.5-0.5b-instruct"


class TokenIdsOnly:
    """The tokenizer's stand-in when no tokenizer could be loaded: token ids pass, text is refused."""

    def __init__(self, model_name: str, vocab_size: int, why: str = "random weights, offline"):
        self.model_name, self.vocab_size, self.why = model_name, vocab_size, why

    def _refuse(self, *_args, **_kwargs):
        raise DFAError(f"{self.model_name} has no tokenizer here ({self.why}): pass token ids "
                       f"(ints below {self.vocab_size}), not text")

    __call__ = encode = decode = batch_decode = apply_chat_template = _refuse

    def __repr__(self) -> str:
        return f"TokenIdsOnly({self.model_name!r}, vocab_size={self.vocab_size})"


@dataclass(eq=False)
class LLM:
    """A loaded model: the transformers ``model``, its ``tokenizer`` (or ``TokenIdsOnly``), the project's
    ``ModelConfig`` of what was built (``config.n_layers == layers``: simulate exactly this), and where the
    weights came from (``weights``: "real" or "random")."""

    model: nn.Module
    tokenizer: Any
    config: ModelConfig
    name: str
    display: str
    weights: str
    layers: int
    total_layers: int

    @property
    def label(self) -> str:
        """'Qwen2.5-0.5B-Instruct (2 of 24 layers, random weights)': what a figure says about its model."""
        depth = f"{self.layers} layers" if self.layers == self.total_layers else \
            f"{self.layers} of {self.total_layers} layers"
        return f"{self.display} ({depth}, {self.weights} weights)"

    @property
    def has_tokenizer(self) -> bool:
        return not isinstance(self.tokenizer, TokenIdsOnly)

    def input_ids(self, prompt: str | list[int] | torch.Tensor) -> torch.Tensor:
        """(1, T) token ids on the model's device: text through the tokenizer, ids as given."""
        if isinstance(prompt, str):
            ids = self.tokenizer(prompt, return_tensors="pt")["input_ids"]
        else:
            ids = torch.as_tensor(prompt, dtype=torch.long)
            ids = ids if ids.dim() == 2 else ids.view(1, -1)  # (1, T)
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.config.vocab_size):
                raise DFAError(f"token ids must lie in [0, {self.config.vocab_size}) for {self.display}; got "
                               f"{int(ids.min())}..{int(ids.max())}")
        return ids.to(next(self.model.parameters()).device)

    @torch.no_grad()
    def generate(self, prompt: str | list[int] | torch.Tensor, max_new_tokens: int = 16) -> str | torch.Tensor:
        """Greedy continuation: text for a text prompt, else the (1, T + new) ids."""
        ids = self.input_ids(prompt)
        out = self.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                  do_sample=False, pad_token_id=self.model.config.eos_token_id)
        if isinstance(prompt, str):
            return self.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        return out


def _hub_unreachable(hf_id: str) -> str:
    """Why the Hub cannot be used now (env var or a failed metadata request), or '' if it answered."""
    for var in _OFFLINE_ENV:
        if os.environ.get(var, "").strip().lower() in ("1", "on", "yes", "true"):
            return f"{var} is set"
    try:
        from huggingface_hub import model_info
        model_info(hf_id, timeout=HUB_TIMEOUT_S)
    except Exception as exc:  # no network, DNS, proxy, HTTP error: all mean "use what is here"
        return f"the Hugging Face Hub did not answer ({type(exc).__name__})"
    return ""


def _layers(layers: int | None, total: int) -> int:
    if layers is None:
        return total
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= total:
        raise DFAError(f"layers must be an int from 1 to {total} (the model's num_hidden_layers), got {layers!r}")
    return layers


def _with_layers(hf_config, layers: int):
    """A copy of a transformers config keeping the first ``layers`` layers (and their layer_types)."""
    raw = hf_config.to_dict()
    raw["num_hidden_layers"] = layers
    if isinstance(raw.get("layer_types"), list):  # transformers 5 checks len(layer_types) == num_hidden_layers
        raw["layer_types"] = raw["layer_types"][:layers]
    return type(hf_config).from_dict(raw)


def _no_init():
    """transformers' context that skips both torch's and transformers' weight initialisation."""
    try:
        from transformers.initialization import no_init_weights  # transformers 5
    except ImportError:  # transformers 4.57
        from transformers.modeling_utils import no_init_weights
    return no_init_weights()


@torch.no_grad()
def _seeded_init(model: nn.Module, std: float, seed: int) -> None:
    """Fill every parameter once, in module order, as transformers' ``_init_weights`` does for these decoders:
    Linear and Embedding weights ~ N(0, std) (the padding row 0), biases 0, norm weights 1.

    One draw per tensor from a private generator: about 4x faster than building the model with torch's
    default init and then re-initialising it (two draws, the 136M-value embedding included). Module order puts
    the embedding and layer i before layer i+1, so the first N layers are the same draw for any ``layers=``.
    """
    gen = torch.Generator().manual_seed(seed)
    done: set[int] = set()
    for module in model.modules():
        for pname, param in module.named_parameters(recurse=False):
            if id(param) in done:  # a tied weight (lm_head = embed_tokens) is drawn once
                continue
            done.add(id(param))
            if isinstance(module, (nn.Linear, nn.Embedding)) and pname == "weight":
                param.normal_(0.0, std, generator=gen)
                pad = getattr(module, "padding_idx", None)
                if pad is not None:
                    param[pad].zero_()
            elif pname == "bias":
                param.zero_()
            elif pname == "weight" and param.dim() == 1 and "norm" in type(module).__name__.lower():
                param.fill_(1.0)
            else:
                raise DFAError(f"load_llm has no random-init rule for {type(module).__name__}.{pname}; "
                               f"known: Linear/Embedding weights, biases, norm weights")


def _random(name: str, raw: dict, layers: int | None, dtype, seed: int, device, why: str):
    from transformers import AutoConfig, AutoModelForCausalLM
    raw = {k: v for k, v in raw.items() if k not in ("torch_dtype", "dtype", "transformers_version")}
    hf_config = AutoConfig.for_model(**raw)
    n = _layers(layers, hf_config.num_hidden_layers)
    hf_config = _with_layers(hf_config, n)
    with _no_init():  # uninitialised storage, filled once below (torch's default dtype: no dtype in raw)
        model = AutoModelForCausalLM.from_config(hf_config)
    model.tie_weights()  # no_init_weights also skips init_weights, where transformers ties lm_head to the embedding
    _seeded_init(model, hf_config.initializer_range, seed)
    print(f"load_llm: {name} has RANDOM weights (seed {seed}; {why}): outputs are meaningless, shapes and costs "
          f"are the real model's; pass token ids, not text")
    return model.to(device=device, dtype=dtype).eval(), n, raw["num_hidden_layers"]


def _pretrained(source: str, layers: int | None, dtype, device, local_only: bool):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    hf_config = AutoConfig.from_pretrained(source, local_files_only=local_only)
    total = hf_config.num_hidden_layers
    n = _layers(layers, total)
    # With fewer layers the checkpoint's later layers are unused: transformers' load report listing them as
    # "unexpected" is silenced (expected here), other warnings pass.
    from transformers.utils import logging as hf_logging
    verbosity = hf_logging.get_verbosity()
    if n < total:
        hf_logging.set_verbosity_error()
    try:
        model = AutoModelForCausalLM.from_pretrained(source, config=_with_layers(hf_config, n), dtype=dtype,
                                                     local_files_only=local_only)
    finally:
        hf_logging.set_verbosity(verbosity)
    tokenizer = None
    # a folder without tokenizer files: transformers 5 would build an empty tokenizer from the model type alone
    if not os.path.isdir(source) or any(os.path.isfile(os.path.join(source, f)) for f in _TOKENIZER_FILES):
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    return model.to(device).eval(), tokenizer, n, total


def load_llm(name: str = DEFAULT_LLM, layers: int | None = None, *, offline: bool | None = None,
             dtype: torch.dtype = torch.float32, seed: int = 0, device: torch.device | str = "cpu") -> LLM:
    """Load ``name`` (a key of ``LLMS``, or a folder written by ``save_pretrained``) as an ``LLM``.

    ``offline``: None tries the Hub (or its cache when the Hub is out of reach) and falls back to random
    weights; True builds random weights without touching network or cache; False insists on real weights.
    """
    local = isinstance(name, (str, os.PathLike)) and os.path.isfile(os.path.join(os.fspath(name), "config.json"))
    if not local and name not in LLMS:
        raise unknown("LLM", name, LLMS)
    if offline is not None and not isinstance(offline, bool):
        raise DFAError(f"offline must be None, True or False, got {offline!r}")
    if local:
        path = os.fspath(name)
        display = short = os.path.basename(os.path.normpath(path))
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            raw = json.load(f)
        source, why = path, "offline=True" if offline else ""
        model_config = config_from_hf(path, name=short)
    else:
        spec, short, display = LLMS[name], name, LLMS[name].display
        raw, source = bundled_config(name), spec.hf_id
        why = "offline=True" if offline else ("" if offline is False else _hub_unreachable(spec.hf_id))
        model_config = CONFIGS[name]
    tokenizer = None
    if offline:
        model, n, total = _random(display, raw, layers, dtype, seed, device, why)
        weights = "random"
    else:
        try:
            model, tokenizer, n, total = _pretrained(source, layers, dtype, device, local_only=bool(why))
            weights = "real"
        except OSError as exc:  # not downloadable and not cached
            if offline is False:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise DFAError(f"cannot load the weights of {display} from {source!r}: {first}") from None
            model, n, total = _random(display, raw, layers, dtype, seed, device,
                                      f"{why or 'download failed'}, and nothing cached")
            weights = "random"
    if tokenizer is None:
        why_none = "random weights, offline" if weights == "random" else "no tokenizer files in the checkpoint"
        tokenizer = TokenIdsOnly(display, model_config.vocab_size, why_none)
    return LLM(model=model, tokenizer=tokenizer, config=dataclasses.replace(model_config, n_layers=n), name=short,
               display=display, weights=weights, layers=n, total_layers=total)
