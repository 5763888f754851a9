"""The trust model's parts without a sandbox: test cells split out of a notebook, the snapshot put back, the
checker's verdicts (in a subprocess: its audit hook cannot be removed), and outputs made from verdicts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from common.grading import testcells
from common.grading.verdicts import verdict_outputs

FIXTURES = Path(__file__).parent / "fixtures"


def _cell(source, **nbgrader):
    return new_code_cell(source, metadata={"nbgrader": nbgrader} if nbgrader else {})


def test_split_leaves_no_hidden_test_and_returns_what_the_checker_needs():
    nb = new_notebook(cells=[
        _cell("import torch\nfrom common.checks import check_scalar", locked=True, grade=False, solution=False),
        _cell("def f(x):\n    return x", solution=True, grade=False, locked=False),
        _cell("y = f(2)\ncheck_scalar('f', y, 2.0)\n### BEGIN HIDDEN TESTS\nassert f(3) == 3\n### END HIDDEN TESTS",
              grade=True, solution=False, locked=True, points=1),
        _cell("print(y)"),
        _cell("z = 1\n### BEGIN HIDDEN TESTS\nassert f(4) == 4\n### END HIDDEN TESTS", grade=True, solution=False,
              locked=True, points=1),
    ])  # fmt: skip
    tests = testcells.split(nb)
    assert set(tests) == {"2", "4"}
    assert "HIDDEN" not in json.dumps(nbformat.writes(nb)) and "f(3)" not in nbformat.writes(nb)
    first = tests["2"]
    assert first["segments"] == [(False, "y = f(2)\ncheck_scalar('f', y, 2.0)"), (True, "assert f(3) == 3")]
    assert first["imports"] == ["import torch", "from common.checks import check_scalar"]
    assert first["visible"].startswith("y = f(2)")  # a later cell reads y: the kernel runs the visible part
    assert tests["4"]["visible"] == ""  # nothing later reads z: not run twice
    assert testcells.kernel_source(4, tests["4"]).startswith("__import__('sys').audit('dfa.check', 4)")


def test_grader_side_answers_leave_the_notebook_and_reach_only_the_test(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from common.grading import answerkeys
    from common.grading.checker import _test_namespace

    lab = tmp_path / "source" / "lab9"
    lab.mkdir(parents=True)
    (lab / "answers.py").write_text("KEY = (GRADER_SALT, GRADER_STUDENT)\ndef ref(x):\n    return 2 * x\n")
    course = SimpleNamespace(source_dir=tmp_path / "source", name="course9", config={"Offering": {"salt": "s3cret"}})
    monkeypatch.delenv("DFA_SALT", raising=False)
    nb = new_notebook(cells=[
        _cell("def f(x):\n    return x", solution=True, grade=False, locked=False),
        _cell("### BEGIN HIDDEN TESTS\nfrom answers import ref\nassert f(3) == ref(3)\n### END HIDDEN TESTS",
              grade=True, solution=False, locked=True, points=1),
    ])  # fmt: skip
    assert answerkeys.attach(nb, course, "lab9", "alice")
    assert not answerkeys.attach(new_notebook(), course, "lab8", "alice")  # a lab without answers.py
    tests = testcells.split(nb)
    assert answerkeys.METADATA_KEY not in nb.metadata and "s3cret" not in nbformat.writes(nb)
    grader = tests["1"]["grader"]
    assert grader["salt"] == "s3cret" and grader["student"] == "alice"
    assert "answers" not in testcells.imported_modules(tests)  # the kernel must not import a learner's answers.py
    namespace = _test_namespace({"__name__": "__main__"}, grader)
    exec("import answers\nfrom answers import ref, KEY", namespace)  # noqa: S102
    assert namespace["ref"](4) == 8 and namespace["KEY"] == ("s3cret", "alice")
    assert "answers" not in sys.modules
    bare = _test_namespace({"__name__": "__main__"})
    try:
        exec("import answers", bare)  # noqa: S102
    except ImportError as exc:
        assert "answers.py" in str(exc)
    else:
        raise AssertionError("a lab without answers.py gave the test an answers module")
    monkeypatch.setenv("DFA_SALT", "from-env")
    assert answerkeys.offering_salt(course) == "from-env"


def test_a_hidden_region_that_cuts_a_block_is_one_hidden_piece():
    source = "for i in range(2):\n### BEGIN HIDDEN TESTS\n    assert i < 2\n### END HIDDEN TESTS"
    assert testcells.segments(source) == [(True, "for i in range(2):\n    assert i < 2")]


def test_snapshot_restore_undoes_rebound_code_and_keeps_what_it_replaced():
    script = """
import torch, common.checks, common.roofline as r
from common.grading.snapshot import Snapshot
snap = Snapshot()
original_allclose, original_code = torch.allclose, r.Roofline.attainable.__code__
torch.allclose = lambda *a, **k: True
type(common.checks.grader)._verdict = staticmethod(lambda *a, **k: None)
type(common.checks.grader).extra = lambda self: 1
r.Roofline.attainable.__code__ = (lambda self, x: 0).__code__
keep = []
changed = snap.restore(keep)
assert torch.allclose is original_allclose and r.Roofline.attainable.__code__ is original_code
assert not hasattr(type(common.checks.grader), "extra")
assert changed >= 4 and len(keep) >= 4
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_the_checker_judges_tests_and_refuses_what_a_stub_could_use_against_them():
    out = subprocess.run([sys.executable, str(FIXTURES / "checker_probe.py")], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    verdicts = json.loads(out.stdout.strip().splitlines()[-1])
    assert verdicts["passes"] == {"passed": True, "stdout": "visible 2\n"}  # the hidden part's print is dropped
    assert verdicts["fails"]["passed"] is False and verdicts["fails"]["evalue"] == "wrong"
    assert verdicts["library_frames"]["passed"], verdicts["library_frames"]  # typing, enum, traceback still work
    for name in ("frame", "frame_via_inspect", "spoofed_library_file"):
        assert verdicts[name]["passed"] is False and "from your code" in verdicts[name]["evalue"], verdicts[name]
    assert verdicts["rebind_during_test"]["passed"], verdicts["rebind_during_test"]
    assert verdicts["patched_before"]["passed"] is False  # the class patch was undone before the test
    assert verdicts["stale_skipped"]["passed"] is True


def test_outputs_come_from_the_verdict_alone():
    assert verdict_outputs({"passed": True, "stdout": ""}) == []
    failed = verdict_outputs({"passed": False, "stdout": "✔ part a\n", "ename": "CheckFailed", "evalue": "no",
                              "line": 3})  # fmt: skip
    assert [o["output_type"] for o in failed] == ["stream", "error"] and failed[1]["evalue"] == "no (test line 3)"
    (missing,) = verdict_outputs(None)
    assert missing["output_type"] == "error" and missing["ename"] == "NotChecked"
    assert "time limit" in verdict_outputs(None, timed_out=True)[0]["evalue"]
