"""The lazy-notebook suite: for every lab, the shortcuts a student who does not do the work would try
must earn nothing, while the honest solution keeps every point.

Each lab lists its shortcuts in ``source/<lab>/shortcuts.py`` (instructor edition only, like answers.py):

    SHORTCUTS = [dict(cell="run_dataflow", kind="call-reference",
                      code="from common.dataflow.interpreter import run_tokens as run_dataflow",
                      fails=["run_dataflow_tests"]), ...]

``kind`` is one of ``KINDS``. The lab's source notebook runs once, in a plain kernel in its own folder (so hidden
tests import ``answers`` from there), with ``FAST = True``. After the last test cell a shortcut targets, the
harness inserts the shortcut's code, then a copy of each test cell in ``fails`` (each must raise), then the honest
solution cell again, so later cells run on honest state. Every original cell must finish without an error.
A test cell that raises earns 0 of its points under nbgrader; one that runs clean earns them all.

The same run checks the blank release (``blank_segments``): after each autograded test cell it puts back the
release's stubs of the solution cells the learner writes for that test (those since the previous test cell),
re-runs the code cells between them and the test, then the test (which must raise), then the honest solution and
those cells again. So every test fails on the learner's blank stubs, with every other stub honest; the sandboxed
autograde of every lab's source (tests/test_grading_notebooks.py) proves the grader itself takes each lab.
Last, in the same kernel after ``%reset -f``, the untouched release runs top to bottom (``blank_run``): a cell
that is neither a stub nor a test must not raise on it.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell
from nbformat.v4.nbbase import random_cell_id

from common.grading.authoring.lab_length import GOING_FURTHER
from common.grading.courses.standard import is_autograded_test, is_stub, nbgrader_meta
from common.grading.verdicts.judge import Judgement, parts, probe_cell_source, probe_payloads, verdict
from common.grading.verdicts.probe import variant_seed

REPO = Path(__file__).resolve().parents[1]
# avoid-fault: right output on a planted fault's input by routing around the faulty path instead of fixing it.
KINDS = ("read-off-object", "call-reference", "cpu-reference", "hard-code-visible", "echo-expected", "avoid-fault")
LAZY_LABS = sorted(REPO.glob("course*_*/source/*/shortcuts.py"))
TAG = "dfa-lazy"  # metadata key marking the cells the harness inserted
SALT = "lazy-suite-salt"  # the variants the harness judges (the grader derives them from the offering's salt)


def _id(path: Path) -> str:
    return f"{path.parents[2].name}/{path.parent.name}"


def load_shortcuts(path: Path) -> list[dict]:
    spec = importlib.util.spec_from_file_location(f"lazy_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.SHORTCUTS)


def _grade_ids(nb) -> dict[str, int]:
    return {nbgrader_meta(c)["grade_id"]: i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id")}


def shortcut_problems(nb, shortcuts: list[dict]) -> list[str]:
    """What is wrong with the list itself: unknown kinds or cells, a shortcut that targets no test."""
    ids, problems = _grade_ids(nb), []
    for n, s in enumerate(shortcuts):
        where = f"shortcut {n} ({s.get('cell')}, {s.get('kind')})"
        if s.get("kind") not in KINDS:
            problems.append(f"{where}: kind {s.get('kind')!r} is not one of {', '.join(KINDS)}")
        if s.get("cell") not in ids or not nbgrader_meta(nb.cells[ids[s["cell"]]]).get("solution"):
            problems.append(f"{where}: {s.get('cell')!r} is not a solution cell of the lab")
        fails = s.get("fails") or []
        if not fails:
            problems.append(f"{where}: it names no test cell it must fail")
        for test in fails:
            if test not in ids or not nbgrader_meta(nb.cells[ids[test]]).get("grade"):
                problems.append(f"{where}: {test!r} is not a graded test cell of the lab")
    return problems


def blank_segments(source, release) -> dict[int, list]:
    """Cells to insert after each autograded test cell of ``source``: the release's stubs of the solution cells
    since the previous test cell, the code cells between them and the test, a copy of the test (must fail), then
    the honest solution and the cells between again (restore)."""
    stubs = {nbgrader_meta(c)["grade_id"]: c for c in release.cells if is_stub(c)}
    inserts, start = {}, 0
    for i, cell in enumerate(source.cells):
        if not is_autograded_test(cell):
            continue
        segment = range(start, i)
        start = i + 1
        mine = [j for j in segment if is_stub(source.cells[j])]
        if not mine:
            continue
        between = [j for j in segment if j > mine[0] and source.cells[j].cell_type == "code" and j not in mine]
        test = nbgrader_meta(cell)["grade_id"]

        def tagged(c, role, test=test):
            c = copy.deepcopy(c)
            c.metadata = {TAG: {"role": role, "test": test, "kind": "blank"}}
            c.pop("id", None)
            return c

        blank = [tagged(stubs[nbgrader_meta(source.cells[j])["grade_id"]], "blank") for j in mine]
        inserts[i] = [
            *blank,
            *(tagged(source.cells[j], "blank") for j in between),
            tagged(cell, "must-fail-blank"),
            *(tagged(source.cells[j], "restore") for j in [*mine, *between]),
        ]
    return inserts


def blank_run(release) -> list:
    """The untouched release, top to bottom in a cleared namespace (the same kernel, so imports are cached):
    only its stubs and autograded test cells may raise, and anything under 'Going further'. Every other cell
    must run, printing its 'not written yet' line where it needs a stub's work (a stub left blank must not hang the
    run)."""
    cells = [new_code_cell("%reset -f", metadata={TAG: {"role": "parameters"}})]
    optional = False
    for cell in release.cells:
        optional = optional or (cell.cell_type == "markdown" and bool(GOING_FURTHER.search(cell.source)))
        if cell.cell_type != "code":
            continue
        c = copy.deepcopy(cell)
        may_raise = optional or is_stub(cell) or is_autograded_test(cell)
        c.metadata = {TAG: {"role": "blank-run", "may_raise": may_raise}}
        c.pop("id", None)
        cells.append(c)
        if "parameters" in cell.metadata.get("tags", []):
            cells.append(new_code_cell("FAST = True", metadata={TAG: {"role": "parameters"}}))
    return cells


def lazy_notebook(nb, shortcuts: list[dict], release=None):
    """``nb`` with every shortcut inserted after the last test cell it targets (see the module docstring), and
    with ``release`` given, the blank stubs of every test (``blank_segments``)."""
    nb = copy.deepcopy(nb)
    ids = _grade_ids(nb)
    after: dict[int, list] = blank_segments(nb, release) if release is not None else {}
    for n, s in enumerate(shortcuts):
        at = max(ids[t] for t in s["fails"])
        cells = [new_code_cell(s["code"], metadata={TAG: {"shortcut": n, "role": "code"}})]
        for test in s["fails"]:
            cell = copy.deepcopy(nb.cells[ids[test]])
            cell.metadata = {TAG: {"shortcut": n, "role": "must-fail", "test": test}}
            cell.pop("id", None)
            cells.append(cell)
        honest = copy.deepcopy(nb.cells[ids[s["cell"]]])
        honest.metadata = {TAG: {"shortcut": n, "role": "restore"}}
        honest.pop("id", None)
        after.setdefault(at, []).extend([*cells, honest])
    out = []
    for i, cell in enumerate(nb.cells):
        out.append(cell)
        if "parameters" in cell.metadata.get("tags", []):
            out.append(new_code_cell("FAST = True", metadata={TAG: {"role": "parameters"}}))
        out += after.get(i, [])
    if release is not None:
        out += blank_run(release)
    nb.cells = [piece for cell in out for piece in as_graded(cell)]
    for cell in nb.cells:  # nbformat 4.5 wants an id on every cell
        cell.setdefault("id", random_cell_id())
    return nb


def _test_id(cell) -> str | None:
    """The grade_id of a test cell the grader judges: an autograded test of the lab, or a copy the harness made."""
    tag = cell.metadata.get(TAG) or {}
    if tag.get("role") in ("must-fail", "must-fail-blank"):
        return tag["test"]
    return nbgrader_meta(cell)["grade_id"] if is_autograded_test(cell) else None


def as_graded(cell) -> list:
    """A test cell as the grader runs it (runner.py): its probe first, on its own, then its visible checks; the
    judgement waits in the cell's metadata for ``judged`` to run it here, outside the kernel."""
    test = _test_id(cell)
    if test is None:
        return [cell]
    visible, probe, judgement = parts(cell.source)
    seed = variant_seed(SALT, "lazy-suite", "lazy", test)
    probe_cell = new_code_cell(probe_cell_source(probe, seed), metadata={TAG: {"role": "probe", "test": test}})
    cell = copy.deepcopy(cell)
    cell.source = visible
    tag = cell.metadata.get(TAG) or {"role": "test"}
    cell.metadata[TAG] = {**tag, "judgement": judgement, "seed": seed, "test": test}
    return [probe_cell, cell]


