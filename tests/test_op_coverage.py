"""Every op a learner's model can bring has a cost rule, and an op a machine cannot run - no rule, or
a dtype it has no datapath for - leaves it on the documented CPU-fallback path, or fails in one line."""
from __future__ import annotations

import pytest
import torch

import common.sim as sim
from common.graph.capture import capture_aten
from common.graph.costs import annotate
from common.graph.op_decompose import DECOMPOSITIONS, decomposition_kind
from common.graph.op_kinds import CREATION, KINDS, MOVEMENT, VIEW, core_aten_ops, rule_for, rule_without_exceptions
from common.sim.compile import clear_reports

aten = torch.ops.aten
CORE = core_aten_ops()


def test_every_core_aten_op_has_a_kind_and_a_flop_rule():
    # the Core ATen opset of the torch installed here (torch 2.11 and 2.13: 189 overloads of 160 ops), read from
    # torch.Tag.core: no list of names from one torch version
    assert len(CORE) >= 150
    missing = [str(op) for op in CORE if rule_for(op) is None or rule_for(op).kind not in KINDS]
    assert not missing, f"Core ATen ops without a kind: {missing}"
    # the kind follows torch's own metadata where it exists
    assert all(rule_for(op).kind in ("pointwise", "movement") for op in CORE if torch.Tag.pointwise in op.tags)
    assert rule_for(aten.view.default).kind == rule_for(aten.permute.default).kind == "view"
    assert rule_for(aten.mm.default).kind == rule_for(aten.convolution.default).kind == "matmul"
    assert rule_for(aten.amax.default).kind == "reduction" and rule_for(aten.full.default).kind == "creation"
    assert rule_for(torch.ops._c10d_functional.all_reduce.default).kind == "collective"
    assert rule_for(aten.sym_size.int).kind == "metadata" and rule_for(aten.lift_fresh_copy.default).kind == "movement"


def _kind(op):
    rule = rule_for(op)
    return rule.kind if rule is not None else None


def test_a_decomposed_op_takes_the_heaviest_kind_its_decomposition_dispatches():
    # leaky_relu: tagged pointwise from torch 2.13 on, core-only on 2.11; its decomposition (gt, mul, where) says
    # pointwise on either, as does every tagged pointwise op's. logsumexp's (amax, sub, exp, sum...) says reduction.
    assert decomposition_kind(aten.leaky_relu.default, _kind) == rule_for(aten.leaky_relu.default).kind == "pointwise"
    assert decomposition_kind(aten.logsumexp.default, _kind) == rule_for(aten.logsumexp.default).kind == "reduction"
    assert decomposition_kind(aten.unsafe_split.Tensor, _kind) == "view"  # split: views (no table entry needed)
    decomposed = [op for op in CORE if op in DECOMPOSITIONS and torch.Tag.pointwise in op.tags]
    derived = {str(op): decomposition_kind(op, _kind) for op in decomposed}
    assert derived and all(k in ("pointwise", "movement", None) for k in derived.values()), derived
    assert decomposition_kind(aten.mm.default, _kind) is None  # no decomposition: no derived kind
    assert decomposition_kind(aten.leaky_relu.default, lambda op: None) is None  # an op inside without a kind


def _redundant(tables) -> list[str]:
    """The entries of ``tables`` torch's own metadata already implies: without the entry the op would get the same
    kind and count FLOPs the same way (not through a decomposition, whose count may differ from the op's work)."""
    found = []
    for table in tables:
        for packet, reason in table.items():
            assert reason and "\n" not in reason, packet  # a one-line reason
            overloads = [getattr(packet, name) for name in packet.overloads()]
            needed = False
            for op in overloads:
                a, b = rule_for.__wrapped__(op), rule_without_exceptions(op)
                needed |= b is None or a.kind != b.kind or "decomposition" in b.source or \
                    (a.flops is None) != (b.flops is None)
            if not needed:
                found.append(packet.__name__)
    return found


