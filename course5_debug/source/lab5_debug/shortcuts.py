"""Shortcuts a learner who does no debugging might try in Lab 5; each must score 0 on the cells in ``fails``
(tests/test_shortcut_notebooks.py runs them). Instructor edition only, like answers.py.

Each shortcut first sets the cell's names to a blank value, so one whose trick raises (an attribute that no
longer exists) is judged on what it leaves behind, as a learner's notebook would be.
"""

# Echo the printed expected answer: set a dummy, run the visible check, read "expected '...'" off what it prints.
_ECHO = '''
import contextlib as _cl
import io as _io
import re as _re

from common.checks import check_equal as _ce


def _echo(check, dummy):
    buf = _io.StringIO()
    try:
        with _cl.redirect_stdout(buf):
            check(dummy)
    except AssertionError as exc:
        m = _re.search(r"expected '([^']+)'", buf.getvalue() + str(exc))
        return m.group(1) if m else dummy
    return dummy
'''

_HELD = '''
class _Held(torch.nn.Module):
    """Runs the given model on the device and returns the stored CPU answer."""

    def __init__(self, model, answer):
        super().__init__()
        self.m = model
        self.register_buffer("answer", answer)

    def forward(self, x):
        return self.m(x) * 0 + self.answer
'''

SHORTCUTS = [
    # Part 1: the layer was a field of every report, and the ids (cap1, mem2) named it.
    dict(cell="classify", kind="read-off-object", fails=["classify_tests"], code='''
MY_LAYERS = {}
try:
    MY_LAYERS = {r.id: r.layer for r in REPORTS}
except AttributeError:
    pass
'''),
    dict(cell="classify", kind="read-off-object", fails=["classify_tests"], code='''
_prefix = {"cap": "capture", "low": "lowering", "cov": "coverage", "lay": "layout", "cg": "codegen",
           "mem": "memory", "sch": "schedule", "num": "numerics"}
MY_LAYERS = {r.id: _prefix.get(r.id.rstrip("0123456789").lower(), "capture") for r in REPORTS}
'''),
    # Bug 1: the node was params["node"], the layer bug.layer; the visible check printed the expected node.
    dict(cell="stick_locate", kind="read-off-object", fails=["stick_locate_tests"], code='''
STICK_NODE = STICK_REPRO = None
try:
    STICK_NODE = BUGS["wrong"].params["node"]
except AttributeError:
    pass
'''),
    dict(cell="stick_locate", kind="echo-expected", fails=["stick_locate_tests"], code=_ECHO + '''
_aten = BUGS["wrong"].compile(BUGS["wrong"].model, BUGS["wrong"].args).aten
_names = {n.name for n in _aten.graph.nodes if n.op == "call_function"}
STICK_NODE = _echo(lambda v: _ce("STICK_NODE names a node of the compiled aten graph", v in _names, True), "x")
STICK_REPRO = None
'''),
    dict(cell="stick_layer", kind="read-off-object", fails=["stick_layer_tests"], code='''
STICK_LAYER = None
try:
    STICK_LAYER = BUGS["wrong"].layer
except AttributeError:
    pass
'''),
    dict(cell="stick_layer", kind="hard-code-visible", fails=["stick_layer_tests"], code='''
STICK_LAYER = "layout"  # the word the old bug key ("stick") suggested
'''),
    # The fixes: ran_on_device checked only that values fit in fp16.
    dict(cell="fix_stick", kind="cpu-reference", fails=["fix_stick_tests"], code='''
def fix_stick(bug):
    return bug.reference().half()
'''),
    dict(cell="fix_stick", kind="cpu-reference", fails=["fix_stick_tests"], code='''
def fix_stick(bug):
    bug.run()  # the device ran (the buggy model), then the CPU answer is handed back
    return bug.reference().half()
'''),
    dict(cell="fix_stick", kind="cpu-reference", fails=["fix_stick_tests"], code=_HELD + '''
def fix_stick(bug):
    return bug.run(_Held(bug.model, bug.reference()))
'''),
    # Routing around the fault: every clone becomes a multiply, which no stick_copy fault can hit. Right values
    # from the device, the model's FLOPs, and nothing fixed.
    dict(cell="fix_stick", kind="avoid-fault", fails=["fix_stick_tests"], code='''
def fix_stick(bug):
    gm = bugs.trace(bug.model)
    for node in list(gm.graph.nodes):
        if node.op == "call_method" and node.target == "clone":
            with gm.graph.inserting_before(node):
                times_one = gm.graph.call_function(torch.mul, (node.args[0], 1))
            node.replace_all_uses_with(times_one)
            gm.graph.erase_node(node)
    gm.recompile()
    return bug.run(gm)
'''),
    # Bug 2
    dict(cell="hang_locate", kind="echo-expected", fails=["hang_locate_tests"], code=_ECHO + '''
HANG_ERROR = _echo(lambda v: _ce("exception type", v, "?"), "x")
HANG_REPRO = None
'''),
    dict(cell="hang_layer", kind="read-off-object", fails=["hang_layer_tests"], code='''
HANG_LAYER = None
try:
    HANG_LAYER = BUGS["hang"].layer
except AttributeError:
    pass
'''),
    dict(cell="fix_hang", kind="cpu-reference", fails=["fix_hang_tests"], code='''
def fix_hang(bug):
    return bug.reference().half().float()
'''),
    dict(cell="fix_hang", kind="cpu-reference", fails=["fix_hang_tests"], code='''
def fix_hang(bug):
    bug.run(None, bug.args[0][:1, :2])  # one small call that does not hang, then the CPU answer
    return bug.reference().half().float()
'''),
    # Part 3: a fixed tolerance against eager instead of the fp64 truth; the visible verdicts hard-coded.
    dict(cell="classify_divergence", kind="cpu-reference", fails=["classify_divergence_tests"], code='''
def classify_divergence(out, eager, truth):
    if out.dtype == eager.dtype and out.shape == eager.shape and torch.equal(out, eager):
        return "match"
    if not torch.isfinite(out).all():
        return "bug"
    return "noise" if torch.allclose(out.float(), eager.float(), rtol=1.6e-2, atol=1e-5) else "bug"
'''),
    dict(cell="classify_divergence", kind="hard-code-visible", fails=["classify_divergence_tests"], code='''
def classify_divergence(out, eager, truth):
    if torch.equal(out, eager):
        return "match"
    if not torch.isfinite(out).all() or (out.double() - truth).abs().max() > 0.02:
        return "bug"
    return "noise"
'''),
    dict(cell="bisect_stack", kind="hard-code-visible", fails=["bisect_stack_tests"], code='''
def bisect_stack(model, args, backends=STACK, seed=0):
    return {"eager": "match", "aot_eager": "match", "inductor": "noise"}
'''),
    dict(cell="bisect_stack", kind="cpu-reference", fails=["bisect_stack_tests"], code='''
def bisect_stack(model, args, backends=STACK, seed=0):
    eager = model(*args)  # no seed, no fp64 truth: eager against itself
    return {backend_label(b): classify_divergence(torch.compile(model, backend=b)(*args), eager, eager.double())
            for b in backends}
'''),
    # The landscape rows: one phrase for every system, or every mechanism word in every cell.
    dict(cell="landscape_rows", kind="hard-code-visible", fails=["landscape_rows_tests"], code='''
MY_ROWS = {a: dict.fromkeys(SYSTEMS, "it depends on the stack") for a in ATTRIBUTES}
'''),
    dict(cell="landscape_rows", kind="hard-code-visible", fails=["landscape_rows_tests"], code='''
_all = "compile error, CPU fallback round trip, extern kernel, watchdog timeout, DMA timeout, deadlock"
MY_ROWS = {a: {s: f"{s}: {_all}" for s in SYSTEMS} for a in ATTRIBUTES}
'''),
    # Part 4: the performance bug.
    # The cause was params["cause"]; the region and cause were printed by the visible check.
    dict(cell="perf", kind="read-off-object", fails=["perf_tests"], code='''
PERF_REGION, PERF_CAUSE = None, None
try:
    PERF_CAUSE = BUGS["slow"].params["cause"]
except AttributeError:
    pass
'''),
    dict(cell="perf", kind="hard-code-visible", fails=["perf_tests"], code='''
_r = BUGS["slow"].report()
PERF_REGION = (0.0, _r.time_s)  # the whole step, read off the printed timeline
PERF_CAUSE = "fallback:aten." + {"RunningMean": "cumsum", "DecayMix": "tril", "RepeatKV": "repeat"}[
    type(BUGS["slow"].model).__name__]
'''),
    # fix_perf: a module holding the CPU answer as a buffer.
    dict(cell="fix_perf", kind="cpu-reference", fails=["fix_perf_tests"], code='''
def fix_perf(bug):
    class Held(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("answer", bug.reference())

        def forward(self, x):
            return self.answer + 0.0 * x[:, :, :1]

    return Held()
'''),
    # --- attacks on the probe channel -----------------------------------------------------------------------------------
    # Part 1 by the course's own words: a bag-of-words overlap of each report with the taxonomy's texts, and the
    # last entry that has numbers as the "evidence" (the report's words name several stages; its numbers decide).
    dict(cell="classify", kind="call-reference", fails=["classify_tests"], code='''
import re as _re

_lazy_words = {L.key: set(_re.findall(r"[a-z]\\w+", " ".join([L.key, L.name, L.what_fails, L.symptom, L.tool,
               *(e.text for e in L.examples.values())]).lower())) for L in taxonomy.LAYERS}
MY_LAYERS = {r.id: max(_lazy_words, key=lambda k, r=r: len(_lazy_words[k] & set(_re.findall(r"[a-z]\\w+",
             r.text.lower())))) for r in REPORTS}
MY_EVIDENCE = {r.id: [ln.split()[0] for ln in r.text.splitlines()[1:] if not ln.endswith("not reached")][-1]
               for r in REPORTS}
'''),
    # Part 1 with objects that lie: every reading equal to whatever the grader compares it with.
    dict(cell="classify", kind="echo-expected", fails=["classify_tests"], code='''
class _LazyYes(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class _LazyAll(dict):
    def get(self, key, default=None):
        return _LazyYes("capture")

    def __contains__(self, key):
        return True


MY_LAYERS = _LazyAll({r.id: _LazyYes("capture") for r in REPORTS})
MY_EVIDENCE = _LazyAll({r.id: _LazyYes("e1") for r in REPORTS})
'''),
    # The layer of the 65-element copy by a text search of the taxonomy (its Spyre examples), and a node name
    # equal to anything.
    dict(cell="stick_layer", kind="call-reference", fails=["stick_layer_tests"], code='''
STICK_LAYER = next((L.key for L in taxonomy.LAYERS for e in L.examples.values()
                    if "65" in e.text or "clone" in e.text), None)
'''),
    dict(cell="stick_locate", kind="echo-expected", fails=["stick_locate_tests"], code='''
class _LazyName(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


STICK_NODE = _LazyName("clone")
STICK_REPRO = None
'''),
    # The layer of the hang read off the simulator's docstring (it used to say which layer each fault is).
    dict(cell="hang_layer", kind="read-off-object", fails=["hang_layer_tests"], code='''
import re as _re

_lazy_m = _re.search(r"``%s`` \\(([a-z]+)" % BUGS["hang"]._rule["fault"], faults.__doc__ or "")
HANG_LAYER = {"scheduling": "schedule"}.get(_lazy_m.group(1), _lazy_m.group(1)) if _lazy_m else None
'''),
    # The fixes: replace the model or empty the input the learner is handed, so a reference rebuilt from that
    # object after the call agrees with anything; rebind the device check and the tolerances.
    dict(cell="fix_stick", kind="cpu-reference", fails=["fix_stick_tests"], code='''
import copy as _lazy_copy


class _LazyPlus(torch.nn.Module):
    def forward(self, x):
        return x + 0.0  # no copy, so no stick bug; the model of the bug is replaced by this


def fix_stick(bug):
    bug = _lazy_copy.copy(bug) if bug is BUGS["wrong"] else bug  # the notebook's own bug stays intact
    bug.model = _LazyPlus()
    return bug.run()
'''),
    dict(cell="fix_stick", kind="cpu-reference", fails=["fix_stick_tests"], code='''
bugs.device_problems = lambda *a, **k: []  # the device check the old hidden test called, rebound
TOL = {k: 1e9 for k in TOL}  # and the tolerances it read


def fix_stick(bug):
    return bug.reference().half()
'''),
    dict(cell="fix_hang", kind="cpu-reference", fails=["fix_hang_tests"], code='''
import copy as _lazy_copy


def fix_hang(bug):
    bug = _lazy_copy.copy(bug) if bug is BUGS["hang"] else bug  # the notebook's own bug stays intact
    bug.args = (bug.args[0][:1, :2],)  # a call small enough not to hang: the input handed over, emptied
    return bug.run()
'''),
    # The simulated device itself rebound: a run that would hang logs the CPU answer as the device's output.
    dict(cell="fix_hang", kind="cpu-reference", fails=["fix_hang_tests"], code='''
def _lazy_patch(run, errors, device_run):  # a closure: it outlives the notebook's names (%reset)
    def never_hangs(self, model=None, *args):
        try:
            return run(self, model, *args)
        except errors:
            args = args or self.args
            out = self.reference(*args)
            self.runs.append(device_run(self.compile(self.model if model is None else model, args), tuple(args), out))
            return out

    return never_hangs


bugs.PlantedBug.run = _lazy_patch(bugs.PlantedBug.run, (faults.SimTimeoutError, faults.DeadlockError), bugs.DeviceRun)


def fix_hang(bug):
    return bug.run()
'''),
    dict(cell="fix_perf", kind="cpu-reference", fails=["fix_perf_tests"], code='''
import copy as _lazy_copy


def fix_perf(bug):
    x = bug.args[0]
    bug = _lazy_copy.copy(bug) if bug is BUGS["slow"] else bug  # the notebook's own bug stays intact
    bug.model = torch.nn.Linear(x.shape[-1], x.shape[-1])  # a native model in place of the slow one
    return bug.model
'''),
    dict(cell="perf", kind="echo-expected", fails=["perf_tests"], code='''
class _LazyTime(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__

    def __sub__(self, other):
        return 0.0

    def __rsub__(self, other):
        return 0.0


class _LazyCause(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


PERF_REGION, PERF_CAUSE = (_LazyTime(0.0), _LazyTime(1.0)), _LazyCause("fallback:aten.cumsum")
'''),
    # A re-asked question answered with one's own first answer: a wrong hang kind, then the landscape row that
    # says the same (the grader judges the row against the hang it planted, not against HANG_ERROR).
    dict(cell="landscape_rows", kind="hard-code-visible", fails=["landscape_rows_tests"], code='''
HANG_ERROR = faults.SimTimeoutError if HANG_ERROR is not faults.SimTimeoutError else faults.DeadlockError
MY_ROWS = {
    "unsupported op": {
        "GPU": "an extern aten kernel that breaks the fusion, no host trip",
        "TPU": "a CPU round trip with a device sync (XLA fallback)",
        "WSE": "a compile error: no host to fall back to",
        "LPU": "a compile error: the static schedule has no host path",
        "Spyre": "a CPU fallback: sync, PCIe round trip, relaunch",
    },
    "a hang surfaces as": {
        "GPU": "a watchdog timeout in a stuck NCCL collective",
        "TPU": "a barrier or collective timeout at run time",
        "WSE": "a routing plan rejected at compile time",
        "LPU": "a scheduling failure at compile time, never at run time",
        "Spyre": ("a DMA timeout: a transfer never completed" if HANG_ERROR is faults.SimTimeoutError
                  else "a deadlock report: a cycle of waits between kernels"),
    },
}
'''),
    # Part 3: the verdicts read off the backends' names (the old hidden test called them planted_bug, rounds_once).
    dict(cell="bisect_stack", kind="read-off-object", fails=["bisect_stack_tests"], code='''
def bisect_stack(model, args, backends=STACK, seed=0):
    out = {}
    for b in backends:
        name = backend_label(b)
        out[name] = "match" if name in ("eager", "aot_eager") else "bug" if "bug" in name or "seed" in name else "noise"
    return out
'''),
]

# Stubs under "Going further (optional)": ungraded, so there is no score for a shortcut to win.
NOT_LISTED = {cell: "optional (Going further), ungraded" for cell in
              ("overflow_locate", "overflow_layer", "fix_overflow", "split_time")}
NOT_LISTED["predict_slow"] = "ungraded: the learner's own ranking (Analysis Q2), judged only in the reveal, no points"
