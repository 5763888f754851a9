"""The planted Spyre bugs: each fails exactly as described for several seeds and passes with its workaround."""
import pytest
import torch

from common.debug import bugs
from common.debug.divergence import first_divergence
from common.debug.timing import timing_region
from common.errors import DFAError
from common.sim import faults as F

SEEDS = (0, 1, 2)


def stick_fix_output(bug):
    # the widths are static: pad each clone's input to a multiple of 64 elements, clone, cut back
    gm = bugs.trace(bug.model)
    widths = iter(p.out_features for p in bug.model.proj)
    for node in list(gm.graph.nodes):
        if node.op == "call_method" and node.target == "clone":
            w = next(widths)
            with gm.graph.inserting_before(node):
                pad = gm.graph.call_function(torch.nn.functional.pad, (node.args[0], (0, -w % 64)))
            node.args = (pad,)
            with gm.graph.inserting_after(node):
                cut = gm.graph.call_function(torch.narrow, (node, -1, 0, w))
            node.replace_all_uses_with(cut, delete_user_cb=lambda u, cut=cut: u is not cut)
    gm.recompile()
    return bug.run(gm)


class StableSoftmax(torch.nn.Module):
    def forward(self, s, dim):
        return torch.softmax(s - s.amax(dim=dim, keepdim=True), dim=dim)


def overflow_fix_output(bug):
    gm = bugs.trace(bug.model)
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is torch.softmax:
            x, dim = node.args[0], node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else -1)
            with gm.graph.inserting_before(node):
                m = gm.graph.call_method("amax", (x,), {"dim": dim, "keepdim": True})
                shifted = gm.graph.call_function(torch.sub, (x, m))
            node.args = (shifted, *node.args[1:])
    gm.recompile()
    return bug.run(gm)


