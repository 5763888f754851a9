"""``dfa lab`` (common/cli/lab.py, common/cli/lab_contents.py): an unedited lab opens in JupyterLab unmodified, and
nothing a learner wrote is changed, on disk or on its way to the browser."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest
from ipykernel.ipkernel import IPythonKernel

from common.cli import lab as labopen
from common.cli import lab_contents as labcontents
from common.cli import main

REPO = Path(__file__).resolve().parents[1]
LAB = REPO / "course1_landscape" / "release" / "lab1_landscape" / "lab1_landscape.ipynb"
FIXTURE_RELEASE = REPO / "tests" / "fixtures" / "course0_fixture" / "release" / "lab1" / "lab1.ipynb"
KERNEL = {  # what kernel_metadata finds for this interpreter's python3 kernel, without asking it again
    "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
    "language_info": dict(IPythonKernel.language_info),
}


def jupyterlab_writes(metadata: dict, kernel_name: str, spec, language_info: dict) -> list[str]:
    """The metadata keys JupyterLab 4 changes once the kernel starts, i.e. what marks the notebook modified:
    panel.ts ``_updateLanguage`` (the kernel_info reply's language_info) and ``_updateSpec`` ({name,
    display_name, language}); ynotebook.ts ``setMetadata`` skips a deep-equal value (dict ``==`` here)."""
    writes = {
        "language_info": language_info,
        "kernelspec": {"name": kernel_name, "display_name": spec.display_name, "language": spec.language},
    }
    return [key for key, value in writes.items() if metadata.get(key) != value]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _served(port: int, token: str, name: str, deadline: float) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/contents/{name}?content=1",
                                     headers={"Authorization": f"token {token}"})  # fmt: skip
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError:
            raise  # the server answered: no point waiting
        except OSError:  # not listening yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_lab_opened_with_dfa_lab_gets_no_write_from_its_kernel(tmp_path):
    """The real thing: the command ``dfa lab`` runs serves the labs over HTTP; a real python3 kernel's
    kernel_info reply then changes nothing JupyterLab holds. Plain Jupyter serves the file, which it changes."""
    from jupyter_client.manager import start_new_kernel

    for path in (LAB, FIXTURE_RELEASE):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    flags = ["--no-browser", f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"]
    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []  # CI containers run as root
    command = labopen.lab_command(tmp_path, flags + root)
    server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        reply = kc.kernel_info(reply=True, timeout=60)
        deadline = time.monotonic() + 120
        served = {p.name: _served(port, token, p.name, deadline)["content"] for p in (LAB, FIXTURE_RELEASE)}
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        server.terminate()
        server.wait(30)
    language_info = reply["content"]["language_info"]
    assert language_info == IPythonKernel.language_info  # ipykernel's, this interpreter's version
    for path in (LAB, FIXTURE_RELEASE):
        on_disk = json.loads(path.read_text(encoding="utf-8"))["metadata"]
        assert jupyterlab_writes(on_disk, "python3", km.kernel_spec, language_info) == ["language_info"]  # the bug
        assert jupyterlab_writes(served[path.name]["metadata"], "python3", km.kernel_spec, language_info) == []
        assert (tmp_path / path.name).read_bytes() == path.read_bytes()  # nothing written
        for cell in served[path.name]["cells"]:
            cell["metadata"].pop("trusted", None)  # jupyter_server's transient trust mark, never saved
        assert served[path.name]["cells"] == nbformat.read(path, as_version=4)["cells"]  # the cells as released


def _get(root: Path, name: str, **kwargs) -> dict:
    return asyncio.run(labcontents.LabContentsManager(root_dir=str(root)).get(name, **kwargs))


def test_a_released_lab_is_handed_out_with_what_its_kernel_reports(tmp_path, monkeypatch):
    monkeypatch.setattr(labcontents, "kernel_metadata", lambda name, specs=None: KERNEL if name == "python3" else None)
    (tmp_path / "lab.ipynb").write_bytes(LAB.read_bytes())
    before = os.stat(tmp_path / "lab.ipynb")
    model = _get(tmp_path, "lab.ipynb")
    released = json.loads(LAB.read_text(encoding="utf-8"))["metadata"]
    assert model["content"]["metadata"] == {**released, **KERNEL}
    assert _get(tmp_path, "lab.ipynb", content=False)["content"] is None
    assert _get(tmp_path, "")["type"] == "directory"
    after = os.stat(tmp_path / "lab.ipynb")
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)


def _variant(tmp_path: Path, name: str, change) -> tuple[Path, dict]:
    nb = nbformat.read(LAB, as_version=4)
    change(nb)
    nbformat.write(nb, tmp_path / name)
    return tmp_path / name, json.loads((tmp_path / name).read_text(encoding="utf-8"))["metadata"]


def _learner_saved(nb):
    nb.cells[3].source += "\n# my notes"
    nb.metadata.language_info["version"] = "3.12.8"  # Jupyter saved it with the learner's kernel


@pytest.mark.parametrize("change", [
    _learner_saved,
    lambda nb: nb.metadata.pop("dfa"),  # not a lab
    lambda nb: nb.metadata.kernelspec.update(name="ir"),  # another kernel
    lambda nb: nb.metadata.language_info.update(pygments_lexer="ipython2"),  # not what the kernel reports
], ids=["learner-saved", "not-a-lab", "other-kernel", "other-language-info"])  # fmt: skip
def test_anything_but_an_unedited_lab_passes_as_it_is(tmp_path, monkeypatch, change):
    asked = []
    monkeypatch.setattr(labcontents, "kernel_metadata", lambda name, specs=None: asked.append(name) or KERNEL)
    path, metadata = _variant(tmp_path, "nb.ipynb", change)
    text = path.read_text(encoding="utf-8")
    assert _get(tmp_path, "nb.ipynb")["content"]["metadata"] == metadata
    assert path.read_text(encoding="utf-8") == text
    assert asked == ([] if "dfa" not in metadata else ["python3"] if metadata["kernelspec"]["name"] == "python3"
                     else ["ir"])  # fmt: skip


class _Specs:
    def __init__(self, argv):
        self.argv = argv

    def get_kernel_spec(self, name):
        if name != "python3":
            raise KeyError(name)
        return type("Spec", (), {"argv": self.argv, "display_name": "Py", "language": "python"})()


def test_kernel_metadata_asks_the_kernel_s_own_interpreter_or_says_none():
    native = ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    found = labopen.kernel_metadata("python3", _Specs(native))
    assert found == {"kernelspec": {"name": "python3", "display_name": "Py", "language": "python"},
                     "language_info": IPythonKernel.language_info}  # fmt: skip
    assert labopen.kernel_metadata("ir", _Specs(["python"])) is None  # no such kernel
    assert labopen.kernel_metadata("python3", _Specs(["R", "--slave", "-e", "IRkernel::main()"])) is None
    assert labopen.kernel_metadata("python3", _Specs(["/no/such/python", "-m", "ipykernel_launcher"])) is None


# ---- the command ---
def test_dfa_lab_bad_input_is_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "notes.txt").write_text("x")
    assert main(["lab", str(tmp_path / "missing.ipynb")]) == 2
    assert main(["lab", str(tmp_path / "notes.txt")]) == 2
    monkeypatch.setattr(labopen.importlib.util, "find_spec", lambda name: None)
    assert main(["lab", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("dfa: error: ") for line in lines)
    assert "missing.ipynb" in lines[0] and "not a notebook" in lines[1] and labopen.INSTALL_HINT in lines[2]


class _Exec(Exception):
    pass


def test_dfa_lab_runs_jupyterlab_with_the_contents_manager(tmp_path, monkeypatch):
    if os.name != "posix":
        pytest.skip("execv is the POSIX route")
    ran = []

    def execv(program, argv):
        ran.append(argv)
        raise _Exec

    monkeypatch.setattr(labopen.os, "execv", execv)
    for argv in (["lab", str(LAB)], ["lab", "--", "--no-browser"], ["lab", str(tmp_path), "--", "--port", "8890"]):
        with pytest.raises(_Exec):
            main(argv)
    head = [sys.executable, "-m", "jupyterlab", f"--ServerApp.contents_manager_class={labopen.CONTENTS_MANAGER}"]
    assert ran == [[*head, str(LAB)], [*head, ".", "--no-browser"], [*head, str(tmp_path), "--port", "8890"]]
