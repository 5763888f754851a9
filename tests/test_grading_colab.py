"""Colab, both ways.

The setup cell, executed in a fresh kernel: in "Colab" (a fake ``google.colab`` module) it installs the
package from the install source with ``%pip`` and picks a device, and on a torch older than the floor it stops
with one line; on a local machine it installs nothing.

A notebook saved by Colab still grades: Colab drops nbgrader's metadata, gives cells its own ids and adds
``executionInfo``/``outputId`` to their metadata and ``colab`` to the notebook's; re-matching (rematch.py)
gives the honest notebook back its cells, and the autograder its full marks.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import sys
import uuid
from pathlib import Path

import nbformat
import pytest
from fixtures.grading_support import (
    AUTOGRADED_POINTS,
    FIXTURE_COURSE,
    LAB,
    RIGHT_RELU,
    cell_index,
    copy_course,
    needs_sandbox,
    read,
    right_answers,
    with_code,
)
from nbclient import NotebookClient

import common
from common import torch_compat
from common.grading.authoring import colab
from common.grading.gradebook import rematch

REPO = Path(__file__).resolve().parents[1]
RELEASE = FIXTURE_COURSE / "release" / LAB / f"{LAB}.ipynb"

MINIMAL_PYPROJECT = """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
[project]
name = "dfa-setup-cell-check"
version = "0"
[tool.setuptools.packages.find]
include = ["common*"]
"""


# ---- the setup cell's text ---
def test_the_setup_cell_installs_the_pinned_release_with_the_pip_magic():
    cell = colab.setup_cell_source()
    installs = [line.strip() for line in cell.splitlines() if re.match(r"\s*[%!]?pip\b", line)]  # not its messages
    assert "subprocess" not in cell and "os.system" not in cell
    assert installs == ["%pip install {source}"]  # the magic: into this kernel, with Colab's restart prompt
    assert f'"{colab.INSTALL_SOURCE_ENV}", "git+{colab.REPO_GIT_URL}@{colab.RELEASE_REF}"' in cell
    assert "--quiet" not in cell and " -q" not in cell  # a silent minute looks like a hang
    assert not re.search(r"(torch|numpy)\s*[=<>~]", cell), "the setup cell must not pin Colab's torch or numpy"
    assert cell.index("import common") < cell.index("import torch")  # the version check runs before torch loads


def test_the_pinned_release_is_this_package_version():
    # Bumping the version without tagging it and moving RELEASE_REF would leave every lab on the old package.
    assert colab.RELEASE_REF == f"v{common.__version__}" and colab.RELEASE_REF != colab.REPO_BRANCH


# ---- the setup cell, run in a kernel ---
def execute(cells: list[str], env: dict[str, str], cwd: Path, *, allow_errors: bool = False):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits this environment
    try:
        NotebookClient(
            nb, timeout=300, kernel_name="python3", allow_errors=allow_errors,
            resources={"metadata": {"path": str(cwd)}},
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return nb


def texts(nb) -> list[str]:
    return ["".join(o.get("text", "") for o in c.outputs) for c in nb.cells]


@pytest.fixture
def install_source(tmp_path) -> Path:
    """A local copy of the package that pip can install offline (the stand-in for the git URL)."""
    source = tmp_path / "source"
    shutil.copytree(REPO / "common", source / "common", ignore=shutil.ignore_patterns("__pycache__"))
    (source / "pyproject.toml").write_text(MINIMAL_PYPROJECT)
    return source


def kernel_env(pythonpath: list[Path], **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHONPATH", "DFA_"))}
    env.update(
        PYTHONPATH=os.pathsep.join(map(str, pythonpath)),
        PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
        **extra,
    )
    return env


def fake_colab(tmp_path: Path, install_source: Path, *, torch_metadata: str | None = None):
    """A kernel environment that looks like Colab and installs offline into ``site``. With ``torch_metadata``
    a ``torch-<version>.dist-info`` ahead of site-packages makes the installed torch look that old."""
    fake = tmp_path / "fake_colab" / "google" / "colab"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    target = tmp_path / "site"
    target.mkdir()
    path = [tmp_path / "fake_colab", target]
    if torch_metadata:
        info = tmp_path / "old_torch" / f"torch-{torch_metadata}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {torch_metadata}\n")
        path.append(tmp_path / "old_torch")
    env = kernel_env(
        path,
        DFA_INSTALL_SOURCE=str(install_source),
        PIP_TARGET=str(target),
        PIP_NO_DEPS="1",
        PIP_NO_INDEX="1",
        PIP_NO_BUILD_ISOLATION="0",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return env, target


@pytest.mark.slow
def test_in_colab_the_setup_cell_installs_the_package(tmp_path, install_source):
    env, target = fake_colab(tmp_path, install_source)
    outputs = texts(execute(
        [
            "import google.colab",
            colab.setup_cell_source(),
            "import common.checks; print(common.checks.__file__); print(DEVICE.type)",
        ],
        env,
        tmp_path,
    ))
    assert (target / "common" / "checks.py").is_file(), "pip did not install from DFA_INSTALL_SOURCE"
    installed_at, device = outputs[2].split()
    assert Path(installed_at).resolve() == (target / "common" / "checks.py").resolve()
    assert device == "cpu" and "no GPU found" in outputs[1]
    assert "Successfully installed dfa-setup-cell-check" in outputs[1]  # pip's own output is shown


@pytest.mark.slow
def test_in_colab_on_an_old_torch_the_setup_cell_stops_with_one_line(tmp_path, install_source):
    env, target = fake_colab(tmp_path, install_source, torch_metadata="2.8.0")
    nb = execute(["import google.colab", colab.setup_cell_source(), "print('ran on')"], env, tmp_path,
                 allow_errors=True)
    assert (target / "common" / "checks.py").is_file()  # it installed, then refused the torch
    errors = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "TorchVersionError"
    want = f'dataflow-labs needs torch >= {torch_compat.floor()}, found 2.8.0: %pip install -U "torch>=2.11"'
    assert errors[0].traceback == [want]  # what Jupyter and Colab show: that line, no traceback
    assert "torch 2" not in texts(nb)[1]  # it stopped before picking a device


@pytest.mark.slow
def test_on_a_local_machine_the_setup_cell_installs_nothing(tmp_path):
    target = tmp_path / "site"
    target.mkdir()
    env = kernel_env([REPO], DFA_INSTALL_SOURCE=str(tmp_path / "missing"), PIP_TARGET=str(target))
    outputs = texts(execute(
        [colab.setup_cell_source(), "import sys; print('google.colab' in sys.modules)"], env, tmp_path
    ))
    assert outputs[0].startswith("torch ") and outputs[1] == "False\n"
    assert list(target.iterdir()) == []


# ---- a notebook saved by Colab ---
def colab_saved(nb, *, cell_ids: bool) -> str:
    """``nb`` as Colab saves it after a learner ran it: the JSON text of its Drive file.

    Colab keeps only the metadata it knows: a notebook's becomes ``colab``/``kernelspec``/``language_info``;
    a cell's becomes its own ``id`` (12 characters), plus for a run code cell ``colab``, ``executionInfo``
    and ``outputId``. nbgrader's metadata, tags and the release's cell ids are gone. Notebooks it creates are
    nbformat 4.0 without cell ids (``cell_ids=False``); ``cell_ids=True`` is a 4.5 notebook with new ids.
    """
    nb = copy.deepcopy(nb)
    cells = []
    for i, cell in enumerate(nb.cells):
        colab_id = f"q7Rz{i:04d}XbNa"  # Colab's look: 12 letters and digits, nothing like the release's ids
        meta: dict = {"id": colab_id}
        out = {"cell_type": cell.cell_type, "metadata": meta, "source": cell.source.splitlines(keepends=True)}
        if cell_ids:
            out["id"] = colab_id
        if cell.cell_type == "code":
            meta.update({
                "colab": {"base_uri": "https://localhost:8080/"},
                "executionInfo": {"elapsed": 1200 + i, "status": "ok", "timestamp": 1767225600000 + 1000 * i,
                                  "user": {"displayName": "A Learner", "userId": "01234567890123456789"},
                                  "user_tz": -60},
                "outputId": str(uuid.UUID(int=i + 1)),
            })
            out["execution_count"] = i + 1
            out["outputs"] = [{"name": "stdout", "output_type": "stream", "text": [f"ran cell {i}\n"]}]
        cells.append(out)
    saved = {
        "nbformat": 4,
        "nbformat_minor": 5 if cell_ids else 0,
        "metadata": {"colab": {"provenance": [], "toc_visible": True},
                     "kernelspec": {"name": "python3", "display_name": "Python 3"},
                     "language_info": {"name": "python"}, "accelerator": "GPU"},
        "cells": cells,
    }
    return json.dumps(saved, indent=2, ensure_ascii=False)


def _grade_ids(nb):
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


@pytest.mark.parametrize("cell_ids", [False, True], ids=["nbformat-4.0", "nbformat-4.5-new-ids"])
def test_a_colab_saved_notebook_gets_its_cells_back(cell_ids):
    release = read(RELEASE)
    text = colab_saved(with_code(release, relu=RIGHT_RELU), cell_ids=cell_ids)
    assert '"nbgrader"' not in text and '"executionInfo"' in text and '"cell-0' not in text
    submission = nbformat.reads(text, as_version=4)
    rematch.restore(submission, release)
    assert _grade_ids(submission) == _grade_ids(release)
    assert [c.id for c in submission.cells] == [c.id for c in release.cells]  # Colab's ids replaced
    assert submission.cells[cell_index(submission, "relu")].source == RIGHT_RELU
    assert "executionInfo" in submission.cells[cell_index(submission, "relu")].metadata  # harmless, kept
    nbformat.validate(submission)




@pytest.mark.slow
@needs_sandbox
def test_an_honest_notebook_saved_by_colab_keeps_full_marks(tmp_path):
    from common.grading.authoring.release import release
    from common.grading.gradebook.autograde import autograde
    from common.grading.sandbox.limits import GB, Limits

    course = copy_course(FIXTURE_COURSE, tmp_path)
    release([course])
    honest = right_answers(course)
    for student, cell_ids in (("colab-40", False), ("colab-45", True)):
        folder = course.submitted_dir / student / LAB
        folder.mkdir(parents=True)
        (folder / f"{LAB}.ipynb").write_text(colab_saved(honest, cell_ids=cell_ids), encoding="utf-8")
    limits = Limits(cell_timeout_s=6, notebook_timeout_s=240, memory_bytes=2 * GB, max_processes=64)
    graded = {g.student: g for g in autograde(course, LAB, workers=2, limits=limits)}
    for student in ("colab-40", "colab-45"):
        assert graded[student].status == "completed", graded[student].line()
        assert graded[student].score == AUTOGRADED_POINTS, graded[student].line()
