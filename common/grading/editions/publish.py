"""``dfa publish OUT``: write the student edition of the course into ``OUT``, the folder of the public repository.

This repository is the instructor edition (lab sources, solutions, hidden tests, mark schemes, salts, the
grader-only references); course staff keep it private. The student edition holds what a learner needs:

- every lab's and Deep Dive's release notebook at ``courseN_*/release/<lab>/<lab>.ipynb``, built as
  ``dfa release`` builds it (rendered from ``<lab>.py``, then nbgrader: solutions stubbed, hidden tests and
  outputs removed) in a throw-away copy of the course, so the instructor's gradebook is not touched;
- the package learners install (``published_package``: ``pyproject.toml`` and ``common/`` without
  ``common/grading`` and without the grader-only references nothing published uses);
- a learner README (``published_readme``) and each course's README (its syllabus);
- the licence, ``LICENSE`` (Apache-2.0), as the instructor edition has it, and where it has them the course
  text and figures' licence (``LICENSE-CONTENT``, CC BY 4.0) and ``CITATION.cff``;
- a manifest, ``.dfa-publish.json``, naming the files this command wrote.

Badges and setup cells point at the published repository, from one setting: ``[tool.dfa] published_repo =
"owner/name"`` in pyproject.toml (``--repo`` overrides it). Every instructor Colab URL
``…/github/<colab.REPO_GIT_URL's slug>/blob/<branch>/`` and install source ``git+<REPO_GIT_URL>@`` in what is
published is rewritten to it. ``OUT`` must be empty (a fresh clone, holding only ``.git``, counts as empty)
unless ``force``; even then only files a previous publish wrote (its manifest) are removed — anything else in
``OUT`` stays, and is reported.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from common.errors import DFAError
from common.grading.authoring import colab, labsource
from common.grading.authoring.colab import colab_prefix
from common.grading.courses.course import CONFIG_FILE, Course, quiet_nbgrader, repo_root
from common.grading.editions import published_package

MANIFEST = ".dfa-publish.json"
SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
KEEP_IN_OUT = {".git", MANIFEST}  # what a non-empty OUT may hold without --force


@dataclass
class Published:
    out: Path
    repo: str
    notebooks: list[str] = field(default_factory=list)  # repository paths of the release notebooks
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # files of the previous publish that this one did not write
    foreign: list[str] = field(default_factory=list)  # files in OUT that publish did not write (left alone)
    replaced: list[str] = field(default_factory=list)  # files no manifest listed that --force overwrote
    strips: list = field(default_factory=list)  # published_package.Strip per grader-only reference
    salted: list[str] = field(default_factory=list)  # release notebooks that print a salt


def published_repo(pyproject: Path | None = None, override: str | None = None) -> str:
    """The ``owner/name`` of the public repository: ``override``, else ``[tool.dfa] published_repo``."""
    pyproject = pyproject or repo_root() / "pyproject.toml"
    repo = override
    if repo is None and pyproject.is_file():
        repo = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("dfa", {}).get("published_repo")
    if repo is None:
        raise DFAError(
            f'no published repository: set [tool.dfa] published_repo = "owner/name" in {pyproject} '
            "or pass --repo owner/name"
        )
    if not SLUG.match(repo):
        raise DFAError(f"published repository {repo!r} is not owner/name (e.g. dataflow-labs/open-labs)")
    return repo


def install_prefix(slug: str) -> str:
    return f"git+https://github.com/{slug}.git@"


def rewrite(text: str, slug: str) -> str:
    """``text`` with the instructor repository's Colab URLs and install source pointing at ``slug``."""
    text = text.replace(colab_prefix(colab.github_slug()), colab_prefix(slug))
    return text.replace(f"git+{colab.REPO_GIT_URL}@", install_prefix(slug))


def build_releases(course: Course, into: Path) -> dict[str, Path]:
    """Release notebooks of every lab of ``course``, generated in a copy of it under ``into``: lab -> folder."""
    from common.grading.authoring.release import release_lab

    copy = into / course.name
    copy.mkdir(parents=True)
    shutil.copy2(course.root / CONFIG_FILE, copy / CONFIG_FILE)
    shutil.copytree(course.source_dir, copy / "source")
    clone = Course(copy)
    api = clone.api()
    with quiet_nbgrader():
        return {lab: release_lab(clone, lab, api, force=True).path.parent for lab in clone.labs()}


