"""Everything that ties a release notebook to Google Colab: the repository URL, the badge and the setup cell.

A fork changes ``REPO_GIT_URL`` (and ``REPO_BRANCH`` if it publishes another branch), then runs
``dfa release``: every badge, every setup cell and the README lab tables are rewritten from these constants.
A new release of the package is a git tag: push it, set ``RELEASE_REF`` to it, run ``dfa release``.
"""

from __future__ import annotations

import re
from pathlib import Path

from common import torch_compat

# The one place that says where this project lives: setup cells install from it, badges open from it.
REPO_GIT_URL = "https://github.com/dataflow-labs/open-labs.git"
REPO_BRANCH = "main"
# What setup cells install: a tag, so a learner's lab keeps the package it was written against while the branch
# moves on. Only the package is pinned: torch and numpy stay Colab's own (pyproject's floors apply).
RELEASE_REF = "v0.1.0"
# Tests (and anyone installing from a mirror) point the setup cell elsewhere with this environment variable.
INSTALL_SOURCE_ENV = "DFA_INSTALL_SOURCE"

BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
# Notebook metadata as Colab saves it after "Runtime > Change runtime type > T4 GPU": a notebook that carries it
# opens on a GPU runtime (T4, what Colab's free tier hands out), so the labs' CUDA cells measure a real GPU.
# Jupyter keeps unknown notebook metadata as it is, so these keys do not make a notebook open modified there.
# A learner can still pick a CPU runtime: every lab runs on a CPU.
NOTEBOOK_METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}
TABLE_START = "<!-- labs:start -->"
TABLE_END = "<!-- labs:end -->"


def github_slug(url: str = REPO_GIT_URL) -> str:
    """``https://github.com/owner/name.git`` → ``owner/name``."""
    match = re.match(r"^(?:https://|git@)github\.com[/:]([^/]+)/([^/]+?)(?:\.git)?/?$", url)
    if not match:
        raise ValueError(f"REPO_GIT_URL must be a GitHub repository URL, got {url!r}")
    return f"{match.group(1)}/{match.group(2)}"


def colab_url(notebook_path: str) -> str:
    """The Colab URL that opens ``notebook_path`` (relative to the repository root, POSIX separators)."""
    return f"https://colab.research.google.com/github/{github_slug()}/blob/{REPO_BRANCH}/{notebook_path}"


def badge_markdown(notebook_path: str) -> str:
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(notebook_path)})"


def install_source() -> str:
    """The pip requirement setup cells install: ``git+URL@RELEASE_REF``."""
    return f"git+{REPO_GIT_URL}@{RELEASE_REF}"


def setup_cell_source() -> str:
    """The first code cell of every lab: in Colab it installs this package; elsewhere it only reports.

    ``%pip`` rather than ``subprocess``: it installs into the running kernel, and Colab's own pip magic then
    offers to restart the session when the install replaced a package already imported. Its output is left
    visible: a minute of silence looks like a hang. When the install fails (offline, a tag or fork that does
    not exist) or a local kernel lacks the package, the cell stops with one ``SetupError`` line saying what
    happened and what to do, instead of pip's error followed by a bare ``ModuleNotFoundError``. On a torch older
    than the floor, ``import common`` raises ``TorchVersionError``, also one line (``_render_traceback_``).
    """
    return f'''# Setup. In Google Colab this installs the course package, release {RELEASE_REF} (about a
# minute; if Colab then offers to restart the session, restart and run this cell again); on
# your own machine, where you installed it already, it changes nothing. Then it picks the GPU
# if there is one, else the CPU.
import importlib
import os
import sys


class SetupError(RuntimeError):
    def _render_traceback_(self):  # Jupyter and Colab show this one line, not a traceback
        return [f"SetupError: {{self}}"]


IN_COLAB = "google.colab" in sys.modules
if IN_COLAB:
    source = os.environ.get("{INSTALL_SOURCE_ENV}", "{install_source()}")
    _exit_code = 0
    %pip install {{source}}
    importlib.invalidate_caches()
    if _exit_code:
        raise SetupError(f"pip could not install the course package from {{source}} (its error is above): "
                         "check that this runtime is online and that the release exists, then run this cell again")

# The checks load before any of your code runs. On a torch older than {torch_compat.floor()} this
# line stops the cell with one line saying which torch it found and how to upgrade.
try:
    import common.checks  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name not in ("common", "common.checks"):
        raise
    where = (f"pip installed nothing from {{source}}: run this cell again" if IN_COLAB else
             f"this kernel runs {{sys.executable}}: from the repository run  pip install -e '.[lab]'  with that "
             "Python (or pick the kernel where you installed it), then restart the kernel")
    raise SetupError(f"the course package is not installed in this kernel; {{where}}") from None
import torch

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print(f"torch {{torch.__version__}} on {{DEVICE}}"
      + ("" if DEVICE.type == "cuda" else " (no GPU found: everything runs on the CPU, which is fine)"))
'''


NO_LABS_YET = "No lab is released yet: the six course issues add them. `dfa release` regenerates this table."


def lab_table(rows: list[tuple[str, str, str, str]]) -> str:
    """Markdown table for ``rows`` of (course, lab title, link to the notebook, its repository path)."""
    if not rows:
        return NO_LABS_YET
    lines = ["| Course | Lab | Open |", "| --- | --- | --- |"]
    for course, title, link, path in rows:
        lines.append(f"| {course} | [{title}]({link}) | {badge_markdown(path)} |")
    return "\n".join(lines)


def update_lab_table(
    readme: Path, rows: list[tuple[str, str, str, str]], *, write: bool = True
) -> bool | None:
    """Rewrite the text between the ``labs:start``/``labs:end`` markers of ``readme``.

    Returns None when the file or its markers are missing (then nothing is touched), else whether the table
    changed. With ``write=False`` it only reports whether it would change.
    """
    if not readme.is_file():
        return None
    text = readme.read_text(encoding="utf-8")
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        return None
    new = text[: start + len(TABLE_START)] + "\n" + lab_table(rows) + "\n" + text[end:]
    if new == text:
        return False
    if write:
        readme.write_text(new, encoding="utf-8")
    return True


def colab_prefix(slug: str) -> str:
    """The Colab URL prefix of repository ``slug`` (owner/name) on the branch learners open."""
    return f"https://colab.research.google.com/github/{slug}/blob/{REPO_BRANCH}/"
