"""Every ``dfa`` command line in a ```bash block of README.md and docs/*.md, as written, is a valid command.

The fast test parses each line with the real parser and resolves the courses, labs and chips it names. The slow
test runs the README's instructor block end to end on a copy of the repository, with one honest submission.
"""
from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from common.cli import build_parser
from common.grading.courses.course import find_course

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)


def dfa_lines(text: str) -> list[tuple[int, list[str]]]:
    """(line number, argv after ``dfa``) of each dfa command in the bash blocks of a Markdown text."""
    found = []
    for block in BASH_BLOCK.finditer(text):
        first = text.count("\n", 0, block.start(1)) + 1
        for offset, line in enumerate(block.group(1).replace("\\\n", " ").splitlines()):
            words = shlex.split(line, comments=True)
            # a line may chain commands: `cd x && dfa check`
            command: list[str] = []
            for word in [*words, ";"]:
                if word in ("&&", "||", ";", "|"):
                    if command[:1] == ["dfa"]:
                        found.append((first + offset, command[1:]))
                    command = []
                else:
                    command.append(word)
    return found


DOCUMENTED = [(doc, lineno, argv) for doc in DOCS for lineno, argv in dfa_lines(doc.read_text(encoding="utf-8"))]


def test_the_docs_have_dfa_commands():
    commands = {argv[0] for _, _, argv in DOCUMENTED if argv}
    assert {"tour", "release", "check", "collect", "autograde", "feedback", "grades"} <= commands


@pytest.mark.parametrize("doc, lineno, argv", DOCUMENTED,
                         ids=[f"{d.relative_to(ROOT)}:{n}:dfa {' '.join(a)}" for d, n, a in DOCUMENTED])
def test_documented_command_is_valid(doc, lineno, argv, capsys):
    where = f"{doc.relative_to(ROOT)}:{lineno}: dfa {' '.join(argv)}"
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{where}: {capsys.readouterr().err.strip()}")
    course = getattr(args, "course", None)
    for name in course if isinstance(course, list) else [course] if course else []:
        find_course(name)  # a DFAError names the valid courses
    if course and isinstance(course, str) and getattr(args, "lab", None):
        find_course(course).require_lab(args.lab)
    elif args.command == "grade-one":
        from common.grading.gradebook.grade_one import find_lab

        find_lab(args.lab)
    if getattr(args, "chip", None):
        from common.chips import get_chip

        get_chip(args.chip)


def _readme_instructor_block() -> list[list[str]]:
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Instructors", 1)[1].split("\n## ", 1)[0]
    return [argv for _, argv in dfa_lines(section)]


def _copy_repository(dest: Path) -> Path:
    """The repository's files as git sees them (tracked and not ignored), without its build outputs."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():  # a tracked file deleted in the working tree is gone from the copy too
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def _sandbox_problem() -> str | None:
    from common.grading.sandbox.sandbox import Sandbox, SandboxUnavailable

    try:
        Sandbox().check_available()
    except SandboxUnavailable as exc:
        return str(exc)
    return None


@pytest.mark.slow
def test_readme_instructor_block_runs_as_written(tmp_path):
    problem = _sandbox_problem()
    if problem and not os.environ.get("DFA_REQUIRE_SANDBOX"):
        pytest.skip(f"no sandbox: {problem}")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    repo = _copy_repository(tmp_path / "repo")
    dfa = Path(sys.executable).with_name("dfa")
    prefix = [str(dfa)] if dfa.is_file() else [sys.executable, "-m", "common.cli"]
    env = {**os.environ, "PYTHONPATH": str(repo)}  # the copy's package, not this checkout's
    block = _readme_instructor_block()
    assert [argv[0] for argv in block] == ["release", "check", "collect", "autograde", "feedback", "grades"]
    outputs = {}
    for argv in block:
        args = build_parser().parse_args(argv)
        if args.command == "collect":  # the LMS download the README names: one honest submission
            course = find_course(str(repo / args.course))
            lab = course.require_lab(args.lab)
            with zipfile.ZipFile(repo / args.source, "w") as archive:
                archive.write(course.source_notebook(lab), f"alice/{lab}.ipynb")
        done = subprocess.run([*prefix, *argv], cwd=repo, env=env, capture_output=True, text=True, timeout=1800)
        outputs[args.command] = done.stdout
        assert done.returncode == 0, f"dfa {' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert "collected 1 submission(s) of lab1_landscape: alice" in outputs["collect"]
    assert "graded 1 of 1 submission(s)" in outputs["autograde"]
    course = find_course(str(repo / "course1_landscape"))
    assert (course.feedback_dir / "alice" / "lab1_landscape" / "lab1_landscape.html").is_file()
    rows = list(csv.DictReader((course.root / "grades" / "grades.csv").open()))
    alice = [r for r in rows if r["student_id"] == "alice" and r["assignment"] == "lab1_landscape"]
    auto, manual = _points(course.source_notebook("lab1_landscape"))
    # every autograded point; the manually graded answers wait for the instructor
    assert len(alice) == 1 and float(alice[0]["score"]) == auto and float(alice[0]["max_score"]) == auto + manual
    # and no cell of the graded run shows an error (tests/test_grading_notebooks.py leaves Lab 1 to this test)
    executed = nbformat.read(course.autograded_dir / "alice" / "lab1_landscape" / "lab1_landscape.ipynb", as_version=4)
    assert [f"{o.get('ename')}: {o.get('evalue')}" for c in executed.cells for o in c.get("outputs", [])
            if o.output_type == "error"] == []


def _points(notebook: Path) -> tuple[float, float]:
    """(autograded, manually graded) points of a source notebook, from its nbgrader cell metadata."""

    auto = manual = 0.0
    for cell in nbformat.read(notebook, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            if meta.get("solution"):
                manual += meta.get("points", 0)
            else:
                auto += meta.get("points", 0)
    return auto, manual
