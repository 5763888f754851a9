"""LPDDR5 <-> LX traffic of one simulated Spyre step, op by op: the hardware counters taken apart.

``spyre_step`` simulates one decode (or prefill) step of a reference decoder and keeps how many times each
captured segment runs (a decoder layer runs ``n_layers`` times). ``traffic_table`` gives one row per SuperDSC
op of the compiled program, read from the compiler's own records (``kernel.tiling["sdsc"]``):

* ``lpddr_read`` / ``lpddr_write``  bytes DMA'd LPDDR5 -> LX and LX -> LPDDR5 (device bytes: whole sticks);
  summed x ``repeat`` they are ``report.counters["lpddr_to_lx_bytes"]`` and ``["lx_to_lpddr_bytes"]``.
* ``lpddr_padding``  the part of that traffic that is stick padding. A tensor whose innermost dim n is not a
  multiple of e = stick_bytes / elem_bytes elements is stored as rows x ceil(n / e) sticks, so it carries
  rows x (ceil(n / e) e - n) x elem_bytes bytes of padding; every read or write of it moves that share.
* matmul tiling ``mc, nc`` (per-core output rows / padded columns), ``tm, tn`` (tile), ``m_tiles, n_tiles``:
  LPDDR5 bytes = A x ceil(nc / tn) + B x ceil(mc / tm) for the operands that come from LPDDR5, not LX.
  (The closed forms of padding, tile traffic, the largest tile and a spilled chain are the Course 4 Deep
  Dive's exercises; the library does not hold them.)
* working set: ``ws_bytes_per_core`` (the op's tiles or slice), ``spill_write`` / ``spill_read`` (intermediates
  that did not fit the LX budget, written out and read back) and ``reread_bytes`` (operand re-reads that
  tiling forced). ``working_set_check`` keeps the ops where the LX budget changed what the compiler did.

``sweep`` re-simulates the step over one knob: ``coarse_tiles``, ``lx_budget_bytes``, ``head_dim``, ``batch``
or ``seq``. Everything is simulated; hardware numbers (stick bytes, LX capacity, reservations) come from the
catalog through the Spyre policy.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pandas as pd

from common.chips import get_chip
from common.errors import DFAError, unknown
from common.models import resolve_config
from common.sim.report import Report
from common.sim.run import simulate
from common.sim.workload import Workload, llm_step

SWEEP_KNOBS = ("coarse_tiles", "lx_budget_bytes", "head_dim", "batch", "seq")
COLUMNS = ("segment", "repeat", "kernel", "index", "op", "weights", "kind", "cores", "split", "lpddr_read",
           "lpddr_write", "lpddr_padding", "lx_bytes", "out_sticks", "out_padding_bytes", "a_bytes", "b_bytes",
           "a_from", "b_from", "mc", "nc", "tm", "tn", "m_tiles", "n_tiles", "ws_bytes_per_core", "lx_bytes_per_core",
           "spill_write", "spill_read", "streamed", "reread_bytes", "output_to", "host_bytes")


@dataclass(frozen=True)
class SpyreStep:
    """A simulated step and, per compiled program (segment), how many times it ran."""
    report: Report
    segments: tuple[str, ...]  # ("prologue", "layer", "epilogue")
    repeats: tuple[int, ...]  # (1, n_layers, 1)
    lx_budget_bytes: float  # LX per core the planner was allowed to use


def default_lx_budget(chip="spyre") -> int:
    """LX per core torch-spyre lets the planner use: (capacity - reserved) x (1 - backend share), whole sticks."""
    c = get_chip(chip)
    stick = int(c.fact("stick_bytes"))
    usable = (c.level("LX").capacity - c.fact("lx_reserved_bytes")) * (1 - c.fact("lx_backend_reserved_fraction"))
    return int(usable) // stick * stick


def spyre_step(model="tiny-block", *, phase: str = "decode", batch: int = 1, seq: int = 64,
               head_dim: int | None = None, **options) -> SpyreStep:
    """Simulate one step of ``model`` (a name, config.json, ModelConfig or a captured Workload) on one Spyre card.

    ``head_dim`` overrides the model's head size (to test stick alignment); ``options`` are the Spyre compiler
    knobs (``coarse_tiles``, ``lx_budget_bytes``, ``cores``)."""
    if isinstance(model, Workload):
        return workload_step(model, **options)
    config = resolve_config(model)
    if head_dim is not None:
        if not isinstance(head_dim, int) or head_dim < 2 or head_dim % 2:
            raise DFAError(f"head_dim must be an even integer >= 2 (RoPE rotates pairs), got {head_dim!r}")
        config = dataclasses.replace(config, head_dim=head_dim, name=f"{config.name}(head_dim={head_dim})")
    return workload_step(llm_step(config, phase, batch, seq, "fp16"), **options)


def workload_step(workload: Workload, **options) -> SpyreStep:
    """Simulate any captured workload (``graph_workload``, ``op_workload``) on one Spyre card in fp16."""
    report = simulate(workload, "spyre", dtype="fp16", **options)
    if report.chips != 1:
        raise DFAError(f"{workload.name} needs {report.chips} Spyre cards; the traffic table covers one card "
                       "(pick a smaller model, batch or seq)")
    budget = options.get("lx_budget_bytes") or default_lx_budget(report.chip)
    return SpyreStep(report, tuple(s.name for s in workload.segments), tuple(s.repeat for s in workload.segments),
                     budget)


def _pad_fraction(tensor: dict, stick: int) -> float:
    """Share of a stored tensor's bytes that is stick padding (the same in every row)."""
    device = tensor["sticks"] * stick
    return tensor["padding_bytes"] / device if device else 0.0