def chunked(bug):
    """Workaround for the hang: run the model on smaller batches until every call fits the DMA limit."""
    x = bug.args[0]
    for n in (x.shape[0], 2, 1):
        for t in (x.shape[1], x.shape[1] // 2, x.shape[1] // 4):
            try:
                return torch.cat([torch.cat([bug.run(None, xb[:, i:i + t]) for i in range(0, x.shape[1], t)], 1)
                                  for xb in x.split(n)])
            except (F.SimTimeoutError, F.DeadlockError):
                continue
    raise AssertionError("no chunk size fits")


def _rel(out, ref):
    return ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


def _node(bug):
    return first_divergence(None, bug.args, compiled=bug.compile(bug.model, bug.args)).node


def test_learner_seed_is_stable_and_a_bug_carries_no_answer():
    a = bugs.learner_seed("alice")
    assert a == bugs.learner_seed(" Alice ") and a != bugs.learner_seed("bob")
    with pytest.raises(DFAError, match="learner_id must be a non-empty string"):
        bugs.learner_seed("")
    with pytest.raises(DFAError, match="unknown bug 'stick'"):
        bugs.make_bug("stick", 1)
    for bug in bugs.learner_bugs("alice").values():  # no layer, node or cause to read off
        assert not {"layer", "params", "variant"} & set(vars(bug))
    # the seed changes the answers learners must find
    nodes = {_node(bugs.make_bug("wrong", s)) for s in range(12)}
    faults = {bugs.make_bug("hang", s)._rule["fault"] for s in range(12)}
    causes = {type(bugs.make_bug("slow", s).model).__name__ for s in range(12)}
    assert len(nodes) == 3 and faults == {"dma_timeout", "deadlock"} and len(causes) == 3


@pytest.mark.parametrize("seed", SEEDS)
def test_stick_bug_loses_the_tail_past_the_last_whole_stick_and_padding_fixes_it(seed):
    bug = bugs.make_bug("wrong", seed)
    out, ref = bug.run(), bug.reference()
    assert not torch.allclose(out.float(), ref.float(), atol=1e-2)
    found = first_divergence(None, bug.args, compiled=bug.compile(bug.model, bug.args))
    odd = next(i for i, p in enumerate(bug.model.proj) if p.out_features % 64)
    assert found.node == "clone" + (f"_{odd}" if odd else "") and found.op == "aten.clone"
    assert found.index[-1] >= 64 and found.target_value == 0.0  # past the first whole stick
    assert found.table.set_index("node").loc[found.node, "bad_elements"] > 0
    n0 = len(bug.runs)
    fixed = stick_fix_output(bug)
    assert bugs.device_problems(bug, fixed, n0) == [] and _rel(fixed, ref) < 5e-3
    # Routing around the fault (every clone turned into a multiply) gives right values and fixes nothing.
    gm = bugs.trace(bug.model)
    for node in [n for n in gm.graph.nodes if n.op == "call_method" and n.target == "clone"]:
        with gm.graph.inserting_before(node):
            node.replace_all_uses_with(gm.graph.call_function(torch.mul, (node.args[0], 1)))
        gm.graph.erase_node(node)
    gm.recompile()
    n1 = len(bug.runs)
    avoided = bug.run(gm)
    assert _rel(avoided, ref) < 5e-3
    assert any("route around the copy" in p for p in bugs.device_problems(bug, avoided, n1))


@pytest.mark.parametrize("seed", SEEDS + (4,))
def test_hang_bug_times_out_or_deadlocks_and_smaller_calls_pass(seed):
    bug = bugs.make_bug("hang", seed)
    timeout = bug._rule["fault"] == "dma_timeout"
    err = F.SimTimeoutError if timeout else F.DeadlockError
    match = "did not complete within 1.0 s" if timeout else "cyclic wait k0 -> k0"
    with pytest.raises(err, match=match):
        bug.run()
    weights = sum(p.numel() * p.element_size() for p in bug.model.parameters())
    rows = (bug._rule["dma_limit_bytes"] - weights) // (64 * 4)  # rows of 64 fp32 values under the limit
    flat = bug.args[0].reshape(1, -1, bug.args[0].shape[-1])  # (1, B*T, d)
    bug.run(None, flat[:, :rows])  # exactly at the limit: fine
    with pytest.raises(err):
        bug.run(None, flat[:, :rows + 1])
    n0 = len(bug.runs)
    out = chunked(bug)
    assert bugs.device_problems(bug, out, n0) == [] and _rel(out, bug.reference()) < 5e-3


@pytest.mark.parametrize("seed", SEEDS)
def test_overflow_bug_gives_nan_at_the_large_logit_softmax_and_the_max_shift_fixes_it(seed):
    bug = bugs.make_bug("nan", seed)
    assert torch.isnan(bug.run()).any() and torch.isfinite(bug.reference()).all()
    found = first_divergence(None, bug.args, compiled=bug.compile(bug.model, bug.args))
    big = next(i for i, s in enumerate(bug.model.scales) if s > 1)
    assert found.node == "_softmax" + (f"_{big}" if big else "") and found.op == "aten._softmax"
    assert found.target_value != found.target_value  # NaN
    n0 = len(bug.runs)
    fixed = overflow_fix_output(bug)
    assert bugs.device_problems(bug, fixed, n0, rtol=2e-2) == [] and torch.isfinite(fixed).all()
    assert _rel(fixed, bug.reference()) < 2e-2  # sharp softmax in fp16


class NativeRewrite(torch.nn.Module):
    def __init__(self, bug):
        super().__init__()
        m = bug.model
        self.variant = {"RunningMean": "cumsum", "DecayMix": "tril", "RepeatKV": "repeat"}[type(m).__name__]
        self.m = m
        if self.variant == "cumsum":
            t = bug.args[0].shape[1]
            tri = torch.tril(torch.ones(t, t))
            self.register_buffer("avg", tri / tri.sum(1, keepdim=True))
        if self.variant == "tril":
            self.register_buffer("w", torch.tril(m.decay.detach()))

    def forward(self, x):
        if self.variant == "cumsum":
            return self.m.proj(self.avg @ x)
        if self.variant == "tril":
            return self.m.proj(self.w @ x)
        k = self.m.k(x)
        b, t, d = k.shape
        return self.m.out(k.unsqueeze(2).expand(b, t, self.m.groups, d).reshape(b, t, self.m.groups * d))


@pytest.mark.parametrize("seed", (0, 1, 2, 5))
def test_perf_bug_is_correct_but_slow_and_the_native_rewrite_is_faster(seed):
    bug = bugs.make_bug("slow", seed)
    out = bug.run()
    assert _rel(out, bug.reference()) < 5e-3  # a performance bug: the answer is right
    slow = timing_region(bug.report())
    fixed = NativeRewrite(bug)
    assert slow.causes() == [f"fallback:aten.{fixed.variant}"] and slow.split()["host"] > 0
    fast = timing_region(bug.report(fixed))
    assert fast.causes() == [] and slow.wall_s / fast.wall_s > 1.3
    assert _rel(bug.run(fixed), bug.reference()) < 5e-3


class HeldAnswer(torch.nn.Module):
    """Runs the buggy model on the device (its FLOPs are all there) and returns a stored CPU answer."""

    def __init__(self, bug):
        super().__init__()
        self.m = bug.model
        self.register_buffer("answer", bug.reference())

    def forward(self, x):
        return self.m(x) * 0 + self.answer


@pytest.mark.parametrize("key", ["wrong", "nan"])
def test_device_problems_refuses_cpu_answers_and_answers_held_by_the_model(key):
    bug = bugs.make_bug(key, 1)
    assert "no run of the simulated Spyre" in bugs.device_problems(bug, bug.reference().half())[0]
    n0 = len(bug.runs)
    bug.run()  # a run of the buggy model, then the CPU answer handed back
    assert "not made of the simulated Spyre's outputs" in bugs.device_problems(bug, bug.reference().half(), n0)[0]
    n0 = len(bug.runs)
    out = bug.run(HeldAnswer(bug))
    assert bugs.device_problems(bug, out, n0) != []


def test_device_problems_counts_the_devices_flops():
    bug = bugs.make_bug("hang", 0)
    part = bug.args[0][:1, :4]
    n0 = len(bug.runs)
    out = bug.run(None, part)  # a genuine device output, but of 4 rows of 128
    assert "FLOPs" in bugs.device_problems(bug, out, n0)[0]