def test_every_name_in_the_kind_tables_is_an_exception_torch_metadata_gets_wrong(monkeypatch):
    assert not _redundant((MOVEMENT, CREATION, VIEW)), "implied by torch's own metadata"
    # planted: aten.view is a view by its schema, aten.lift_fresh_copy movement by Tag.view_copy
    monkeypatch.setitem(VIEW, aten.view, "planted")
    monkeypatch.setitem(MOVEMENT, aten.lift_fresh_copy, "planted")
    assert _redundant((MOVEMENT, VIEW)) == ["lift_fresh_copy", "view"]


@pytest.mark.parametrize("op, args, flops", [
    (aten.new_ones.default, (torch.empty(3, 4), [5, 6]), 0),  # what learners first brought: creation, no FLOPs
    (aten.lift_fresh_copy.default, (torch.ones(7),), 0),  # a copy
    (aten.add_.Tensor, (torch.ones(2, 3), torch.ones(2, 3)), 6),  # in place: the rule of add
    (aten.sort.default, (torch.randn(4, 8),), 4 * 8 * 3),  # n log2 n comparisons per row
    (aten.native_dropout.default, (torch.ones(10), 0.5, True), 20),
    (aten.atan2.default, (torch.ones(5), torch.ones(5)), 5),  # tagged pointwise: one per output element
    (aten.logsumexp.default, (torch.ones(4, 6), [1]), None),  # no rule of its own: counted as its decomposition
    # the per-op counts of common.graph.op_kinds.TABLE, by hand
    (aten._cdist_forward.default, (torch.randn(2, 3, 4), torch.randn(2, 5, 4), 2.0, None), 3 * 2 * 3 * 5 * 4),
    (aten._pdist_forward.default, (torch.randn(5, 4), 2.0), 3 * 10 * 4),  # 10 pairs of 4 features
    (aten._fft_r2c.default, (torch.randn(8), [0], 0, True), 2.5 * 8 * 3),  # 2.5 N log2 N
    (aten.avg_pool2d.default, (torch.randn(1, 1, 4, 4), [2, 2]), 4 * 4),  # 4 windows of 4
    (aten.scatter_add.default, (torch.zeros(5), 0, torch.tensor([0, 1, 1]), torch.ones(3)), 3),
    (aten.histc.default, (torch.randn(10),), 2 * 10),
    (aten.upsample_bilinear2d.vec, (torch.randn(1, 1, 2, 2), [4, 4], False, None), 9 * 16),
])
def test_ops_nobody_listed_are_costed_by_their_kind(op, args, flops):
    class One(torch.nn.Module):
        def forward(self, *xs):
            return op(*xs)

    gm = capture_aten(One(), args)
    annotate(gm, *gm.meta["example_inputs"])
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and n.meta["cost"].kind != "view"]
    assert nodes and all(n.meta["cost"].kind in KINDS for n in nodes)
    assert not any(n.meta.get("uncosted") for n in nodes)
    total = sum(n.meta["cost"].flops for n in nodes)
    assert total == flops if flops is not None else total > 0
    if op is aten.new_ones.default:  # a creation op reads nothing, writes its output
        (n,) = nodes
        assert n.meta["cost"].bytes_read == 0 and n.meta["cost"].bytes_written == 5 * 6 * 4


def _events(backend):
    return [e for r in sim.reports(backend) for e in r.events]


@pytest.mark.parametrize("backend", ["wse", "lpu", "spyre"])
def test_an_op_without_a_rule_runs_on_the_host_with_a_fallback_event(backend):
    torch._dynamo.reset()
    clear_reports()
    x = torch.randn(3, 3) + 3 * torch.eye(3)
    out = torch.compile(lambda t: torch.linalg.det(t) * 2, backend=f"dfa_{backend}")(x)
    assert torch.allclose(out, torch.linalg.det(x) * 2, rtol=sim.get_backend(backend).rtol_vs_eager * 4)
    host = [e for e in _events(backend) if e.kind == "host"]
    assert [e.detail["fallback"] for e in host] == ["aten._linalg_det"]
    assert host[0].detail["reason"].startswith("no cost rule") and host[0].duration >= host[0].floor > 0
    if backend != "spyre":  # the round trip replaced the op's device event; the device waits for it
        events = sim.last_report(backend).events
        trip = [e for e in events if e.kernel == host[0].kernel]
        assert [e.kind for e in trip][0] == "sync" and trip[-1].kind in ("host", "dma")
        assert all(a.end == pytest.approx(b.start) for a, b in zip(trip, trip[1:], strict=False))
        after = [e for e in events if e.kind == "compute" and e.start >= trip[0].start]
        assert after and all(e.start >= trip[-1].end * (1 - 1e-12) for e in after)


