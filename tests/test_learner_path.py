"""The learner's path without trips: a failed setup says what happened in one line, one install
opens the labs, a release notebook opens unmodified in Jupyter, every visible check names what is wrong, and the
licence ships."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from common.checks import CheckFailed, check_equal, check_no_problems, check_type
from common.grading.authoring import colab, labsource
from common.grading.courses.course import all_courses

REPO = Path(__file__).resolve().parents[1]
RELEASES = sorted(REPO.glob("course*/release/*/*.ipynb"))
RUNNER = """
import sys, types
if {colab!r}:
    sys.modules["google"] = types.ModuleType("google")
    sys.modules["google.colab"] = types.ModuleType("google.colab")
def get_ipython():  # %pip as IPython runs it: the command's exit status lands in _exit_code
    class Shell:
        def run_line_magic(self, name, line):
            globals()["_exit_code"] = {pip_status}
    return Shell()
try:
    exec(compile(open(sys.argv[1]).read(), "setup", "exec"), globals())
except Exception as exc:
    render = getattr(exc, "_render_traceback_", None)
    print("RENDERED:", render() if render else type(exc).__name__)
"""


def _run_setup(tmp_path, *, colab_: bool, pip_status: int, site: bool) -> str:
    """The setup cell, as IPython transforms it, in a fresh Python (``site=False``: no package installed)."""
    (tmp_path / "cell.py").write_text(TransformerManager().transform_cell(colab.setup_cell_source()))
    (tmp_path / "run.py").write_text(RUNNER.format(colab=colab_, pip_status=pip_status))
    flags = [] if site else ["-S", "-s"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "DFA_"))}
    done = subprocess.run([sys.executable, *flags, str(tmp_path / "run.py"), str(tmp_path / "cell.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


# ---- a failed install ends in one line that says what to do ---
def test_a_local_kernel_without_the_package_gets_one_line_with_the_install(tmp_path):
    out = _run_setup(tmp_path, colab_=False, pip_status=0, site=False)
    rendered = [line for line in out.splitlines() if line.startswith("RENDERED:")]
    assert len(rendered) == 1 and "SetupError: the course package is not installed in this kernel" in rendered[0]
    assert "pip install -e '.[lab]'" in rendered[0] and sys.executable in rendered[0]
    assert "ModuleNotFoundError" not in out


def test_a_failed_colab_install_names_the_source_and_stops_before_importing(tmp_path):
    out = _run_setup(tmp_path, colab_=True, pip_status=1, site=True)  # offline, a missing tag, a fork's bad URL
    (line,) = [line for line in out.splitlines() if line.startswith("RENDERED:")]
    assert "SetupError: pip could not install the course package from git+" in line and colab.RELEASE_REF in line
    assert "online" in line and "torch" not in out.split("RENDERED:")[0]  # stopped before the import


def test_a_colab_install_that_left_no_package_says_so(tmp_path):
    out = _run_setup(tmp_path, colab_=True, pip_status=0, site=False)
    (line,) = [line for line in out.splitlines() if line.startswith("RENDERED:")]
    assert "not installed in this kernel; pip installed nothing from git+" in line


def test_with_the_package_the_setup_cell_reports_the_device(tmp_path):
    out = _run_setup(tmp_path, colab_=False, pip_status=0, site=True)
    assert "RENDERED" not in out and "torch " in out and " on cpu" in out


# ---- one install that opens the labs ---
def test_the_lab_extra_brings_jupyterlab_and_widgets_and_the_readme_says_so():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {req.split(">")[0].split("=")[0].strip() for req in extras["lab"]}
    assert {"jupyterlab", "ipywidgets", "ipykernel"} <= names
    dev = next(req for req in extras["dev"] if req.startswith("dataflow-labs["))
    assert {"instructor", "cluster", "lab"} <= set(dev.split("[", 1)[1].rstrip("]").split(","))
    readme = (REPO / "README.md").read_text()
    assert '| learner, on a laptop | `pip install -e ".[lab]"` |' in readme
    assert "`dfa lab`" in readme  # opens the labs unmodified (common/cli/lab.py)
    assert "enough to run every lab" not in readme


# ---- a release notebook opens unmodified, on a GPU runtime in Colab ---
FIXTURE_RELEASE = REPO / "tests" / "fixtures" / "course0_fixture" / "release" / "lab1" / "lab1.ipynb"


@pytest.mark.parametrize("path", [*RELEASES, FIXTURE_RELEASE], ids=lambda p: p.parent.name)
def test_what_dfa_release_writes_opens_unmodified_and_asks_colab_for_a_gpu(path, tmp_path):
    """What ``dfa release`` writes for this lab: nbgrader's notebook (whose cells are the committed ones) in
    ``labsource.normalised`` form, its last step. Whether the committed file is that is ``dfa check``'s job
    (CI runs it), so this holds before and after a pending ``dfa release``."""
    from jupyter_server.services.contents.filemanager import FileContentsManager

    committed = path.read_text(encoding="utf-8")
    text = labsource.notebook_text(labsource.normalised(nbformat.reads(committed, as_version=4)))
    assert json.loads(text)["cells"] == json.loads(committed)["cells"]  # released cells are already normalised
    assert labsource.notebook_text(labsource.normalised(nbformat.reads(text, as_version=4))) == text
    (tmp_path / "lab.ipynb").write_text(text, encoding="utf-8")
    cm = FileContentsManager(root_dir=str(tmp_path))
    model = cm.get("lab.ipynb", content=True)
    cm.save({"type": "notebook", "format": "json", "content": model["content"]}, "lab.ipynb")
    assert (tmp_path / "lab.ipynb").read_text(encoding="utf-8") == text  # loaded and saved: the same bytes
    meta = json.loads(text)["metadata"]
    assert meta["kernelspec"] == labsource.KERNELSPEC and meta["language_info"] == labsource.LANGUAGE_INFO
    # Colab's own keys for a T4 GPU runtime (as Colab saves them), next to the lab's own metadata
    assert meta["accelerator"] == "GPU" and meta["colab"] == {"gpuType": "T4", "provenance": []}
    assert set(meta) == {"accelerator", "colab", "dfa", "kernelspec", "language_info"}
    # `dfa lab` knows it for an unedited lab and hands it out with the kernel's version (tests/test_labopen.py)
    from ipykernel.ipkernel import IPythonKernel

    from common.cli import lab as labopen

    kernel = {"kernelspec": labsource.KERNELSPEC, "language_info": dict(IPythonKernel.language_info)}
    assert labopen.with_kernel_metadata(json.loads(text), kernel)


def test_the_committed_fixture_release_is_what_dfa_release_writes():
    """The fixture's release was regenerated with ``dfa release`` (test_grading_release checks it is current):
    its bytes are the normalised form, Colab's GPU setting included."""
    text = FIXTURE_RELEASE.read_text(encoding="utf-8")
    assert labsource.notebook_text(labsource.normalised(nbformat.reads(text, as_version=4))) == text
    assert json.loads(text)["metadata"]["accelerator"] == "GPU"


