"""The meta tracer (common.graph.meta_capture) gives make_fx's graph on FakeTensors node for node, costs included, on
every named model and phase; a capture in a fresh process leaves torch._dynamo unimported (common.graph.lazy_dynamo)."""
import dataclasses
import functools
import importlib
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from common.errors import DFAError
from common.graph import lazy_dynamo
from common.graph.meta_capture import FakeViews, Unsupported, capture_meta, fake_view_strides
from common.models import CONFIGS, get_config
from common.sim import BACKEND_NAMES, simulate_llm
from common.sim import workload as W
from common.sim.capture_cache import encode_graph

ROOT = Path(__file__).resolve().parents[1]


def _assert_same_workload(fake, meta):
    assert dataclasses.replace(fake, segments=[]) == dataclasses.replace(meta, segments=[])
    for a, b in zip(fake.segments, meta.segments, strict=True):
        assert (a.name, a.repeat, type(a.gm).__name__, a.gm.code) == (b.name, b.repeat, type(b.gm).__name__, b.gm.code)
        ea, eb = encode_graph(a.gm), encode_graph(b.gm)
        assert len(ea["nodes"]) == len(eb["nodes"])
        for na, nb in zip(ea["nodes"], eb["nodes"], strict=True):
            assert na == nb  # name, op, target, args, kwargs, meta: values (shape, stride, dtype), costs
        assert (ea["attrs"], ea["meta"]) == (eb["attrs"], eb["meta"])
        assert repr(ea["codegen"].pytree_info) == repr(eb["codegen"].pytree_info)


@pytest.mark.parametrize("model, phase", list(itertools.product(sorted(CONFIGS), ("decode", "prefill"))))
def test_meta_graph_equals_make_fx_graph(model, phase):
    config = get_config(model)
    batch, seq = (3, 16) if phase == "decode" else (2, 32)
    fake = W.capture_step(config, phase, batch, seq, "bf16", tracer="fake")
    meta = W.capture_step(config, phase, batch, seq, "bf16", tracer="meta")
    _assert_same_workload(fake, meta)


def test_meta_graph_equals_make_fx_graph_8bit():
    config = get_config("llama-3.1-8b")
    _assert_same_workload(W.capture_step(config, "decode", 4, 64, "fp8", tracer="fake"),
                          W.capture_step(config, "decode", 4, 64, "fp8", tracer="meta"))


@pytest.mark.parametrize("shape, perm, new", [((1, 8, 8, 128), None, (8, 1, 128, 8)),
                                              ((2, 3, 4, 5), (0, 2, 1, 3), (2, 2, 2, 3, 5)),
                                              ((1, 1, 8, 1, 128), (0, 3, 1, 2, 4), (1, 1, 1024)),
                                              ((4, 1, 6), (2, 1, 0), (6, 1, 1, 4)),
                                              ((6, 4), (1, 0), (2, 2, 6)), ((3, 0, 2), None, (0, 6)),
                                              ((5,), None, (1, 5, 1)), ((2, 3), None, (6,))])
def test_view_strides_are_the_fake_tensors(shape, perm, new):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(shape)
        x = x.permute(perm) if perm else x
        want = x.view(new).stride()
    assert fake_view_strides(tuple(x.shape), tuple(x.stride()), new) == want
    m = torch.empty(shape, device="meta")
    m = m.permute(perm) if perm else m
    with FakeViews():
        assert m.view(new).stride() == want


def test_no_view_is_unsupported():
    with pytest.raises(Unsupported, match="no view"):
        fake_view_strides((4, 6), (1, 4), (24,))  # a transposed tensor cannot be flattened without a copy


class _ReadsValues(torch.nn.Module):
    def forward(self, x):
        return x * x.sum().item()  # a Python number read from the values


def test_data_dependent_model_is_unsupported_and_auto_falls_back(monkeypatch):
    with pytest.raises(Unsupported):
        capture_meta(_ReadsValues(), (torch.empty(4, device="meta"),))

    def refuse(*a, **k):
        raise Unsupported("refused")
    config = get_config("test")
    want = W.capture_step(config, "decode", 1, 8, "bf16", tracer="fake")
    monkeypatch.setattr(W, "capture_meta", refuse)
    _assert_same_workload(want, W.capture_step(config, "decode", 1, 8, "bf16"))  # auto: make_fx instead
    with pytest.raises(Unsupported, match="refused"):
        W.capture_step(config, "decode", 1, 8, "bf16", tracer="meta")


def test_unknown_tracer_is_one_line():
    with pytest.raises(DFAError, match="unknown tracer 'jit'; valid: auto, meta, fake"):
        W.capture_step(get_config("test"), "decode", 1, 8, "bf16", tracer="jit")


def test_deferred_call_is_the_function_until_dynamo_loads_then_dynamo_disable():
    def double(x):
        return 2 * x
    wrapped = torch._disable_dynamo(double)
    deferred = lazy_dynamo._Deferred(double, True)
    found = lazy_dynamo._wrapped_by_disable([wrapped])
    assert [fn for fn, _ in found.values()] == [double]
    setattr(double, lazy_dynamo._ATTR, deferred)
    importlib.import_module("torch._dynamo")  # loaded now: the deferred call becomes the real disable
    assert wrapped(3) == 6
    assert getattr(double, lazy_dynamo._ATTR) is not deferred


def test_fresh_capture_and_simulate_never_import_dynamo(tmp_path, monkeypatch):
    """A cold step on every backend captures without importing torch._dynamo (a second of CPU) and leaves torch's
    functions as it found them; its numbers are those of the make_fx capture."""
    code = ("import sys, json\n"
            "from common.sim import BACKEND_NAMES, simulate_llm\n"
            "from common.graph import lazy_dynamo as L\n"
            "rows = [simulate_llm('llama-3.1-8b', b, seq=256).summary_row() for b in BACKEND_NAMES]\n"
            "left = [f for f, _ in L._wrapped_by_disable(L._roots()).values()\n"
            "        if isinstance(getattr(f, L._ATTR, None), L._Deferred)]\n"
            "print(json.dumps({'dynamo': 'torch._dynamo' in sys.modules, 'left': len(left), 'rows': rows},\n"
            "                 default=float))\n")
    env = {"DFA_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["dynamo"] is False
    assert got["left"] == 0  # deferred_dynamo took back every attribute it set

    monkeypatch.setenv("DFA_CAPTURE_CACHE", "0")
    monkeypatch.setattr(W, "capture_step", functools.partial(W.capture_step, tracer="fake"))
    W.llm_step.cache_clear()
    W._captured_step.cache_clear()
    try:
        want = [simulate_llm("llama-3.1-8b", b, seq=256).summary_row() for b in BACKEND_NAMES]
    finally:
        W.llm_step.cache_clear()
        W._captured_step.cache_clear()
    assert got["rows"] == json.loads(json.dumps(want, default=float))
