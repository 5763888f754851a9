"""Labs 2-4 ask a comparative prediction: each creates it, takes the learner's commit in an ungraded solution
cell, and only then runs the lab's own simulation and reveals it from that result (never from a literal),
inside ``try/except DFAError`` so the blank release (no commit) still runs top to bottom."""
import ast
from pathlib import Path

import nbformat
import pytest

from common.grading.courses import standard

REPO = Path(__file__).resolve().parents[1]
LABS = {  # lab -> the prediction object's name and the simulator call whose result the reveal reads
    "course2_dataflow/source/lab2_dataflow/lab2_dataflow.ipynb": ("P_BLOCK", "simulate"),
    "course3_compile/source/lab3_compile/lab3_compile.ipynb": ("P_FUSION", "fusion_savings"),
    "course4_memory/source/lab4_memory/lab4_memory.ipynb": ("P_SWEEP", "kv_sweep"),
}


def _calls(tree: ast.AST, attr: str, owner: str | None = None) -> list[ast.Call]:
    """Calls ``owner.attr(...)`` (``owner`` None: any call of a function or method named ``attr``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            base = getattr(f.value, "id", None) if isinstance(f, ast.Attribute) else None
            if name == attr and (owner is None or base == owner):
                found.append(node)
    return found


def _code(cell) -> ast.Module:
    lines = [line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return ast.parse("\n".join(lines))


def prediction_problems(nb, name: str, simulator: str) -> list[str]:
    """What is wrong with how ``nb`` orders and reveals the prediction ``name`` (empty when sound)."""
    cells = [(i, c, _code(c)) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    created = [i for i, _, t in cells if any(isinstance(n, ast.Assign) and _calls(n.value, "predict")
                                             and any(getattr(x, "id", None) == name for x in n.targets)
                                             for n in ast.walk(t))]
    commits = [(i, c) for i, c, t in cells if _calls(t, "commit", name)]
    reveals = [(i, t) for i, _, t in cells if _calls(t, "reveal", name)]
    if len(created) != 1 or len(commits) != 1 or len(reveals) != 1:
        return [f"{name}: want one predict(...), one commit cell and one reveal cell, got {len(created)}, "
                f"{len(commits)}, {len(reveals)}"]
    problems = []
    (commit_at, commit), (reveal_at, tree) = commits[0], reveals[0]
    meta = standard.nbgrader_meta(commit)
    if not (meta.get("solution") and not meta.get("grade") and "### BEGIN SOLUTION" in commit.source):
        problems.append(f"{name}: the commit is not an ungraded nbgrader solution cell")
    if not created[0] < commit_at < reveal_at:
        problems.append(f"{name}: created at cell {created[0]}, committed at {commit_at}, revealed at {reveal_at}: "
                        "the commit must come after the prediction and before the reveal")
    if not _calls(tree, simulator):
        problems.append(f"{name}: the reveal cell does not run {simulator}(...)")
    arg = _calls(tree, "reveal", name)[0].args[0]
    numbers = [n.value for n in ast.walk(arg) if isinstance(n, ast.Constant) and isinstance(n.value, (int, float))
               and n.value not in (0, 1, -1)]
    read = {n.id for n in ast.walk(arg) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assigned = {t.id for n in ast.walk(tree) for t in ast.walk(n) if isinstance(t, ast.Name)
                and isinstance(t.ctx, ast.Store)}
    if numbers or not read & assigned:
        problems.append(f"{name}: the outcome passed to reveal is not computed in the reveal cell "
                        f"(literal numbers {numbers}, names {sorted(read)})")
    guarded = any(isinstance(n, ast.Try) and _calls(ast.Module(body=n.body, type_ignores=[]), "reveal", name)
                  and any("DFAError" in ast.unparse(h.type) for h in n.handlers if h.type) for n in ast.walk(tree))
    if not guarded:
        problems.append(f"{name}: the reveal is not inside try/except DFAError (the blank release has no commit)")
    return problems


@pytest.mark.parametrize("path", list(LABS), ids=lambda p: Path(p).stem)
def test_each_lab_commits_its_prediction_before_the_simulator_reveals_it(path):
    nb = nbformat.read(REPO / path, as_version=4)
    assert prediction_problems(nb, *LABS[path]) == []


def test_the_check_finds_a_commit_after_the_reveal_and_a_hard_coded_outcome():
    path = next(iter(LABS))
    nb = nbformat.read(REPO / path, as_version=4)
    name, simulator = LABS[path]
    commit_at = next(i for i, c in enumerate(nb.cells) if f"{name}.commit(" in c.source)
    reveal_at = next(i for i, c in enumerate(nb.cells) if f"{name}.reveal(" in c.source)
    late = nbformat.from_dict(nb)
    late.cells.insert(reveal_at + 1, late.cells.pop(commit_at))  # commit moved after the reveal
    assert any("before the reveal" in p for p in prediction_problems(late, name, simulator))
    literal = nbformat.from_dict(nb)
    cell = literal.cells[reveal_at]
    start = cell.source.index(f"{name}.reveal(")
    end = cell.source.index("\n", start)
    cell.source = cell.source[:start] + f'{name}.reveal({{"gpu": 3.0, "lpu": 9.0, "wse": 5.0}})' + cell.source[end:]
    assert any("not computed in the reveal cell" in p for p in prediction_problems(literal, name, simulator))
    unguarded = nbformat.from_dict(nb)
    unguarded.cells[reveal_at].source = unguarded.cells[reveal_at].source.replace("except DFAError", "except KeyError")
    assert any("try/except DFAError" in p for p in prediction_problems(unguarded, name, simulator))
