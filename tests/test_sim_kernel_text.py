"""Kernel listings of the simulated Spyre compiler: the clone reproducer of the stick_copy bug, correct and faulty."""
import importlib.util
from pathlib import Path

import pytest
import torch

from common.chips import get_chip
from common.debug import kernel_text as KT

STICK = int(get_chip("spyre").fact("stick_bytes"))
PER_STICK = STICK // 2  # fp16 elements per stick
# The Deep Dive's grader-side answer (its graded stub): the first element no copy range covers.
_SPEC = importlib.util.spec_from_file_location(
    "deepdive5_answers", Path(__file__).resolve().parents[1] / "course5_debug/source/deepdive5_spyre/answers.py"
)
_ANSWERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_ANSWERS)
first_uncovered = _ANSWERS.first_uncovered


@pytest.fixture(scope="module")
def runs():
    return {(n, faulty): KT.compile_clone(n, faulty=faulty) for n in (63, 64, 65, 128) for faulty in (False, True)}


def _copied(frame):
    return [tuple(r) for r in frame["copied"]]


@pytest.mark.parametrize("n", [63, 64, 65, 128])
def test_correct_compiles_cover_every_element(runs, n):
    run = runs[(n, False)]
    table = KT.kernel_table(run)
    assert list(table["op"]) == ["aten.clone"] and table["copy_range"][0] == (0, n)
    assert table["range_from"][0] == "program" and table["fault"][0] == ""
    sticks = KT.stick_ranges(run)
    assert len(sticks) == -(-n // PER_STICK)  # one row per stick of the single row
    assert sum(b - a for a, b in _copied(sticks)) == n and sticks["missed"].sum() == 0
    assert first_uncovered(_copied(sticks), n) is None
    assert torch.equal(run.out, run.x)


def test_faulty_65_stops_at_one_stick(runs):
    run = runs[(65, True)]
    assert KT.planted(run) == {"clone": "stick_copy"}
    row = KT.kernel_table(run).iloc[0]
    assert row["copy_range"] == (0, PER_STICK) and row["program_range"] == (0, 65)
    assert row["range_from"] == "fault rule"
    sticks = KT.stick_ranges(run)
    assert [tuple(e) for e in sticks["elements"]] == [(0, 64), (64, 65)]
    assert _copied(sticks) == [(0, 64), (64, 64)] and list(sticks["missed"]) == [0, 1]
    assert first_uncovered(_copied(sticks), 65) == 64
    text = KT.describe(run)
    assert "fault rule" in text and "misses 1" in text and "misses" not in KT.describe(runs[(65, False)])


@pytest.mark.parametrize("n", [63, 64, 128])
def test_faulty_compiles_of_whole_or_single_sticks_are_still_right(runs, n):
    run = runs[(n, True)]
    assert first_uncovered(_copied(KT.stick_ranges(run)), n) is None
    assert torch.equal(run.out, run.x)


@pytest.mark.parametrize("n", [63, 64, 65, 128])
def test_transfer_log_is_identical_with_and_without_the_fault(runs, n):
    good, bad = KT.transfer_log(runs[(n, False)]), KT.transfer_log(runs[(n, True)])
    assert good.equals(bad) and len(good) == 2  # one launch, one DMA
    dma = good[good["kind"] == "dma"].iloc[0]
    whole_sticks = -(-n // PER_STICK) * STICK  # the DMA moves whole sticks, padding included
    assert dma["lpddr_read"] == dma["lpddr_write"] == whole_sticks
    assert runs[(n, False)].report.counters == runs[(n, True)].report.counters


def test_numerics_faulty_last_element_differs_the_others_match(runs):
    run = runs[(65, True)]
    wrong = (run.out != run.x).nonzero().flatten().tolist()
    assert wrong == [64] and torch.equal(run.out[:64], run.x[:64]) and run.out[64] == 0


def test_byte_ranges_and_cores_follow_the_stick_layout(runs):
    sticks = KT.stick_ranges(runs[(65, False)])
    assert [tuple(b) for b in sticks["bytes"]] == [(0, STICK), (STICK, STICK + 2)]
    assert list(sticks["core"]) == [0, 1] and list(sticks["padding_slots"]) == [0, PER_STICK - 1]
    assert KT.kernel_table(runs[(65, False)])["split"][0] == "stick/2"
    # a (3, 100) clone: device layout (2 sticks, 3 rows, 64); stick s of row r at byte (s * 3 + r) * 128
    two_d = KT.stick_ranges(KT.compile_clone((3, 100), faulty=True))
    assert sorted(two_d["core"]) == list(range(6))
    assert [tuple(b) for b in two_d["bytes"]][:2] == [(0, STICK), (3 * STICK, 3 * STICK)]
    assert list(two_d["missed"]) == [0, 100 - PER_STICK] * 3


@pytest.mark.parametrize("shape", [(130,), (3, 100), (2, 65)])
def test_first_uncovered_element_is_the_first_wrong_value(shape):
    run = KT.compile_clone(shape, faulty=True)
    sticks = KT.stick_ranges(run)
    first = first_uncovered(_copied(sticks[sticks["row"] == 0]), shape[-1])
    wrong = (run.out != run.x).reshape(-1, shape[-1])[0].nonzero().flatten().tolist()
    assert first == wrong[0] == PER_STICK * (shape[-1] // PER_STICK)


def test_first_uncovered_by_hand():
    assert first_uncovered([(0, 4), (6, 10)], 10) == 4
    assert first_uncovered([(5, 10), (0, 5)], 10) is None
    assert first_uncovered([(3, 3), (0, 2)], 3) == 2
    assert first_uncovered([], 1) == 0
    assert first_uncovered([(0, 99)], 7) is None


def test_pad_workaround_survives_the_fault_and_a_copy_free_graph_runs_fault_free():
    x = KT.clone_input(65)

    def padded(t):
        pad = -t.shape[-1] % PER_STICK
        return torch.nn.functional.pad(t, (0, pad)).clone()[..., :t.shape[-1]]

    assert torch.equal(KT.run_with_fault(padded, x), x)
    assert not torch.equal(KT.run_with_fault(lambda t: t.clone(), x), x)
    assert torch.equal(KT.run_with_fault(lambda t: t * 1, x), x)  # no copy kernel for the fault to hit


def test_every_copy_faulty_tells_a_fixed_copy_from_an_avoided_one():
    x = KT.clone_input((3, 65))

    def padded(t):
        pad = -t.shape[-1] % PER_STICK
        return torch.nn.functional.pad(t, (0, pad)).clone()[..., :t.shape[-1]]

    def two_copies(t):  # a decoy aligned copy next to the real, unaligned one: the fault must hit both
        return t.clone() + torch.ones(PER_STICK).clone()[:1]

    fixed = KT.run_with_every_copy_faulty(padded, x)
    assert torch.equal(fixed.out, x) and KT.faulty_copy_elements(fixed) == 3 * 2 * PER_STICK  # padded to 2 sticks
    assert KT.run_with_every_copy_faulty(lambda t: t * 1, x) is None  # routed around: nothing to plant on
    both = KT.run_with_every_copy_faulty(two_copies, x)
    assert len(KT.planted(both)) == 2 and KT.faulty_copy_elements(both) == 3 * 65 + PER_STICK
    assert not torch.equal(both.out, x + 1)  # the unaligned copy still loses its tail
