"""Report totals: the one-pass ``Report.totals`` (what sweeps and ``summary_row`` read) equals the plain
definitions event by event, bit for bit, on every backend and on hand-made timelines with gaps and overlaps."""
import pytest

from common.sim import simulate_llm
from common.sim.program import BOUNDS, Event
from common.sim.report import Report


def _plain(events, engine, tokens, batch):
    """The definitions, written the slow, obvious way (one property at a time)."""
    time_s = max((e.end for e in events), default=0.0)
    flops = sum(e.flops * e.detail.get("replicas", 1) for e in events if e.kind == "compute")
    nbytes = {}
    for e in events:
        for level, b in e.bytes.items():
            nbytes[level] = nbytes.get(level, 0.0) + b * e.detail.get("replicas", 1)
    att, busy = dict.fromkeys(BOUNDS, 0.0), 0.0
    for e in sorted((e for e in events if e.engine == engine), key=lambda e: e.start):
        if e.start > busy:
            att["scheduling"] += e.start - busy
        att[e.bound] += max(0.0, e.end - max(e.start, busy))
        busy = max(busy, e.end)
    att["scheduling"] += max(0.0, time_s - busy)
    tps = tokens / time_s if time_s else 0.0
    return {"time_s": time_s, "flops": flops, "bytes": nbytes, "attribution_s": att,
            "bottleneck": max(att, key=att.get), "tokens_per_s": tps, "tokens_per_s_per_user": tps / max(batch, 1),
            "achieved_flops_per_s": flops / time_s if time_s else 0.0}


def _report(events, tokens=4, batch=2):
    return Report("gpu", "h100", 1, "bf16", events, [], "SM", tokens=tokens, batch=batch)


def _check(r):
    want = _plain(r.events, r.critical_engine, r.tokens, r.batch)
    got = r.totals()
    assert got == want
    assert (r.time_s, r.flops, r.bytes, r.attribution, r.bottleneck) == (
        want["time_s"], want["flops"], want["bytes"], want["attribution_s"], want["bottleneck"])
    row = r.summary_row()
    assert {k: row[k] for k in want} == want


@pytest.mark.parametrize("backend", ["gpu", "tpu", "wse", "lpu", "spyre"])
@pytest.mark.parametrize("phase, batch", [("decode", 3), ("prefill", 1)])
def test_totals_are_the_definitions_on_every_backend(backend, phase, batch):
    _check(simulate_llm("test", backend, phase=phase, batch=batch, seq=16))


def test_totals_with_gaps_overlaps_replicas_and_other_engines():
    events = [Event("a", "compute", "SM", 0.1, 0.2, flops=1e9, bytes={"HBM": 3.0}, bound="memory",
                    detail={"replicas": 4}),
              Event("b", "compute", "SM", 0.15, 0.05, flops=2e9, bound="compute"),  # inside a: covers nothing
              Event("c", "comm", "link", 0.0, 0.9, bytes={"link": 7.0}, bound="communication"),  # off the engine
              Event("d", "sync", "SM", 0.5, 0.0, bound="scheduling"),  # zero length after a gap
              Event("e", "compute", "SM", 0.25, 0.3, flops=0.5e9, bytes={"HBM": 1.0, "SRAM": 2.0})]
    _check(_report(events))
    _check(_report([]))
    _check(_report(events[2:3]))  # nothing on the critical engine: all scheduling
