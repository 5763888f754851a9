"""Fast tests of the grading pieces that need no kernel: standard, lab sources, Colab, regions, re-matching,
stderr, tamper flags, limits (time limits scaled to the load, the retry), cgroups and finding courses."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import nbformat
import pytest
from fixtures.grading_support import (
    FIXTURE_COURSE,
    LAB,
    RIGHT_RELU,
    cell_index,
    colab_stripped,
    copy_course,
    read,
    with_code,
)

from common.errors import DFAError
from common.grading.authoring import colab, labsource
from common.grading.courses import regions, standard
from common.grading.courses.course import Course, find_course
from common.grading.courses.stderr import HARMLESS_STDERR_PATTERN
from common.grading.gradebook import rematch, tamper
from common.grading.gradebook.preprocessors import _not_run_reason
from common.grading.gradebook.runs import run_notebook
from common.grading.sandbox import cgroups, limits
from common.grading.sandbox.limits import Limits
from common.grading.sandbox.sandbox import Execution, _apply_event

SOURCE = FIXTURE_COURSE / "source" / LAB / f"{LAB}.ipynb"
RELEASE = FIXTURE_COURSE / "release" / LAB / f"{LAB}.ipynb"


# ---- the fixture lab and the lab standard ---
def test_committed_fixture_lab_is_what_its_source_renders():
    assert labsource.source_problems(Course(FIXTURE_COURSE), LAB) == []
    assert labsource.rendered(Course(FIXTURE_COURSE), LAB) == SOURCE.read_text(encoding="utf-8")


def test_fixture_lab_follows_the_standard():
    assert standard.section_problems(read(SOURCE)) == []


@pytest.mark.parametrize(
    "break_it, message",
    [
        (lambda cells: [c for c in cells if "Wrap-up" not in c.source], "missing section: Wrap-up"),
        (
            lambda cells: [c for c in cells if "parameters" not in c.metadata.get("tags", [])],
            "missing section: parameters cell",
        ),
        (lambda cells: [c for c in cells if "dfa-setup" not in c.metadata.get("tags", [])]
         + [c for c in cells if "dfa-setup" in c.metadata.get("tags", [])], "should come before"),
        (
            lambda cells: [
                c for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") != "relu_tests"
            ],
            "Part 1 has no autograded test cell",
        ),
        (
            lambda cells: [c for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") != "q_ridge"],
            "no manually graded answer",
        ),
    ],
)
def test_section_problems_are_named(break_it, message):
    nb = read(SOURCE)
    nb.cells = break_it(nb.cells)
    assert any(message in p for p in standard.section_problems(nb)), standard.section_problems(nb)


def _fixture_copy(tmp_path) -> Course:
    return copy_course(FIXTURE_COURSE, tmp_path)


def test_lab_source_renders_includes_and_stable_ids(tmp_path):
    course = _fixture_copy(tmp_path)
    nb = read(course.source_notebook(LAB))
    assert [c.id for c in nb.cells] == [f"cell-{i:03d}" for i in range(len(nb.cells))]
    badge = next(c for c in nb.cells if standard.BADGE_TAG in standard.tags(c))
    setup = next(c for c in nb.cells if standard.SETUP_TAG in standard.tags(c))
    assert badge.source == colab.badge_markdown(labsource.repo_path(course.name, LAB))
    assert setup.source == colab.setup_cell_source().strip("\n")
    assert standard.nbgrader_meta(setup)["locked"] is True
    text = labsource.text_path(course, LAB).read_text(encoding="utf-8")
    assert colab.setup_cell_source().strip("\n") not in text  # shared cells are included, not copied


def test_lab_source_refuses_an_unknown_include(tmp_path):
    course = _fixture_copy(tmp_path)
    path = labsource.text_path(course, LAB)
    path.write_text(path.read_text(encoding="utf-8").replace('include="badge"', 'include="bagde"'),
                    encoding="utf-8")
    with pytest.raises(DFAError, match="'bagde'; valid: badge, grading, setup"):
        labsource.rendered(course, LAB)
    assert "bagde" in labsource.source_problems(course, LAB)[0]


def test_an_edited_lab_source_makes_its_notebook_out_of_date(tmp_path):
    course = _fixture_copy(tmp_path)
    path = labsource.text_path(course, LAB)
    path.write_text(path.read_text(encoding="utf-8").replace("write a ReLU", "write a rectifier"),
                    encoding="utf-8")
    assert "out of date with lab1.py" in labsource.source_problems(course, LAB)[0]
    assert labsource.write_source_notebook(course, LAB) is True
    assert labsource.write_source_notebook(course, LAB) is False  # byte-stable
    assert labsource.source_problems(course, LAB) == []
    assert "write a rectifier" in course.source_notebook(LAB).read_text(encoding="utf-8")


def test_a_notebook_edited_after_its_source_is_not_overwritten(tmp_path):
    import os

    course = _fixture_copy(tmp_path)
    target = course.source_notebook(LAB)
    nb = read(target)
    nb.cells[1].source += "\n\nA sentence written in Jupyter, not in the .py."
    nbformat.write(nb, target)
    source = labsource.text_path(course, LAB)
    os.utime(source, (target.stat().st_mtime - 60, target.stat().st_mtime - 60))
    with pytest.raises(DFAError, match="edited after it.*--force"):
        labsource.write_source_notebook(course, LAB)
    assert "written in Jupyter" in target.read_text(encoding="utf-8")
    assert labsource.write_source_notebook(course, LAB, force=True) is True
    assert "written in Jupyter" not in target.read_text(encoding="utf-8")


# ---- Colab ---
def test_colab_urls_come_from_the_one_constant():
    assert colab.github_slug("https://github.com/someone/fork.git") == "someone/fork"
    assert colab.github_slug("git@github.com:someone/fork.git") == "someone/fork"
    with pytest.raises(ValueError):
        colab.github_slug("https://example.com/x.git")
    badge = colab.badge_markdown("course1_landscape/release/lab1/lab1.ipynb")
    assert (
        f"github/{colab.github_slug()}/blob/{colab.REPO_BRANCH}/course1_landscape/release/lab1/lab1.ipynb"
        in badge
    )
    assert colab.REPO_GIT_URL in colab.setup_cell_source()


def test_lab_table_rewrites_only_between_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    rows = [
        (
            "course1_landscape",
            "Lab one",
            "course1_landscape/release/a/a.ipynb",
            "course1_landscape/release/a/a.ipynb",
        )
    ]
    readme.write_text("# Title\nno markers here\n")
    assert colab.update_lab_table(readme, rows) is None
    assert readme.read_text() == "# Title\nno markers here\n"
    readme.write_text(f"intro\n{colab.TABLE_START}\nold table\n{colab.TABLE_END}\noutro\n")
    assert colab.update_lab_table(readme, rows) is True
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{colab.TABLE_END}\noutro\n")
    assert "old table" not in text and "[Lab one](course1_landscape/release/a/a.ipynb)" in text
    assert colab.update_lab_table(readme, rows) is False


# ---- secret regions ---
def test_secret_lines_are_specific_to_the_regions():
    secrets = regions.secret_lines(read(SOURCE))
    assert "return torch.where(x > 0, x, torch.zeros_like(x))" in secrets
    assert "from common.checks import grader" in secrets
    assert not any("import torch" == s for s in secrets)  # appears outside the regions too
    release_text = regions.notebook_text(read(RELEASE))
    assert regions.find_leaks(release_text, secrets) == []
    assert regions.find_leaks(regions.notebook_text(read(SOURCE)), secrets)


def test_html_text_sees_through_syntax_highlighting():
    page = '<pre><span class="n">grader</span><span class="o">.</span><span class="n">x</span>&lt;1</pre>'
    assert regions.html_text(page) == "grader.x<1"


# ---- re-matching cells to the release ---
def _grade_ids(nb):
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


def test_colab_stripped_submission_gets_its_metadata_back():
    release = read(RELEASE)
    submission = colab_stripped(with_code(release, relu=RIGHT_RELU))
    rematch.restore(submission, release)
    assert _grade_ids(submission) == _grade_ids(release)
    assert [c.id for c in submission.cells] == [c.id for c in release.cells]
    assert submission.cells[cell_index(submission, "relu")].source == RIGHT_RELU
    nbformat.validate(submission)


def test_learner_cells_lose_minted_metadata_and_moved_cells_are_found():
    release = read(RELEASE)
    submission = copy.deepcopy(release)
    scratch = nbformat.v4.new_code_cell("print('scratch')")
    scratch.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "free_points",
        "points": 99,
        "locked": False,
        "solution": False,
        "schema_version": 3,
    }
    submission.cells.insert(4, scratch)
    submission.cells[cell_index(submission, "relu_tests")].metadata["nbgrader"]["points"] = 100
    notes = rematch.restore(submission, release)
    assert "free_points" not in _grade_ids(submission)
    assert submission.cells[cell_index(submission, "relu_tests")].metadata.nbgrader["points"] == 3
    assert any("removed" in n for n in notes) and any("restored" in n for n in notes)


def test_missing_stub_and_setup_cells_come_back_but_tests_are_left_to_nbgrader():
    release = read(RELEASE)
    submission = copy.deepcopy(release)
    drop = {"relu", "dfa_setup", "relu_tests"}
    submission.cells = [
        c for c in submission.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in drop
    ]
    rematch.restore(submission, release)
    ids = _grade_ids(submission)
    assert "relu" in ids and "dfa_setup" in ids and "relu_tests" not in ids
    assert ids.index("dfa_setup") < ids.index("relu") < ids.index("intensity")


# ---- stderr, tamper flags, limits ---
@pytest.mark.parametrize(
    "text, harmless",
    [
        ("/x/torch/_tensor.py:12: UserWarning: To copy construct...\n  return torch.tensor(x)\n", True),
        ("[W1202 09:08:00.123456 1234 torch/csrc/x.cpp:1] Warning: foo (function bar)\n", True),
        ("Matplotlib is building the font cache; this may take a moment.\n", True),
        (" 50%|█████     | 5/10 [00:00<00:00]\r100%|██████████| 10/10\n", True),
        ("Traceback (most recent call last):\n  File x\nValueError: boom\n", False),
        ("/x.py:1: UserWarning: fine\n  code\nbut this line is not\n", False),
        (
            "  /x.py:1: UserWarning: 50%|w\n" * 20000 + "bad\n",
            False,
        ),  # fails fast, no catastrophic backtracking
    ],
)
def test_harmless_stderr_pattern(text, harmless):
    assert bool(re.search(HARMLESS_STDERR_PATTERN, text)) is harmless


def test_tamper_flags_ignore_read_only_cells():
    nb = read(RELEASE)
    assert tamper.flags(nb) == []
    flagged = with_code(nb, relu="import sys\nsys.modules['common.checks'] = None\nimport ctypes")
    assert tamper.flags(flagged) == ["sys.modules", "ctypes"]


def test_limits_count_processes_only_in_a_user_namespace():
    limits = Limits(memory_bytes=1000, max_processes=7)
    assert limits.kernel_rlimits(count_processes=True)["RLIMIT_NPROC"] == 7
    assert "RLIMIT_NPROC" not in limits.kernel_rlimits(count_processes=False)
    assert limits.kernel_rlimits(count_processes=False)["RLIMIT_DATA"] == 1000


def test_load_factor_only_raises_limits_and_is_clamped():
    reference = limits.CALIBRATION_REFERENCE_S
    assert limits.load_factor(reference / 3, 4.0) == 1.0  # a faster machine keeps the instructor's limits
    assert limits.load_factor(reference * 1.8, 4.0) == 1.8
    assert limits.load_factor(reference * 50, 4.0) == 4.0
    assert limits.measure_load_factor(1.0) == 1.0  # max_load_factor=1 turns scaling off, without measuring
    assert 1.0 <= limits.measure_load_factor(4.0) <= 4.0
    assert limits.scaled_seconds(6, 1.8) == 11 and limits.scaled_seconds(6, 1.0) == 6


def test_the_sandbox_takes_only_a_plausible_load_factor():
    for reported, kept in [(1.8, 1.8), (40, 1.0), (0.2, 1.0), (float("nan"), 1.0), ("4", 1.0)]:
        execution = Execution()
        _apply_event(execution, json.dumps({"event": "start", "cells": 3, "load_factor": reported}).encode(), 4.0)
        assert execution.status == "running" and execution.load_factor == kept, reported


class ScriptedSandbox:
    """Stands in for Sandbox.run: hands out the given executions in turn and records each time_scale."""

    def __init__(self, *executions: Execution):
        self.executions, self.scales = list(executions), []

    def run(self, folder, notebook, *, time_scale=1.0):
        self.scales.append(time_scale)
        return self.executions.pop(0)


def _timed_out(seconds: int, factor: float) -> Execution:
    message = f"cell 4 ran past the {seconds} s time limit and stopped when interrupted; the later cells ran"
    return Execution(status="time_limit", message=message, failed_cell=4, seconds=seconds, load_factor=factor)


def test_a_run_that_hits_a_time_limit_is_retried_once_at_doubled_limits():
    done = Execution(status="completed", seconds=3.0, load_factor=1.3)
    sandbox = ScriptedSandbox(done)
    assert run_notebook(sandbox, Path("x"), "lab1.ipynb") is done and sandbox.scales == [1.0]

    sandbox = ScriptedSandbox(_timed_out(11, 1.8), Execution(status="completed", seconds=9.0, load_factor=1.2))
    result = run_notebook(sandbox, Path("x"), "lab1.ipynb")
    assert sandbox.scales == [1.0, limits.RETRY_TIME_SCALE] == [1.0, 2]
    assert result.status == "completed" and result.retried and result.seconds == 20.0
    assert result.load_factor == 1.8  # the larger of the two, shown to the instructor
    assert result.message.startswith("completed when retried at doubled time limits (first run: cell 4 ran")

    sandbox = ScriptedSandbox(_timed_out(11, 1.8), _timed_out(22, 1.8))
    result = run_notebook(sandbox, Path("x"), "lab1.ipynb")
    assert len(sandbox.scales) == 2 and result.status == "time_limit" and result.failed_cell == 4
    assert "past the 22 s time limit" in result.message and "retried once" in result.message
    assert "ignored" not in result.message  # a time limit, not a charge against the learner


def test_cells_left_unrun_by_a_time_limit_say_which_limit():
    result = {"status": "time_limit", "failed_cell": 2, "message": "the notebook ran past its 900 s total time limit"}
    assert _not_run_reason(result) == "the notebook ran past its 900 s total time limit"
    assert _not_run_reason({"status": "time_limit"}) == "a time limit was reached"


@pytest.mark.parametrize("version", [1, 2])
def test_cgroup_creation_on_a_fake_hierarchy(tmp_path, version):
    if version == 2:
        (tmp_path / "grader").mkdir()
        (tmp_path / "cgroup.controllers").write_text("memory pids")
        (tmp_path / "grader" / "cgroup.subtree_control").write_text("memory pids")
        proc = "0::/grader\n"
    else:
        for controller in ("memory", "pids"):
            (tmp_path / controller / "grader").mkdir(parents=True)
        proc = "4:memory:/grader\n8:pids:/grader\n0::/\n"
    group = cgroups.create(123456, 42, sysfs=tmp_path, proc_cgroup=proc)
    assert group is not None
    limits = {p.name: p.read_text() for d in group.dirs for p in d.iterdir()}
    assert limits.get("pids.max") == "42"
    assert limits.get("memory.max" if version == 2 else "memory.limit_in_bytes") == "123456"
    assert group.join_prefix()[:2] == ["/bin/sh", "-c"] and group.join_prefix()[-1] == "--"
    for d in group.dirs:  # a fake hierarchy holds files, which a real cgroup removes itself
        for f in d.iterdir():
            f.unlink()
    group.destroy()
    assert not any(d.exists() for d in group.dirs)


def test_no_cgroup_where_the_hierarchy_is_missing(tmp_path):
    assert cgroups.create(1, 1, sysfs=tmp_path, proc_cgroup="4:memory:/x\n") is None


# ---- courses (collect: tests/test_grading_collect.py) ---
@pytest.fixture
def course(tmp_path):
    return copy_course(FIXTURE_COURSE, tmp_path)


def test_find_course_names_the_valid_choices(tmp_path):
    with pytest.raises(DFAError, match="no course 'nope'"):
        find_course("nope")
    assert isinstance(find_course(str(FIXTURE_COURSE)), Course)


def test_a_non_editable_install_keeps_site_packages_visible(monkeypatch, tmp_path):
    # after `pip install .` the package sits in site-packages: only a checkout around it is hidden
    import site

    from common.grading.sandbox import bwrap

    fake_site = tmp_path / "site-packages"
    (fake_site / "common").mkdir(parents=True)
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(fake_site)])
    monkeypatch.setattr(bwrap, "package_dir", lambda: fake_site / "common")
    assert fake_site.resolve() in bwrap.python_env_dirs()
    (fake_site / "pyproject.toml").write_text("")  # now it looks like a checkout: hidden
    assert fake_site.resolve() not in bwrap.python_env_dirs()
