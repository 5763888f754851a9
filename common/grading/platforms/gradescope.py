"""Gradescope's autograder for one lab, and ``dfa export gradescope`` (``autograder.zip``).

The contract, from Gradescope's "Autograder Specifications" (gradescope-autograders.readthedocs.io/en/latest/
specs/): the zip holds ``setup.sh`` (run once, as root, on Gradescope's Ubuntu image) and ``run_autograder``
(run for each submission, in ``/autograder``); the zip is unpacked into ``/autograder/source``, the submission
arrives in ``/autograder/submission``, and ``/autograder/results/results.json`` is the result: ``score``,
``output``, ``stdout_visibility`` and ``tests``, each with ``name``, ``score``, ``max_score``, ``status``,
``visibility`` and ``output``. Here one test is one graded cell; a cell that holds hidden tests is visible
``after_published`` (when the instructor publishes the grades), a written answer is a 0-point test that says it
is graded by hand.

Gradescope's troubleshooting page gives the defaults: 768 MB of memory, half a vCPU, a 10-minute timeout (up to
40). A lab needs more: set the assignment's autograder to 1 CPU, 4 GB and the timeout the export was made for
(docs/instructors.md). results.json is written by this process after the grading child has ended; bubblewrap
does not show /autograder at all, and a fallback sandbox's user may not write in results/ nor read the course
sources, so a submission cannot write it or leave a process behind that would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path

from common.errors import DFAError
from common.grading.platforms import shared

ROOT_ENV = "DFA_GRADESCOPE_ROOT"  # tests lay out a folder as Gradescope lays out /autograder
DEFAULT_ROOT = "/autograder"
CONFIG_FILE = "dfa_grader.json"
DEFAULT_TIMEOUT_S, DEFAULT_MEMORY_GB = 1200, 4.0
MAX_TIMEOUT_S = 40 * 60  # Gradescope's largest timeout (module docstring)
VENV = "/opt/dfa-venv"

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (written by `dfa export gradescope`).
set -euo pipefail
source_dir=/autograder/source
apt-get update
# bubblewrap isolates the learner's code (docs/instructors.md, "The sandbox")
apt-get install -y --no-install-recommends bubblewrap python3-venv
# The package needs Python 3.11 or newer (pyproject.toml); Ubuntu 22.04's python3 is 3.10.
py=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  apt-get install -y --no-install-recommends python3.11 python3.11-venv
  py=python3.11
fi
"$py" -m venv {venv}
# The CPU build of torch (the autograder has no GPU), then the package, editable: the sandbox shows its common/
{venv}/bin/pip install --no-cache-dir torch --index-url https://download.pytorch.org/whl/cpu
{venv}/bin/pip install --no-cache-dir -e "$source_dir/package[instructor]"
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for each submission (written by `dfa export gradescope`): {course}/{lab}.
exec {venv}/bin/python -m common.grading.platforms.gradescope
"""


