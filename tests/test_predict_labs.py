"""Predict, then reveal, in the labs: the comparative prediction of a lab's Analysis is created, committed in
its own ungraded answer cell, and only then revealed, by a cell that runs the simulator and hands its result
(never a literal) to ``reveal`` inside ``try/except DFAError`` (the blank release commits nothing and must
still run top to bottom). Read from the source notebooks (``common.cli check`` keeps them equal to the .py)."""
from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from common.grading.courses.standard import nbgrader_meta

REPO = Path(__file__).resolve().parents[1]
LABS = {  # lab -> the prediction's variable in it
    "course1_landscape/source/lab1_landscape/lab1_landscape.ipynb": "P70B",
    "course2_dataflow/source/lab2_dataflow/lab2_dataflow.ipynb": "P_BLOCK",
    "course2_dataflow/source/deepdive2_spyre/deepdive2_spyre.ipynb": "P_PROGRAMS",
    "course3_compile/source/lab3_compile/lab3_compile.ipynb": "P_FUSION",
    "course3_compile/source/deepdive3_spyre/deepdive3_spyre.ipynb": "P_BYTES",
    "course4_memory/source/lab4_memory/lab4_memory.ipynb": "P_SWEEP",
    "course4_memory/source/deepdive4_spyre/deepdive4_spyre.ipynb": "P_ALIGN",
    "course5_debug/source/lab5_debug/lab5_debug.ipynb": "P_SLOW",
    "course6_roofline/source/lab6_roofline/lab6_roofline.ipynb": "P_DECODE",
    "course6_roofline/source/deepdive6_spyre/deepdive6_spyre.ipynb": "P_RATIO",
}
# what computes an outcome a lab reveals (common.sim, and the learner's kv_sweep in Lab 4, which runs it)
SIMULATORS = {"simulate_llm", "simulate", "compile_graph", "simulate_op", "fusion_savings", "kv_sweep"}


def _tree(cell) -> ast.Module:
    # IPython magics (%run, !pip) are not Python; they never hold a prediction
    return ast.parse("\n".join(line for line in cell.source.splitlines() if line.lstrip()[:1] not in ("%", "!")))


def _calls(tree, var: str, method: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == method and isinstance(n.func.value, ast.Name) and n.func.value.id == var]


def _called_names(tree) -> set[str]:
    return {n.func.id if isinstance(n.func, ast.Name) else n.func.attr for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)}


def _bound_names(tree) -> set[str]:
    """Names a cell binds outside comprehensions (assignments and for-loop targets)."""
    targets = [t for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets]
    targets += [n.target for n in ast.walk(tree) if isinstance(n, ast.For | ast.AugAssign | ast.AnnAssign)]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _free_names(expr) -> set[str]:
    inner = {n.id for c in ast.walk(expr) if isinstance(c, ast.comprehension) for n in ast.walk(c.target)
             if isinstance(n, ast.Name)}
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - inner


def _catches_dfaerror(tree, call: ast.Call) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(call in ast.walk(stmt) for stmt in node.body):
            if any(h.type is not None and "DFAError" in ast.unparse(h.type) for h in node.handlers):
                return True
    return False


