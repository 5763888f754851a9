"""Hidden tests as probe + judgement (common/grading/verdicts/probe.py, judge.py), without a sandbox: the wire format's
checks, what leaves a notebook before it is run, and how each kind of bad probe data is judged."""

from __future__ import annotations

import json
import math

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook

from common.grading.sandbox.sandbox_events import Execution
from common.grading.verdicts.judge import (
    FINISH_LINE,
    Judgement,
    judge_execution,
    parts,
    probe_payloads,
    take_out,
    verdict,
)
from common.grading.verdicts.probe import (
    MAX_DEPTH,
    MAX_PROBE_BYTES,
    PROBE_MIME,
    Probe,
    ProbeDataError,
    decode,
    encode,
    graph_nodes,
    variant_seed,
)

TEST_CELL = """\
check(relu)
### BEGIN HIDDEN TESTS
from common.grading.verdicts.probe import Probe
probe = Probe()
probe.send("y", relu(torch.tensor([-1.0, 2.0])))
### JUDGEMENT
from answers import SECRET_KEY
data, seed = probe.received()
assert data["y"].tolist() == [0.0, 2.0], "relu is wrong"
### END HIDDEN TESTS
"""


def graded_nb():
    meta = {"nbgrader": {"grade": True, "grade_id": "relu_tests", "locked": True, "points": 2, "solution": False}}
    return new_notebook(
        cells=[new_code_cell("def relu(x): return x.clamp(min=0)"), new_code_cell(TEST_CELL, metadata=meta)]
    )


def sent(**items) -> dict:
    probe = Probe(seed=7)
    for name, value in items.items():
        probe.send(name, value)
    return {"probe": {"data": [probe.text()], "error": "", "timed_out": False}}


def errors(outputs) -> list[str]:
    return [f"{o['ename']}: {o['evalue']}" for o in outputs if o["output_type"] == "error"]


# ---- the wire format --------------------------------------------------------------------------------------


def test_plain_data_round_trips_as_fresh_objects():
    t = torch.randn(3, 4).to(torch.bfloat16)
    probe = Probe(seed=1)
    probe.send("t", t)
    probe.send("mixed", [1, 2.5, float("nan"), -math.inf, "s", None, True, (1, 2), {"k": [torch.arange(3)]}])
    probe.send("empty", torch.empty(0, 5, dtype=torch.int64))
    data, seed = probe.received()
    assert seed == 1 and torch.equal(data["t"], t) and data["t"] is not t
    mixed = data["mixed"]
    assert mixed[:2] == [1, 2.5] and math.isnan(mixed[2]) and mixed[3] == -math.inf
    assert mixed[4:8] == ["s", None, True, [1, 2]] and torch.equal(mixed[8]["k"][0], torch.arange(3))
    assert data["empty"].shape == (0, 5) and data["empty"].dtype == torch.int64


def test_what_is_sent_is_frozen_when_sent():
    probe, x = Probe(), torch.zeros(3)
    probe.send("x", x)
    x += 5  # the learner's code mutates the tensor after the probe sent it: the data does not change
    assert probe.received()[0]["x"].tolist() == [0.0, 0.0, 0.0]


def test_lying_objects_arrive_as_plain_values():
    class Anything(float):
        def __eq__(self, other):
            return True

    class Sneaky(torch.Tensor):
        def __eq__(self, other):
            return True

    probe = Probe()
    probe.send("f", Anything(1.0))
    probe.send("t", torch.zeros(2).as_subclass(Sneaky))
    data, _ = probe.received()
    assert type(data["f"]) is float and data["f"] != 2.0
    assert type(data["t"]) is torch.Tensor and not torch.equal(data["t"], torch.ones(2))


