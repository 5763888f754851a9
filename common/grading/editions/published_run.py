"""``dfa check --published OUT --execute``: every release notebook of the student edition runs top to bottom in a
fresh virtual environment that holds only ``OUT``.

The environment: ``python -m venv``, then ``pip install`` of a copy of ``OUT`` (so no build files land in it),
the torch this interpreter runs (``torch==<version>``, so pip takes the same build from the local index) and
what executes a notebook (nbclient, ipykernel). Nothing from the instructor edition is importable there: a
probe cell, run first in every kernel, fails unless ``common`` comes from the environment's site-packages and
``common.grading`` does not exist.

Each notebook runs *solved*: its stub cells hold the instructor's solution (markers removed), as a learner who
did the work would have them, while every other cell is the published one. That is what proves the package
is enough: a visible check, a setup cell or a solution that needs something the edition left out fails here.
The solved copies are made in a temporary folder, never in ``OUT``. ``NBGRADER_EXECUTION=1`` gives the labs
their FAST sizes, as under the autograder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from common.errors import DFAError
from common.grading.courses import regions, standard

PROBE = """import importlib.util, sys
import common
assert common.__file__.startswith(sys.prefix), f"common comes from {common.__file__}, not {sys.prefix}"
assert importlib.util.find_spec("common.grading") is None, "the instructor tooling is importable"
import common.cli
assert "tour" in common.cli.build_parser().format_help(), "the dfa command lost its learner commands"
"""

RUNNER = r"""
import json, sys, time
import nbclient, nbformat
jobs = json.loads(open(sys.argv[1]).read())
results = []
for job in jobs:
    nb = nbformat.read(job["path"], as_version=4)
    started = time.monotonic()
    client = nbclient.NotebookClient(nb, timeout=job["timeout"], kernel_name="python3", allow_errors=False,
                                     resources={"metadata": {"path": job["cwd"]}})
    error = None
    try:
        client.execute()
    except Exception as exc:
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        for i, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    error = f"cell {i - 1}: {out.get('ename')}: {out.get('evalue')}"[:300]
    results.append({"notebook": job["name"], "error": error, "seconds": round(time.monotonic() - started, 1)})
    print(json.dumps(results[-1]), flush=True)
open(sys.argv[2], "w").write(json.dumps(results))
"""


def _strip_markers(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if not any(m in line for m in regions.MARKERS))


def solved(release_nb, source_nb):
    """The release notebook with each stub and written-answer cell replaced by the source's (markers removed)."""
    answers = {
        standard.nbgrader_meta(c).get("grade_id"): c.source
        for c in source_nb.cells
        if standard.nbgrader_meta(c).get("solution")
    }
    nb = nbformat.from_dict(release_nb)
    for cell in nb.cells:
        grade_id = standard.nbgrader_meta(cell).get("grade_id")
        if standard.nbgrader_meta(cell).get("solution") and grade_id in answers:
            cell.source = _strip_markers(answers[grade_id])
    probe = nbformat.v4.new_code_cell(PROBE)
    nb.cells.insert(0, probe)
    return nb


def make_env(out: Path, work: Path, log) -> Path:
    """A fresh virtual environment in ``work`` with only the student edition installed; its python."""
    edition = work / "edition"
    shutil.copytree(out, edition, ignore=shutil.ignore_patterns(".git"))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pins = []
    try:
        import torch

        pins.append(f"torch=={torch.__version__.split('+')[0]}")
    except ImportError:
        pass
    started = time.monotonic()
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(edition), *pins, "nbclient", "ipykernel", "nbformat"],
        cwd=work,
        env=_clean_env(work),
        capture_output=True,
        text=True,
    )
    if pip.returncode != 0:
        raise DFAError(
            f"--execute: pip could not install the student edition in a fresh environment: "
            f"{_tail(pip.stderr or pip.stdout)}"
        )
    log(f"fresh environment with the student edition installed in {time.monotonic() - started:.0f} s")
    return python


def _tail(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("WARNING: Location")]
    return lines[-1].strip() if lines else "(no output)"


def _clean_env(work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "JUPYTER"))}
    env.update(
        JUPYTER_DATA_DIR=str(work / "jupyter"),
        JUPYTER_CONFIG_DIR=str(work / "jupyter"),
        NBGRADER_EXECUTION="1",
        MPLBACKEND="Agg",
    )
    env["PATH"] = str(work / "venv" / "bin") + os.pathsep + env.get("PATH", "")
    return env


def execute(out: Path, notebooks: dict[str, Path], *, timeout_s: int = 600, log=print) -> list[str]:
    """Run each published notebook (``notebooks``: repository path -> its lab's source notebook), solved, in a
    fresh environment; one problem line per notebook that fails."""
    with tempfile.TemporaryDirectory(prefix="dfa-published-run-") as tmp:
        work = Path(tmp)
        jobs = []
        for rel, source in notebooks.items():
            folder = work / "labs" / Path(rel).parent
            if not folder.is_dir():  # the lab's other files; two notebooks of one folder share them
                shutil.copytree((out / rel).parent, folder)
            nb = solved(nbformat.read(out / rel, as_version=4), nbformat.read(source, as_version=4))
            nbformat.write(nb, folder / Path(rel).name)
            jobs.append({"name": rel, "path": str(folder / Path(rel).name), "cwd": str(folder), "timeout": timeout_s})
        (work / "jobs.json").write_text(json.dumps(jobs), encoding="utf-8")
        python = make_env(out, work, log)
        (work / "runner.py").write_text(RUNNER, encoding="utf-8")
        run = subprocess.run(
            [str(python), str(work / "runner.py"), str(work / "jobs.json"), str(work / "results.json")],
            cwd=work / "labs",
            env=_clean_env(work),
            capture_output=True,
            text=True,
        )
        if not (work / "results.json").is_file():
            return [f"--execute: the notebook runner in the fresh environment stopped: {_tail(run.stderr)}"]
        results = json.loads((work / "results.json").read_text(encoding="utf-8"))
    problems = []
    for result in results:
        log(f"ran {result['notebook']} in {result['seconds']} s" + (f": {result['error']}" if result["error"] else ""))
        if result["error"]:
            problems.append(
                f"{result['notebook']}: does not run in a fresh environment with only the student "
                f"edition: {result['error']}"
            )
    return problems