def judged(nb, answers: str | None) -> dict[int, list[str]]:
    """The grader's verdict on every test cell of an executed lazy notebook, judged in this process from the
    data its probe cell printed (judge.verdict): {cell index: errors}, empty when it earns its points."""
    verdicts = {}
    for i, cell in enumerate(nb.cells):
        tag = cell.metadata.get(TAG) or {}
        if "judgement" not in tag:
            continue
        probe_cell = nb.cells[i - 1]
        record = {"probe": {"data": probe_payloads(probe_cell.get("outputs", [])),
                            "error": "; ".join(_errors(probe_cell)), "timed_out": False}}  # fmt: skip
        outputs = verdict(Judgement(tag["test"], tag["judgement"], tag["seed"]), record, answers=answers)
        verdicts[i] = [f"{o['ename']}: {o['evalue']}"[:300] for o in outputs if o["output_type"] == "error"]
    return verdicts


def _errors(cell) -> list[str]:
    return [f"{o.get('ename')}: {o.get('evalue')}"[:300] for o in cell.get("outputs", []) if o.output_type == "error"]


@pytest.mark.slow
@pytest.mark.parametrize("lazy", LAZY_LABS, ids=_id)
def test_every_shortcut_scores_zero_and_the_honest_solution_keeps_its_points(lazy, tmp_path):
    lab_dir = lazy.parent
    source = nbformat.read(lab_dir / f"{lab_dir.name}.ipynb", as_version=4)
    release = nbformat.read(lab_dir.parents[1] / "release" / lab_dir.name / f"{lab_dir.name}.ipynb", as_version=4)
    shortcuts = load_shortcuts(lazy)
    assert not shortcut_problems(source, shortcuts)
    nb = lazy_notebook(source, shortcuts, release)
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(lab_dir)}}).execute()  # fmt: skip
    nbformat.write(nb, tmp_path / "lazy.ipynb")  # kept for a failing run's inspection
    answers = (lab_dir / "answers.py").read_text(encoding="utf-8") if (lab_dir / "answers.py").is_file() else None
    honest_errors, passed = judge(nb, shortcuts, judged(nb, answers))
    assert not honest_errors, f"the honest notebook raised: {honest_errors}"
    assert not passed, f"shortcuts that earned points: {passed}"


