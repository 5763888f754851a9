"""The student edition, the public repository learners clone: ``publish`` writes it (``published_package``,
``published_readme``), ``published_check`` and ``published_run`` prove that it holds nothing graded and that
it runs, ``grader_only`` names what of ``common`` it must not ship; ``publish_cli`` prints the results.

May import: ``courses``, ``authoring``.
"""
