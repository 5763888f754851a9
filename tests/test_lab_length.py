"""The lab-length model (common.grading.authoring.lab_length) and what every lab's header says about it."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from common.grading.authoring.lab_length import (
    CORE_RANGE,
    RATES,
    estimate,
    length_problems,
    readme_problems,
    stated_minutes,
)

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for p in REPO.glob("course*_*/source/*/*.ipynb") if p.stem == p.parent.name)


def _lab(header_minutes="about 7 minutes"):
    answer = new_markdown_cell("=== BEGIN MARK SCHEME ===\nlong hidden text " * 20)
    answer.metadata["nbgrader"] = {"grade": True, "solution": True, "points": 2, "grade_id": "q"}
    return new_notebook(cells=[
        new_markdown_cell(f"# Lab\n\n**Expected time:** {header_minutes}"),
        new_markdown_cell("## Part 1 — x\n\n" + "word " * 240),                       # 240 words
        new_code_cell("a = 1\n# comment\n\nb = 2\n"                                    # 2 given lines
                      "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n"
                      "### BEGIN HIDDEN TESTS\nassert f() == 1\n### END HIDDEN TESTS\n"),
        new_markdown_cell("## Analysis"), answer,
        new_markdown_cell("## Going further (optional)\n\n" + "word " * 120),
        new_markdown_cell("## Wrap-up\n\n" + "word " * 120),
    ])


def test_the_model_counts_what_a_learner_reads_and_writes_and_nothing_hidden():
    est = estimate(_lab())
    part = est.frame().set_index("section").loc["Part 1 — x"]
    # 'def f():' is given, the solution line is counted once, the hidden assert not at all
    assert (part.words, part.given_lines, part.stubs, part.solution_lines) == (244, 3, 1, 1)
    analysis = est.frame().set_index("section").loc["Analysis"]
    assert analysis.written_points == 2 and analysis.words == 1  # the mark scheme is not read by learners
    assert est.optional_minutes == pytest.approx(2 * 121 / RATES.prose_wpm, abs=0.1)  # everything after it
    want = (244 / RATES.prose_wpm + 3 / RATES.code_lines_per_min + RATES.stub_min + RATES.solution_line_min)
    assert part.minutes == pytest.approx(want, abs=0.05)


def test_a_prediction_commit_costs_its_line_not_a_stub():
    """Committing a prediction has no spec, API or check: it is timed by the written question after the reveal."""
    def part(solution):
        nb = new_notebook(cells=[new_markdown_cell("## Part 1 — x"), new_code_cell(
            f"P = predict('q')\n### BEGIN SOLUTION\n{solution}\n### END SOLUTION\n")])
        return estimate(nb).frame().set_index("section").loc["Part 1 — x"]

    commit = part("P_BLOCK.commit(['lpu', 'wse', 'gpu'])")
    assert (commit.given_lines, commit.stubs, commit.solution_lines) == (1, 0, 1)
    mixed = part("P_BLOCK.commit(['lpu', 'wse', 'gpu'])\nx = compute()")  # real code beside it: a stub
    assert (mixed.stubs, mixed.solution_lines) == (1, 2)
    assert part("x = compute()").stubs == 1


def test_the_header_must_state_the_estimate_and_a_core_lab_must_fit():
    minutes = round(estimate(_lab()).core_minutes)
    nb = _lab(f"about {minutes} minutes")
    assert stated_minutes(nb) == minutes
    assert length_problems(nb, core=False) == []
    assert any("outside 90-120" in p for p in length_problems(nb, core=True))
    assert any(f"states 60 minutes, the estimate is {minutes}" in p
               for p in length_problems(_lab("about 60 minutes"), core=False))
    assert any("does not state" in p for p in length_problems(_lab("90–120 minutes"), core=False))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_every_lab_states_its_estimate_and_every_core_lab_fits(path):
    nb = nbformat.read(path, as_version=4)
    assert length_problems(nb, core=path.stem.startswith("lab")) == []
    if path.stem.startswith("lab"):
        assert CORE_RANGE[0] <= estimate(nb).core_minutes <= CORE_RANGE[1] + 0.5


def test_the_course_readme_row_must_state_the_header_minutes():
    readme = "| notebook | what | expected time |\n| `lab9` (core lab) | things | about 112 min (+20 optional) |\n"
    assert readme_problems(readme, "lab9", 112) == []
    assert readme_problems(readme, "lab9", 115) == [
        "the course README's row for lab9 does not say 'about 115 min' (the header's estimate)"]
    assert readme_problems(readme, "lab8", 115) == []  # no row: nothing to disagree with