def judge(nb, shortcuts: list[dict], verdicts: dict[int, list[str]]) -> tuple[list[str], list[str]]:
    """(errors in the honest cells, shortcuts whose must-fail test cell earned its points) of an executed lazy
    notebook; ``verdicts`` are the grader's (``judged``): a test cell earns its points when its judgement passed
    on its probe's data, whatever its visible checks printed."""
    honest_errors, passed = [], []
    for i, cell in enumerate(nb.cells):
        tag = cell.metadata.get(TAG)
        role = (tag or {}).get("role")
        first = cell.source.splitlines()[0][:60] if cell.source else ""
        if role == "probe":
            continue  # judged with its test cell
        if role == "test":  # an honest test cell of the lab: its judgement passes, and so do its visible checks
            if verdicts[i] or _errors(cell):
                honest_errors.append(f"test {tag['test']}: judgement {verdicts[i]}, visible checks {_errors(cell)}")
        elif tag is None or role in ("restore", "parameters"):
            if _errors(cell):
                honest_errors.append(f"{first}: {_errors(cell)}")
        elif role == "must-fail" and not verdicts[i]:
            s = shortcuts[tag["shortcut"]]
            passed.append(f"{s['kind']} shortcut for {s['cell']} passed {tag['test']}")
        elif role == "must-fail-blank" and not verdicts[i]:
            passed.append(f"the blank release's stubs passed {tag['test']}")
        elif role == "blank-run" and not tag["may_raise"] and _errors(cell):
            honest_errors.append(
                f"the blank release crashed in a cell that is not a stub or a test ({first}): {_errors(cell)}"
            )
    return honest_errors, passed


LABS = sorted(p.parent for p in REPO.glob("course*_*/source/*/*.py") if p.stem == p.parent.name)


@pytest.mark.parametrize("lab_dir", LABS, ids=lambda p: f"{p.parents[1].name}/{p.name}")
def test_every_lab_lists_a_shortcut_for_every_stub_or_says_why_not(lab_dir):
    """Runs without a kernel (not slow): a lab without shortcuts.py, or a graded stub nobody tried to cheat, fails."""
    lazy = lab_dir / "shortcuts.py"
    assert lazy.is_file(), f"{lab_dir.name} has no shortcuts.py (every lab lists the shortcuts a lazy learner tries)"
    spec = importlib.util.spec_from_file_location(f"lazy_{lab_dir.name}", lazy)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = nbformat.read(lab_dir / f"{lab_dir.name}.ipynb", as_version=4)
    tried = {s["cell"] for s in module.SHORTCUTS} | set(getattr(module, "NOT_LISTED", {}))
    untried = [
        nbgrader_meta(c)["grade_id"] for c in source.cells if is_stub(c) and nbgrader_meta(c)["grade_id"] not in tried
    ]
    assert not untried, f"stubs with no shortcut in shortcuts.py (add one, or say why in NOT_LISTED): {untried}"
    assert not shortcut_problems(source, module.SHORTCUTS)


