"""The reader's architecture against transformers' own: parameter counts of the model each class builds.

One default config per way of writing an MLP or a layer pattern (ungated GPT-2 / Falcon / Phi, GeGLU, LFM2's
2/3-width MLP, experts with shared experts, dense layers among experts, Llama 4's dense width, switched-off
experts): transformers builds the model on the meta device (shapes, no weights) and its parameter count must
match ``ModelConfig.n_params`` to 1 % (the norms' biases and Falcon's, which DecoderLM does not build, are
under that). Families whose count differs more are listed in the report with the field that explains it.
"""
from __future__ import annotations

import warnings

import pytest

from common.models import config_from_hf

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
from transformers import CONFIG_MAPPING, AutoModelForCausalLM  # noqa: E402

FAMILIES = ("gpt2", "falcon", "phi", "gemma", "gemma2", "lfm2", "mixtral", "qwen2_moe", "glm4_moe", "llama4_text",
            "gpt_oss", "doge", "starcoder2", "arcee", "ergo")


@pytest.mark.parametrize("model_type", [m for m in FAMILIES if m in CONFIG_MAPPING])
def test_parameter_count_matches_the_transformers_class(model_type):
    transformers.logging.set_verbosity_error()
    hf_config = CONFIG_MAPPING[model_type]()
    ours = config_from_hf(hf_config)
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_config(hf_config)
    theirs = sum(p.numel() for p in model.parameters())
    assert ours.n_params == pytest.approx(theirs, rel=0.01), (model_type, ours.n_params, theirs)
