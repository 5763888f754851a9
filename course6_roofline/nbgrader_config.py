"""nbgrader settings for course6_roofline, read by the `dfa` instructor commands and by plain `nbgrader`.

Instructors usually change only the limits below. docs/instructors.md explains each setting.
"""

import os

from common.grading.stderr import HARMLESS_STDERR_PATTERN

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)
here = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = here
c.CourseDirectory.course_id = "course6_roofline"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, "gradebook.db")

# Seconds one cell may run while autograding (dfa autograde --timeout overrides it).
c.Execute.timeout = 120
# Warnings PyTorch and friends print on stderr must not zero a correct answer (common/grading/stderr.py).
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = HARMLESS_STDERR_PATTERN
# A learner who deletes a test cell gets it back from the gradebook instead of escaping it.
c.OverwriteCells.add_missing_cells = True
