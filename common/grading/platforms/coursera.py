"""Coursera's custom grader (Coursera's second-generation "autograder" containers) and ``dfa export coursera``.

The contract, from Coursera's SDK (github.com/coursera/coursera_autograder: its README and ``grade local``): one
container per submission; the submission is in ``/shared/submission/``; the assignment part being graded is the
environment variable ``partId``; the grader writes ``/shared/feedback.json`` with ``fractionalScore`` (0 to 1)
and ``feedback``, here with ``feedbackType: "HTML"`` and the page in ``/shared/htmlFeedback.html``. ``grade
local`` also reads the last line the grader prints as JSON, so that line is the same feedback.

Resources are set per part when the image is uploaded (``coursera_autograder upload --grader-cpu 1
--grader-memory-limit 4096 --grading-timeout 1200``); the SDK documents the defaults 1 vCPU, 4096 MiB and
1200 s, and a timeout between 300 and 1800 s. The grader's ``Budget`` is those numbers (the image's environment
says which), so a notebook that hits every limit still gets its feedback before Coursera stops the container.

Whatever goes wrong (no notebook, an unknown part, a grading error, the time limit), feedback.json is written,
with score 0 and a message the learner can act on; the grader's log (stderr) says more for the course staff.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path

from common.errors import DFAError
from common.grading.platforms import shared

ROOT_ENV = "DFA_COURSERA_ROOT"  # tests lay out a folder as Coursera lays out /shared
DEFAULT_ROOT = "/shared"
PART_ENV = "partId"
TIMEOUT_ENV, MEMORY_ENV = "DFA_GRADER_TIMEOUT", "DFA_GRADER_MEMORY_GB"
DEFAULT_TIMEOUT_S, DEFAULT_MEMORY_GB = 1200, 4.0  # Coursera's defaults (module docstring)
TIMEOUT_RANGE = (300, 1800)  # what Coursera accepts
PARTS_FILE = "parts.json"
GRADER_HOME = "/grader"

DOCKERFILE = """\
# Coursera custom grader for {course} (written by `dfa export coursera`): labs {labs}.
# Coursera sets the resources when the image is uploaded, not here; upload with the ones the grader budgets for
# (Coursera's defaults, github.com/coursera/coursera_autograder README):
#   coursera_autograder upload grader.zip COURSE_ID ITEM_ID PART_ID \\
#       --grader-cpu 1 --grader-memory-limit {memory_mb} --grading-timeout {timeout}
FROM python:3.12-slim
LABEL coursera.grader-cpu="1" coursera.grader-memory-limit="{memory_mb}" coursera.grading-timeout="{timeout}"
# bubblewrap isolates the learner's code (docs/instructors.md, "The sandbox")
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap && rm -rf /var/lib/apt/lists/*
COPY package {home}/package
# The CPU build of torch (the grader has no GPU), then the package, editable: the sandbox shows {home}/package/common
RUN pip install --no-cache-dir torch --index-url https://download.pytorch.org/whl/cpu \\
 && pip install --no-cache-dir -e "{home}/package[instructor]"
COPY courses {home}/courses
COPY {parts} grader.py {home}/
ENV {timeout_env}={timeout} {memory_env}={memory_gb:g}
ENTRYPOINT ["python", "{home}/grader.py"]
"""

GRADER_SCRIPT = '''\
"""Coursera's entry for this grader (written by `dfa export coursera`): grade /shared/submission for $partId."""

import sys
from pathlib import Path

from common.grading.platforms.coursera import main

sys.exit(main(["--grader-dir", str(Path(__file__).resolve().parent)]))
'''


def part_map(course, parts: list[str]) -> dict[str, str]:
    """``PARTID=LAB`` pairs → {part id: "course/lab"}; a lab no pair names is keyed by its own name."""
    mapping, named = {}, set()
    for pair in parts:
        part_id, sep, lab = pair.partition("=")
        if not sep or not part_id or not lab:
            raise DFAError(f"--part {pair!r}: expected PARTID=LAB, e.g. --part Zb6wb=lab1")
        if part_id in mapping:
            raise DFAError(f"--part {part_id!r} is given twice")
        lab = course.require_lab(lab)
        mapping[part_id] = f"{course.name}/{lab}"
        named.add(lab)
    for lab in course.labs():
        if lab not in named:
            mapping.setdefault(lab, f"{course.name}/{lab}")
    return mapping


def export(course, out: Path, *, parts: list[str] = (), force: bool = False, timeout_s: int = DEFAULT_TIMEOUT_S,
           memory_gb: float = DEFAULT_MEMORY_GB) -> list[Path]:
    """Write the grader's Docker context for ``course`` into ``out``; returns the files written at its top."""
    if not TIMEOUT_RANGE[0] <= timeout_s <= TIMEOUT_RANGE[1]:
        raise DFAError(f"--timeout {timeout_s}: Coursera accepts {TIMEOUT_RANGE[0]} to {TIMEOUT_RANGE[1]} s")
    shared.Budget(timeout_s, memory_gb)  # refuses a budget a notebook cannot be graded in
    mapping = part_map(course, list(parts))
    shared.prepare_out(out, force)
    shared.copy_package(out / "package")
    shared.copy_course(course, course.labs(), out / "courses")
    (out / PARTS_FILE).write_text(json.dumps(mapping, indent=2) + "\n", encoding="utf-8")
    (out / "grader.py").write_text(GRADER_SCRIPT, encoding="utf-8")
    (out / "Dockerfile").write_text(DOCKERFILE.format(
        course=course.name, labs=", ".join(course.labs()), timeout=timeout_s, memory_gb=memory_gb,
        memory_mb=int(memory_gb * 1024), home=GRADER_HOME, parts=PARTS_FILE, timeout_env=TIMEOUT_ENV,
        memory_env=MEMORY_ENV), encoding="utf-8")
    return [out / name for name in ("Dockerfile", "grader.py", PARTS_FILE, "courses", "package")]


def _lab(grader_dir: Path, part_id: str | None) -> tuple[Path, str]:
    """The course folder and lab that ``part_id`` grades."""
    try:
        mapping = json.loads((grader_dir / PARTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise shared.GradingFailed(shared.MISCONFIGURED, f"cannot read {grader_dir / PARTS_FILE}: {exc}") from None
    if part_id not in mapping:
        raise shared.GradingFailed(
            f"This grader has no lab for assignment part {part_id!r}, so it did not grade your notebook. This is "
            "not your fault: tell the course staff.",
            f"{PART_ENV}={part_id!r} is not in {grader_dir / PARTS_FILE}; valid: {', '.join(mapping)}")
    course, lab = mapping[part_id].split("/", 1)
    return grader_dir / "courses" / course, lab


def _summary(result: dict, cells: dict) -> tuple[float, str]:
    """(fractionalScore, an HTML summary: score, how the run ended, one row per graded cell)."""
    auto = [c for c in result["cells"] if not (cells.get(c["grade_id"]) and cells[c["grade_id"]].manual)]
    manual = [c for c in result["cells"] if c not in auto]
    top = sum(c["max_score"] for c in auto)
    score = sum(c["score"] for c in auto)
    rows = []
    for c in result["cells"]:
        section = cells[c["grade_id"]].section if c["grade_id"] in cells else ""
        points = "written answer: not graded here" if c in manual else f"{c['score']:g} / {c['max_score']:g}"
        rows.append(f"<tr><td>{html.escape(section)}</td><td><code>{html.escape(c['grade_id'])}</code></td>"
                    f"<td>{points}</td></tr>")
    parts = [f"<h3>{html.escape(result['lab'])}: {score:g} / {top:g} points</h3>"]
    note = shared.status_note(result)
    if note:
        parts.append(f"<p>{html.escape(note, quote=False)}</p>")
    parts.append("<table><tr><th>part</th><th>cell</th><th>points</th></tr>" + "".join(rows) + "</table>")
    if manual:
        parts.append(f"<p>Written answers ({sum(c['max_score'] for c in manual):g} points) are not graded "
                     "automatically: this score counts the automatic points only.</p>")
    return (round(score / top, 4) if top else 0.0), "\n".join(parts)


def _page(summary: str, feedback_html: str) -> str:
    """The summary on top of the graded notebook's page (which has no hidden tests: ``dfa feedback``'s page)."""
    if not feedback_html:
        return f"<!DOCTYPE html>\n<html><body>\n{summary}\n</body></html>\n"
    body = re.search(r"<body[^>]*>", feedback_html)
    if not body:
        return summary + feedback_html
    return feedback_html[: body.end()] + "\n" + summary + "\n" + feedback_html[body.end():]


def run(root: Path, grader_dir: Path, part_id: str | None, budget: shared.Budget) -> dict:
    """Grade ``root/submission`` for ``part_id``; write ``root/feedback.json`` and ``root/htmlFeedback.html``."""
    started = time.monotonic()
    try:
        course_dir, lab = _lab(grader_dir, part_id)
        for path in (root, course_dir):
            if shared.visible_in_sandbox(path):
                raise shared.GradingFailed(shared.MISCONFIGURED, f"{path} lies inside a folder the sandbox shows")
        shared.close_to_others([course_dir.parent], [root])
        submission = shared.find_notebook(root / "submission")
        from common.grading.courses.course import Course

        result = shared.grade(course_dir, lab, submission, budget, started)
        fraction, summary = _summary(result, shared.lab_cells(Course(course_dir), lab))
        page = _page(summary, result["feedback_html"])
        print(f"dfa grader: {result['course']}/{lab} {result['score']:g} / {result['max_score']:g} "
              f"{result['status']} in {result['seconds']} s, sandbox {result.get('sandbox_mode')}"
              f"{shared.review_note(result)}", file=sys.stderr)
    except Exception as exc:  # whatever failed, the learner gets feedback: score 0 and what to do
        if not isinstance(exc, shared.GradingFailed):
            traceback.print_exc()  # a bug of the grader's: the log gets it all
            exc = shared.GradingFailed(shared.BROKEN, f"{type(exc).__name__}: {exc}")
        print(f"dfa grader: no grade: {exc.detail}", file=sys.stderr)
        fraction, summary = 0.0, f"<p>{html.escape(exc.learner, quote=False)}</p>"
        page = _page(summary, "")
    feedback = {"fractionalScore": fraction, "feedback": summary, "feedbackType": "HTML"}
    shared.write_atomic(root / "htmlFeedback.html", page)
    shared.write_atomic(root / "feedback.json", json.dumps(feedback) + "\n")
    return feedback


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="coursera-grader", description="Coursera's entry for a dfa grader")
    parser.add_argument("--grader-dir", required=True, type=Path, help=f"the folder with {PARTS_FILE} and courses/")
    parser.add_argument("--root", type=Path, default=Path(os.environ.get(ROOT_ENV, DEFAULT_ROOT)),
                        help=f"Coursera's shared folder (default ${ROOT_ENV} or {DEFAULT_ROOT})")
    parser.add_argument("--timeout", type=int, default=int(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))
    parser.add_argument("--memory", type=float, default=float(os.environ.get(MEMORY_ENV, DEFAULT_MEMORY_GB)))
    args = parser.parse_args(argv)
    feedback = run(args.root, args.grader_dir, os.environ.get(PART_ENV), shared.Budget(args.timeout, args.memory))
    print(json.dumps(feedback), flush=True)  # `coursera_autograder grade local` reads the last line printed
    return 0


if __name__ == "__main__":
    sys.exit(main())
