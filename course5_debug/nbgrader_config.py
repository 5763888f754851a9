"""nbgrader settings for course5_debug, read by the `dfa` instructor commands and by plain `nbgrader`.

The shared rules (course root, gradebook, stderr filter, restoring deleted test cells) live in
common/grading/courses/config.py. Instructors usually change only the limits below; docs/instructors.md explains them.
"""

from common.grading.courses.config import configure

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)
configure(c, __file__)

# Seconds one cell may run while autograding (dfa autograde --timeout overrides it).
c.Execute.timeout = 120

# The offering's secret that seeds the hidden variants and answer keys of source/<lab>/answers.py (GRADER_SALT):
# set c.Offering.salt here in the private instructor repository, or DFA_SALT in the grader's environment (it
# wins). Without one the grader warns and derives them from the course name, which learners know.
