"""The grading package's groups (``common/grading/<group>/``): each group's ``__init__`` says which other groups it
may import (a ``May import:`` line); every import in the group's modules, lazy ones included, must keep to it,
and the allowed imports must form a DAG."""

from __future__ import annotations

import ast
import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

GRADING = Path(__file__).resolve().parents[1] / "common" / "grading"
TOP_LEVEL = {"__init__.py", "cli.py"}  # the flow picture, and the dfa sub-commands (which use every group)


def groups() -> list[str]:
    return sorted(p.name for p in GRADING.iterdir() if (p / "__init__.py").is_file())


def may_import(group: str) -> set[str]:
    doc = ast.get_docstring(ast.parse((GRADING / group / "__init__.py").read_text(encoding="utf-8"))) or ""
    line = re.search(r"^May import: (.*)$", doc, re.MULTILINE)
    assert line, f"common/grading/{group}/__init__.py says nowhere which groups it may import ('May import: ...')"
    return set(re.findall(r"``(\w+)``", line.group(1)))


def imported_groups(source: str, module: str) -> set[str]:
    """The groups (or top-level modules, e.g. ``cli``) of ``common.grading`` that ``source`` imports, anywhere in it;
    ``module`` is its dotted name, for relative imports."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: -node.level]
                base = ".".join(package + ([base] if base else []))
            targets = [base] if base != "common.grading" else [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            if parts[:2] == ["common", "grading"] and len(parts) > 2:
                found.add(parts[2])
    return found


def test_every_module_is_in_a_group():
    loose = sorted(p.name for p in GRADING.glob("*.py") if p.name not in TOP_LEVEL)
    assert not loose, f"modules at the top of common/grading, in no group: {loose}"


def test_each_group_says_what_it_owns_and_may_import_only_groups():
    for group in groups():
        doc = ast.get_docstring(ast.parse((GRADING / group / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc.split("May import:")[0].strip()) > 40, f"{group}/__init__.py: say what it owns"
        unknown = may_import(group) - set(groups())
        assert not unknown, f"{group}/__init__.py may import {sorted(unknown)}, which are not groups"


def test_allowed_imports_form_a_dag():
    try:
        order = list(TopologicalSorter({group: may_import(group) for group in groups()}).static_order())
    except CycleError as cycle:
        pytest.fail(f"the groups' 'May import' lines form a cycle: {cycle.args[1]}")
    assert set(order) == set(groups())


@pytest.mark.parametrize("group", groups())
def test_group_imports_only_what_it_may(group):
    allowed = may_import(group) | {group}
    wrong = []
    for path in sorted((GRADING / group).rglob("*.py")):
        module = ".".join(path.relative_to(GRADING.parents[1]).with_suffix("").parts)
        for target in sorted(imported_groups(path.read_text(encoding="utf-8"), module) - allowed):
            wrong.append(f"{path.relative_to(GRADING)} imports common.grading.{target}")
    assert not wrong, f"{group} may import only {sorted(allowed - {group})}: " + "; ".join(wrong)


def test_the_check_sees_every_kind_of_import():
    source = ("from common.grading.gradebook import autograde\n"
              "def f():\n    import common.grading.sandbox.limits\n    from common.grading import cli\n"
              "from ..authoring.release import release_lab\n")
    found = imported_groups(source, "common.grading.verdicts.judge")
    assert found == {"gradebook", "sandbox", "cli", "authoring"}