@torch.library.custom_op("dfa_unseen::mystery", mutates_args=())
def _mystery(x: torch.Tensor) -> torch.Tensor:  # an op of a torch this project has never seen: no tag, no rule
    return x.sin() + 1


@_mystery.register_fake
def _(x):
    return torch.empty_like(x)


@pytest.mark.parametrize("backend", ["wse", "lpu", "spyre"])
def test_an_op_no_torch_metadata_covers_takes_the_documented_fallback_with_a_report_event(backend):
    op = torch.ops.dfa_unseen.mystery.default
    assert rule_for(op) is None  # no tag, no decomposition, not a view, takes and returns a tensor
    torch._dynamo.reset()
    clear_reports()
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    out = torch.compile(lambda t: torch.ops.dfa_unseen.mystery(t * 2) * 3, backend=f"dfa_{backend}")(x)
    tol = sim.get_backend(backend).rtol_vs_eager * 4  # the machine's dtype; an absolute part for results near 0
    assert torch.allclose(out, ((x * 2).sin() + 1) * 3, rtol=tol, atol=tol * 6)
    host = [e for e in _events(backend) if e.kind == "host"]
    assert [e.detail["fallback"] for e in host] == ["dfa_unseen.mystery"], host
    assert host[0].detail["reason"].startswith("no cost rule") and host[0].duration >= host[0].floor > 0
    computed = [e for e in sim.last_report(backend).events if e.kind == "compute"]
    assert computed and all(e.flops >= 0 for e in computed)  # the ops around it still ran on the machine


@pytest.mark.parametrize("backend", ["gpu", "tpu"])
def test_without_a_host_link_in_the_catalog_such_an_op_is_one_line_naming_op_and_backend(backend):
    torch._dynamo.reset()
    with pytest.raises(Exception, match=rf"dfa_{backend} cannot run aten\._linalg_det: it must run on the host"):
        torch.compile(lambda t: torch.linalg.det(t), backend=f"dfa_{backend}")(torch.randn(3, 3))
    torch._dynamo.reset()  # an op of a torch the project has never seen: the same one line, never a traceback
    with pytest.raises(Exception, match=rf"dfa_{backend} cannot run dfa_unseen\.mystery: it must run on the host"):
        torch.compile(lambda t: torch.ops.dfa_unseen.mystery(t), backend=f"dfa_{backend}")(torch.randn(3, 3))


class IndexMath(torch.nn.Module):  # positions, a mask and a histogram in int64; a complex rotation
    def forward(self, ids, x):  # ids: (B, T) int64, x: (B, T) float
        pos = (ids * 3 + 1) % 17  # (B, T) int64
        z = torch.polar(torch.ones_like(x), x) * torch.polar(torch.ones_like(x), x)  # (B, T) complex64
        return pos, z, (ids > 5) & (x > 0)


@pytest.mark.parametrize("backend", list(sim.BACKEND_NAMES))
def test_integer_and_complex_ops_run_where_the_machine_has_the_dtype_else_on_the_host(backend):
    torch._dynamo.reset()
    clear_reports()
    ids, x = torch.randint(0, 50, (2, 7)), torch.randn(2, 7)
    ref = IndexMath()(ids, x)
    out = torch.compile(IndexMath(), backend=f"dfa_{backend}")(ids, x)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[2], ref[2])  # integer and bool: bit-exact
    policy = sim.get_backend(backend)
    assert torch.allclose(out[1], ref[1], atol=4 * policy.rtol_vs_eager)  # |z| = 1; x stored in the chip's float
    table = policy.computes_in
    host = {(e.detail["fallback"], e.detail["reason"].split(":")[0]) for e in _events(backend) if e.kind == "host"}
    report = sim.last_report(backend)
    note = next(n for n in report.notes if n.startswith("dtypes computed on"))
    narrowed = table is not None and "int64" not in table and "int32" in table  # index math on the int32 path
    for dt in ("int64", "complex64"):
        runs = table is None or dt in table or (dt == "int64" and narrowed)
        assert runs == (f"dtype {dt}" not in {why for _, why in host}), (dt, host)
        label = "int32" if dt == "int64" and narrowed else dt
        assert (label in note.split(";")[0]) == runs  # labelled with the dtype it computed in, where it did
    if table is not None and "complex64" not in table:
        assert ("aten.mul", "dtype complex64") in host and "complex64 x" in note.split("on the host (CPU fallback)")[1]
    # the report never calls an integer op by the float dtype: its ops are labelled with their own dtypes
    assert not any(e.detail.get("dtype") in ("fp16", "bf16") for e in report.events if e.kind == "host"
                   and "dtype" in e.detail.get("reason", ""))