def _out_files(out: Path) -> list[str]:
    return sorted(
        p.relative_to(out).as_posix()
        for p in out.rglob("*")
        if p.is_file() and p.relative_to(out).parts[0] not in KEEP_IN_OUT
    )


def _prepare(out: Path, force: bool) -> tuple[list[str], list[str]]:
    """Refuse a non-empty OUT without ``force``; with it, the previous publish's files (to replace) and the rest."""
    if out.exists() and not out.is_dir():
        raise DFAError(f"{out} is a file: dfa publish writes a folder")
    out.mkdir(parents=True, exist_ok=True)
    present = _out_files(out)
    if present and not force:
        raise DFAError(
            f"{out} is not empty ({len(present)} files, e.g. {present[0]}): publish into an empty "
            "folder or a fresh clone, or pass --force to replace what a previous publish wrote there"
        )
    previous = []
    if (out / MANIFEST).is_file():
        previous = json.loads((out / MANIFEST).read_text(encoding="utf-8")).get("files", [])
    return [p for p in previous if p in present], [p for p in present if p not in previous]


def _write(out: Path, rel: str, text: str, written: list[str]) -> None:
    path = out / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    written.append(rel)


def publish(
    courses: list[Course],
    out: Path,
    *,
    repo: str | None = None,
    force: bool = False,
    package_parent: Path | None = None,
) -> Published:
    """Write the student edition of ``courses`` into ``out``; see the module docstring. ``package_parent``: the
    folder holding ``common/`` and ``pyproject.toml`` to publish (default: this checkout)."""
    from common.grading.editions import published_readme
    from common.grading.editions.published_check import salt_lines

    package_parent = package_parent or repo_root()
    slug = published_repo(package_parent / "pyproject.toml", override=repo)
    out = out.resolve()
    previous, foreign = _prepare(out, force)
    result = Published(out, slug, foreign=foreign)
    code: dict[str, str] = {}
    rows = []
    with tempfile.TemporaryDirectory(prefix="dfa-publish-") as tmp:
        stage = Path(tmp) / "edition"
        for course in courses:
            for lab, folder in build_releases(course, Path(tmp) / "build").items():
                for item in sorted(p for p in folder.rglob("*") if p.is_file()):
                    rel = (Path(course.name) / "release" / lab / item.relative_to(folder)).as_posix()
                    if item.suffix == ".ipynb":
                        text = rewrite(item.read_text(encoding="utf-8"), slug)
                        nb = nbformat.reads(text, as_version=4)
                        code[rel] = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
                        if salt_lines(code[rel]):
                            result.salted.append(rel)
                        _write(stage, rel, text, result.written)
                    else:
                        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(item, stage / rel)
                        result.written.append(rel)
                nb_rel = labsource.repo_path(course.name, lab)
                result.notebooks.append(nb_rel)
                title = published_readme.title_of(stage / nb_rel)
                rows.append((course.name, title, nb_rel))
            readme = course.root / "README.md"
            if readme.is_file():
                _write(
                    stage, f"{course.name}/README.md", rewrite(readme.read_text(encoding="utf-8"), slug), result.written
                )
        package = published_package.copy_package(package_parent, stage)
        result.strips = published_package.strip_references(stage, code)
        result.written += [p.relative_to(stage).as_posix() for p in package]
        _write(
            stage,
            "pyproject.toml",
            published_package.learner_pyproject(package_parent / "pyproject.toml", slug),
            result.written,
        )
        _write(stage, "README.md", published_readme.readme(slug, rows), result.written)
        licence = package_parent / published_package.LICENSE_FILE
        if not licence.is_file():
            raise DFAError(f"{licence} is missing: the student edition is published with its licence")
        _write(stage, published_package.LICENSE_FILE, licence.read_text(encoding="utf-8"), result.written)
        for name in published_package.COURSE_FILES:
            if (package_parent / name).is_file():  # the citation names the published repository
                text = (package_parent / name).read_text(encoding="utf-8")
                text = text.replace(f"https://github.com/{colab.github_slug()}", f"https://github.com/{slug}")
                _write(stage, name, text, result.written)
        for rel in previous:
            if rel not in result.written:
                (out / rel).unlink(missing_ok=True)
                result.removed.append(rel)
        result.replaced = [rel for rel in foreign if rel in result.written]
        result.foreign = [rel for rel in foreign if rel not in result.written]
        for rel in result.written:
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(stage / rel, target)
    manifest = {"published_repo": slug, "files": sorted(result.written), "notebooks": result.notebooks}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return result