def test_jupyterlab_would_set_only_the_python_version_when_the_kernel_starts():
    """JupyterLab writes the started kernel's kernelspec and language_info into the notebook (and marks it
    modified if they differ): the released ones are what ipykernel reports, but the learner's Python version,
    which `dfa lab` fills in as it serves an unedited lab (common/cli/lab.py)."""
    from ipykernel.ipkernel import IPythonKernel
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    assert {"name": "python3", "display_name": spec.display_name, "language": spec.language} == labsource.KERNELSPEC
    reported = dict(IPythonKernel.language_info)
    assert reported.pop("version") == sys.version.split()[0]
    assert reported == labsource.LANGUAGE_INFO


def test_normalising_fixes_what_jupyter_would_change_and_is_idempotent():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_markdown_cell("# t")])
    nb.nbformat_minor = 4
    for cell in nb.cells:
        cell.pop("id", None)
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    nb.cells[0].execution_count = 3
    nb.metadata = {"language_info": {"name": "python"}, "dfa": {"lab": "x"}}
    once = labsource.normalised(nb)
    assert once.nbformat_minor == 5 and [c.id for c in once.cells] == ["cell-000", "cell-001"]
    assert once.cells[0].outputs == [] and once.cells[0].execution_count is None
    assert once.metadata["dfa"] == {"lab": "x"} and once.metadata["language_info"] == labsource.LANGUAGE_INFO
    assert once.metadata["colab"] == colab.NOTEBOOK_METADATA["colab"] and once.metadata["accelerator"] == "GPU"
    nb.metadata["colab"] = {"provenance": [], "name": "copy.ipynb"}  # saved from Colab: the release setting replaces it
    again = labsource.normalised(nb)
    assert again.metadata["colab"] == {"gpuType": "T4", "provenance": []} and "name" not in again.metadata["colab"]
    text = labsource.notebook_text(once)
    assert labsource.notebook_text(labsource.normalised(nbformat.reads(text, as_version=4))) == text
    assert text.endswith("}\n") and nb.cells[0].execution_count == 3  # the input is left alone


