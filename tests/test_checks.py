"""The checking helpers: right answers pass, wrong ones fail with a useful message, and tricks do not work."""

from __future__ import annotations

import builtins
import math

import numpy as np
import pytest
import torch

import common.checks as checks
from common.checks import CheckFailed, check_equal, grader


class AlwaysEqual:
    """The classic trick: an object that claims to equal anything."""

    def __eq__(self, other):
        return True

    def __float__(self):
        return 1.0

    shape = (2, 2)
    dtype = torch.float32


class EqualToEveryType(type):
    def __eq__(cls, other):
        return True

    def __hash__(cls):
        return 0


class NumberLookalike(metaclass=EqualToEveryType):
    """Its *class* claims to equal float and int: ``type(x) in (float, int)`` would let it through."""

    def __float__(self):
        return 250.0


class SneakyTensor(torch.Tensor):
    """A tensor subclass whose torch functions all answer 'yes'."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True


def test_check_tensor_passes_and_prints_a_tick(capsys):
    checks.check_tensor("relu", torch.tensor([0.0, 2.0]), torch.tensor([0.0, 2.0]))
    assert capsys.readouterr().out.strip() == "✔ relu: correct"


def test_check_tensor_failure_shows_yours_expected_and_hint(capsys):
    with pytest.raises(CheckFailed, match="values differ at 1 of 2 positions"):
        checks.check_tensor("relu", torch.tensor([0.0, -2.0]), torch.tensor([0.0, 2.0]), hint="negatives → 0")
    out = capsys.readouterr().out
    assert "✘ relu" in out and "yours -2.0, expected 2.0" in out and "hint: negatives → 0" in out


@pytest.mark.parametrize(
    "yours, message",
    [
        (torch.zeros(3), "shape is (3,), expected (2, 2)"),
        (torch.zeros(2, 2, dtype=torch.float64), "dtype is torch.float64, expected torch.float32"),
        (AlwaysEqual(), "expected a torch.Tensor, got AlwaysEqual"),
        ([[0.0, 0.0], [0.0, 0.0]], "expected a torch.Tensor, got list"),
        (torch.zeros(2, 2).as_subclass(SneakyTensor), "expected a torch.Tensor, got SneakyTensor"),
        (torch.zeros(2, 2).to_sparse(), "dense"),
        (torch.zeros(2, 2, device="meta"), "cannot be read"),
    ],
)
def test_check_tensor_rejects_wrong_kinds_of_answer(yours, message):
    with pytest.raises(CheckFailed, match=message.replace("(", r"\(").replace(")", r"\)")):
        grader.assert_tensor(yours, torch.zeros(2, 2))


def test_nan_matches_only_nan():
    grader.assert_tensor(torch.tensor([math.nan, 1.0]), torch.tensor([math.nan, 1.0]))
    with pytest.raises(CheckFailed):
        grader.assert_tensor(torch.tensor([math.nan, 1.0]), torch.tensor([0.0, 1.0]))
    with pytest.raises(CheckFailed):
        grader.assert_tensor(torch.tensor([0.0, 1.0]), torch.tensor([math.nan, 1.0]))


def test_reference_may_be_a_literal_and_dtype_can_be_required():
    grader.assert_tensor(torch.tensor([[1, 2]]), [[1, 2]])
    grader.assert_tensor(torch.tensor([0.5], dtype=torch.float16), [0.5], dtype=torch.float16)
    with pytest.raises(CheckFailed, match="dtype"):
        grader.assert_tensor(torch.tensor([0.5]), [0.5], dtype=torch.float16)


def test_tolerances_are_relative_and_absolute():
    grader.assert_tensor(torch.tensor([1000.05]), torch.tensor([1000.0]), rtol=1e-4, atol=0.0)
    with pytest.raises(CheckFailed):
        grader.assert_tensor(torch.tensor([1000.5]), torch.tensor([1000.0]), rtol=1e-4, atol=0.0)


def test_large_tensors_use_the_captured_allclose():
    namespace = vars(checks)  # the module is read-only: change the limit through its dict, then restore it
    old = namespace["_PYTHON_COMPARE_LIMIT"]
    namespace["_PYTHON_COMPARE_LIMIT"] = 4
    try:
        grader.assert_tensor(torch.ones(3, 3), torch.ones(3, 3))
        with pytest.raises(CheckFailed, match="values differ"):
            grader.assert_tensor(torch.ones(3, 3), torch.zeros(3, 3))
    finally:
        namespace["_PYTHON_COMPARE_LIMIT"] = old


def test_monkeypatched_torch_does_not_fool_the_grader(monkeypatch):
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(torch, "equal", lambda *a, **k: True)
    monkeypatch.setattr(torch.Tensor, "shape", property(lambda self: torch.Size([2, 2])))
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: [[0.0, 0.0], [0.0, 0.0]])
    monkeypatch.setattr(torch.Tensor, "__torch_function__", classmethod(lambda cls, *a, **k: True))
    monkeypatch.setattr(math, "isfinite", lambda x: True)
    with pytest.raises(CheckFailed, match="shape"):
        grader.assert_tensor(torch.ones(3), torch.zeros(2, 2))
    with pytest.raises(CheckFailed, match="values differ"):
        grader.assert_tensor(torch.ones(2, 2), torch.zeros(2, 2))
    with pytest.raises(CheckFailed, match="finite"):
        grader.assert_scalar(math.inf, 1.0)


def test_rebound_builtins_do_not_fool_the_grader():
    """Rebinding builtins breaks most code (pytest too), so restore them before asserting anything."""
    saved = builtins.type, builtins.all, builtins.abs
    failures = []
    builtins.type = lambda *a: torch.Tensor
    builtins.all = lambda *a: True
    builtins.abs = lambda x: 0.0
    try:
        for yours in (AlwaysEqual(), torch.ones(2, 2)):
            try:
                grader.assert_tensor(yours, torch.zeros(2, 2))
            except CheckFailed as exc:
                failures.append(str(exc))
    finally:
        builtins.type, builtins.all, builtins.abs = saved
    assert len(failures) == 2, failures
    assert "got AlwaysEqual" in failures[0] and "values differ" in failures[1]


def test_the_module_and_the_grader_are_read_only():
    with pytest.raises(AttributeError, match="read-only"):
        checks.check_tensor = lambda *a, **k: None
    with pytest.raises(AttributeError, match="read-only"):
        del checks.grader
    with pytest.raises(AttributeError):
        grader.assert_tensor = lambda *a, **k: None
    assert checks.check_tensor.__module__ == "common.checks"


def test_grader_messages_do_not_reveal_reference_values(capsys):
    with pytest.raises(CheckFailed) as failure:
        grader.assert_tensor(torch.tensor([1.25, 7.5]), torch.tensor([3.875, 7.5]), name="secret")
    assert "hidden test 'secret' failed" in str(failure.value)
    assert "3.875" not in str(failure.value)
    assert capsys.readouterr().out == ""  # silent


@pytest.mark.parametrize(
    "yours", [np.float64(2.0), True, "2.0", torch.tensor(2.0), AlwaysEqual(), NumberLookalike()]
)
def test_scalar_checks_want_exact_python_numbers(yours):
    with pytest.raises(CheckFailed, match="expected a Python number"):
        grader.assert_scalar(yours, 2.0)


def test_scalar_tolerance():
    checks.check_scalar("intensity", 2.0000001, 2.0)
    grader.assert_scalar(3, 3.0)
    with pytest.raises(CheckFailed, match="off by"):
        grader.assert_scalar(2.1, 2.0, rel=0.01)


def test_check_equal_compares_plain_data_exactly():
    checks.check_equal("tiles", (2, [3, "a"], {"k": None}), (2, [3, "a"], {"k": None}))
    with pytest.raises(CheckFailed):
        checks.check_equal("flag", 1, True)
    with pytest.raises(CheckFailed, match="plain data"):
        checks.check_equal("eq", AlwaysEqual(), 3)
    with pytest.raises(CheckFailed):
        grader.assert_equal({"a": 1}, {"a": 1, "b": 2})


def test_check_in_range_and_check_type():
    checks.check_in_range("speedup", 3.2, 1.5, 100.0)
    with pytest.raises(CheckFailed, match="outside"):
        grader.assert_in_range(0.5, 1.5, 100.0)
    with pytest.raises(CheckFailed, match="outside"):
        grader.assert_in_range(math.nan, -math.inf, math.inf)
    checks.check_type("result", {"a": 1}, dict)
    with pytest.raises(CheckFailed, match=r"expected one of \(int\), got bool"):
        grader.assert_type(True, int)
    with pytest.raises(CheckFailed, match="got NumberLookalike"):
        grader.assert_type(NumberLookalike(), float)
    with pytest.raises(CheckFailed):
        grader.assert_equal(NumberLookalike(), 250.0)


def test_reference_literal_round_trips():
    reference = torch.tensor([[1.0, 2.5], [-3.25, 0.1]])
    literal = checks.reference_literal(reference)
    assert literal == "[[1.0, 2.5], [-3.25, 0.1]]"
    grader.assert_tensor(reference.clone(), eval(literal))


def test_check_equal_never_prints_the_expected_discrete_answer(capsys):
    """A dummy value must not make the visible check reveal the answer: only its structure."""
    cases = [("cat", "clone_1"), (["a", "b"], ["a", "clone_1"]), ({"r1": "cat"}, {"r1": "clone_1"}),
             (["a"], ["a", "clone_1"]), (3, "clone_1")]  # fmt: skip
    for yours, expected in cases:
        with pytest.raises(CheckFailed):
            check_equal("answer", yours, expected)
        out = capsys.readouterr().out
        assert "clone_1" not in out and "✘ answer" in out
    with pytest.raises(CheckFailed):
        check_equal("layers", {"r1": "cat", "r2": "mem"}, {"r1": "cat", "r3": "mem"})
    assert "keys missing: ['r3']" in capsys.readouterr().out  # the keys are the learner's own to fix


def test_a_numpy_bool_is_named_as_such(capsys):
    with pytest.raises(CheckFailed):
        check_equal("flag", np.bool_(True), True)
    assert "got numpy.bool" in capsys.readouterr().out  # not "expected plain data (bool), got bool"
