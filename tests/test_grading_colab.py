"""The setup cell, executed in a fresh kernel: in "Colab" (a fake ``google.colab`` module) it installs the
package from the install source and picks a device; on a local machine it installs nothing."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from common.grading import colab

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

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


def execute(cells: list[str], env: dict[str, str], cwd: Path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits this environment
    try:
        NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
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


def test_in_colab_the_setup_cell_installs_the_package(tmp_path, install_source):
    fake = tmp_path / "fake_colab" / "google" / "colab"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    target = tmp_path / "site"
    target.mkdir()
    env = kernel_env(
        [tmp_path / "fake_colab", target],
        DFA_INSTALL_SOURCE=str(install_source),
        PIP_TARGET=str(target),
        PIP_NO_DEPS="1",
        PIP_NO_INDEX="1",
        PIP_NO_BUILD_ISOLATION="0",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    outputs = execute(
        [
            "import google.colab",
            colab.setup_cell_source(),
            "import common.checks; print(common.checks.__file__); print(DEVICE.type)",
        ],
        env,
        tmp_path,
    )
    assert (target / "common" / "checks.py").is_file(), "pip did not install from DFA_INSTALL_SOURCE"
    installed_at, device = outputs[2].split()
    assert Path(installed_at).resolve() == (target / "common" / "checks.py").resolve()
    assert device == "cpu" and "no GPU found" in outputs[1]


def test_on_a_local_machine_the_setup_cell_installs_nothing(tmp_path):
    target = tmp_path / "site"
    target.mkdir()
    env = kernel_env([REPO], DFA_INSTALL_SOURCE=str(tmp_path / "missing"), PIP_TARGET=str(target))
    outputs = execute(
        [colab.setup_cell_source(), "import sys; print('google.colab' in sys.modules)"], env, tmp_path
    )
    assert outputs[0].startswith("torch ") and outputs[1] == "False\n"
    assert list(target.iterdir()) == []
