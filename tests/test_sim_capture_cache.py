"""The on-disk capture cache (common.sim.capture_cache): same reports as an uncached run, event for event;
invalidated when any input changes; a corrupt file is a miss that is rewritten; it lives in the user's cache dir."""
import dataclasses
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from common.models import get_config
from common.sim import BACKEND_NAMES, capture_cache, simulate_llm
from common.sim import workload as W

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty cache directory, and no step remembered in this process."""
    monkeypatch.setenv("DFA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DFA_CAPTURE_CACHE", raising=False)
    W.llm_step.cache_clear()
    W._captured_step.cache_clear()
    yield tmp_path / "captures"
    W.llm_step.cache_clear()
    W._captured_step.cache_clear()


def _reports(model, phase, seq, dtype=None):
    W.llm_step.cache_clear()
    W._captured_step.cache_clear()
    backends = [b for b in BACKEND_NAMES if not (dtype == "int8" and b == "wse")]  # the WSE has no int8 path
    return [simulate_llm(model, b, phase=phase, batch=1, seq=seq, dtype=dtype) for b in backends]


def _same(a, b):
    assert a.summary_row() == b.summary_row()
    assert len(a.events) == len(b.events)
    for ea, eb in zip(a.events, b.events, strict=True):
        assert ea == eb
    assert a.counters == b.counters and a.notes == b.notes and a.peak_flops == b.peak_flops
    assert [[k.name for k in p.kernels] for p in a.programs] == [[k.name for k in p.kernels] for p in b.programs]


@pytest.mark.parametrize("model, phase, seq, dtype", [("llama-3.1-8b", "decode", 512, None),
                                                      ("qwen3-30b-a3b", "prefill", 64, None),  # MoE plan
                                                      ("llama-3.1-8b", "decode", 256, "int8")])  # byte scale
def test_cached_reports_equal_uncached_event_for_event(cache, monkeypatch, model, phase, seq, dtype):
    monkeypatch.setenv("DFA_CAPTURE_CACHE", "0")
    uncached = _reports(model, phase, seq, dtype=dtype)
    assert not cache.exists()
    monkeypatch.delenv("DFA_CAPTURE_CACHE")
    stored = _reports(model, phase, seq, dtype=dtype)  # captured, then written
    assert list(cache.glob("*.pkl"))

    def no_capture(*a, **k):
        raise AssertionError("captured again: the cache was not read")
    monkeypatch.setattr(W, "capture_step", no_capture)
    loaded = _reports(model, phase, seq, dtype=dtype)  # read back from disk
    for u, s, c in zip(uncached, stored, loaded, strict=True):
        _same(u, s)
        _same(u, c)


def test_loaded_graph_matches_the_captured_one(cache):
    config = get_config("llama-3.1-8b")
    fresh = W.capture_step(config, "decode", 1, 128, "bf16")
    assert capture_cache.store(cache / "k.pkl", "k", fresh)
    back = capture_cache.load(cache / "k.pkl", "k")
    assert (back.name, back.tokens, back.kv_bytes, back.weight_bytes) == \
        (fresh.name, fresh.tokens, fresh.kv_bytes, fresh.weight_bytes)
    for s, t in zip(fresh.segments, back.segments, strict=True):
        assert (s.name, s.repeat) == (t.name, t.repeat)
        for a, b in zip(s.gm.graph.nodes, t.gm.graph.nodes, strict=True):
            assert (a.name, a.op, a.target, str(a.args), str(a.kwargs)) == \
                (b.name, b.op, b.target, str(b.args), str(b.kwargs))
            assert a.meta.get("cost") == b.meta.get("cost")
            assert (a.meta.get("kind"), a.meta.get("source")) == (b.meta.get("kind"), b.meta.get("source"))
            va, vb = a.meta.get("val"), b.meta.get("val")
            if isinstance(va, torch.Tensor):
                assert (va.shape, va.stride(), va.dtype) == (vb.shape, vb.stride(), vb.dtype)
                assert vb.device.type == "meta"


def test_key_changes_with_every_input(monkeypatch):
    cfg = get_config("llama-3.1-70b")
    base = capture_cache.key("llm_step", cfg, "decode", 1, 4096, "bf16")
    assert base == capture_cache.key("llm_step", cfg, "decode", 1, 4096, "bf16")
    others = [("llm_step", dataclasses.replace(cfg, n_layers=81), "decode", 1, 4096, "bf16"),
              ("llm_step", dataclasses.replace(cfg, rope_theta=cfg.rope_theta * 2), "decode", 1, 4096, "bf16"),
              ("llm_step", cfg, "prefill", 1, 4096, "bf16"), ("llm_step", cfg, "decode", 2, 4096, "bf16"),
              ("llm_step", cfg, "decode", 1, 4095, "bf16"), ("llm_step", cfg, "decode", 1, 4096, "fp8")]
    keys = {capture_cache.key(*p) for p in others}
    assert len(keys) == len(others) and base not in keys
    monkeypatch.setattr(torch, "__version__", "0.0.0")
    assert capture_cache.key("llm_step", cfg, "decode", 1, 4096, "bf16") != base
    monkeypatch.undo()
    monkeypatch.setattr(capture_cache, "_CODE_HASH", "edited")
    assert capture_cache.key("llm_step", cfg, "decode", 1, 4096, "bf16") != base
    monkeypatch.undo()
    monkeypatch.setattr(capture_cache, "FORMAT", capture_cache.FORMAT + 1)
    assert capture_cache.key("llm_step", cfg, "decode", 1, 4096, "bf16") != base


def test_code_hash_covers_the_capture_code():
    capture_cache._code_hash()
    names = {Path(sys.modules[m].__file__).name for m in capture_cache.CODE_MODULES}
    assert {"capture.py", "costs.py", "workload.py", "capture_cache.py"} <= names


def test_changed_code_misses_and_recaptures(cache, monkeypatch):
    built = []

    def build():
        built.append(1)
        return W.capture_step(get_config("llama-3.1-8b"), "decode", 1, 64, "bf16")
    parts = ("llm_step", get_config("llama-3.1-8b"), "decode", 1, 64, "bf16")
    capture_cache.cached(parts, build)
    capture_cache.cached(parts, build)
    assert len(built) == 1
    monkeypatch.setattr(capture_cache, "_CODE_HASH", "edited")
    capture_cache.cached(parts, build)
    assert len(built) == 2 and len(list(cache.glob("*.pkl"))) == 2


@pytest.mark.parametrize("content", [b"", b"not a pickle", None, "foreign", "other key"])
def test_corrupt_file_is_ignored_and_rewritten(cache, content):
    parts = ("llm_step", get_config("llama-3.1-8b"), "decode", 1, 64, "bf16")
    good = capture_cache.cached(parts, lambda: W.capture_step(*parts[1:]))
    path = cache / f"{capture_cache.key(*parts)}.pkl"
    blob = path.read_bytes()
    if content is None:
        content = blob[: len(blob) // 2]  # truncated
    elif content == "foreign":
        content = pickle.dumps({"format": capture_cache.FORMAT, "key": capture_cache.key(*parts), "workload": 42})
    elif content == "other key":
        content = pickle.dumps({"format": capture_cache.FORMAT, "key": "0" * 40, "workload": None})
    path.write_bytes(content)
    built = []
    again = capture_cache.cached(parts, lambda: built.append(1) or W.capture_step(*parts[1:]))
    assert built == [1]  # a miss, never a crash
    assert path.read_bytes() != content  # rewritten
    assert capture_cache.load(path, capture_cache.key(*parts)) is not None
    assert [len(s.gm.graph.nodes) for s in again.segments] == [len(s.gm.graph.nodes) for s in good.segments]


def test_unwritable_cache_runs_uncached(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("DFA_CACHE_DIR", str(blocker))
    parts = ("llm_step", get_config("llama-3.1-8b"), "decode", 1, 64, "bf16")
    w = capture_cache.cached(parts, lambda: W.capture_step(*parts[1:]))
    assert len(w.segments) == 3


def test_cache_dir_is_the_users(monkeypatch, tmp_path):
    monkeypatch.delenv("DFA_CAPTURE_CACHE", raising=False)
    monkeypatch.setenv("DFA_CACHE_DIR", str(tmp_path / "dfa"))
    assert capture_cache.cache_dir() == tmp_path / "dfa" / "captures"
    monkeypatch.delenv("DFA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert capture_cache.cache_dir() == tmp_path / "xdg" / "dataflow-labs" / "captures"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert capture_cache.cache_dir() == tmp_path / "home" / ".cache" / "dataflow-labs" / "captures"
    assert ROOT not in capture_cache.cache_dir().parents
    monkeypatch.setenv("DFA_CAPTURE_CACHE", "0")
    assert capture_cache.cache_dir() is None


def test_warm_cache_process_does_not_import_dynamo(tmp_path):
    """The point of the cache: a fresh process with a warm cache needs neither the capture nor torch._dynamo."""
    from common.sim.compile import _declared_as_entry_points
    if not _declared_as_entry_points():
        pytest.skip("package not installed: common.sim registers its backends with torch._dynamo itself")
    code = ("import sys; from common.sim import simulate_llm; "
            "r = simulate_llm('llama-3.1-8b', 'gpu', phase='decode', seq=128); "
            "print(r.time_s, 'torch._dynamo' in sys.modules)")
    env = {**os.environ, "DFA_CACHE_DIR": str(tmp_path)}
    env.pop("DFA_CAPTURE_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                           check=True).stdout.split() for _ in range(2)]
    assert runs[0][0] == runs[1][0]  # the same step time from the capture and from the cache
    assert runs[1][1] == "False"


def _age(path, seconds):
    t = os.path.getmtime(path) - seconds
    os.utime(path, (t, t))


def _entry(folder, name, age_s):
    f = folder / name
    f.write_bytes(b"x")
    _age(f, age_s)
    return f


def test_prune_keeps_the_most_recently_used_entries_and_drops_stale_temporaries(tmp_path):
    folder = tmp_path / "captures"
    folder.mkdir()
    old = [_entry(folder, f"old{i}.pkl", 1000 + i) for i in range(3)]
    new = [_entry(folder, f"new{i}.pkl", i) for i in range(2)]
    stale = _entry(folder, "a.pkl.123.tmp", capture_cache.STALE_TMP_S + 60)
    writing = _entry(folder, "b.pkl.456.tmp", 5)  # a writer still at work: left alone
    removed = capture_cache.prune(folder, keep=3)
    assert sorted(removed) == sorted([old[1], old[2], stale])
    assert sorted(folder.iterdir()) == sorted([*new, old[0], writing])
    assert capture_cache.prune(tmp_path / "absent") == []  # no folder: nothing to do, no error


def test_a_hit_refreshes_the_entry_and_a_store_prunes_to_the_cap(cache, monkeypatch):
    monkeypatch.setattr(capture_cache, "MAX_ENTRIES", 2)
    monkeypatch.setattr(capture_cache, "encode_workload", lambda w: w)  # plain strings stand in for workloads
    monkeypatch.setattr(capture_cache, "decode_workload", lambda d: d)
    path = {p: cache / f"{capture_cache.key(p)}.pkl" for p in "abc"}
    assert capture_cache.cached(("a",), lambda: "A") == "A"
    assert capture_cache.cached(("b",), lambda: "B") == "B"
    _age(path["a"], 500)
    _age(path["b"], 100)
    assert capture_cache.cached(("a",), lambda: pytest.fail("a hit must not rebuild")) == "A"
    assert os.path.getmtime(path["a"]) > os.path.getmtime(path["b"])  # refreshed by the hit
    assert capture_cache.cached(("c",), lambda: "C") == "C"  # a third entry: the least recently used goes
    assert sorted(cache.glob("*.pkl")) == sorted([path["a"], path["c"]])
