"""Instructor tooling: how a lab goes from the instructor's notebook to a grade, on top of nbgrader.

```
courseN_*/source/<lab>/<lab>.py        solutions + hidden tests, jupytext text
  → dfa release   authoring/labsource  render <lab>.ipynb, shared cells included (badge, setup: colab)
                  authoring/release    nbgrader generate_assignment
  → dfa check     authoring/check      metadata, LAB_STANDARD sections (courses/standard), no leaks (regions)
  → dfa publish   editions/publish     the student edition: release notebooks, ``common`` without grading
  → dfa collect   gradebook/collect    LMS zip / folder → courseN_*/submitted/<student>/<lab>/
  → dfa autograde gradebook/autograde  parent: restore cells (rematch) + nbgrader sanitize; each test cell's
                                       judgement stays here, its probe goes on (verdicts/judge, probe)
                                       worker: run the notebook in a sandbox (sandbox/sandbox → runner); each
                                       probe runs in the kernel and prints plain data (verdicts/testcells)
                                       parent: judge the data with the answer key, merge outputs, nbgrader
                                       scores it (verdicts/judge, gradebook/preprocessors)
  → dfa feedback  gradebook/feedback   HTML without hidden tests
  → dfa grades    gradebook/grades     nbgrader's CSV + a score histogram per lab
  platforms/                           Coursera and Gradescope graders around gradebook/grade_one
```
Each group's ``__init__`` says what it owns and which groups it may import (tests/test_grading_layout.py):
verdicts builds on courses; sandbox and authoring on verdicts; editions on authoring; gradebook on sandbox and
authoring; platforms on gradebook. ``courses/course.py`` finds course folders and builds nbgrader API objects;
``cli.py`` adds the ``dfa`` sub-commands.
Only the parent process writes a gradebook; student code only ever runs inside the sandbox, and no output of
the learner's kernel decides a test cell's grade.

May import: no other package.
"""
