"""The nbgrader settings every course shares; each ``courseN_*/nbgrader_config.py`` calls ``configure``.

A course's own file keeps only what an instructor may want to change (the cell timeout); the rest is here so
six courses cannot drift apart. docs/instructors.md explains each setting.
"""

from __future__ import annotations

import os

from common.grading.courses.stderr import HARMLESS_STDERR_PATTERN


def configure(c, config_file: str) -> None:
    """Pin course id, root and gradebook to the folder holding ``config_file``; set the shared grading rules."""
    here = os.path.dirname(os.path.abspath(config_file))
    c.CourseDirectory.root = here
    c.CourseDirectory.course_id = os.path.basename(here)
    c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, "gradebook.db")
    # Seconds one cell may run while autograding (the course file or `dfa autograde --timeout` overrides it).
    c.Execute.timeout = 120
    # Warnings PyTorch and friends print on stderr must not zero a correct answer (common/grading/courses/stderr.py).
    c.IgnorePattern.enabled = True
    c.IgnorePattern.pattern = HARMLESS_STDERR_PATTERN
    # A lab's source, source/<lab>/<lab>.py, holds the solutions and hidden tests: nbgrader must neither release
    # it nor copy it into the folder a submission is graded in (nbgrader copies a lab's other files to both).
    # nbgrader's own defaults, then the lab sources.
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py"]
    # A learner who deletes a test cell gets it back from the gradebook instead of escaping it.
    c.OverwriteCells.add_missing_cells = True