@pytest.mark.parametrize(
    "value",
    [object(), {1: "int key"}, torch.zeros(2, dtype=torch.float8_e4m3fn), lambda: 0],
    ids=["object", "int-key", "float8", "function"],  # stable ids: pytest-xdist workers must collect the same
)
def test_only_plain_data_can_be_sent(value):
    with pytest.raises(ProbeDataError):
        Probe().send("v", value)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps([1, 2]),
        json.dumps({"$dict": {"x": {"a": 1}}}),  # an untagged object
        json.dumps({"$dict": {"x": {"$float": "0.5"}}}),
        json.dumps({"$dict": {"x": {"$tensor": {"dtype": "float32", "shape": [2], "b64": "AAAA"}}}}),
        json.dumps({"$dict": {"x": {"$tensor": {"dtype": "object", "shape": [], "b64": ""}}}}),
        json.dumps({"$dict": {"x": {"$tensor": {"dtype": "float32", "shape": [-1], "b64": ""}}}}),
        json.dumps({"$dict": {"x": 10**60}}),
        json.dumps({"$dict": {"x": [[[]]]}}).replace("[[[]]]", "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)),
        "[" * 100_000 + "]" * 100_000,
        " " * (MAX_PROBE_BYTES + 1),
        None,
    ],
)
def test_garbage_is_refused_by_decode(text):
    with pytest.raises(ProbeDataError):
        decode(text)


