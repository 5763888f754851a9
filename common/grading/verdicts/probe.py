"""A hidden test in two parts: a *probe* in the learner's kernel, a *judgement* in the grader.

A hidden-test region of a lab's source is split by a ``### JUDGEMENT`` line::

    ### BEGIN HIDDEN TESTS
    from common.grading.verdicts.probe import Probe
    probe = Probe()                                   # its .seed: the learner's variant, made by the grader
    torch.manual_seed(probe.seed)
    probe.send("out", relu(torch.randn(5, 7)))        # the learner's function on a fresh input
    ### JUDGEMENT
    data, seed = probe.received()                     # plain data: numbers, strings, lists, dicts, tensors
    torch.manual_seed(seed)
    grader.assert_tensor(data["out"], torch.clamp(torch.randn(5, 7), min=0), name="relu on a random input")
    ### END HIDDEN TESTS

While grading (judge.py), only the probe enters the sandbox: the learner's kernel runs it and ``Probe.finish``
prints what it sent as one display output of the MIME type ``PROBE_MIME``. The judgement runs afterwards in the
trusted grader process, with the answer key, on data that ``decode`` rebuilt and checked by type and size. It
never sees an object the learner's code held, so no ``__eq__``, rebound name or mutated argument reaches it;
a learner who forges the data still has to forge the right answer for inputs the judgement makes itself.

In a direct run of the source notebook (an author in Jupyter, papermill) both parts run in one kernel, and
``received`` returns what was sent after a round trip through the same encoding, so the author sees what the
grader will judge.

Wire format (JSON): ``None``, ``bool``, ``int``, ``str`` and finite ``float`` as themselves; lists for lists
and tuples; every JSON object is tagged with exactly one key: ``{"$dict": {...}}`` (string keys),
``{"$float": "nan" | "inf" | "-inf"}``, ``{"$tensor": {"dtype", "shape", "b64"}}`` (raw little-endian bytes).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import os
import sys

PROBE_MIME = "application/vnd.dfa.probe+json"
MAX_PROBE_BYTES = 1024 * 1024  # one test's data, as JSON text: under the runner's 2 MB cap per cell, escaped
MAX_DEPTH = 32
MAX_ITEMS = 200_000  # values of every kind, counted once each
MAX_INT_DIGITS = 40
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
          "complex64", "complex128")  # fmt: skip
DEV_SEED = 12345  # a direct run's variant, unless DFA_PROBE_SEED says otherwise
SEED_BITS = 31


class ProbeDataError(ValueError):
    """What a probe sent is not plain data of the allowed kinds and sizes."""


def variant_seed(salt: str, lab: str, student: str, test: str) -> int:
    """The learner's variant of one test, derived from the offering's secret outside the sandbox; the seed
    reveals nothing about the salt (HMAC-SHA256)."""
    digest = hmac.new(str(salt).encode(), f"{lab}/{student}/{test}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") % (1 << SEED_BITS)


# ---------------------------------------------------------------------------------------------- encoding


def _encode(value, depth: int = 0):
    if depth > MAX_DEPTH:
        raise ProbeDataError(f"data nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else {"$float": repr(float(value))}
    if isinstance(value, (list, tuple)):
        return [_encode(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ProbeDataError("dict keys must be strings")
        return {"$dict": {str(k): _encode(v, depth + 1) for k, v in value.items()}}
    torch = sys.modules.get("torch")
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.generic):
        return _encode(value.item(), depth)
    if numpy is not None and isinstance(value, numpy.ndarray) and torch is not None:
        value = torch.from_numpy(numpy.ascontiguousarray(value))
    if torch is not None and isinstance(value, torch.Tensor):
        return {"$tensor": _tensor_fields(value)}
    raise ProbeDataError(f"cannot send a {type(value).__name__}: send numbers, strings, lists, dicts or tensors")


def _tensor_fields(t) -> dict:
    import torch

    t = torch.Tensor.detach(t).to("cpu").contiguous()
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in DTYPES:
        raise ProbeDataError(f"cannot send a {dtype} tensor; allowed: {', '.join(DTYPES)}")
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return {"dtype": dtype, "shape": list(t.shape), "b64": base64.b64encode(raw).decode()}


def encode(items: dict) -> str:
    """``{name: value}`` as the wire format's JSON text; ProbeDataError for anything else or too much."""
    text = json.dumps({"$dict": {str(k): _encode(v, 1) for k, v in items.items()}}, allow_nan=False)
    if len(text) > MAX_PROBE_BYTES:
        raise ProbeDataError(f"probe data is {len(text):,} bytes, more than {MAX_PROBE_BYTES:,}")
    return text


# ---------------------------------------------------------------------------------------------- decoding


class _Budget:
    def __init__(self):
        self.items = 0

    def count(self) -> None:
        self.items += 1
        if self.items > MAX_ITEMS:
            raise ProbeDataError(f"more than {MAX_ITEMS:,} values")


