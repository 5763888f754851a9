"""The package learners install from the student edition: ``pyproject.toml`` and ``common/`` without what only
the instructor needs.

Left out: ``common/grading/`` (release, sandbox, autograde, the graders: instructor tooling; the checks the visible
tests call live in ``common/checks.py`` and stay), ``common/site/`` (the course website's builder), caches, and each
reference of a graded stub (``grader_only.GRADER_ONLY``) that nothing the learner runs needs. A reference is removed
only when no release notebook and no other published module mentions its name (a whole word); otherwise it stays,
and ``dfa publish`` says which notebook or module holds it, so that ``dfa check --published`` is expected to fail
until that use is gone. The pyproject keeps the project's name, version, dependencies, the ``dfa`` command and the
torch.compile backends and the learners' ``lab`` extra (JupyterLab), and drops the instructor, cluster and dev
extras. The licence file (``LICENSE``) is published beside it.
"""

from __future__ import annotations

import ast
import re
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from common.grading.editions import grader_only

INSTRUCTOR_ONLY = ("common/grading", "common/site")  # relative to the package's parent folder
SKIP = ("__pycache__", "*.pyc", "*.egg-info")
LEARNER_DESCRIPTION = (
    "Dataflow Architectures for AI - the labs' package: simulated GPU/TPU/WSE/LPU/Spyre backends, "
    "FX cost tools, roofline and the labs' checks (student edition)"
)
LEARNER_EXTRAS = ("lab",)  # `pip install ".[lab]"`: JupyterLab and ipywidgets to open the labs locally
LICENSE_FILE = "LICENSE"
# Published beside it where the instructor edition has them: the course text and figures' licence, the citation.
COURSE_FILES = ("LICENSE-CONTENT", "CITATION.cff")
PROJECT_KEYS = (
    "name",
    "version",
    "description",
    "readme",
    "requires-python",
    "license",
    "dependencies",
    "scripts",
    "entry-points",
)


@dataclass
class Strip:
    """What happened to one reference: left out of the package, or kept and why."""

    reference: str
    stubs: list[str]
    removed: bool = False
    users: list[str] = field(default_factory=list)  # release notebooks / modules that mention it


def copy_package(src_parent: Path, out: Path) -> list[Path]:
    """Copy ``common/`` from ``src_parent`` into ``out`` without the instructor-only parts; the files written."""
    src = src_parent / "common"
    skip = shutil.ignore_patterns(*SKIP)
    written = []

    def keep(folder: str, names: list[str]) -> set[str]:
        rel = Path(folder).relative_to(src_parent)
        dropped = set(skip(folder, names))
        return dropped | {n for n in names if (rel / n).as_posix() in INSTRUCTOR_ONLY}

    shutil.copytree(src, out / "common", ignore=keep, dirs_exist_ok=True)
    for path in sorted((out / "common").rglob("*")):
        if path.is_file():
            written.append(path)
    return written


def _mentions(name: str, texts: dict[str, str]) -> list[str]:
    word = re.compile(rf"\b{re.escape(name)}\b")
    return [where for where, text in texts.items() if word.search(text)]


def _without(text: str, qualname: str) -> str | None:
    """``text`` with the definition of ``qualname`` removed (decorators included); None if it is not there."""
    tree = ast.parse(text)
    node = grader_only.definition(tree, qualname)
    if node is None:
        return None
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    lines = text.splitlines(keepends=True)
    new = "".join(lines[: first - 1] + lines[node.end_lineno :])
    ast.parse(new)  # a class left with an empty body would not parse: the caller keeps the reference then
    return new


def strip_references(out: Path, notebooks: dict[str, str]) -> list[Strip]:
    """Remove each grader-only reference from ``out/common`` where nothing published uses it.

    ``notebooks``: a release notebook's name -> its code. The reference's own definition does not count as a
    use; any other mention of its name in a published module does (an import, a call, ``__all__``)."""
    by_reference: dict[str, Strip] = {}
    for where, stub, reference in grader_only.GRADER_ONLY:
        by_reference.setdefault(reference, Strip(reference, [])).stubs.append(f"{where} {stub}")
    results = []
    for reference, strip in by_reference.items():
        module, qualname = grader_only.split(reference)
        path = grader_only.module_file(out, module)
        if path is None or not grader_only.defines(path, qualname):
            strip.removed = True  # not in the published package at all
            results.append(strip)
            continue
        name = qualname.split(".")[-1]
        text = path.read_text(encoding="utf-8")
        try:
            remainder = _without(text, qualname)
        except SyntaxError:
            remainder = None
        modules = {
            p.relative_to(out).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted((out / "common").rglob("*.py"))
            if p != path
        }
        if remainder is not None:
            modules[path.relative_to(out).as_posix()] = remainder
        strip.users = _mentions(name, notebooks) + _mentions(name, modules)
        if remainder is not None and not strip.users:
            path.write_text(remainder, encoding="utf-8")
            strip.removed = True
        elif remainder is None:
            strip.users.append(f"{path.relative_to(out).as_posix()} (cannot be cut out cleanly)")
        results.append(strip)
    return results


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)


def _table(name: str, items: dict) -> list[str]:
    lines = [f"[{name}]"]
    for key, value in items.items():
        if isinstance(value, list) and len(value) > 3:
            lines.append(f"{_toml_key(key)} = [")
            lines += [f"    {_toml_value(v)}," for v in value]
            lines.append("]")
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    return lines + [""]


def learner_pyproject(instructor_pyproject: Path, published_repo: str) -> str:
    """The student edition's pyproject: the project without the instructor extras, and where it is published."""
    data = tomllib.loads(instructor_pyproject.read_text(encoding="utf-8"))
    project = {k: v for k, v in data["project"].items() if k in PROJECT_KEYS}
    project["description"] = LEARNER_DESCRIPTION
    tables = {k: project.pop(k) for k in ("scripts", "entry-points") if k in project}
    lines = ["# The student edition of the course package, written by `dfa publish` (do not edit: publish again).", ""]
    lines += _table("build-system", data["build-system"])
    lines += _table("project", project)
    learner_extras = {k: v for k, v in data["project"].get("optional-dependencies", {}).items() if k in LEARNER_EXTRAS}
    if learner_extras:
        lines += _table("project.optional-dependencies", learner_extras)
    if "scripts" in tables:
        lines += _table("project.scripts", tables["scripts"])
    for group, entries in tables.get("entry-points", {}).items():
        lines += _table(f"project.entry-points.{group}", entries)
    lines += _table("tool.setuptools.packages.find",
                    {"include": ["common*"], "exclude": ["common.grading*", "common.site*"]})
    # data files the package reads at run time (the bundled model configs of common.models.llm)
    package_data = {k: v for k, v in data.get("tool", {}).get("setuptools", {}).get("package-data", {}).items()
                    if not k.startswith("common.grading")}
    if package_data:
        lines += _table("tool.setuptools.package-data", package_data)
    lines += _table("tool.dfa", {"published_repo": published_repo})
    return "\n".join(lines)
