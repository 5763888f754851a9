"""How fast does ``dfa autograde`` grade, and what does the sandbox cost? (A benchmark, not a test.)

Grades N copies (default 20) of the fixture lab's source notebook — every answer right, so every cell runs —
four ways, on a fresh copy of the course each time:

* ``dfa autograde`` with the sandbox, 1 worker and 2 workers (the target: ≥ 6 submissions/min on 2 cores);
* ``dfa autograde --unsafe-no-sandbox``, 2 workers: the same pipeline without bubblewrap;
* nbgrader alone: ``NbGraderAPI.autograde`` for each student in turn, in-process, no sandbox, one at a time.

    PYTHONPATH=. python benchmarks/grading_throughput.py [--copies 20] [--json results.json]

Prints one line per way (submissions per minute, seconds per submission) and checks every way gave every
submission the same, full score.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# nbgrader alone runs kernels with this process's environment: they must find the `common` package too
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))

from common.grading.autograde import autograde  # noqa: E402
from common.grading.course import Course  # noqa: E402
from common.grading.release import release  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "course0_fixture"
LAB = "lab1"


def fresh_course(workdir: Path, copies: int) -> Course:
    root = workdir / FIXTURE.name
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(FIXTURE, root)
    course = Course(root)
    release([course])
    for i in range(copies):
        folder = course.submitted_dir / f"student{i:02d}" / LAB
        folder.mkdir(parents=True)
        shutil.copy(course.source_notebook(LAB), folder / f"{LAB}.ipynb")
    return course


def run_dfa(course: Course, workers: int, sandbox: bool) -> dict[str, float]:
    graded = autograde(course, LAB, workers=workers, unsafe_no_sandbox=not sandbox, report=lambda g: None)
    return {g.student: g.score for g in graded}


def run_nbgrader_alone(course: Course) -> dict[str, float]:
    api = course.api()
    scores = {}
    for folder in sorted(course.submitted_dir.iterdir()):
        result = api.autograde(LAB, folder.name, force=True, create=True)
        if not result["success"]:
            raise RuntimeError(result.get("error", "nbgrader failed"))
    with course.gradebook() as gb:
        for submission in gb.find_assignment(LAB).submissions:
            scores[submission.student.id] = submission.score
    return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    ways = [
        ("dfa autograde, sandbox, 1 worker", lambda c: run_dfa(c, 1, True)),
        ("dfa autograde, sandbox, 2 workers", lambda c: run_dfa(c, 2, True)),
        ("dfa autograde, no sandbox, 2 workers", lambda c: run_dfa(c, 2, False)),
        ("nbgrader alone (in-process, serial)", run_nbgrader_alone),
    ]
    print(f"grading {args.copies} copies of {FIXTURE.name}/{LAB} on {os.cpu_count()} CPU cores")
    results, reference = [], None
    with tempfile.TemporaryDirectory(prefix="dfa-bench-") as tmp:
        for name, grade in ways:
            course = fresh_course(Path(tmp), args.copies)
            started = time.monotonic()
            scores = grade(course)
            seconds = time.monotonic() - started
            reference = reference or scores
            same = scores == reference and len(set(scores.values())) == 1
            row = {
                "way": name,
                "seconds": round(seconds, 1),
                "per_minute": round(len(scores) / seconds * 60, 1),
                "seconds_each": round(seconds / len(scores), 2),
                "same_scores": same,
            }
            results.append(row)
            print(
                f"{name:<40} {row['per_minute']:6.1f} submissions/min   {row['seconds_each']:5.2f} s each"
                f"   {'same full scores' if same else 'SCORES DIFFER'}"
            )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"copies": args.copies, "cores": os.cpu_count(), "results": results}, indent=2)
        )
    return 0 if all(r["same_scores"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