@pytest.mark.parametrize("backend, model_dtype, report_dtype", [
    ("gpu", torch.float32, "fp32"), ("gpu", torch.bfloat16, "bf16"), ("spyre", torch.float32, "fp16")])
def test_the_report_names_the_float_dtype_the_values_were_computed_in(backend, model_dtype, report_dtype):
    # the GPU computes in the model's own dtype (eager CUDA semantics), so it is timed in it too; Spyre rounds
    # every stored float to fp16, so its report says fp16 whatever the model's dtype
    torch._dynamo.reset()
    clear_reports()
    lin = torch.nn.Linear(16, 16).to(model_dtype)
    torch.compile(lambda x: torch.relu(lin(x)), backend=f"dfa_{backend}")(torch.randn(4, 16, dtype=model_dtype))
    report = sim.last_report(backend)
    note = next(n for n in report.notes if n.startswith("dtypes computed on"))
    assert report.dtype == report_dtype and f"{report_dtype} x" in note
    assert report.peak_flops == sim.get_backend(backend)(dtype=report_dtype).peak


@pytest.mark.parametrize("backend", list(sim.BACKEND_NAMES))
def test_an_integer_only_graph_is_not_labelled_with_a_float_dtype(backend):
    # no float op ran on the machine: the report (and its program) name the integer dtype the ops computed in
    torch._dynamo.reset()
    clear_reports()
    ids = torch.arange(10, dtype=torch.int32)
    out = torch.compile(lambda t: t * 3 + 1, backend=f"dfa_{backend}")(ids)
    assert torch.equal(out, ids * 3 + 1)
    report = sim.last_report(backend)
    assert report.dtype == "int32" and report.programs[0].dtype == "int32"
    assert "(int32)" in report.summary().splitlines()[0]


@pytest.mark.parametrize("backend, bytes_per_element", [("lpu", 4), ("wse", 4), ("tpu", 8), ("gpu", 8)])
def test_int64_index_math_is_counted_at_the_width_the_machine_holds_it_in(backend, bytes_per_element):
    # LPU and WSE have 32-bit integer paths only: positions are narrowed to int32 (4 B); TPU and GPU keep int64
    torch._dynamo.reset()
    clear_reports()
    ids = torch.arange(12).reshape(3, 4)
    out = torch.compile(lambda t: t * 3 + 1, backend=f"dfa_{backend}")(ids)
    assert torch.equal(out, ids * 3 + 1)
    ops = [o for k in sim.last_report(backend).programs[0].kernels for o in k.ops if o.dtype == "int64"]
    assert ops and all(o.coverage != "fallback" for o in ops)
    assert all(o.out_bytes == 12 * bytes_per_element for o in ops)
    assert all(b == 12 * bytes_per_element for o in ops for b in o.in_bytes.values())


def test_an_int64_value_that_int32_cannot_hold_is_a_one_line_error_where_int64_is_narrowed():
    torch._dynamo.reset()
    big = torch.tensor([3_000_000_000, 1])
    f = torch.compile(lambda t: t + 1, backend="dfa_lpu")
    with pytest.raises(Exception, match=r"dfa_lpu holds int64 as int32 .*input value 3000000000 does not fit"):
        f(big)
    torch._dynamo.reset()
    assert torch.equal(torch.compile(lambda t: t + 1, backend="dfa_tpu")(big), big + 1)  # TPU keeps int64
