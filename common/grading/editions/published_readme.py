"""The README of the student edition: written for learners (open a lab in Colab, or install and run it locally)."""

from __future__ import annotations

from pathlib import Path

import nbformat

from common.grading.authoring import colab


def title_of(notebook: Path) -> str:
    from common.grading.authoring.release import lab_title

    return lab_title(nbformat.read(notebook, as_version=4))


def _badge(slug: str, path: str) -> str:

    return f"[![Open In Colab]({colab.BADGE_IMAGE})]({colab.colab_prefix(slug)}{path})"


def readme(slug: str, rows: list[tuple[str, str, str]]) -> str:
    """``rows``: (course folder, lab title, notebook path in the repository)."""
    table = ["| Course | Lab | Open |", "| --- | --- | --- |"]
    table += [f"| {course} | [{title}]({path}) | {_badge(slug, path)} |" for course, title, path in rows]
    url = f"https://github.com/{slug}"
    courses = len({course for course, _, _ in rows})
    return f"""# Dataflow Architectures for AI — the labs

{courses} course(s), {len(rows)} notebooks, on how GPUs, TPUs, wafer-scale engines, Groq's LPU and IBM's
Spyre run a neural network. Every lab runs on simulated machines built on PyTorch: no special hardware, and
a CPU is enough. Each course folder's README is its syllabus.

## Open a lab

The easiest way: click a lab's **Open in Colab** badge, then, in Colab, **File → Save a copy in Drive** (your
work is kept in your copy). Run the cells from the top, in order.

{chr(10).join(table)}

## What the first cells do

- The **setup cell** installs this course's package in Colab (about a minute; if Colab offers to restart the
  session, restart and run the setup cell again). On your own machine it only reports torch and the device.
- Each lab says at the top **how it is graded** and how long it takes. Write your code where a cell says
  `# YOUR CODE HERE` (replace the `raise NotImplementedError()` line), then run the **test cell** under it:
  it prints a ✔, or what is wrong with your answer. Passing these visible checks is necessary, not sufficient:
  your instructor grades your notebook with further tests on other inputs.
- Do not edit or delete the locked cells (the setup cell and the test cells): they are restored when your
  notebook is graded.

## Run the labs on your own machine

```bash
python3 -m venv .venv && . .venv/bin/activate
pip install torch --index-url https://download.pytorch.org/whl/cpu   # or your platform's torch build
pip install "dataflow-labs[lab] @ git+{url}.git@{colab.RELEASE_REF}"   # the package, JupyterLab, ipywidgets
dfa lab   # JupyterLab, in which an unedited lab opens unmodified (plain `jupyter lab` works too)
```

Or clone the repository and install it from there: `git clone {url}.git && cd {slug.split("/")[1]} &&
pip install -e ".[lab]"`. Then `dfa lab courseN_*/release/<lab>/<lab>.ipynb` (or `jupyter lab`, which asks
to save an unedited lab on close: saying no loses nothing). The `dfa` command
comes with the package: `dfa tour --quick` shows the simulated machines in a minute. The licence is Apache-2.0
(`LICENSE`).

Your landscape map (every course adds rows to it) is one file,
`~/.local/share/dataflow-labs/landscape_map.json`. On Colab it is gone when the session ends unless you keep it:
set `KEEP_ON_DRIVE = True` in a lab's map cell (Google Drive), or download it with `download_map()`.

## Handing in

Save the notebook (in Colab: **File → Download → Download .ipynb**) and upload the `.ipynb` where your
instructor asks (the course platform or its assignment page). Hand in the notebook you worked in, with its
cells in place: the grader finds your answers by the cells' ids.

## Getting help

Read the error line first: the checks are written to say what is wrong and what to try. Then ask on your
course's forum; please do not post solutions there.
"""