def prediction_problems(nb, var: str) -> list[str]:
    """What is wrong with how ``nb`` predicts with ``var`` (empty when the order and the reveal are right)."""
    code = [(i, c, _tree(c)) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    created = [i for i, _, t in code for n in ast.walk(t) if isinstance(n, ast.Assign)
               and any(isinstance(x, ast.Name) and x.id == var for x in n.targets)
               and isinstance(n.value, ast.Call) and "predict" in ast.unparse(n.value.func)]
    commits = [(i, c) for i, c, t in code if _calls(t, var, "commit")]
    reveals = [(i, t, call) for i, _, t in code for call in _calls(t, var, "reveal")]
    if not (created and commits and reveals):
        return [f"{var}: needs a predict(...) cell, a {var}.commit cell and a {var}.reveal cell "
                f"(found {len(created)}, {len(commits)}, {len(reveals)})"]
    problems = []
    for i, cell in commits:
        meta = nbgrader_meta(cell)
        if not (meta.get("solution") and not meta.get("grade") and not meta.get("points")):
            problems.append(f"cell {i}: the commit is not in an ungraded answer cell (grade false, solution true)")
        if "### BEGIN SOLUTION" not in cell.source:
            problems.append(f"cell {i}: the commit is not between ### BEGIN/END SOLUTION (the release keeps it)")
    first_reveal = min(i for i, _, _ in reveals)
    if not created[0] < min(i for i, _ in commits) < first_reveal:
        problems.append(f"{var}: created in cell {created[0]}, committed in {[i for i, _ in commits]}, revealed in "
                        f"{first_reveal}: the commit must come after the prediction and before the reveal")
    for i, tree, call in reveals:
        outcome = call.args[0] if call.args else None
        if outcome is None:
            problems.append(f"cell {i}: {var}.reveal() is given no outcome")
            continue
        try:
            ast.literal_eval(outcome)
            problems.append(f"cell {i}: {var}.reveal is given a literal, not the simulator's result")
        except ValueError:
            pass
        if not _called_names(tree) & SIMULATORS:
            problems.append(f"cell {i}: the reveal cell runs no simulator ({sorted(SIMULATORS)})")
        elif not _free_names(outcome) & _bound_names(tree):
            problems.append(f"cell {i}: {var}.reveal's outcome is not computed in the cell that runs the simulator")
        if not _catches_dfaerror(tree, call):
            problems.append(f"cell {i}: {var}.reveal is not inside try/except DFAError (the blank release "
                            "commits nothing)")
    return problems


@pytest.mark.parametrize("lab", LABS, ids=lambda p: Path(p).stem)
def test_each_lab_commits_its_prediction_before_the_simulator_reveals_it(lab):
    nb = nbformat.read(REPO / lab, as_version=4)
    assert prediction_problems(nb, LABS[lab]) == []


@pytest.mark.parametrize("lab", LABS, ids=lambda p: Path(p).stem)
def test_the_release_leaves_the_commit_to_the_learner_and_the_map_is_open_before(lab):
    var = LABS[lab]
    release = nbformat.read(REPO / lab.replace("/source/", "/release/"), as_version=4)
    committed = [i for i, c in enumerate(release.cells) if c.cell_type == "code" and _calls(_tree(c), var, "commit")]
    assert committed == []  # the blank release commits nothing: the learner does, in the form or the answer cell
    src = nbformat.read(REPO / lab, as_version=4).cells
    opened = min(i for i, c in enumerate(src) if c.cell_type == "code" and ("open_map(" in c.source))
    created = min(i for i, c in enumerate(src) if c.cell_type == "code" and f"{var} = " in c.source)
    assert opened <= created and "lm=" in src[created].source  # kept beside the learner's map (lm.path)


def _lab(*cells):
    return new_notebook(cells=[new_markdown_cell("## Analysis"), *cells])


def _answer(source):
    cell = new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": False, "solution": True, "grade_id": "p", "locked": False}
    return cell


CREATE = new_code_cell("P = explore.predict('q', 'fastest first', choices=('gpu', 'tpu', 'lpu'), lm=lm)")
COMMIT = _answer("### BEGIN SOLUTION\nP.commit(['lpu', 'gpu', 'tpu'])\n### END SOLUTION")
REVEAL = new_code_cell("r = {s: simulate_llm('m', s).tokens_per_s for s in ('gpu', 'tpu', 'lpu')}\n"
                       "try:\n    P.reveal(r)\nexcept DFAError as exc:\n    print(exc)")


def test_the_check_accepts_the_pattern_and_names_each_violation():
    assert prediction_problems(_lab(CREATE, COMMIT, REVEAL), "P") == []
    assert "before the reveal" in " ".join(prediction_problems(_lab(CREATE, REVEAL, COMMIT), "P"))
    literal = new_code_cell("simulate_llm('m', 'gpu')\ntry:\n    P.reveal({'gpu': 1.0, 'tpu': 2.0, 'lpu': 3.0})\n"
                            "except DFAError:\n    pass")
    assert "a literal" in " ".join(prediction_problems(_lab(CREATE, COMMIT, literal), "P"))
    unguarded = new_code_cell("r = {s: simulate_llm('m', s).tokens_per_s for s in 'ab'}\nP.reveal(r)")
    assert "try/except DFAError" in " ".join(prediction_problems(_lab(CREATE, COMMIT, unguarded), "P"))
    no_sim = new_code_cell("r = OUTCOME\ntry:\n    P.reveal(r)\nexcept DFAError:\n    pass")
    assert "runs no simulator" in " ".join(prediction_problems(_lab(CREATE, COMMIT, no_sim), "P"))
    graded = _answer(COMMIT.source)
    graded.metadata["nbgrader"].update(grade=True, points=1)
    assert "ungraded answer cell" in " ".join(prediction_problems(_lab(CREATE, graded, REVEAL), "P"))
    assert "needs a predict" in " ".join(prediction_problems(_lab(CREATE, REVEAL), "P"))