def test_too_much_data_is_refused_at_both_ends():
    with pytest.raises(ProbeDataError):
        Probe().send("big", torch.zeros(MAX_PROBE_BYTES // 2))
    with pytest.raises(ProbeDataError):
        encode({"many": list(range(MAX_PROBE_BYTES // 4))})


def test_seeds_differ_per_learner_and_test_and_hide_the_salt():
    a = variant_seed("salt", "lab1", "alice", "t1")
    assert a == variant_seed("salt", "lab1", "alice", "t1")
    assert len({a, variant_seed("salt", "lab1", "bob", "t1"), variant_seed("salt", "lab1", "alice", "t2"),
                variant_seed("other", "lab1", "alice", "t1")}) == 4  # fmt: skip
    assert 0 <= a < 2**31


def test_graph_nodes_are_plain_data():
    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()))
    nodes = graph_nodes(gm)
    assert [n["op"] for n in nodes] == ["placeholder", "call_module", "call_module", "output"]
    assert json.loads(encode({"g": nodes}))  # sendable as it is


# ---- what leaves the notebook before it runs ----------------------------------------------------------------


def test_take_out_keeps_the_probe_and_removes_every_judgement():
    nb = graded_nb()
    judgements = take_out(nb, salt="s3cret", lab="lab1", student="alice")
    text = nbformat.writes(nb)
    assert "SECRET_KEY" not in text and "relu is wrong" not in text and "JUDGEMENT" not in text
    assert "s3cret" not in text
    source = nb.cells[1].source
    seed = variant_seed("s3cret", "lab1", "alice", "relu_tests")
    assert f"DFA_PROBE_SEED'] = '{seed}'" in source and FINISH_LINE in source and 'probe.send("y"' in source
    assert judgements[1].seed == seed and "relu is wrong" in judgements[1].source
    visible, probe, judgement = parts(TEST_CELL)
    assert visible.strip() == "check(relu)" and "probe.send" in probe and "SECRET_KEY" in judgement


# ---- judging what came back -------------------------------------------------------------------------------

ANSWERS = "SECRET_KEY = 'k'\n"


def judged(record, source=None):
    j = Judgement("relu_tests", source or parts(TEST_CELL)[2], 7)
    return verdict(j, record, answers=ANSWERS, salt="s", student="alice")


def test_right_data_passes_and_wrong_data_fails_with_the_judgements_message():
    assert judged(sent(y=torch.tensor([0.0, 2.0]))) == []
    assert errors(judged(sent(y=torch.tensor([-1.0, 2.0])))) == ["AssertionError: relu is wrong"]


@pytest.mark.parametrize(
    "record, why",
    [
        (None, "its probe did not run"),
        ({"probe": {"data": [], "error": "NotImplementedError: ", "timed_out": False}}, "your code raised"),
        ({"probe": {"data": [], "error": "", "timed_out": True}}, "ran past the cell's time limit"),
        ({"probe": {"data": [], "error": "", "timed_out": False}}, "sent no data"),
        ({"probe": {"data": ["{}", "{}"], "error": "", "timed_out": False}}, "more than once"),
        ({"probe": {"data": ["[1]"], "error": "", "timed_out": False}}, "data was refused"),
        ({"probe": "forged"}, "its probe did not run"),
    ],
)
def test_a_probe_that_sends_nothing_garbage_or_twice_scores_zero(record, why):
    (error,) = errors(judged(record))
    assert error.startswith("NotChecked") and why in error


def test_missing_or_mistyped_data_fails_the_test_not_the_grader():
    assert errors(judged(sent(other=1)))[0].startswith("KeyError")
    assert errors(judged(sent(y="a string")))[0].startswith("AttributeError")


def test_a_judgement_sees_none_of_the_notebook_s_names():
    # a judgement that (by mistake) reads a learner name fails: the grader's namespace is fresh
    (error,) = errors(judged(sent(y=torch.tensor([0.0, 2.0])), "data, seed = probe.received()\nrelu(1)"))
    assert error.startswith("NameError")


def test_the_answer_key_is_built_for_the_judgement_only():
    import sys

    source = "from answers import SECRET_KEY, GRADER_STUDENT\nassert (SECRET_KEY, GRADER_STUDENT) == ('k', 'alice')"
    assert judged(sent(), source) == []
    assert "answers" not in sys.modules


def test_a_cell_without_judgement_earns_nothing():
    (error,) = errors(verdict(Judgement("t", "", 1), sent(y=1), answers=None))
    assert error.startswith("NoJudgement")


def test_judge_execution_keeps_feedback_as_text_and_adds_the_verdict():
    execution = Execution(status="completed")
    good = sent(y=torch.tensor([0.0, 2.0]))
    forged_error = {"output_type": "error", "ename": "X", "evalue": "y", "traceback": []}
    execution.cells = {1: {"outputs": [forged_error], "execution_count": 2, **good}}
    judge_execution(execution, {1: Judgement("relu_tests", parts(TEST_CELL)[2], 7)}, answers=ANSWERS, salt="s",
                    student="alice")  # fmt: skip
    outputs = execution.cells[1]["outputs"]
    assert [o["output_type"] for o in outputs] == ["stream"] and "probe" not in execution.cells[1]


def test_probe_payloads_are_found_by_mime_type_only():
    probe = Probe()
    probe.send("a", 1)
    outputs = [
        {"output_type": "display_data", "data": {PROBE_MIME: probe.text(), "text/plain": "x"}},
        {"output_type": "display_data", "data": {"text/plain": PROBE_MIME}},
        {"output_type": "stream", "name": "stdout", "text": probe.text()},
    ]
    assert probe_payloads(outputs) == [probe.text()]


def test_every_answer_key_import_from_common_is_explained(monkeypatch):
    """A library function an answer key calls may compute a graded answer; each import is explained."""
    from pathlib import Path

    from common.grading.courses.course import all_courses
    from common.grading.editions import grader_only

    courses = all_courses(Path(__file__).resolve().parents[1])
    assert grader_only.answer_key_problems(courses) == []
    dropped = next(iter(grader_only.ANSWER_KEY_IMPORTS))
    monkeypatch.delitem(grader_only.ANSWER_KEY_IMPORTS, dropped)
    (problem,) = grader_only.answer_key_problems(courses)
    assert dropped[1] in problem and "ANSWER_KEY_IMPORTS" in problem


def test_dfa_check_names_a_test_cell_without_judgement_or_with_answers_in_its_probe():
    from common.grading.authoring.check import metadata_problems

    nb = graded_nb()
    for cell in nb.cells:
        cell.metadata.setdefault("nbgrader", {})["schema_version"] = 3
    nb.cells[0].metadata["nbgrader"] = {"grade": False, "grade_id": "relu", "locked": False, "schema_version": 3,
                                        "solution": True, "task": False}  # fmt: skip
    nb.cells[1].metadata["nbgrader"]["task"] = False
    assert metadata_problems(nb) == []
    nb.cells[1].source = TEST_CELL.replace("### JUDGEMENT\n", "")  # all of it a probe, answer key included
    problems = metadata_problems(nb)
    assert any("needs hidden tests with a probe and a judgement" in p for p in problems), problems
    nb.cells[1].source = TEST_CELL.replace("probe = Probe()", "from answers import SECRET_KEY\nprobe = Probe()")
    assert ["its probe imports answers" in p for p in metadata_problems(nb)] == [True]


# ---- a judgement that never ends (issue: an instructor's loop stalled `dfa autograde`) ----------------------

LOOPING = "data, seed = probe.received()\nwhile True:\n    try:\n        pass\n    except Exception:\n        pass\n"


def _judge_two_cells(monkeypatch) -> dict:
    """Cell 1's judgement loops (and swallows every Exception), cell 2's passes: judge both as the grader does."""
    from common.grading.verdicts import judge

    monkeypatch.setattr(judge, "JUDGEMENT_TIMEOUT_S", 0.2)  # 1 s once rounded up to whole seconds
    good = sent(y=torch.tensor([0.0, 2.0]))
    execution = Execution(status="completed")
    execution.cells = {1: {"outputs": [], **good}, 2: {"outputs": [], **good}}
    judgements = {1: Judgement("loops", LOOPING, 7), 2: Judgement("relu_tests", parts(TEST_CELL)[2], 7)}
    judge_execution(execution, judgements, answers=ANSWERS, salt="s", student="alice")
    return execution.cells


def _scores(cells: dict) -> list[float]:
    """nbgrader's own rule for an autograded test cell: full points unless an output is an error."""
    from nbgrader.utils import determine_grade

    meta = {"nbgrader": {"grade": True, "solution": False, "points": 2, "grade_id": "t"}}
    return [determine_grade(new_code_cell("", metadata=meta, outputs=cells[i]["outputs"]))[0] for i in (1, 2)]


def _assert_only_the_looping_test_fails(cells: dict) -> None:
    (error,) = errors(cells[1]["outputs"])
    assert error.startswith("JudgementTimeout") and "judgement timed out after 1 s" in error
    assert errors(cells[2]["outputs"]) == [] and _scores(cells) == [0, 2]


def test_a_looping_judgement_scores_zero_for_its_test_only_in_the_main_thread(monkeypatch):
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        pytest.skip("the SIGALRM timer needs the main thread of a POSIX process")
    handler = signal.getsignal(signal.SIGALRM)
    _assert_only_the_looping_test_fails(_judge_two_cells(monkeypatch))
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) is handler
    assert not [t for t in threading.enumerate() if t.name == "dfa-judgement"]  # no thread was needed


def test_a_looping_judgement_scores_zero_for_its_test_only_in_a_worker_thread(monkeypatch):
    import threading

    cells = {}
    worker = threading.Thread(target=lambda: cells.update(_judge_two_cells(monkeypatch)))  # e.g. a Dask worker
    worker.start()
    worker.join(60)
    _assert_only_the_looping_test_fails(cells)
    assert not [t for t in threading.enumerate() if t.name == "dfa-judgement"]  # the looping thread was stopped


def test_a_timer_already_set_is_left_alone():
    import signal
    import threading
    import time

    from common.grading.verdicts.judge import JudgementTimeout, run_limited

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        pytest.skip("the SIGALRM timer needs the main thread of a POSIX process")
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 100)  # someone else's alarm: the judgement runs in a thread instead
        started = time.monotonic()
        with pytest.raises(JudgementTimeout):
            run_limited(lambda: exec("while True: pass"), 0.3)  # noqa: S102
        assert time.monotonic() - started < 30 and signal.getitimer(signal.ITIMER_REAL)[0] > 60
        with pytest.raises(ZeroDivisionError):  # a judgement's own error passes through either way
            run_limited(lambda: 1 / 0, 5)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_the_judgement_limit_follows_the_load_like_the_sandbox_limits(monkeypatch):
    from common.grading.sandbox.limits import Limits
    from common.grading.verdicts import judge

    assert judge.MAX_LOAD_FACTOR == Limits().max_load_factor
    assert judge.judgement_limit_s() == judge.judgement_limit_s(0.5) == judge.JUDGEMENT_TIMEOUT_S
    assert judge.judgement_limit_s(1.8) == math.ceil(judge.JUDGEMENT_TIMEOUT_S * 1.8)
    assert judge.judgement_limit_s(50.0) == judge.JUDGEMENT_TIMEOUT_S * judge.MAX_LOAD_FACTOR  # at the clamp
    monkeypatch.setattr(judge, "JUDGEMENT_TIMEOUT_S", 1)
    outcomes = []
    for factor in (1.0, 3.0):  # a 1.5 s judgement: past 1 s on an idle grader, within 3 s on a busy one
        execution = Execution(status="completed", load_factor=factor)
        execution.cells = {1: {"outputs": [], **sent(y=1)}}
        judge_execution(execution, {1: Judgement("t", "import time; time.sleep(1.5)", 1)}, answers=None, salt="s",
                        student="a")  # fmt: skip
        outcomes.append(errors(execution.cells[1]["outputs"]))
    assert ["judgement timed out after 1 s" in e for e in outcomes[0]] == [True] and outcomes[1] == []
