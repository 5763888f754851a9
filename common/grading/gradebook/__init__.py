"""From submissions to grades, in the trusted parent, the gradebook's only writer: ``collect``, ``autograde``
(sandboxes on ``executors``: threads or Dask), ``grade_one``, ``feedback``, ``grades``; what a grading path
accepts (``inputs``), nbgrader's extra preprocessors (``preprocessors``, ``rematch``), stale scores
(``stale``) and review flags (``tamper``).

May import: ``courses``, ``verdicts``, ``sandbox``, ``authoring``.
"""
