"""Predict, then reveal: a prediction is committed before the answer, judged side by side with it, kept beside
the landscape map, and a change after the reveal is kept and flagged, never judged in place of the first."""
import json

import pytest

from common.errors import DFAError
from common.explore import kendall_tau, predict
from common.explore.predict import GENESIS, PREDICTIONS_FILE, _digest
from common.landscape import LandscapeMap

MACHINES = ("gpu", "tpu", "wse", "lpu", "spyre")
SCORES = {"gpu": 100.0, "tpu": 80.0, "wse": 900.0, "lpu": 400.0, "spyre": 50.0}  # best: wse, lpu, gpu, tpu, spyre


@pytest.fixture
def lm(tmp_path):
    return LandscapeMap(tmp_path / "landscape_map.json")


def ranking(lm, qid="q1"):
    return predict(qid, "rank the machines by decode tokens/s", kind="ranking", choices=MACHINES, lm=lm)


def test_kendall_tau_is_one_for_the_same_order_and_minus_one_for_the_reverse():
    order = ["a", "b", "c", "d"]
    assert kendall_tau(order, order) == 1.0 and kendall_tau(order[::-1], order) == -1.0
    assert kendall_tau(["b", "a", "c", "d"], order) == pytest.approx((5 - 1) / 6)


def test_a_reveal_before_a_commit_is_refused_in_one_line(lm):
    with pytest.raises(DFAError, match="commit one first") as err:
        ranking(lm).reveal(SCORES)
    assert "\n" not in str(err.value)


def test_the_reveal_judges_the_ranking_side_by_side_and_adds_map_rows(lm, capsys):
    p = ranking(lm)
    p.commit(["WSE", "dfa_gpu", "lpu"])
    table = p.reveal(SCORES)
    # among the three ranked, the outcome order is wse, lpu, gpu
    assert table["machine"].tolist() == ["wse", "gpu", "lpu"]
    assert table["prediction"].tolist() == [1, 2, 3] and table["outcome"].tolist() == [1, 3, 2]
    assert table["hit"].tolist() == ["hit", "miss", "miss"]
    assert table.attrs["rank_distance"] == 2 and table.attrs["kendall_tau"] == pytest.approx(1 / 3)
    out = capsys.readouterr().out
    assert "SIMULATED" in out and "kendall_tau" in out
    assert lm.get("GPU", "prediction: rank the machines by decode tokens/s").startswith("#2 predicted, #3")
    assert lm.get("Spyre", "prediction: rank the machines by decode tokens/s") is None  # not ranked


def test_an_order_and_a_missing_score_are_outcomes_too(lm):
    p = ranking(lm)
    p.commit(["spyre", "tpu", "gpu"])
    assert p.reveal(["gpu", "tpu", "spyre", "wse", "lpu"])["outcome"].tolist() == [3, 2, 1]
    # a machine the model does not fit (NaN) goes last
    assert p.reveal({**SCORES, "gpu": float("nan")})["outcome"].tolist() == [2, 1, 3]


def test_the_commit_is_kept_beside_the_map_with_a_time_and_a_hash_chain(lm):
    p = ranking(lm)
    first = p.commit(["wse", "lpu", "gpu"])
    again = p.commit(["wse", "lpu", "gpu"])  # re-running the cell adds nothing
    second = p.commit(["lpu", "wse", "gpu"])
    doc = json.loads((lm.path.parent / PREDICTIONS_FILE).read_text())
    commits = doc["questions"]["q1"]["commits"]
    assert len(commits) == 2 and again == first and commits[1]["sha256"] == second["sha256"]
    assert len(first["sha256"]) == 64 and first["at"].endswith("+00:00")
    assert ranking(lm).verify() == []  # a new object on the same file sees it (a restarted kernel)
    commits[0]["value"] = ["gpu", "lpu", "wse"]  # edit the file behind its back
    (lm.path.parent / PREDICTIONS_FILE).write_text(json.dumps(doc))
    assert [b.split(" (")[0] for b in ranking(lm).verify()] == ["q1: commit 0"]
    commits[0]["sha256"] = _digest(GENESIS, "q1", commits[0]["value"], commits[0]["at"])  # and re-hash it
    (lm.path.parent / PREDICTIONS_FILE).write_text(json.dumps(doc))
    assert [b.split(" (")[0] for b in ranking(lm).verify()] == ["q1: commit 1"]  # the chain gives it away