def _tile(tile: str | None) -> tuple[int | None, int | None]:
    if not tile:
        return None, None
    tm, _, tn = (int(x) for x in tile.split("x"))  # "tm x tk x tn"
    return tm, tn


def _op_row(plan: dict, produced: set[str], stick: int) -> dict:
    """One SuperDSC op: its LPDDR5 traffic split into first reads, re-reads, spills and padding."""
    src, reads, tensors = plan["inputs_from"], plan["reads"], plan["tensors"]
    out_frac = _pad_fraction(tensors[plan["name"]], stick)
    from_lpddr = {p: n * k for p, (n, k) in reads.items() if src[p] == "LPDDR5"}
    streamed = plan["lpddr_read"] - sum(from_lpddr.values())  # a decomposed op's parts streamed through LPDDR5
    pad = sum(b * _pad_fraction(tensors[p], stick) for p, b in from_lpddr.items())
    pad += (streamed + plan["lpddr_write"]) * out_frac
    reread = sum(reads[p][0] * (reads[p][1] - 1) for p in from_lpddr)  # passes beyond the first
    a, b = plan.get("a_operand"), plan.get("b_operand")
    tm, tn = _tile(plan.get("tile"))
    return {"op": plan["op"], "kind": plan["sdsc_kind"], "cores": plan["cores_used"], "split": plan["split"],
            "lpddr_read": plan["lpddr_read"], "lpddr_write": plan["lpddr_write"], "lpddr_padding": pad,
            "lx_bytes": plan["lx_bytes"], "out_sticks": plan["sticks"], "out_padding_bytes": plan["padding_bytes"],
            "a_bytes": reads[a][0] if a else None, "b_bytes": reads[b][0] if b else None,
            "a_from": src.get(a), "b_from": src.get(b), "mc": plan.get("mc"), "nc": plan.get("nc"), "tm": tm,
            "tn": tn, "m_tiles": plan.get("m_tiles"), "n_tiles": plan.get("n_tiles"),
            "ws_bytes_per_core": plan["ws_bytes_per_core"], "lx_bytes_per_core": plan["lx_bytes_per_core"],
            "spill_write": plan["spill_bytes"],
            "spill_read": streamed + sum(reads[p][0] for p in from_lpddr if p in produced), "streamed": streamed,
            "reread_bytes": reread, "output_to": plan["output_to"], "host_bytes": 0.0}


def _weights(params) -> str:
    """'self_attn.q_proj.weight' (+ '.bias') -> 'q_proj': which module's parameters an op reads, for labels."""
    return ", ".join(dict.fromkeys(p.split(".")[-2] if p.count(".") else p for p in params))