def _decode(value, budget: _Budget, depth: int = 0):
    budget.count()
    if depth > MAX_DEPTH:
        raise ProbeDataError(f"data nested deeper than {MAX_DEPTH} levels")
    if value is None or type(value) in (bool, str, float):
        return value
    if type(value) is int:
        if len(str(abs(value))) > MAX_INT_DIGITS:
            raise ProbeDataError(f"an integer of more than {MAX_INT_DIGITS} digits")
        return value
    if type(value) is list:
        return [_decode(v, budget, depth + 1) for v in value]
    if type(value) is not dict or len(value) != 1:
        raise ProbeDataError(f"unexpected {type(value).__name__} in probe data")
    ((tag, body),) = value.items()
    if tag == "$dict" and type(body) is dict:
        return {k: _decode(v, budget, depth + 1) for k, v in body.items()}
    if tag == "$float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "$tensor" and type(body) is dict:
        return _tensor(body)
    raise ProbeDataError(f"unexpected tagged value {tag!r} in probe data")


def _tensor(fields: dict):
    import torch

    if set(fields) != {"dtype", "shape", "b64"} or fields["dtype"] not in DTYPES:
        raise ProbeDataError(f"a tensor must have dtype (one of {', '.join(DTYPES)}), shape and b64")
    shape = fields["shape"]
    if type(shape) is not list or len(shape) > 8 or not all(type(n) is int and 0 <= n for n in shape):
        raise ProbeDataError(f"bad tensor shape {shape!r}")
    dtype = getattr(torch, fields["dtype"])
    raw = base64.b64decode(str(fields["b64"]).encode(), validate=True)
    expected = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if len(raw) != expected:
        raise ProbeDataError(
            f"tensor of shape {shape} and dtype {fields['dtype']} needs {expected} bytes, got {len(raw)}"
        )
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape).clone()


def decode(text) -> dict:
    """The wire format's JSON text back to ``{name: value}`` (fresh tensors and containers), checked by type
    and size; ProbeDataError when it is not what ``encode`` makes."""
    if not isinstance(text, str) or len(text) > MAX_PROBE_BYTES:
        raise ProbeDataError("probe data missing or larger than the limit")
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProbeDataError(f"probe data is not JSON ({type(exc).__name__})") from None
    value = _decode(raw, _Budget())
    if not isinstance(value, dict):
        raise ProbeDataError("probe data must be a dict of named values")
    return value


# ---------------------------------------------------------------------------------------------- the probe


class Probe:
    """The kernel side: ``send`` named values, ``finish`` prints them for the grader (the runner calls it
    after the probe). ``seed`` is this learner's variant: set by the grader, else ``DFA_PROBE_SEED`` or
    ``DEV_SEED`` in a direct run."""

    def __init__(self, seed: int | None = None):
        self.seed = int(seed if seed is not None else os.environ.get("DFA_PROBE_SEED", DEV_SEED))
        self._items: dict = {}

    def send(self, name: str, value) -> None:
        """Keep ``value`` (encoded now, so later mutation by anyone changes nothing) under ``name``."""
        self._items[str(name)] = json.loads(encode({"v": value}))["$dict"]["v"]

    def text(self) -> str:
        text = json.dumps({"$dict": self._items}, allow_nan=False)
        if len(text) > MAX_PROBE_BYTES:
            raise ProbeDataError(f"probe data is {len(text):,} bytes, more than {MAX_PROBE_BYTES:,}")
        return text

    def finish(self) -> None:
        """One display output carrying everything sent (grading), as raw MIME data."""
        from IPython.display import display

        display({PROBE_MIME: self.text(), "text/plain": f"[probe data: {len(self._items)} values]"}, raw=True)

    def received(self) -> tuple[dict, int]:
        """A direct run's judgement: what was sent, decoded exactly as the grader decodes it, and the seed."""
        return decode(self.text()), self.seed


class Received:
    """The judgement's ``probe`` while grading: ``received()`` gives the decoded data and the seed."""

    def __init__(self, data: dict, seed: int):
        self._data, self._seed = data, seed

    def received(self) -> tuple[dict, int]:
        return self._data, self._seed

    def send(self, name, value) -> None:  # a judgement never sends: the probe part did
        raise RuntimeError("probe.send belongs above the ### JUDGEMENT line")


def _target_name(target) -> str:
    if isinstance(target, str):  # placeholder, get_attr, call_method, call_module
        return target
    if type(target).__name__ in ("OpOverload", "OpOverloadPacket"):
        return str(target)  # aten.mm.default
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', repr(target))}"


def graph_nodes(gm) -> list[dict]:
    """An fx graph as plain data a probe can send: one ``{op, name, target, args}`` per node, ``target`` a
    string (``aten.mm.default``, ``_operator.add``, a submodule path, a method name) and ``args`` the names of
    the node's input nodes."""
    return [
        {"op": n.op, "name": n.name, "target": _target_name(n.target), "args": [a.name for a in n.all_input_nodes]}
        for n in gm.graph.nodes
    ]
