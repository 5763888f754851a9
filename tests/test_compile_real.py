"""common.compile.real_model on a tiny Qwen2ForCausalLM (the labs' LLM class, 2 layers of width 32: no download, no
Inductor): the decode step equals the full forward and repeats exactly, the compile log of a growing cache, the
GPU/CPU choice against a faked torch.cuda, and bad input."""

import pytest
import torch

from common.compile.real_model import CompileLog, DecodeStep, Prefill, decode_compiles, device_and_dtype, inputs_summary
from common.errors import DFAError

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny():
    cfg = transformers.Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(cfg).eval()
    return model, torch.randint(64, (1, 6), generator=torch.Generator().manual_seed(1))  # ids (1, 6)


def test_decode_step_is_the_full_forward_and_reset_repeats_it(tiny):
    model, ids = tiny
    step = DecodeStep(model, ids)
    assert step.cache_len == 6 and step.next_ids.shape == (1, 1)
    with torch.no_grad():
        full = Prefill(model)(torch.cat([ids, step.next_ids], 1))[:, -1:]  # (1, 1, vocab)
        first = step(step.next_ids)
        assert step.cache_len == 7
        step.reset()
        again = step(step.next_ids)
    assert step.cache_len == 7
    step.reset()
    assert step.cache_len == 6
    torch.testing.assert_close(first, full, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(again, first, atol=0, rtol=0)


def test_a_growing_cache_compiles_a_static_then_a_dynamic_graph_and_reuses_it(tiny):
    model, ids = tiny
    log = decode_compiles(model, ids, steps=4)
    assert [e["call"] for e in log] == [1, 2]  # step 1, then step 2 (cache one longer), then none
    assert not log[0]["dynamic"] and log[1]["dynamic"]
    assert log[0]["inputs"][0] == [1, 1]  # the token; weights and buffers are not listed
    assert all(len(s) == 4 for s in log[0]["inputs"][1:]) and [1, 2, 6, 8] in log[0]["inputs"]
    assert any(isinstance(d, str) for s in log[1]["inputs"] for d in s)
    assert all(e["ops"] > 10 for e in log)
    assert inputs_summary(log[0]["inputs"]) == "[1, 1] + 4 x [1, 2, 6, 8]"
    assert inputs_summary(log[1]["inputs"]).startswith("[1, 1] + 4 x [1, 2, s, 8] (")
    assert inputs_summary([[2, "s0"], [2, "s0"], [3]]) == "2 x [2, s] + [3] (1 symbol)"


def test_compile_log_without_a_model_lists_every_tensor_input():
    log = CompileLog()
    compiled = torch.compile(lambda x, w: x @ w, backend=log)
    compiled(torch.ones(2, 3), torch.ones(3, 4))
    assert log.entries[0]["inputs"] == [[2, 3], [3, 4]] and log.entries[0]["call"] == 0


def test_device_and_dtype_follow_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device_and_dtype() == ("cpu", torch.float32)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert device_and_dtype() == ("cuda", torch.float16)


def test_bad_input_is_one_line(tiny):
    model, ids = tiny
    with pytest.raises(DFAError, match="steps must be an int >= 1, got 0"):
        decode_compiles(model, ids, steps=0)
    with pytest.raises(DFAError, match=r"prompt_ids must be \(batch, tokens\).*got shape \(6,\)"):
        DecodeStep(model, ids[0])
