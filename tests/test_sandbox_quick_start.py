"""The sandbox runner and the ``dfa`` command skip jsonschema's IRI checker (``quick_start``); nobody else does.

The runner once set the skip inside ``run()``, after its own module imports had already loaded nbformat, so
every sandboxed run still paid the 1-2 s. Each case runs in a fresh interpreter: what matters is import order.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_runner_module_imports_no_notebook_library_before_main_skips():
    # the parent imports the runner (copy_regular_files): that import must neither load nbformat nor skip
    assert _run("import sys, common.grading.sandbox.runner\nprint('nbformat' in sys.modules)") == "False"
    assert _run("import sys, common.grading.sandbox.sandbox\n"  # the parent, which reads notebooks itself
                "print(sys.modules.get('rfc3987_syntax', 'absent') is None)") == "False"


def test_after_the_skip_nbformat_loads_without_it_and_still_validates():
    pytest.importorskip("rfc3987_syntax")  # installed with Jupyter here; where it is not, there is nothing to skip
    out = _run("import sys\n"
               "from common.grading.sandbox.quick_start import skip_unused_iri_check\n"
               "skip_unused_iri_check()\n"
               "import nbformat\n"
               "from nbformat.v4 import new_notebook, new_code_cell\n"
               "nb = new_notebook(cells=[new_code_cell('1')])\n"
               "nbformat.validate(nb)\n"
               "nb.cells[0]['cell_type'] = 'nonsense'\n"
               "try:\n    nbformat.validate(nb)\nexcept nbformat.ValidationError:\n    print('invalid caught')\n"
               "print(sys.modules['rfc3987_syntax'] is None)")
    assert out.splitlines() == ["invalid caught", "True"]


def test_the_skip_is_too_late_once_jsonschema_is_loaded_and_does_nothing():
    pytest.importorskip("rfc3987_syntax")
    assert _run("import sys, jsonschema, common.grading.sandbox.quick_start as q\n"
                "q.skip_unused_iri_check()\nprint(sys.modules.get('rfc3987_syntax', 'absent') is not None)") == "True"


@pytest.mark.parametrize("call,expected", [("main()", "SKIPPED"), ("main(['chips'])", "KEPT")],
                         ids=["the dfa command", "main called from Python"])
def test_the_dfa_command_skips_and_main_called_from_python_does_not(call, expected):
    # main() with no argv is the console script (it reads sys.argv); a caller's Python keeps every check it had
    out = _run(f"import sys\nsys.argv = ['dfa', 'chips']\nfrom common.cli import main\n{call}\n"
               "print('SKIPPED' if sys.modules.get('rfc3987_syntax', 'absent') is None else 'KEPT')")
    assert out.splitlines()[-1] == expected
