"""Fixtures every grading test may ask for by name (tests/fixtures/grading_support.py defines them)."""

from fixtures.grading_support import course, coursera_grader, gradescope_zip, released  # noqa: F401