def export(course, lab: str, out: Path, *, force: bool = False, timeout_s: int = DEFAULT_TIMEOUT_S,
           memory_gb: float = DEFAULT_MEMORY_GB) -> Path:
    """Write ``out/autograder.zip`` for ``course``'s ``lab``; returns its path."""
    lab = course.require_lab(lab)
    if timeout_s > MAX_TIMEOUT_S:
        raise DFAError(f"--timeout {timeout_s}: Gradescope allows at most {MAX_TIMEOUT_S} s")
    shared.Budget(timeout_s, memory_gb)  # refuses a budget a notebook cannot be graded in
    shared.prepare_out(out, force)
    with tempfile.TemporaryDirectory(prefix="dfa-export-") as tmp:
        stage = Path(tmp)
        shared.copy_package(stage / "package")
        shared.copy_course(course, [lab], stage / "courses")
        config = {"course": course.name, "lab": lab, "timeout_s": timeout_s, "memory_gb": memory_gb}
        (stage / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        (stage / "setup.sh").write_text(SETUP_SH.replace("{venv}", VENV), encoding="utf-8")
        (stage / "run_autograder").write_text(
            RUN_AUTOGRADER.format(course=course.name, lab=lab, venv=VENV), encoding="utf-8")
        target = out / "autograder.zip"
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(stage.rglob("*")):
                if path.is_file():
                    name = path.relative_to(stage).as_posix()  # setup.sh and run_autograder at the zip's root
                    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                    mode = 0o755 if name in ("setup.sh", "run_autograder") else 0o644
                    info.external_attr, info.compress_type = mode << 16, zipfile.ZIP_DEFLATED
                    archive.writestr(info, path.read_bytes())
    return target


def _results(result: dict, cells: dict) -> dict:
    tests = []
    for c in result["cells"]:
        info = cells.get(c["grade_id"])
        name = f"{info.section}: {c['grade_id']}" if info and info.section else c["grade_id"]
        if info and info.manual:
            tests.append({"name": name, "score": 0.0, "max_score": 0.0, "visibility": "visible",
                          "output": f"Written answer ({c['max_score']:g} points): graded by hand by the course "
                                    "staff, not by the autograder."})
            continue
        passed = c["score"] >= c["max_score"]
        output = "Passed." if passed else (
            f"{c['score']:g} of {c['max_score']:g} points. Run this cell in your notebook: its checks say what is "
            "wrong (hidden tests may check more cases than the visible ones).")
        tests.append({"name": name, "score": c["score"], "max_score": c["max_score"],
                      "status": "passed" if passed else "failed",
                      "visibility": "after_published" if info and info.hidden else "visible", "output": output})
    score = sum(t["score"] for t in tests)
    top = sum(t["max_score"] for t in tests)
    if result.get("review"):  # for the staff only: Gradescope never shows a hidden test to the learner
        tests.append({"name": "Review flags (staff only)", "score": 0.0, "max_score": 0.0, "visibility": "hidden",
                      "output": shared.review_note(result).strip()})
    output = " ".join(filter(None, [f"{result['lab']}: {score:g} / {top:g} automatic points.",
                                    shared.status_note(result)]))
    return {"score": score, "execution_time": round(result["seconds"]), "output": output,
            "stdout_visibility": "hidden", "tests": tests}


def run(root: Path) -> dict:
    """Grade ``root/submission`` for the lab in ``root/source``; write ``root/results/results.json``."""
    started = time.monotonic()
    source, results_file = root / "source", root / "results" / "results.json"
    try:
        try:
            config = json.loads((source / CONFIG_FILE).read_text(encoding="utf-8"))
            course_dir, lab = source / "courses" / config["course"], config["lab"]
        except (OSError, ValueError, KeyError) as exc:
            raise shared.GradingFailed(shared.MISCONFIGURED, f"cannot read {source / CONFIG_FILE}: {exc}") from None
        for path in (root / "results", course_dir):
            if shared.visible_in_sandbox(path):
                raise shared.GradingFailed(shared.MISCONFIGURED, f"{path} lies inside a folder the sandbox shows")
        shared.close_to_others([course_dir.parent], [root / "results"])
        submission = shared.find_notebook(root / "submission")
        from common.grading.courses.course import Course

        result = shared.grade(course_dir, lab, submission, shared.Budget(config["timeout_s"], config["memory_gb"]),
                              started)
        results = _results(result, shared.lab_cells(Course(course_dir), lab))
        print(f"dfa grader: {config['course']}/{lab} {result['score']:g} / {result['max_score']:g} "
              f"{result['status']} in {result['seconds']} s, sandbox {result.get('sandbox_mode')}"
              f"{shared.review_note(result)}")
    except Exception as exc:  # whatever failed, results.json says so: score 0 and what to do
        if not isinstance(exc, shared.GradingFailed):
            traceback.print_exc()  # a bug of the grader's: the log gets it all
            exc = shared.GradingFailed(shared.BROKEN, f"{type(exc).__name__}: {exc}")
        print(f"dfa grader: no grade: {exc.detail}")
        results = {"score": 0.0, "output": exc.learner, "stdout_visibility": "hidden", "tests": []}
    shared.write_atomic(results_file, json.dumps(results, indent=2) + "\n")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_autograder", description="Gradescope's entry for a dfa grader")
    parser.add_argument("--root", type=Path, default=Path(os.environ.get(ROOT_ENV, DEFAULT_ROOT)),
                        help=f"Gradescope's autograder folder (default ${ROOT_ENV} or {DEFAULT_ROOT})")
    run(parser.parse_args(argv).root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
