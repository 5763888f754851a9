"""The shape of ``common/``: packages by concept, each saying what it owns and which packages it may import.

Every package's ``__init__`` opens with a docstring: one paragraph on what it owns and a ``May import:`` line
naming, in double backticks, the other top-level packages of ``common`` it may import (or "no other package").
The base modules at the top (``BASE``) are for everyone. Every import, lazy ones inside functions included, must
keep to that picture; the allowed imports form a DAG; and no two modules import each other, directly or round a
circle. ``common/grading`` has its own finer picture, one level down (tests/test_grading_layout.py).
"""
from __future__ import annotations

import ast
import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

COMMON = Path(__file__).resolve().parents[1] / "common"
BASE = {"errors", "checks", "torch_compat", "palette"}  # modules everything uses: they import no package
MAX_LINES = 500


def packages() -> list[str]:
    return sorted(p.name for p in COMMON.iterdir() if (p / "__init__.py").is_file())


def docstring(init: Path) -> str:
    return ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""


def may_import(package: str) -> set[str]:
    line = re.search(r"^May import: (.*?)(?:\n\n|\Z)", docstring(COMMON / package / "__init__.py"), re.M | re.S)
    assert line, f"common/{package}/__init__.py says nowhere which packages it may import ('May import: ...')"
    return set(re.findall(r"``(\w+)``", line.group(1)))  # the line may wrap: up to the next blank line


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(COMMON.parent).with_suffix("").parts).removesuffix(".__init__")


MODULES = {module_name(p): p for p in COMMON.rglob("*.py")}


def imports(source: str, module: str, is_package: bool = False) -> set[str]:
    """The ``common`` modules that ``source`` (module ``module``) imports anywhere in it: ``from X import Y``
    counts as X.Y where that is a module, else as X."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found.update(t for t in targets if t == "common" or t.startswith("common."))
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the modules it imports, without the implicit edge from a module to the packages above it."""
    edges = {}
    for name, path in MODULES.items():
        targets = set()
        for target in imports(path.read_text(encoding="utf-8"), name, path.name == "__init__.py"):
            while target not in MODULES and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != name:
                targets.add(target)
        edges[name] = targets
    return edges


def top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_top_level_holds_only_the_base_modules():
    loose = sorted(p.stem for p in COMMON.glob("*.py") if p.stem != "__init__" and p.stem not in BASE)
    assert not loose, f"modules at the top of common/, in no package: {loose} (the base is {sorted(BASE)})"


def test_every_package_says_what_it_owns():
    for init in sorted(COMMON.rglob("__init__.py")):
        doc = docstring(init)
        assert len(doc.split("May import:")[0].strip()) > 40, f"{init.relative_to(COMMON)}: say what it owns"


def test_each_package_may_import_only_packages():
    for package in packages():
        unknown = may_import(package) - set(packages())
        assert not unknown, f"common/{package} may import {sorted(unknown)}, which are not packages of common"


def test_allowed_imports_form_a_dag():
    try:
        order = list(TopologicalSorter({p: may_import(p) for p in packages()}).static_order())
    except CycleError as cycle:
        pytest.fail(f"the packages' 'May import' lines form a cycle: {cycle.args[1]}")
    assert set(order) == set(packages())


def test_base_modules_import_no_package():
    edges = graph()
    for name in BASE & {p.stem for p in COMMON.glob("*.py")}:
        wrong = sorted(t for t in edges[f"common.{name}"] if top(t) not in BASE)
        assert not wrong, f"common/{name}.py is a base module, yet imports {wrong}"


@pytest.mark.parametrize("package", packages())
def test_package_imports_only_what_it_may(package):
    allowed = may_import(package) | {package} | BASE | {"__init__"}
    wrong = [f"{module} imports {target}" for module, targets in sorted(graph().items()) if top(module) == package
             for target in sorted(targets) if top(target) not in allowed]
    assert not wrong, f"common/{package} may import only {sorted(may_import(package))}: " + "; ".join(wrong)


def test_no_import_circles():
    edges = graph()
    try:
        list(TopologicalSorter(edges).static_order())
    except CycleError as cycle:
        pytest.fail("an import circle: " + " -> ".join(cycle.args[1]))


def test_no_source_file_is_too_long_to_read():
    long = {str(p.relative_to(COMMON)): n for p in COMMON.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by what they hold): {long}"


def test_no_tracker_numbers_in_the_code():
    """A comment says why, not which ticket: a tracker number means nothing to a reader of the code."""
    pattern = re.compile(r"\b(issue|ticket)s? #?\d+", re.IGNORECASE)  # an upstream PR cited as a source is fine
    upstream = re.compile(r"\b(torch-spyre|nbgrader|pytorch|transformers|[\w.-]+/[\w.-]+) (issue|PR)", re.I)  # cited
    code = sorted(COMMON.rglob("*.py")) + sorted(COMMON.parent.glob("tests/**/*.py")) + sorted(
        COMMON.parent.glob("benchmarks/**/*.py"))
    hits = [f"{p.relative_to(COMMON.parent)}:{i}" for p in code
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line) and not upstream.search(line) and p.name != "test_layout.py"]
    assert not hits, f"tracker numbers in the code: {hits}"


def test_the_check_sees_every_kind_of_import():
    source = ("from common.sim import simulate\n"
              "def f():\n    import common.graph.costs\n    from common.measure import bench\n"
              "from ..models import config\nfrom . import args\n")
    found = imports(source, "common.sim.run")
    assert found == {"common.sim", "common.graph.costs", "common.measure.bench", "common.models.config",
                     "common.sim.args"}


def test_the_check_finds_a_planted_circle():
    edges = {"common.a": {"common.b"}, "common.b": {"common.c"}, "common.c": {"common.a"}}
    with pytest.raises(CycleError):
        list(TopologicalSorter(edges).static_order())
