"""Shortcuts a learner who does not do the Course 5 Deep Dive's work might try; each must score 0 on the cells in
``fails`` (tests/test_lazy_notebooks.py runs them). Instructor edition only, like answers.py."""

SHORTCUTS = [
    # sticks_needed: the simulator's stick_layout knows only the catalog's 128-byte stick.
    dict(cell="sticks_needed", kind="call-reference", fails=["sticks_needed_tests"], code='''
from common.sim.spyre import stick_layout as _layout


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
    # first_uncovered: the reference used to be common.sim.kernel_text.first_uncovered.
    dict(cell="first_uncovered", kind="call-reference", fails=["first_uncovered_tests"], code='''
def first_uncovered(ranges, n):
    return None


try:
    from common.sim.kernel_text import first_uncovered
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
]
