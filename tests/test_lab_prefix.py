"""A LAB argument may be a unique prefix of a lab's name (``lab1`` = ``lab1_landscape``), in every command.

``Course.require_lab`` is the one place that resolves it; these tests need no notebook execution.
"""
from __future__ import annotations

import nbformat
import pytest

from common.cli import main
from common.errors import DFAError
from common.grading.courses.course import Course, find_course

LABS = ("lab1_landscape", "deepdive1_spyre", "lab2_a", "lab2_b")


@pytest.fixture
def course(tmp_path) -> Course:
    """A course folder with only what lab lookup reads: a config file and source/<lab>/<lab>.py."""
    root = tmp_path / "course9_demo"
    for lab in LABS:
        (root / "source" / lab).mkdir(parents=True)
        (root / "source" / lab / f"{lab}.py").write_text("# a lab source\n")
    (root / "nbgrader_config.py").write_text("")
    return Course(root)


@pytest.mark.parametrize("given, lab", [("lab1", "lab1_landscape"), ("lab1_landscape", "lab1_landscape"),
                                        ("deep", "deepdive1_spyre"), ("lab2_a", "lab2_a")])
def test_full_name_or_unique_prefix(course, given, lab):
    assert course.require_lab(given) == lab


def test_ambiguous_prefix_names_the_matches(course):
    with pytest.raises(DFAError) as exc:
        course.require_lab("lab2")
    message = str(exc.value)
    assert "\n" not in message and "'lab2'" in message and "matches lab2_a, lab2_b" in message
    assert "lab1_landscape" in message  # the valid choices


@pytest.mark.parametrize("given", ["lab9", "", "landscape"])
def test_unknown_lab_names_the_choices(course, given):
    with pytest.raises(DFAError) as exc:
        course.require_lab(given)
    message = str(exc.value)
    assert message.startswith(f"unknown lab of course9_demo {given!r}; valid: ") and "\n" not in message
    assert all(lab in message for lab in LABS)


def test_the_real_course_resolves_the_documented_short_name():
    assert find_course("course1_landscape").require_lab("lab1") == "lab1_landscape"


def test_collect_takes_a_prefix(course, tmp_path, capsys):
    downloads = tmp_path / "downloads"
    (downloads / "alice").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), downloads / "alice" / "Copy of lab1.ipynb")
    assert main(["collect", str(course.root), "lab1", str(downloads)]) == 0
    assert "collected 1 submission(s) of lab1_landscape: alice" in capsys.readouterr().out
    assert (course.submitted_dir / "alice" / "lab1_landscape" / "lab1_landscape.ipynb").is_file()


@pytest.mark.parametrize("command", ["autograde", "feedback"])
def test_grading_commands_reject_a_bad_lab_in_one_line(course, command, capsys):
    assert main([command, str(course.root), "lab2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dfa: error: ambiguous lab 'lab2' of course9_demo") and "\n" not in err
