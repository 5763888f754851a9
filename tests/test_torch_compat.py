"""The torch floor: one constant that pyproject agrees with, and one line (no traceback soup) when the installed
torch is older or missing, from ``import common`` and from ``dfa``. No old torch is needed: the version lookup
is monkeypatched, or a fake ``torch-X.dist-info`` ahead on sys.path makes the metadata say an old version."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import types
from importlib import metadata
from pathlib import Path

import pytest

from common import torch_compat

REPO = Path(__file__).resolve().parents[1]


def test_the_floor_is_pyprojects_torch_bound():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    torch_deps = [d.replace(" ", "") for d in deps if d.replace(" ", "").startswith("torch>=")]
    assert torch_deps == [torch_compat.requirement()], f"pyproject: {torch_deps}; MIN_TORCH: {torch_compat.MIN_TORCH}"


@pytest.mark.parametrize("version, release", [
    ("2.11.0", (2, 11, 0)), ("2.14.1+cu130", (2, 14, 1)), ("2.11.0a0+git1a2b3c", (2, 11, 0)),
    ("2.12.0.dev20260101+cpu", (2, 12, 0)), ("2.9", (2, 9)), ("garbage", ()),
])
def test_release_numbers(version, release):
    assert torch_compat.release_of(version) == release


def test_supported_versions():
    assert torch_compat.supported("2.11.0") and torch_compat.supported("2.11.0a0+gitabc")  # the floor's pre-release
    assert torch_compat.supported("2.14.1+cu130") and torch_compat.supported("3.0.0")
    assert not torch_compat.supported("2.10.1") and not torch_compat.supported("2.8.0+cpu")
    assert not torch_compat.supported("1.13.1") and not torch_compat.supported("garbage")


def _require(monkeypatch, installed, loaded=None):
    monkeypatch.setattr(torch_compat, "installed_version", lambda: installed)
    monkeypatch.setattr(torch_compat, "loaded_version", lambda: loaded)
    monkeypatch.setattr(torch_compat, "_running_dfa", lambda: False)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    with pytest.raises(torch_compat.TorchVersionError) as info:
        torch_compat.require_torch()
    message = str(info.value)
    assert "\n" not in message and isinstance(info.value, ImportError)
    assert info.value._render_traceback_() == [message]  # what IPython shows instead of a traceback
    return message


def test_an_old_torch_stops_with_one_line(monkeypatch):
    assert _require(monkeypatch, "2.8.0") == (
        'dataflow-labs needs torch >= 2.11, found 2.8.0: pip install -U "torch>=2.11"')


def test_a_missing_torch_stops_with_one_line(monkeypatch):
    monkeypatch.setattr(torch_compat.importlib.util, "find_spec", lambda name: None)
    assert _require(monkeypatch, None) == 'dataflow-labs needs torch >= 2.11, found none: pip install "torch>=2.11"'


def test_an_old_torch_still_in_memory_after_an_upgrade_says_restart(monkeypatch):
    message = _require(monkeypatch, "2.11.0", loaded="2.9.1")
    assert message.endswith("found 2.9.1 loaded (2.11.0 installed): restart the Python session")


def test_in_a_notebook_the_fix_is_the_pip_magic(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipykernel", sys.modules.get("ipykernel") or types.ModuleType("ipykernel"))
    assert torch_compat.problem("2.10.0").endswith(': %pip install -U "torch>=2.11"')


def test_a_new_enough_torch_passes(monkeypatch):
    monkeypatch.setattr(torch_compat, "installed_version", lambda: "2.11.0+cu128")
    monkeypatch.setattr(torch_compat, "loaded_version", lambda: None)
    torch_compat.require_torch()
    assert torch_compat.problem(None, loaded="2.14.1") is None
    assert torch_compat.problem("2.13.0+cpu") is None


def test_the_real_lookup_reads_metadata(monkeypatch):
    monkeypatch.setattr(metadata, "version", lambda name: {"torch": "2.7.1"}[name])
    assert torch_compat.installed_version() == "2.7.1"


def _old_torch_path(tmp_path: Path, version: str = "2.8.0") -> dict[str, str]:
    """An environment whose torch metadata says ``version`` (a dist-info ahead of site-packages)."""
    info = tmp_path / "old" / f"torch-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "old"), str(REPO)])
    return env


def test_import_common_checks_without_importing_torch(tmp_path):
    ok = subprocess.run([sys.executable, "-c", "import sys, common; print('torch' in sys.modules)"],
                        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert ok.stdout == "False\n", ok.stderr  # importing torch takes seconds: `import common` must not
    old = subprocess.run([sys.executable, "-c", "import common"], capture_output=True, text=True, cwd=tmp_path,
                         env=_old_torch_path(tmp_path))
    assert old.returncode == 1
    assert old.stderr.splitlines()[-1] == ('common.torch_compat.TorchVersionError: dataflow-labs needs torch >= '
                                           '2.11, found 2.8.0: pip install -U "torch>=2.11"')


def test_dfa_says_one_line_and_exits_2(tmp_path):
    script = tmp_path / "dfa"  # what pip's console script does: import common.cli, then call main
    script.write_text("import sys\nfrom common.cli import main\nsys.exit(main())\n")
    env = _old_torch_path(tmp_path)
    for argv in ([str(script), "--help"], ["-m", "common.cli", "chips"]):
        done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=tmp_path, env=env)
        assert (done.returncode, done.stdout) == (2, ""), argv
        assert done.stderr == ('dfa: error: dataflow-labs needs torch >= 2.11, found 2.8.0: '
                               'pip install -U "torch>=2.11"\n')