@pytest.mark.slow
def test_the_harness_catches_a_shortcut_that_passes_and_a_list_that_is_wrong():
    from nbformat.v4 import new_notebook

    def graded(source, grade_id, **meta):
        return new_code_cell(source, metadata={"nbgrader": {"grade_id": grade_id, **meta}})

    def test_cell(probe: str, judgement: str) -> str:  # visible check, then the probe and its judgement
        return (
            "assert f(2) == 4\n### BEGIN HIDDEN TESTS\nfrom common.grading.verdicts.probe import Probe\n"
            "probe = Probe()\n"
            f"{probe}\n### JUDGEMENT\ndata, seed = probe.received()\n{judgement}\n### END HIDDEN TESTS"
        )

    nb = new_notebook(cells=[
        graded("def f(x):\n    return 2 * x", "f", solution=True, grade=False),
        graded(test_cell('probe.send("f2", f(2))', 'assert data["f2"] == 4'), "f_tests", solution=False, grade=True,
               points=1),
    ])  # fmt: skip
    cheat = dict(cell="f", kind="hard-code-visible", code="def f(x):\n    return 4", fails=["f_tests"])
    assert shortcut_problems(nb, [cheat]) == []
    assert len(shortcut_problems(nb, [dict(cell="f_tests", kind="guess", code="", fails=[])])) == 3

    def run(lazy):
        NotebookClient(lazy, timeout=60, kernel_name="python3", allow_errors=True).execute()
        return judge(lazy, [cheat], judged(lazy, None))

    lazy = lazy_notebook(nb, [cheat])
    roles = [c.metadata.get(TAG, {}).get("role") for c in lazy.cells]
    assert roles == [None, "probe", "test", "code", "probe", "must-fail", "restore"]
    assert "JUDGEMENT" not in "".join(c.source for c in lazy.cells)  # judgements never reach the kernel
    # the visible value hard-coded passes a judgement of the visible value only: the harness reports it
    assert run(lazy) == ([], ["hard-code-visible shortcut for f passed f_tests"])
    # a judgement on an input the learner has not seen fails it, though the visible check passes
    nb.cells[1].source = test_cell(
        'probe.send("f2", f(2))\nprobe.send("f5", f(5))', 'assert data["f2"] == 4 and data["f5"] == 10'
    )
    assert run(lazy_notebook(nb, [cheat])) == ([], [])
    # a lying __eq__ reaches the judgement only as data: a float that is not 10
    liar = dict(
        cell="f",
        kind="hard-code-visible",
        fails=["f_tests"],
        code="class Any(float):\n    __eq__ = lambda s, o: True\ndef f(x):\n    return Any(4.0)",
    )
    lazy = lazy_notebook(nb, [liar])
    NotebookClient(lazy, timeout=60, kernel_name="python3", allow_errors=True).execute()
    assert judge(lazy, [liar], judged(lazy, None)) == ([], [])
    release = copy.deepcopy(nb)
    release.cells[0].source = "def f(x):\n    raise NotImplementedError()"
    lazy = lazy_notebook(nb, [], release)
    assert [c.metadata.get(TAG, {}).get("role") for c in lazy.cells] == [
        None, "probe", "test", "blank", "probe", "must-fail-blank", "restore", "parameters", "blank-run",
        "blank-run"]  # fmt: skip
    NotebookClient(lazy, timeout=60, kernel_name="python3", allow_errors=True).execute()
    assert judge(lazy, [], judged(lazy, None)) == ([], [])
    # a given cell that uses a stub's work without its 'not written yet' line: the blank run catches it
    release.cells.append(new_code_cell("print(f(3))"))
    lazy = lazy_notebook(nb, [], release)
    NotebookClient(lazy, timeout=60, kernel_name="python3", allow_errors=True).execute()
    errors, _ = judge(lazy, [], judged(lazy, None))
    assert len(errors) == 1 and "not a stub or a test (print(f(3)))" in errors[0]
    release.cells.pop()
    release.cells[0].source = "def f(x):\n    return 2 * x"  # a release whose stub is the answer
    lazy = lazy_notebook(nb, [], release)
    NotebookClient(lazy, timeout=60, kernel_name="python3", allow_errors=True).execute()
    assert judge(lazy, [], judged(lazy, None)) == ([], ["the blank release's stubs passed f_tests"])