def test_a_change_after_the_reveal_is_kept_flagged_and_not_judged(lm, capsys):
    p = ranking(lm)
    p.commit(["spyre", "tpu", "gpu"])
    p.reveal(SCORES)
    late = p.commit(["wse", "lpu", "gpu"])
    assert late["after_reveal"] and "AFTER the reveal" in capsys.readouterr().out
    table = ranking(lm).reveal(SCORES)
    assert table["machine"].tolist() == ["spyre", "tpu", "gpu"]  # the first prediction is still the judged one
    assert table.attrs["changed_after_reveal"] == [["wse", "lpu", "gpu"]]
    assert "changed after reveal" in capsys.readouterr().out
    commits = json.loads((lm.path.parent / PREDICTIONS_FILE).read_text())["questions"]["q1"]["commits"]
    assert [c["value"] for c in commits] == [["spyre", "tpu", "gpu"], ["wse", "lpu", "gpu"]]


def test_a_value_prediction_is_judged_by_its_ratio(lm):
    p = predict("q2", "GPU decode tokens/s at batch 1", kind="value", system="gpu", lm=lm, tolerance=2.0)
    p.commit(50)
    table = p.reveal(150.0)
    assert table["ratio"].tolist() == [3.0] and table["hit"].tolist() == ["miss"]
    assert lm.get("GPU", "prediction: GPU decode tokens/s at batch 1") == "50 predicted, 150 simulated (miss)"
    p2 = predict("q3", "same, within 2x", kind="value", system="gpu", lm=lm)
    p2.commit(100)
    assert p2.reveal(150.0)["hit"].tolist() == ["hit"]

    with pytest.raises(DFAError, match="tolerance must be a number > 1"):
        predict("q3", "?", kind="value", lm=lm, tolerance=1.0)


def test_a_tight_tolerance_separates_close_values(lm):
    # the Course 4 Deep Dive's 72/64 bytes ratios lie within 1.07-1.25: a factor 2 would make every answer a hit
    near = predict("q6", "ratio", kind="value", system="spyre", lm=lm, tolerance=1.1)
    near.commit(1.2)
    assert near.reveal(1.25)["hit"].tolist() == ["hit"]
    far = predict("q7", "ratio", kind="value", system="spyre", lm=lm, tolerance=1.1)
    far.commit(1.07)
    assert far.reveal(1.25)["hit"].tolist() == ["miss"]  # 1.25 / 1.07 = 1.17 > 1.1


def test_tied_scores_keep_the_learners_order(lm):
    # equal scores (e.g. two compilers with 9 device programs each) are one place shared: either order is a hit
    tied = {"gpu": 1 / 12, "tpu": 1 / 11, "wse": 1 / 9, "lpu": 1 / 9, "spyre": 1 / 2}
    for qid, order in (("q8", ["spyre", "wse", "lpu", "tpu", "gpu"]), ("q9", ["spyre", "lpu", "wse", "tpu", "gpu"])):
        p = ranking(lm, qid)
        p.commit(order)
        table = p.reveal(tied)
        assert table["hit"].tolist() == ["hit"] * 5 and table.attrs["kendall_tau"] == 1.0


@pytest.mark.parametrize("kind, value, words", [
    ("ranking", ["gpu", "tpu"], "rank at least 3"), ("ranking", ["gpu", "gpu", "tpu"], "each machine once"),
    ("ranking", ["gpu", "npu", "tpu"], "unknown machine 'npu'"), ("ranking", "gpu", "a list of machines"),
    ("value", float("inf"), "one finite number"), ("value", True, "one finite number"),
])
def test_a_bad_prediction_is_one_line(lm, kind, value, words):
    p = predict("q4", "?", kind=kind, choices=MACHINES, lm=lm)
    with pytest.raises(DFAError, match=words) as err:
        p.commit(value)
    assert "\n" not in str(err.value)
    assert not (lm.path.parent / PREDICTIONS_FILE).exists()


def test_an_unknown_kind_and_too_few_choices_are_refused(lm):
    with pytest.raises(DFAError, match="unknown prediction kind 'guess'"):
        predict("q5", "?", kind="guess", lm=lm)
    with pytest.raises(DFAError, match="at least 3 distinct choices"):
        predict("q5", "?", kind="ranking", choices=("gpu", "tpu"), lm=lm)


def test_the_form_commits_and_locks(lm):
    pytest.importorskip("ipywidgets")
    p = ranking(lm)
    form = p.form()
    menus = [c for c in form.children if c.__class__.__name__ == "Dropdown"]
    button = next(c for c in form.children if c.__class__.__name__ == "Button")
    for menu, machine in zip(menus, ("lpu", "wse", "tpu"), strict=False):
        menu.value = machine
    button.click()
    assert p.record()["commits"][-1]["value"] == ["lpu", "wse", "tpu"]
    assert button.disabled and all(m.disabled for m in menus)
