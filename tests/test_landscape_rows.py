"""Learner-written landscape rows: the structural check a learner sees and the vocabulary check the grader runs."""
from __future__ import annotations

from common.landscape.map import SYSTEMS
from common.landscape.rows import add_rows, row_problems, vocabulary_misses

ATTRS = ("scheduling granularity",)
GOOD = {"scheduling granularity": {
    "GPU": "kernels launched by the host at run time", "TPU": "XLA fusions in a static order",
    "WSE": "per-PE tasks fired by fabric messages", "LPU": "every instruction placed at compile time",
    "Spyre": "SuperDSC ops in bundles the host launches"}}
VOCAB = {"scheduling granularity": {
    "GPU": ((r"kernel", r"launch"), (r"compile[- ]time",)),
    "LPU": ((r"compile[- ]time", r"static", r"cycle"), (r"run[- ]time", r"dynamic"))}}


def test_complete_rows_in_own_words_pass_both_checks():
    assert row_problems(GOOD, ATTRS) == []
    assert vocabulary_misses(GOOD, VOCAB) == []


def test_structural_problems_name_the_cell():
    same = {"scheduling granularity": dict.fromkeys(SYSTEMS, "one kernel at a time")}
    assert any("same text" in p for p in row_problems(same, ATTRS))
    blank = {"scheduling granularity": {**GOOD["scheduling granularity"], "WSE": "..."}}
    assert any("WSE" in p and "own" in p for p in row_problems(blank, ATTRS))
    short = {"scheduling granularity": {**GOOD["scheduling granularity"], "TPU": "static"}}
    assert any("TPU: 1 words" in p for p in row_problems(short, ATTRS))
    assert any("missing" in p for p in row_problems({}, ATTRS))
    pasted = {**GOOD, "fusion": dict(GOOD["scheduling granularity"])}
    assert any("GPU: the same text under two attributes" in p for p in row_problems(pasted, (*ATTRS, "fusion")))
    assert any("unknown attributes" in p for p in row_problems({**GOOD, "colour": {}}, ATTRS))
    assert row_problems(None, ATTRS) == ["the rows must be a dict attribute -> {system: text}, got NoneType"]


def test_keyword_stuffing_and_wrong_mechanisms_miss():
    stuffed = {"scheduling granularity": {**GOOD["scheduling granularity"],
                                          "LPU": "static compile-time dynamic run-time kernels"}}
    assert vocabulary_misses(stuffed, VOCAB) == [("scheduling granularity", "LPU")]
    vague = {"scheduling granularity": {**GOOD["scheduling granularity"], "GPU": "fast parallel chip here"}}
    assert vocabulary_misses(vague, VOCAB) == [("scheduling granularity", "GPU")]


def test_add_rows_tags_them_as_the_learners(tmp_path):
    from common.landscape.map import LandscapeMap

    lm = LandscapeMap(tmp_path / "m.json")
    add_rows(lm, GOOD, course=2)
    assert lm.get("LPU", "scheduling granularity") == "every instruction placed at compile time"
    assert {r["source"] for r in lm.rows} == {"learner"}
