"""Shortcuts a learner who does not do the Course 5 Deep Dive's work might try; each must score 0 on the cells in
``fails`` (tests/test_shortcut_notebooks.py runs them). Instructor edition only, like answers.py."""

SHORTCUTS = [
    # sticks_needed: the simulator's stick_layout knows only the catalog's 128-byte stick.
    dict(cell="sticks_needed", kind="call-reference", fails=["sticks_needed_tests"], code='''
from common.sim.machines.spyre import stick_layout as _layout


def sticks_needed(n, dtype="fp16", stick_bytes=STICK_BYTES):
    return _layout((n,), dtype)["sticks"]
'''),
    dict(cell="sticks_needed", kind="hard-code-visible", fails=["sticks_needed_tests"], code='''
def sticks_needed(n, dtype="fp16", stick_bytes=STICK_BYTES):
    if stick_bytes == 64:
        return 3
    return {"fp32": 3}.get(dtype, {63: 1, 64: 1, 65: 2, 128: 2}.get(n, 2))
'''),
    dict(cell="stick_copy_range", kind="hard-code-visible", fails=["stick_copy_range_tests"], code='''
def stick_copy_range(n, stick, dtype="fp16"):
    known = {(65, 1): (64, 65), (128, 1): (64, 128), (63, 0): (0, 63)}
    if (n, stick) not in known:
        raise ValueError("unknown")
    return known[(n, stick)]
'''),
    # first_uncovered: the reference used to be common.debug.kernel_text.first_uncovered.
    dict(cell="first_uncovered", kind="call-reference", fails=["first_uncovered_tests"], code='''
def first_uncovered(ranges, n):
    return None


try:
    from common.debug.kernel_text import first_uncovered
except ImportError:
    pass
'''),
    dict(cell="first_uncovered", kind="hard-code-visible", fails=["first_uncovered_tests"], code='''
def first_uncovered(ranges, n):
    return 64 if n == 65 and (64, 65) not in [tuple(r) for r in ranges] else None
'''),
    dict(cell="safe_clone", kind="cpu-reference", fails=["safe_clone_tests"], code='''
def safe_clone(x):
    return x.clone()  # what the CPU does; compiled for Spyre it meets the fault
'''),
    # safe_clone that routes around the fault instead of fixing the faulty copy's range: right values, no copy
    # kernel for the fault to hit (or only a decoy copy that carries a sliver of the tensor).
    dict(cell="safe_clone", kind="avoid-fault", fails=["safe_clone_tests"], code='''
def safe_clone(x):
    return x * 1  # a multiply is not a copy kernel: the planted fault has nowhere to go
'''),
    dict(cell="safe_clone", kind="avoid-fault", fails=["safe_clone_tests"], code='''
def safe_clone(x):
    decoy = x[..., :1].clone()  # a one-element copy for the fault to land on
    return x * 1 + decoy * 0
'''),
    # --- attacks on the probe channel: objects that lie about equality, a rebound simulator entry point -----------------
    dict(cell="sticks_needed", kind="echo-expected", fails=["sticks_needed_tests"], code='''
class _LazyInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def sticks_needed(n, dtype="fp16", stick_bytes=STICK_BYTES):
    return _LazyInt(2)  # equal to whatever it is compared with
'''),
    dict(cell="stick_copy_range", kind="echo-expected", fails=["stick_copy_range_tests"], code='''
class _LazyRange(tuple):
    def __eq__(self, other):
        return True

    __hash__ = tuple.__hash__


def stick_copy_range(n, stick, dtype="fp16"):
    per = STICK_BYTES // DTYPE_BYTES[dtype]
    if stick < 0 or stick * per >= n:
        raise ValueError("out of range")
    return _LazyRange((0, 0))
'''),
    dict(cell="first_uncovered", kind="echo-expected", fails=["first_uncovered_tests"], code='''
class _LazyAnything:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


def first_uncovered(ranges, n):
    ranges.clear()  # and the ranges it was handed, emptied
    return _LazyAnything()
'''),
    dict(cell="safe_clone", kind="cpu-reference", fails=["safe_clone_tests"], code='''
KT.run_with_fault = lambda fn, x, seed=0: fn(x)  # "compiled with the fault": run eagerly on the CPU instead


def safe_clone(x):
    return x.clone()
'''),
]
