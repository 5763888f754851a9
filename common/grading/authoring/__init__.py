"""From the instructor's lab source to the notebook learners open: ``labsource`` renders ``<lab>.py`` into the
source notebook (badge and setup cells: ``colab``), ``release`` runs nbgrader's generate_assignment (``dfa
release``), ``check`` (``dfa check``) and ``lab_length`` hold every lab to the standard.

May import: ``courses``, ``verdicts``.
"""
