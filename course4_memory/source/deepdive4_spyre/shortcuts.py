"""Shortcuts a learner who does not do the Course 4 Deep Dive's work might try; each must score 0 on the cells in
``fails`` (tests/test_shortcut_notebooks.py runs them). Instructor edition only, like answers.py."""

NOT_LISTED = {
    "predict_align": "ungraded: the learner's own number (Analysis Q1), committed before the simulator runs and "
    "judged only in the reveal (kept beside the map, timed and hashed; a change after the reveal is flagged), "
    "no points",
}

_HONEST_BUDGET = '''
def lx_tile_budget(capacity, reserved, backend_fraction, stick_bytes):
    usable = (capacity - reserved) * (1 - backend_fraction)
    return int(usable) // int(stick_bytes) * int(stick_bytes)
'''
_HONEST_ROWS = '''
def largest_tile_rows(lx_bytes, tn, tk, elem_bytes):
    return max(0, int((lx_bytes // elem_bytes - tk * tn) // (tk + tn)))
'''

SHORTCUTS = [
    # The visible step's per-kind bytes, returned for every table.
    dict(cell="step_lpddr_by_kind", kind="hard-code-visible", fails=["step_lpddr_by_kind_tests"], code='''
_LAZY_BY_KIND = ((TABLE["lpddr_read"] + TABLE["lpddr_write"]) * TABLE["repeat"]).groupby(TABLE["kind"]).sum()


def step_lpddr_by_kind(table):
    return _LAZY_BY_KIND.copy()
'''),
    # The library's stick layout: right for the catalog's 128-byte stick only.
    dict(cell="padding_bytes", kind="call-reference", fails=["padding_bytes_tests"], code='''
from common.sim.machines.spyre import stick_layout as _lazy_sl


def padding_bytes(shape, elem_bytes, stick_bytes):
    return int(_lazy_sl(tuple(shape), {1: "int8", 2: "fp16", 4: "fp32"}[elem_bytes])["padding_bytes"])
'''),
    dict(cell="padding_bytes", kind="call-reference", fails=["padding_bytes_tests"], code='''
try:
    from common.memory.traffic import padding_bytes as _lazy_ref
except ImportError:
    _lazy_ref = None


def padding_bytes(shape, elem_bytes, stick_bytes):
    return _lazy_ref(shape, elem_bytes, stick_bytes)
'''),
    # The V-cache padding read off the simulator's table (it is printed), and the worked example's 168.
    dict(cell="padding_bytes", kind="read-off-object", fails=["padding_bytes_tests"], code='''
def padding_bytes(shape, elem_bytes, stick_bytes):
    if tuple(shape) == (3, 100):
        return 168
    if tuple(shape) == (1, 100) and stick_bytes == 64:
        return 56
    if shape[-1] % (stick_bytes // elem_bytes) == 0:
        return 0
    row = TABLE[(TABLE["segment"] == "layer") & (TABLE["op"] == "aten.bmm")].iloc[-1]
    return int(row["lpddr_padding"])
'''),
    dict(cell="tile_traffic", kind="call-reference", fails=["tile_traffic_tests"], code='''
try:
    from common.memory.traffic import matmul_tile_traffic as tile_traffic
except ImportError:
    tile_traffic = None
'''),
    dict(cell="largest_tile", kind="call-reference", fails=["largest_tile_tests"], code=_HONEST_ROWS + '''
def lx_tile_budget(capacity, reserved, backend_fraction, stick_bytes):
    return default_lx_budget()  # the simulator's own budget, whatever scratchpad is asked about
'''),
    dict(cell="largest_tile", kind="call-reference", fails=["largest_tile_tests"], code=_HONEST_BUDGET + '''
try:
    from common.memory.traffic import largest_tile_rows
except ImportError:
    largest_tile_rows = None
'''),
    # The tile the visible cell prints, for every budget.
    dict(cell="largest_tile", kind="echo-expected", fails=["largest_tile_tests"], code=_HONEST_BUDGET + '''
_LAZY_TM = int(traffic_table(workload_step(op_workload("matmul", (4096, 4096, 4096), "fp16"))).iloc[0]["tm"])


def largest_tile_rows(lx_bytes, tn, tk, elem_bytes):
    return _LAZY_TM
'''),
    dict(cell="chain_lpddr_bytes", kind="call-reference", fails=["chain_lpddr_bytes_tests"], code='''
try:
    from common.memory.traffic import chain_lpddr_bytes
except ImportError:
    chain_lpddr_bytes = None
'''),
    # Ask the simulator instead of reasoning: a one-row chain of nbytes with the asked budget.
    dict(cell="chain_lpddr_bytes", kind="read-off-object", fails=["chain_lpddr_bytes_tests"], code='''
def chain_lpddr_bytes(nbytes, n_intermediates, cores, lx_budget):
    if nbytes == 128e6 and lx_budget == 1.5e6:
        return 768e6  # the worked example
    rows = max(1, int(nbytes) // (16384 * 2))
    st = chain_step(rows, 16384, lx_budget_bytes=int(lx_budget))
    return float(step_totals(traffic_table(st))["lpddr_bytes"])
'''),
    # Attacks on the probe channel: references rebuilt from the learner's (emptied) argument, a private helper of
    # common with a free stick width, rebound notebook names and checkers, and objects that lie about equality.
    dict(cell="step_lpddr_by_kind", kind="read-off-object", fails=["step_lpddr_by_kind_tests"], code='''
def step_lpddr_by_kind(table):
    if len(table) == len(TABLE) and (table["lpddr_read"] == TABLE["lpddr_read"]).all():
        per_row = (table["lpddr_read"] + table["lpddr_write"]) * table["repeat"]
        return per_row.groupby(table["kind"]).sum()  # the visible step, honestly
    table.drop(table.index, inplace=True)  # any other table: emptied, so a reference built from it is empty too
    return pd.Series(dtype=float)
'''),
    dict(cell="step_lpddr_by_kind", kind="hard-code-visible", fails=["step_lpddr_by_kind_tests"], code='''
_LAZY_BY_KIND = ((TABLE["lpddr_read"] + TABLE["lpddr_write"]) * TABLE["repeat"]).groupby(TABLE["kind"]).sum()
BIG_MODEL, BIG_BATCH, BIG_SEQ = MODEL, 1, SEQ  # the names the old hidden test simulated with: now the visible step


def step_lpddr_by_kind(table):
    return _LAZY_BY_KIND.copy()
'''),
    dict(cell="padding_bytes", kind="call-reference", fails=["padding_bytes_tests"], code='''
from common.sim.machines.spyre import _layout as _lazy_layout


def padding_bytes(shape, elem_bytes, stick_bytes):
    return int(_lazy_layout(tuple(shape), elem_bytes, stick_bytes)["padding_bytes"])  # the simulator's private helper
'''),
    dict(cell="padding_bytes", kind="echo-expected", fails=["padding_bytes_tests"], code='''
import common.checks as _lazy_checks
import math as _lazy_math

class _LazyGrader:  # agrees with everything
    def __getattr__(self, name):
        return lambda *a, **k: None


for _lazy_name in ("check_equal", "check_scalar", "check_type"):  # the module refuses setattr; its __dict__ does not
    vars(_lazy_checks)[_lazy_name] = lambda *a, **k: None
vars(_lazy_checks)["grader"] = _LazyGrader()
_lazy_math.isclose = lambda *a, **k: True
torch.allclose = lambda *a, **k: True
STICK = 64  # a rebound module constant


def padding_bytes(shape, elem_bytes, stick_bytes):
    return 0
'''),
    dict(cell="largest_tile", kind="echo-expected", fails=["largest_tile_tests"], code=_HONEST_BUDGET + '''
class _LazyAny(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def largest_tile_rows(lx_bytes, tn, tk, elem_bytes):
    return _LazyAny(0)  # equal to whatever it is compared with
'''),
    dict(cell="tile_traffic", kind="echo-expected", fails=["tile_traffic_tests"], code='''
class _LazyClose(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__

    def __sub__(self, other):
        return 0.0

    def __rsub__(self, other):
        return 0.0


def tile_traffic(a_bytes, b_bytes, mc, nc, tm, tn):
    return _LazyClose(a_bytes + b_bytes)  # one read of each operand, and no distance to any reference
'''),
    # The sticks explorer's question: the view on screen, a constant, a world without sticks, padding without
    # tiling, and the right sweep on the wrong matmul.
    dict(cell="most_traffic_per_byte", kind="echo-expected", fails=["most_traffic_per_byte_tests"], code='''
def most_traffic_per_byte(m, n, lengths):
    p = sticks.point()  # the printed default view, K = 100 of (128, 100) @ (100, 1024)
    return int(p["k"]), float(p["bytes_per_useful_byte"])
'''),
    dict(cell="most_traffic_per_byte", kind="hard-code-visible", fails=["most_traffic_per_byte_tests"], code='''
def most_traffic_per_byte(m, n, lengths):
    return (65, 1.04) if 65 in lengths else (int(lengths[0]), 1.04)
'''),
    dict(cell="most_traffic_per_byte", kind="cpu-reference", fails=["most_traffic_per_byte_tests"], code='''
def most_traffic_per_byte(m, n, lengths):
    return int(lengths[0]), 1.0  # a CPU's view: every useful byte moved once, no sticks, no re-reads
'''),
    dict(cell="most_traffic_per_byte", kind="cpu-reference", fails=["most_traffic_per_byte_tests"], code='''
def most_traffic_per_byte(m, n, lengths):
    e = STICK // 2  # A's padding share alone: ignores B, C and the re-reads that tiling adds

    def share(k):
        return (-(-k // e) * e - k) / (-(-k // e) * e)
    k = max(lengths, key=share)
    return int(k), 1.0 / (1.0 - share(k))
'''),
    dict(cell="most_traffic_per_byte", kind="read-off-object", fails=["most_traffic_per_byte_tests"], code='''
def most_traffic_per_byte(m, n, lengths):
    rows = sticks.sweep("k", list(lengths))  # the explorer's own m and n, not the matmul asked about
    worst = rows.loc[rows["bytes_per_useful_byte"].idxmax()]
    return int(worst["k"]), float(worst["bytes_per_useful_byte"])
'''),
    dict(cell="most_traffic_per_byte", kind="call-reference", fails=["most_traffic_per_byte_tests"], code='''
try:
    from common.explore.sticks_view import most_traffic_per_byte
except ImportError:
    most_traffic_per_byte = None
'''),
]
