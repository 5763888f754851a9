"""Every dfa_* backend runs what learners bring: small random-init ``transformers`` models - decoders
with grouped-query attention, a mixture of experts, an encoder, a vision transformer, an encoder-decoder - go
through all five backends (one Dynamo trace shared, ``run_each``) and match eager within each backend's
documented ``rtol_vs_eager``, each leaving a report. And ``generate()`` with a KV cache through a compiled
forward gives eager's tokens. Offline: configs are built here, weights are seeded random."""
from __future__ import annotations

import warnings

import pytest
import torch

import common.sim as sim
from common.sim.compile import clear_reports, reports
from common.sim.each_backend import run_each

transformers = pytest.importorskip("transformers")
BACKENDS = list(sim.BACKEND_NAMES)
VOCAB = 128
# tiny decoder: hidden 32, 1 layer, 4 query heads sharing 2 K/V heads (grouped-query attention)
DECODER = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=64, use_cache=False)


def _model(name: str):
    """(model, args, kwargs) of one tiny seeded model."""
    t = transformers
    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (1, 8))  # (B, T)
    configs = {
        "gpt2": lambda: t.GPT2LMHeadModel(t.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=4,
                                                       n_positions=64, use_cache=False, bos_token_id=0,
                                                       eos_token_id=0)),
        "llama": lambda: t.LlamaForCausalLM(t.LlamaConfig(**DECODER)),
        "qwen2": lambda: t.Qwen2ForCausalLM(t.Qwen2Config(**DECODER)),
        "mistral": lambda: t.MistralForCausalLM(t.MistralConfig(**DECODER)),
        "phi3": lambda: t.Phi3ForCausalLM(t.Phi3Config(**DECODER, pad_token_id=0, eos_token_id=0)),
        "gemma": lambda: t.GemmaForCausalLM(t.GemmaConfig(**DECODER, head_dim=8)),
        "mixtral": lambda: t.MixtralForCausalLM(t.MixtralConfig(**DECODER, num_local_experts=4,
                                                                num_experts_per_tok=2)),
        "bert": lambda: t.BertModel(t.BertConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                                 num_hidden_layers=1, num_attention_heads=4,
                                                 max_position_embeddings=64)),
        "vit": lambda: t.ViTModel(t.ViTConfig(image_size=16, patch_size=8, num_channels=3, hidden_size=32,
                                              intermediate_size=64, num_hidden_layers=1, num_attention_heads=4)),
        "t5": lambda: t.T5ForConditionalGeneration(t.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64,
                                                              num_layers=1, num_heads=4, use_cache=False,
                                                              decoder_start_token_id=0)),
    }
    model = configs[name]().eval()
    if name == "vit":
        return model, (torch.randn(1, 3, 16, 16),), {}  # (B, C, H, W)
    if name == "t5":
        return model, (ids,), {"decoder_input_ids": torch.randint(0, VOCAB, (1, 4))}
    return model, (ids,), {}


MODELS = ["gpt2", "llama", "qwen2", "mistral", "phi3", "gemma", "mixtral", "bert", "vit", "t5"]


def _main_output(out) -> torch.Tensor:
    logits = getattr(out, "logits", None)
    return logits if logits is not None else out.last_hidden_state


@pytest.mark.parametrize("name", MODELS)
def test_transformers_model_matches_eager_on_every_backend(name):
    model, args, kwargs = _model(name)
    clear_reports()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumericsWarning: fp16 underflow in random-init weights is expected
        ref = _main_output(model(*args, **kwargs))
        outputs = run_each(model, args, kwargs, backends=BACKENDS)
    for backend, out in outputs.items():
        assert not isinstance(out, Exception), f"{name} on dfa_{backend}: {out}"
        got = _main_output(out)
        err = ((got.double() - ref.double()).abs().max() / ref.double().abs().max()).item()
        assert got.shape == ref.shape and err <= sim.get_backend(backend).rtol_vs_eager, (backend, err)
        compiled = reports(backend)
        assert compiled and sum(r.time_s for r in compiled) > 0, f"no report for dfa_{backend}"
        # the position / mask arithmetic in int64 is labelled with the width the machine computes it in
        table = sim.get_backend(backend).computes_in
        on_machine = [n.split(";")[0] for r in compiled for n in r.notes if n.startswith("dtypes computed on")]
        assert on_machine and (table is None or "int64" in table or not any("int64" in n for n in on_machine))


@pytest.mark.parametrize("backend", BACKENDS)
def test_generate_with_a_kv_cache_through_a_compiled_forward_gives_eagers_tokens(backend):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**{**DECODER, "use_cache": True}, bos_token_id=0, eos_token_id=None,
                                      pad_token_id=0)
    model = transformers.LlamaForCausalLM(config).eval()
    prompt = torch.randint(1, VOCAB, (1, 5))
    gen = dict(max_new_tokens=3, do_sample=False, min_new_tokens=3)
    with torch.no_grad():
        ref = model.generate(prompt, **gen)
        torch._dynamo.reset()
        clear_reports()
        model.forward = torch.compile(model.forward, backend=f"dfa_{backend}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = model.generate(prompt, **gen)
    torch._dynamo.reset()
    assert torch.equal(out, ref) and out.shape[1] == 5 + 3
    assert reports(backend), "the compiled forward left no report"