# ---- every visible check says what is wrong ---
def test_a_problem_list_check_names_each_problem(capsys):
    with pytest.raises(CheckFailed):
        check_no_problems("landscape rows", ["'fusion boundaries' / TPU: 2 words; write 3 to 25", "LPU: missing"])
    out = capsys.readouterr().out
    assert "2 problems to fix" in out and "- 'fusion boundaries' / TPU: 2 words" in out and "- LPU: missing" in out
    check_no_problems("landscape rows", [])
    assert "✔ landscape rows: no problems found" in capsys.readouterr().out


def test_an_empty_expected_list_lists_what_is_there(capsys):
    with pytest.raises(CheckFailed):
        check_equal("no fallback left", ["aten.repeat", "aten.cumsum"], [])
    out = capsys.readouterr().out
    assert "none are expected; yours has 2: aten.repeat; aten.cumsum" in out
    assert "items; 0 are expected" not in out


def test_a_type_check_never_says_correct(capsys):
    check_type("MY_LAYERS", {}, dict)
    out = capsys.readouterr().out
    assert "correct" not in out and "✔ MY_LAYERS: a dict (the type is right)" in out


def _visible(cell_source: str) -> str:
    return cell_source.split("### BEGIN HIDDEN TESTS")[0]


def test_the_labs_landscape_and_layer_checks_name_the_problems():
    sources = {c.name: labsource.render(labsource.text_path(c, lab).read_text(), c.name, lab)
               for c in all_courses(REPO) for lab in c.labs() if lab.startswith("lab")}
    for course, nb in sources.items():
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id == "landscape_rows_tests" and "row_problems" in cell.source:
                assert "check_no_problems(" in _visible(cell.source), course
                assert "check_equal(" not in _visible(cell.source), course
    lab5 = [c for c in sources["course5_debug"].cells if c.metadata.get("nbgrader", {}).get("grade_id") ==
            "classify_tests"][0]
    assert "check_no_problems(\"MY_LAYERS\"" in _visible(lab5.source)


# ---- the licence ---
def test_the_repository_has_the_licences_the_readme_names():
    """Code under Apache-2.0 (LICENSE), course text and figures under CC BY 4.0 (LICENSE-CONTENT), a CITATION.cff."""
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    readme = (REPO / "README.md").read_text()
    assert "Apache License 2.0" in readme and "[LICENSE](LICENSE)" in readme
    assert "Creative Commons Attribution 4.0" in readme and "[LICENSE-CONTENT](LICENSE-CONTENT)" in readme
    content = (REPO / "LICENSE-CONTENT").read_text()
    assert "CC BY 4.0" in content or "Attribution 4.0" in content
    for section in ("Section 1 – Definitions.", "Section 3 – License Conditions.", "Section 8 – Interpretation."):
        assert section in content  # the full legal code travels with the course, not only a link to it
    assert "cff-version:" in (REPO / "CITATION.cff").read_text()