def traffic_table(step: SpyreStep) -> pd.DataFrame:
    """One row per op of each compiled segment (``repeat`` = how often it ran); see the module docstring."""
    stick = int(get_chip(step.report.chip).fact("stick_bytes"))
    rows = []
    for seg, repeat, program in zip(step.segments, step.repeats, step.report.programs, strict=True):
        for k in program.kernels:
            base = {"segment": seg, "repeat": repeat, "kernel": k.name}
            if k.kind == "fallback":  # a graph break: the op runs on the host, its bytes cross PCIe
                zero = dict.fromkeys(("lpddr_read", "lpddr_write", "lpddr_padding", "lx_bytes", "spill_write",
                                      "spill_read", "streamed", "reread_bytes"), 0.0)
                rows.append({**base, "index": 0, "op": k.tiling["fallback"], "weights": "", "kind": "fallback", **zero,
                             "output_to": "host", "host_bytes": k.tiling["d2h_bytes"] + k.tiling["h2d_bytes"]})
                continue
            produced = {o.name for o in k.ops}
            for i, (op, plan) in enumerate(zip(k.ops, k.tiling["sdsc"], strict=True)):
                rows.append({**base, "index": i, "weights": _weights(op.params), **_op_row(plan, produced, stick)})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def step_totals(table: pd.DataFrame) -> dict[str, float]:
    """Per-op rows x repeat, summed: the step's counters (the same keys as ``report.counters``) and more."""
    w = table["repeat"]
    tot = {key: float((table[col].fillna(0.0) * w).sum()) for key, col in (
        ("lpddr_to_lx_bytes", "lpddr_read"), ("lx_to_lpddr_bytes", "lpddr_write"), ("lx_bytes", "lx_bytes"),
        ("lx_spill_bytes", "spill_write"), ("spill_read_bytes", "spill_read"), ("reread_bytes", "reread_bytes"),
        ("lpddr_padding_bytes", "lpddr_padding"), ("host_roundtrip_bytes", "host_bytes"))}
    tot["lpddr_bytes"] = tot["lpddr_to_lx_bytes"] + tot["lx_to_lpddr_bytes"]
    return tot


def working_set_check(step: SpyreStep, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """The ops where the LX budget changed the plan: what the compiler did and the extra LPDDR5 bytes it cost.

    ``retiled``  a matmul split into several M or N tiles: operands re-read (``reread_bytes``);
    ``streamed`` a decomposed op (softmax) whose slice exceeds the free LX: its parts go through LPDDR5;
    ``spilled``  an output that does not fit beside the resident tensors: written out, read back by consumers.
    Extra bytes are per run of the op; multiply by ``repeat`` for the step."""
    t = traffic_table(step) if table is None else table
    t = t[t["kind"] != "fallback"].copy()
    tiles = t["m_tiles"].fillna(1) * t["n_tiles"].fillna(1)

    def action(r) -> str:
        what = []
        if r["kind"] == "matmul" and r["m_tiles"] * r["n_tiles"] > 1:
            what.append(f"retiled {int(r['m_tiles'])}x{int(r['n_tiles'])} tiles of {int(r['tm'])}x{int(r['tn'])}")
        if r["streamed"] > 0:
            what.append("parts streamed through LPDDR5")
        if r["spill_write"] > r["streamed"]:
            what.append("output spilled")
        if r["spill_read"] > r["streamed"]:
            what.append("reads a spilled input")
        return "; ".join(what) or "working set over budget"

    over = t["ws_bytes_per_core"] > step.lx_budget_bytes
    keep = (tiles > 1) | (t["spill_write"] > 0) | (t["spill_read"] > 0) | over
    t = t[keep].copy()
    t["action"] = [action(r) for _, r in t.iterrows()]
    t["extra_lpddr_bytes"] = t["reread_bytes"] + t["spill_write"] + t["spill_read"]
    t["lx_budget_bytes"] = step.lx_budget_bytes
    t["lx_capacity_bytes"] = get_chip(step.report.chip).level("LX").capacity
    return t[["segment", "repeat", "kernel", "index", "op", "ws_bytes_per_core", "lx_budget_bytes",
              "lx_capacity_bytes", "action", "reread_bytes", "spill_write", "spill_read", "extra_lpddr_bytes"]]


def sweep(model, knob: str, values, *, phase: str = "decode", batch: int = 1, seq: int = 64,
          **options) -> pd.DataFrame:
    """Re-simulate the step for each value of one knob; one row per value with the traffic totals.

    ``floor_s`` = LPDDR5 bytes / datasheet bandwidth: no simulated step may be faster (physics first)."""
    if knob not in SWEEP_KNOBS:
        raise unknown("sweep knob", knob, SWEEP_KNOBS)
    rows = []
    for v in values:
        kw = {"phase": phase, "batch": batch, "seq": seq, **options, knob: v}
        step = spyre_step(model, **kw)
        tot = step_totals(traffic_table(step))
        r = step.report
        rows.append({knob: v, "lpddr_bytes": tot["lpddr_bytes"], "lpddr_padding_bytes": tot["lpddr_padding_bytes"],
                     "reread_bytes": tot["reread_bytes"],
                     "spill_bytes": tot["lx_spill_bytes"] + tot["spill_read_bytes"],
                     "lx_bytes": tot["lx_bytes"], "time_s": r.time_s,
                     "floor_s": tot["lpddr_bytes"] / get_chip(r.chip).main_memory.bandwidth,
                     "bytes_per_token": tot["lpddr_bytes"] / r.tokens})
    return pd.DataFrame(rows)
