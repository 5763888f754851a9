"""The course website: ``dfa site`` writes the Markdown pages and runs Sphinx (myst-nb) on them.

It owns the pages that are generated, not hand-typed: one page per simulated machine (what its compiler
models, from the policy module's docstring; its chip records and their sources, from the catalog; where it is
known to be wrong, from ``benchmarks/results/fidelity.json``), the fidelity table (``fidelity.md``) with its
figure, the lab index with Open-in-Colab badges, and the licence page. The course READMEs and the release
notebooks are copied as learners get them, their badges pointing at ``[tool.dfa] published_repo``. Sphinx
runs with warnings as errors, so a broken internal link or a page missing from the navigation fails the build;
so does a figure without alt text. Notebooks are rendered, never executed.

May import: ``chips``, ``grading``, ``sim``.
"""
