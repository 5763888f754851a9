"""Who decides a test cell's points. A hidden test is a *probe* that runs in the learner's kernel and sends
back plain data (``probe``; ``testcells`` splits it from the visible checks) and a *judgement* that compares
that data with the answer key in the trusted parent (``judge``, ``answerkeys``). Answers stay on this side.

May import: ``courses``.
"""
