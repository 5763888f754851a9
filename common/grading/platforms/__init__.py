"""Graders for the platforms a course runs on, each one container per submission, built on ``grade_one``.

- ``coursera``: Coursera's custom grader (``/shared/submission`` in, ``/shared/feedback.json`` out), and
  ``dfa export coursera`` (the Docker context);
- ``gradescope``: Gradescope's autograder (``/autograder/submission`` in, ``/autograder/results/results.json``
  out), and ``dfa export gradescope`` (``autograder.zip``);
- ``shared``: what both need: the learner's notebook, a budget that fits the platform's limits, grading in a
  child process stopped at the platform's deadline, and the files an export copies.

May import: ``courses``, ``sandbox``, ``gradebook``.
"""
