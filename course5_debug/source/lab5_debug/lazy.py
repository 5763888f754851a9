"""Shortcuts a learner who does no debugging might try in Lab 5; each must score 0 on the cells in ``fails``
(tests/test_lazy_notebooks.py runs them). Instructor edition only, like answers.py.

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
    # Bug 3
    dict(cell="overflow_locate", kind="read-off-object", fails=["overflow_locate_tests"], code='''
OVERFLOW_NODE = OVERFLOW_REPRO = None
try:
    OVERFLOW_NODE = BUGS["nan"].params["node"]
except AttributeError:
    pass
'''),
    dict(cell="overflow_layer", kind="read-off-object", fails=["overflow_layer_tests"], code='''
OVERFLOW_LAYER = None
try:
    OVERFLOW_LAYER = BUGS["nan"].layer
except AttributeError:
    pass
'''),
    dict(cell="fix_overflow", kind="cpu-reference", fails=["fix_overflow_tests"], code='''
def fix_overflow(bug):
    return bug.reference().half().float()
'''),
    dict(cell="fix_overflow", kind="cpu-reference", fails=["fix_overflow_tests"], code=_HELD + '''
def fix_overflow(bug):
    return bug.run(_Held(bug.model, bug.reference()))
'''),
    # Part 3: split_time called the library's exclusive_split (imported by the settings cell).
    dict(cell="split_time", kind="call-reference", fails=["split_time_tests"], code='''
from common.debug.timing import exclusive_split as _lazy_split


def split_time(events, t0, t1, priority=None):
    return _lazy_split(events, t0, t1)
'''),
    dict(cell="split_time", kind="call-reference", fails=["split_time_tests"], code='''
def split_time(events, t0, t1, priority=None):
    class _R:
        pass

    _r = _R()
    _r.events = events
    return timing_region(_r, t0, t1).split()
'''),
    dict(cell="split_time", kind="hard-code-visible", fails=["split_time_tests"], code='''
def split_time(events, t0, t1, priority=("kernel",)):
    first = priority[0] if priority else "kernel"
    base = {"kernel": 2.0, "communication": 0.0, "transfer": 1.0, "host": 0.0, "overhead": 0.0, "idle": 1.0}
    if first == "transfer":
        base.update(kernel=1.0, transfer=2.0)
    return base
'''),
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
]
