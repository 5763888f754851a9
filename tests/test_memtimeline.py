"""common.memory.memtimeline: a profiled prefill + decode on the CPU; the KV cache grows by one position per step."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from common.errors import DFAError
from common.memory.memtimeline import (
    TORCH_CATEGORIES,
    DecodeRun,
    live_at,
    plot_memory_timeline,
    profile_decode,
    timeline,
)
from common.models import get_config

matplotlib.use("Agg")
# Lab 4's grader-side labels (the learner writes categorise; common does not hold it)
_ANSWERS = Path(__file__).resolve().parents[1] / "course4_memory/source/lab4_memory/answers.py"
_spec = importlib.util.spec_from_file_location("lab4_answers", _ANSWERS)
_answers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_answers)
categorise_reference = _answers.categorise
RUN = DecodeRun(model="test", batch=3, prompt=5, steps=4)


@pytest.fixture(scope="module")
def prof():
    return profile_decode(RUN, torch_export=False)


def test_regions_and_allocations(prof):
    assert list(prof.regions["name"]) == ["prefill"] + [f"decode_{s}" for s in range(RUN.steps)]
    assert (prof.regions["end_ms"] > prof.regions["start_ms"]).all()
    a = prof.allocs
    assert len(a) > 20 and (a["bytes"] > 0).all()
    freed = a["t_free_ms"].notna()
    assert (a.loc[freed, "t_free_ms"] >= a.loc[freed, "t_alloc_ms"]).all()
    cfg = get_config("test")
    assert prof.weight_bytes == cfg.n_params * 4  # fp32 on the CPU
    assert prof.kv_bytes_per_token == cfg.kv_bytes_per_token(4)


def test_kv_cache_grows_one_position_per_step(prof):
    cats = categorise_reference(prof.allocs, prof.regions)
    frame = timeline(prof, cats)
    assert (frame >= 0).all().all() and not frame.empty
    per_step = prof.kv_bytes_per_token * RUN.batch
    kv = [live_at(frame, end)["KV cache"] for end in prof.regions["end_ms"]]
    expect = [per_step * (RUN.prompt + s) for s in range(RUN.steps + 1)]
    assert kv == expect  # exactly the cache: nothing else outlives its step
    assert np.all(np.diff(kv) > 0)
    # activations: made and freed inside a step, so none are live at a step's end
    assert all(live_at(frame, end).get("activations", 0.0) == 0.0 for end in prof.regions["end_ms"])
    assert frame["activations"].max() > 0
    assert (frame["weights"] == prof.weight_bytes).all()


def test_plot(prof):
    frame = timeline(prof, categorise_reference(prof.allocs, prof.regions))
    ax = plot_memory_timeline(prof, frame)
    assert "MEASURED" in ax.get_title() and "batch 3" in ax.get_title() and "float32" in ax.get_title()
    assert ax.get_ylabel().endswith("[MB]")


def test_torch_export_when_supported():
    p = profile_decode(DecodeRun(model="test", batch=1, prompt=2, steps=1), torch_export=True)
    if p.torch_timeline is None:
        pytest.skip("this torch cannot export a CPU memory timeline")
    assert list(p.torch_timeline.columns) == list(TORCH_CATEGORIES)
    assert p.torch_timeline["parameters"].max() * 1e6 == pytest.approx(p.weight_bytes)


def test_bad_run():
    with pytest.raises(DFAError, match="max_seq_len"):
        DecodeRun(model="test", prompt=30, steps=10)
    with pytest.raises(DFAError, match="batch"):
        DecodeRun(batch=0)


# ---- profile_generate: a transformers model, generate() with a DynamicCache ----------------------------------
def _tiny_llm():
    import dataclasses
    from types import SimpleNamespace

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    hf = Qwen2Config(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                     num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(hf).eval()
    cfg = dataclasses.replace(get_config("qwen2.5-0.5b-instruct"), n_layers=3, n_heads=4, n_kv_heads=2, d_model=32,
                              head_dim=8, vocab_size=97)
    return SimpleNamespace(model=model, config=cfg, name="tiny-qwen2", label="tiny Qwen2 (3 layers, random weights)")


def test_profile_generate_kv_grows_by_the_formula_per_token():
    from common.memory.memtimeline import profile_generate

    llm = _tiny_llm()
    batch, prompt, steps = 3, 5, 4
    p = profile_generate(llm, batch=batch, prompt=prompt, steps=steps)
    assert p.regions["name"].tolist() == ["prefill"] + [f"decode_{s}" for s in range(steps - 1)]
    per_token = 2 * 3 * 2 * (32 // 4) * 4  # K and V, 3 layers, 2 KV heads, head_dim 8, fp32
    assert p.kv_bytes_per_token == per_token
    assert p.meta["cache_bytes"] == (prompt + steps - 1) * batch * per_token  # the last token is never fed back
    labels = categorise_reference(p.allocs, p.regions)
    frame = timeline(p, labels.tolist())
    kv = [int(live_at(frame, e)["KV cache"]) for e in p.regions["end_ms"]]
    assert set(np.diff(kv).tolist()) == {batch * per_token}
    assert "tiny Qwen2" in p.title and "MEASURED" in p.title
    with pytest.raises(DFAError, match="steps"):
        profile_generate(llm, steps=0)


def test_cuda_snapshot_blocks_guarded(monkeypatch):
    import torch

    from common.memory.memtimeline import cuda_snapshot_blocks

    snap = {"segments": [{"blocks": [{"state": "active_allocated"}, {"state": "inactive"}]},
                         {"blocks": [{"state": "active_allocated"}]}]}
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda device=None: snap, raising=False)
    assert cuda_snapshot_blocks("cuda:0") == 2

    def missing(device=None):
        raise AttributeError("no snapshot in this torch")
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", missing, raising=False)
    assert cuda_snapshot_blocks("cuda:0") is None
