"""Fixtures every grading test may ask for by name (tests/fixtures/grading_support.py defines them)."""

import pytest  # noqa: E402
from fixtures.grading_support import course, coursera_grader, gradescope_zip, released  # noqa: F401

# What a test file needs beyond Python, as markers (tests/README.md): `-m "not sandbox"` on a machine where no
# sandbox can run, `-m "not kernel"` where no Jupyter kernel can start, `-m "not browser"` without Chromium.
NEEDS = {
    "sandbox": {"test_documented_commands.py", "test_grading_autograde.py", "test_grading_colab.py",
                "test_grading_dask.py", "test_grading_fallback_setup.py", "test_grading_grade_one.py",
                "test_grading_inputs.py", "test_grading_notebooks.py", "test_grading_platforms.py",
                "test_grading_sandbox.py", "test_grading_secrets.py", "test_grading_workflow.py"},
    "kernel": {"test_compile_tools.py", "test_grading_colab.py", "test_grading_notebooks.py", "test_labopen.py",
               "test_learner_path.py", "test_shortcut_notebooks.py", "test_publish.py", "test_documented_commands.py",
               "test_grading_autograde.py", "test_grading_workflow.py"},
    "browser": {"test_explore_browser.py"},
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for marker, files in NEEDS.items():
            if item.path.name in files:
                item.add_marker(getattr(pytest.mark, marker))
