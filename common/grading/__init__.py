"""Instructor tooling: how a lab goes from the instructor's notebook to a grade, on top of nbgrader.

```
courseN_*/source/<lab>/<lab>.py        solutions + hidden tests, jupytext text
  → dfa release   labsource.py         render <lab>.ipynb, shared cells included (badge, setup: colab.py)
                  release.py           nbgrader generate_assignment
  → dfa check     check.py             metadata, LAB_STANDARD sections (standard.py), no leaks (regions.py)
  → dfa collect   collect.py           LMS zip / folder → courseN_*/submitted/<student>/<lab>/
  → dfa autograde autograde.py         parent: restore cells (rematch.py) + nbgrader sanitize; each test
                                       cell's judgement stays here, its probe goes on (judge.py, probe.py)
                                       worker: run the notebook in a sandbox (sandbox.py → runner.py); each
                                       probe runs in the kernel and prints plain data (testcells.py)
                                       parent: judge the data with the answer key, merge outputs, nbgrader
                                       scores it (judge.py, preprocessors.py)
  → dfa feedback  feedback.py          HTML without hidden tests
  → dfa grades    grades.py            nbgrader's CSV + a score histogram per lab
```
``course.py`` finds course folders and builds nbgrader API objects; ``cli.py`` adds the ``dfa`` sub-commands.
Only the parent process writes a gradebook; student code only ever runs inside the sandbox, and no output of
the learner's kernel decides a test cell's grade.
"""
