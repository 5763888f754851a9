"""``dfa release`` and ``dfa check`` through the CLI, on copies of the fixture course."""

from __future__ import annotations

import json

import nbformat
import pytest
from fixtures.grading_support import FIXTURE_COURSE, LAB, copy_course, read

from common.cli import main
from common.grading.authoring import colab
from common.grading.authoring.check import metadata_problems

pytestmark = pytest.mark.slow  # each call generates notebooks with nbgrader (a few seconds)


def test_committed_fixture_release_is_current(capsys):
    assert main(["check", str(FIXTURE_COURSE)]) == 0, capsys.readouterr().out
    assert "1 lab(s) in 1 course(s), 0 problem(s)" in capsys.readouterr().out
    assert not (FIXTURE_COURSE / "gradebook.db").exists()  # check works on a throw-away copy


def test_release_then_check_and_readme_table(tmp_path, capsys):
    course = copy_course(FIXTURE_COURSE, tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# Labs\n{colab.TABLE_START}\n{colab.NO_LABS_YET}\n{colab.TABLE_END}\nmore text\n")
    (course.root / "release").rename(tmp_path / "old_release")

    assert main(["release", str(course.root)]) == 0
    out = capsys.readouterr().out
    assert f"released course0_fixture/{LAB}" in out and "updated the lab table" in out
    release = read(course.release_notebook(LAB))
    assert release.cells == read(tmp_path / "old_release" / LAB / f"{LAB}.ipynb").cells
    table = readme.read_text()
    assert f"[Fixture lab: ReLU and arithmetic intensity](course0_fixture/release/{LAB}/{LAB}.ipynb)" in table
    assert colab.colab_url(f"course0_fixture/release/{LAB}/{LAB}.ipynb") in table and table.endswith(
        "more text\n"
    )

    assert main(["check", str(course.root)]) == 0
    readme.write_text(table.replace("Fixture lab", "Old title"))
    assert main(["check", str(course.root)]) == 1
    assert "the lab table is out of date" in capsys.readouterr().out


def test_check_finds_stale_leaky_and_orphaned_releases(tmp_path, capsys):
    course = copy_course(FIXTURE_COURSE, tmp_path)
    release_path = course.release_notebook(LAB)
    release = read(release_path)
    stub = next(c for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "relu")
    stub.source += "\n    return torch.where(x > 0, x, torch.zeros_like(x))"  # a solution line leaks
    stub.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello")]
    nbformat.write(release, release_path)
    (course.release_dir / "lab_gone").mkdir()
    source = read(course.source_notebook(LAB))
    source.cells[1].source = source.cells[1].source.replace("Learning objectives", "Goals")
    source.cells[2].source += "\nprint('my own setup')"
    nbformat.write(source, course.source_notebook(LAB))

    assert main(["check", str(course.root)]) == 1
    out = capsys.readouterr().out
    for expected in (
        "is out of date with its source",
        "has stored outputs",
        "leaks solution or hidden-test text",
        "release/lab_gone has no source notebook",
        "does not mention: learning objectives",
        "source/lab1/lab1.ipynb is out of date with lab1.py",
    ):
        assert expected in out, out


def test_metadata_problems_name_each_cell():
    nb = read(FIXTURE_COURSE / "source" / LAB / f"{LAB}.ipynb")
    assert metadata_problems(nb) == []
    broken = json.loads(nbformat.writes(nb))
    grade_cells = [c for c in broken["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
    grade_cells[0]["metadata"]["nbgrader"]["points"] = 0
    grade_cells[1]["metadata"]["nbgrader"]["grade_id"] = grade_cells[2]["metadata"]["nbgrader"]["grade_id"]
    grade_cells[2]["metadata"]["nbgrader"]["schema_version"] = 1
    problems = " | ".join(metadata_problems(nbformat.from_dict(broken)))
    assert (
        "needs points > 0" in problems and "used more than once" in problems and "schema_version" in problems
    )


def test_release_and_check_reject_unknown_courses(capsys):
    assert main(["release", "course_that_does_not_exist"]) == 2
    assert main(["check", "course_that_does_not_exist"]) == 2
    assert "no course 'course_that_does_not_exist'" in capsys.readouterr().err
