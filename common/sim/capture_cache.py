"""A persistent on-disk cache of captured LLM steps, so a fresh process skips the capture.

Capturing one decoder layer (``workload.llm_step``) and costing it takes 0.1-0.3 s of a cold ``dfa simulate``
(more where ``make_fx`` is used, which imports ``torch._dynamo``). What the simulators read from a captured graph
is small and plain: every node's op, target, arguments and ``meta`` (output shapes, strides and dtypes,
``NodeCost``, placeholder kind and source). This module stores that, with the rest of the ``Workload``, in one
pickle per step, and rebuilds an equal graph whose tensors are ``meta``-device tensors (shapes only). The
simulated reports are the same event for event (``tests/test_sim_capture_cache.py``).

* **Where**: ``$DFA_CACHE_DIR/captures`` if set, else ``$XDG_CACHE_HOME/dataflow-labs/captures``, else
  ``~/.cache/dataflow-labs/captures``; never inside the package. ``DFA_CAPTURE_CACHE=0`` turns it off.
* **Key**: the model configuration (every field), phase, batch, seq, dtype, the torch and Python versions, this
  file's ``FORMAT`` and a hash of the source of every module the capture runs (``CODE_MODULES`` and the
  ``common.models`` package). Change any of them and the old entry is simply not found.
* **Size**: at most ``MAX_ENTRIES`` files (about 30 KB each). Storing one more deletes the least recently used
  (a hit refreshes a file's modification time), and a temporary file a killed writer left over an hour ago. A
  code change makes new keys, so without this the folder would grow with every upgrade.
* **Failures**: an unreadable, truncated or foreign file is ignored and rewritten; a step that cannot be stored
  (an unwritable directory, an unpicklable value) is just not cached. The cache never changes a result.

The files are pickles: they are loaded from the user's own cache directory only, as any pickle cache is.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import os
import pickle
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch
import torch.fx as fx

FORMAT = 1  # bump when the stored layout changes
MAX_ENTRIES = 256  # ~8 MB: every model x phase a course touches, several times over
STALE_TMP_S = 3600  # a .tmp older than this belongs to a writer that died
# Modules whose code decides what a capture contains (plus every module of common.models, see _code_hash).
CODE_MODULES = ("common.graph.capture", "common.graph.meta_capture", "common.graph.lazy_dynamo", "common.graph.costs",
                "common.graph.op_kinds", "common.graph.op_decompose", "common.chips", "common.torch_compat",
                "common.sim.moe", "common.sim.workload", __name__)


def cache_dir() -> Path | None:
    """The capture cache's directory (not created here), or None when ``DFA_CAPTURE_CACHE=0``."""
    if os.environ.get("DFA_CAPTURE_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    root = os.environ.get("DFA_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = os.path.join(xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache"), "dataflow-labs")
    return Path(root) / "captures"


_CODE_HASH: str | None = None


def _code_hash() -> str:
    global _CODE_HASH
    if _CODE_HASH is None:
        h = hashlib.sha256()
        models = importlib.import_module("common.models")
        files = [Path(importlib.import_module(m).__file__) for m in CODE_MODULES]
        files += sorted(Path(models.__file__).parent.glob("*.py"))
        for f in files:
            h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
        _CODE_HASH = h.hexdigest()
    return _CODE_HASH


def key(*parts) -> str:
    """Hex digest of ``parts`` (reprs: dataclasses such as ModelConfig show every field) and the environment."""
    ident = (FORMAT, torch.__version__, sys.version_info[:2], _code_hash(), parts)
    return hashlib.sha256(repr(ident).encode()).hexdigest()[:40]


def cached(parts: tuple, build: Callable[[], object]):
    """``build()`` (a ``Workload``), read from the cache under ``key(*parts)`` when present, stored when not."""
    folder = cache_dir()
    if folder is None:
        return build()
    k = key(*parts)
    path = folder / f"{k}.pkl"
    found = load(path, k)
    if found is not None:
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: pruned last
        return found
    workload = build()
    if store(path, k, workload):
        prune(folder)
    return workload


def prune(folder: Path, keep: int | None = None) -> list[Path]:
    """Delete all but the ``keep`` (default ``MAX_ENTRIES``) most recently used entries, and stale temporary
    files; the paths removed."""
    keep = MAX_ENTRIES if keep is None else keep
    removed = []
    try:
        now = time.time()
        entries, stale = [], []
        for f in folder.iterdir():
            try:
                mtime = f.stat().st_mtime
            except OSError:  # removed by another process between the listing and here
                continue
            if f.suffix == ".pkl":
                entries.append((mtime, f))
            elif f.suffix == ".tmp" and now - mtime > STALE_TMP_S:
                stale.append(f)
        entries.sort(reverse=True)  # newest first
        for f in stale + [f for _, f in entries[keep:]]:
            with contextlib.suppress(OSError):  # another process may have removed it already
                f.unlink()
                removed.append(f)
    except OSError:  # the folder vanished or cannot be listed: nothing to prune
        pass
    return removed


def load(path: Path, k: str):
    """The workload stored at ``path`` under key ``k``, or None (missing, corrupt, other key or format)."""
    try:
        with open(path, "rb") as fh, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's own pickled pytree specs may warn of their deprecations
            data = pickle.load(fh)
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != k:
            return None
        return decode_workload(data["workload"])
    except Exception:  # a corrupt or foreign file is a miss, never a crash: it is rewritten by the caller
        return None


def store(path: Path, k: str, workload) -> bool:
    """Write atomically (temporary file, then rename); False if it could not be written."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        blob = pickle.dumps({"format": FORMAT, "key": k, "workload": encode_workload(workload)},
                            protocol=pickle.HIGHEST_PROTOCOL)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(blob)
        os.replace(tmp, path)
        return True
    except Exception:  # unwritable directory, a value pickle cannot take: run uncached
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False


# ---- graphs as plain data ------------------------------------------------------------------------------------
class _Tensor(NamedTuple):
    """A tensor's metadata (what a FakeTensor carries); rebuilt as a ``meta``-device tensor."""
    shape: tuple
    stride: tuple
    dtype: torch.dtype
    requires_grad: bool


class _Ref(NamedTuple):
    """A reference to an earlier node, by name."""
    name: str


class _Op(NamedTuple):
    """An ``OpOverload`` by schema name and overload (``aten::mm``, ``default``): they do not pickle."""
    name: str
    overload: str


def _is_op(v) -> bool:
    return getattr(v, "_schema", None) is not None and hasattr(v, "overloadpacket")  # an aten OpOverload


def _enc(v):
    if isinstance(v, fx.Node):
        return _Ref(v.name)
    if isinstance(v, torch.Tensor):
        return _Tensor(tuple(v.shape), tuple(v.stride()), v.dtype, bool(v.requires_grad))
    if _is_op(v):
        return _Op(v._schema.name, v._schema.overload_name or "default")
    if type(v) in (list, tuple):
        return type(v)(_enc(x) for x in v)
    if isinstance(v, list):  # fx's immutable_list
        return [_enc(x) for x in v]
    if isinstance(v, dict):  # and fx's immutable_dict
        return {k: _enc(x) for k, x in v.items()}
    return v  # numbers, strings, dtypes, torch.Size, named tuples (tensor_meta), NodeCost, functions


def _dec(v, env: dict):
    if isinstance(v, _Ref):
        return env[v.name]
    if isinstance(v, _Tensor):
        t = torch.empty_strided(v.shape, v.stride, dtype=v.dtype, device="meta")
        return t.requires_grad_(True) if v.requires_grad else t
    if isinstance(v, _Op):
        ns, name = v.name.split("::", 1)
        return getattr(getattr(getattr(torch.ops, ns), name), v.overload)
    if type(v) in (list, tuple):
        return type(v)(_dec(x, env) for x in v)
    if isinstance(v, dict):
        return {k: _dec(x, env) for k, x in v.items()}
    return v


def encode_graph(gm: fx.GraphModule) -> dict:
    nodes = [(n.name, n.op, _enc(n.target), _enc(n.args), _enc(n.kwargs), _enc(dict(n.meta)))
             for n in gm.graph.nodes]
    attrs = {n.target: _enc(_getattr(gm, n.target)) for n in gm.graph.nodes if n.op == "get_attr"}
    return {"class": type(gm).__name__, "nodes": nodes, "attrs": attrs, "meta": _enc(dict(gm.meta)),
            "codegen": _picklable(getattr(gm.graph, "_codegen", None))}  # the pytree in/out specs (optional)


def decode_graph(data: dict) -> fx.GraphModule:
    graph = fx.Graph()
    if data.get("codegen") is not None:
        graph.set_codegen(data["codegen"])
    env: dict = {}
    for name, op, target, args, kwargs, meta in data["nodes"]:
        node = graph.create_node(op, _dec(target, env), _dec(args, env), _dec(kwargs, env), name=name)
        if node.name != name:
            raise ValueError(f"node {name} came back as {node.name}")
        node.meta = _dec(meta, env)
        env[name] = node
    attrs = {k: _dec(v, env) for k, v in data["attrs"].items()}
    gm = fx.GraphModule(attrs, graph, class_name=data["class"])
    gm.meta.update(_dec(data["meta"], env))
    return gm


def _picklable(obj):
    try:
        pickle.dumps(obj)
        return obj
    except Exception:  # then the rebuilt graph takes flat inputs: the simulators never call it
        return None


def _getattr(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def encode_workload(w) -> dict:
    segments = [dataclasses.replace(s, gm=None) for s in w.segments]
    return {"workload": dataclasses.replace(w, segments=segments),
            "graphs": [encode_graph(s.gm) for s in w.segments]}


def decode_workload(data: dict):
    w = data["workload"]
    segments = [dataclasses.replace(s, gm=decode_graph(g)) for s, g in zip(w.segments, data["graphs"], strict=True)]
    return dataclasses.replace(w, segments=segments)
