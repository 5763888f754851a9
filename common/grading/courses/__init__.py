"""A course as nbgrader sees it: its folder and the nbgrader settings every course shares (``course``,
``config``, with ``stderr``: which stderr is harmless), the shape every lab notebook has (``standard``, the
LAB_STANDARD as code) and the secret regions of a source notebook (``regions``). Every other group builds on it.

May import: no other group.
"""
