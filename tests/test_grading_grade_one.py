"""``dfa grade-one``: one submission, graded by the same steps as ``dfa autograde``, result in a folder."""

from __future__ import annotations

import json

import nbformat
import pytest
from fixtures.grading_support import (
    AUTOGRADED_POINTS,
    FIXTURE_COURSE,
    LAB,
    colab_stripped,
    copy_course,
    needs_sandbox,
    release_nb,
    right_answers,
    with_code,
)

from common.cli import main
from common.errors import DFAError
from common.grading.courses.course import Course
from common.grading.gradebook.grade_one import find_lab


def test_find_lab_names_the_valid_labs():
    course = Course(FIXTURE_COURSE)
    assert find_lab("lab1", [course]) == (course, "lab1")
    assert find_lab("course0_fixture/lab1", [course]) == (course, "lab1")
    assert find_lab("lab", [course]) == (course, "lab1")  # a unique prefix, as every lab argument takes
    with pytest.raises(DFAError, match="unknown lab 'lab9'; valid: course0_fixture/lab1"):
        find_lab("lab9", [course])


@pytest.mark.slow
@needs_sandbox
def test_grade_one_honest_blank_and_colab_saved(tmp_path, monkeypatch, capsys):
    course = copy_course(FIXTURE_COURSE, tmp_path / "repo")
    monkeypatch.chdir(tmp_path / "repo")  # the course is found by name from here
    before = sorted(p.name for p in course.root.iterdir())
    cases = {"honest": right_answers(course), "blank": release_nb(course),
             "colab": colab_stripped(right_answers(course)),
             "wrong": with_code(right_answers(course), relu="def relu(x):\n    return x")}
    results = {}
    for name, nb in cases.items():
        path = tmp_path / f"{name}.ipynb"
        path.write_text(nbformat.writes(nb, version=4), encoding="utf-8")
        out = tmp_path / f"out-{name}"
        assert main(["grade-one", "--lab", LAB, "--submission", str(path), "--out", str(out)]) == 0
        results[name] = json.loads((out / "result.json").read_text(encoding="utf-8"))
        page = (out / "feedback.html").read_text(encoding="utf-8")
        # a failed judgement names its check ("hidden test 'relu on mixed signs' failed"), never its code or values
        assert "BEGIN HIDDEN TESTS" not in page and "[0.0, 0.0, 2.25]" not in page and "JUDGEMENT" not in page
    assert results["honest"]["score"] == results["colab"]["score"] == AUTOGRADED_POINTS
    assert results["blank"]["score"] == 0.0
    assert 0.0 < results["wrong"]["score"] < AUTOGRADED_POINTS  # relu's cell fails, intensity's passes
    honest = {c["grade_id"]: c for c in results["honest"]["cells"]}
    assert honest["relu_tests"]["score"] == honest["relu_tests"]["max_score"] == 3.0
    assert honest["q_ridge"]["max_score"] == 2.0 and honest["q_ridge"]["kind"] == "markdown"  # written answer
    assert all(r["status"] == "completed" for r in results.values())
    assert all(r["sandbox"].startswith(("bubblewrap", "fallback")) for r in results.values())  # says which
    assert sorted(p.name for p in course.root.iterdir()) == before  # nothing written into the course
    assert "wrote" in capsys.readouterr().out
