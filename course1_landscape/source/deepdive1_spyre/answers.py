"""Grader-side answers of the Course 1 Deep Dive (common/grading/verdicts/answerkeys.py): what its hidden tests compare with.

* ``sticks``: a row-major tensor of shape (..., n) with e = stick_bytes // element bytes values per stick occupies
  rows x ceil(n / e) sticks; device bytes = sticks x stick_bytes; padding = device bytes - the tensor's own bytes.
  The stick width is a parameter here (64 or 256 bytes in a design study); the simulator's ``stick_layout`` knows
  only the catalog's 128 bytes.
* ``bundle_table`` / ``spyre_traffic``: read from a Spyre program's kernels and op plans (sums, max, min).
"""

from __future__ import annotations

import math

import pandas as pd

from common.chips import DTYPE_BYTES, get_chip


def sticks(shape, dtype="fp16", stick_bytes=None) -> dict:
    """sticks, device_bytes, padding_bytes of ``shape`` in ``stick_bytes``-byte sticks (None: the catalog's)."""
    stick = int(stick_bytes or get_chip("spyre").fact("stick_bytes"))
    *outer, n = (int(x) for x in tuple(shape) or (1,))
    elem = DTYPE_BYTES[dtype]
    n_sticks = math.prod(outer) * -(-n // max(1, stick // elem))  # rows x ceil(n / values per stick)
    return {"sticks": n_sticks, "device_bytes": n_sticks * stick,
            "padding_bytes": n_sticks * stick - math.prod(outer) * n * elem}


def bundle_table(program) -> pd.DataFrame:
    """kind, ops, restickify, fallback, inputs, lpddr_read, lpddr_write, pcie_bytes per kernel, in program order."""
    rows = {}
    for k in program.kernels:
        names = [o.op for o in k.ops]
        rows[k.name] = {"kind": k.kind, "ops": len(names), "restickify": names.count("spyre.restickify"),
                        "fallback": k.kind == "fallback", "inputs": len(k.inputs),
                        "lpddr_read": float(k.tiling.get("lpddr_read", 0.0)),
                        "lpddr_write": float(k.tiling.get("lpddr_write", 0.0)),
                        "pcie_bytes": float(k.bytes.get("PCIe", 0.0))}
    return pd.DataFrame.from_dict(rows, orient="index")


def spyre_traffic(program) -> dict:
    """Sums of lpddr_read, lpddr_write, spill_bytes over every op plan; max LX per core; min LX budget."""
    bundles = [k for k in program.kernels if k.kind != "fallback"]
    plans = [p for k in bundles for p in k.tiling["sdsc"]]
    return {"lpddr_read": float(sum(p["lpddr_read"] for p in plans)),
            "lpddr_write": float(sum(p["lpddr_write"] for p in plans)),
            "spill": float(sum(p["spill_bytes"] for p in plans)),
            "lx_peak_per_core": float(max(p["lx_bytes_per_core"] for p in plans)),
            "lx_budget_per_core": float(min(k.tiling["lx_budget_bytes"] for k in bundles))}
