"""The cells the browser test runs before a lab's explorer cell (fixtures/notebook_cells.py): every one it needs,
in order, and none that only binds names in a function or a comprehension."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from fixtures.notebook_cells import cell_names, cells_needed

REPO = Path(__file__).resolve().parents[1]


def _code(source: str, *tags: str):
    cell = nbformat.v4.new_code_cell(source)
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def test_the_slice_follows_names_and_skips_what_the_target_does_not_read():
    cells = [
        _code("import os\nSEEN = os.name", "dfa-setup"),                      # 0: always
        nbformat.v4.new_markdown_cell("A = 'not code'"),                       # 1: markdown
        _code("A = 2\nUNUSED = 1"),                                            # 2: A
        _code("def stub():\n    raise NotImplementedError()"),                 # 3: nothing read
        _code("B = A * 3\nTABLE = {}"),                                        # 4: B, TABLE
        _code("TABLE['k'] = B"),                                               # 5: changes TABLE
        _code("def f():\n    B = 0\n    return B\nsq = [B for B in range(3)]\nl = lambda B=1: B"),  # 6: B local
        _code("COUNT = 1"),                                                    # 7: COUNT
        _code("COUNT += B"),                                                   # 8: reads and binds COUNT
        _code("print(B, TABLE, COUNT)"),                                       # 9: the target
    ]
    assert cells_needed(cells, 9) == [0, 2, 4, 5, 7, 8, 9]


def test_magics_and_imports():
    names = cell_names("%pip install x\nimport a.b as c\nimport d.e\nfrom f import g\nclass K: pass")
    assert {"c", "d", "g", "K"} <= names.bound
    assert "a" not in names.bound


@pytest.mark.parametrize("lab", ["course1_landscape/release/lab1_landscape/lab1_landscape.ipynb",
                                 "course4_memory/release/lab4_memory/lab4_memory.ipynb"])
def test_a_release_lab_slice_holds_the_last_binding_of_every_name_it_reads(lab):
    cells = nbformat.read(REPO / lab, as_version=4).cells
    target = next(i for i, c in enumerate(cells) if c.cell_type == "code" and "explore(" in c.source)
    chosen = cells_needed(cells, target)
    assert chosen[-1] == target and chosen == sorted(chosen)
    code = [i for i in range(target) if cells[i].cell_type == "code"]
    for reader in chosen:
        for name in cell_names(cells[reader].source).read:
            binders = [i for i in code if i < reader and name in cell_names(cells[i].source).bound]
            if binders:
                assert binders[-1] in chosen, f"{lab}: cell {reader} reads {name}, bound last in cell {binders[-1]}"
    for i in chosen:  # a learner's stub is not what an explorer builds on
        assert not cells[i].metadata.get("nbgrader", {}).get("solution"), f"{lab}: cell {i} is a graded stub"
