"""The site's pages other than the machine pages: course READMEs, release notebooks, lab index, fidelity,
licence and the front page. Each ``write_*`` writes into the Sphinx source folder and returns the documents it
wrote (paths relative to it, without suffix), so the builder can check that each one became a page."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import nbformat

from common.errors import DFAError
from common.grading.authoring import colab
from common.grading.authoring.labsource import repo_path
from common.grading.authoring.release import lab_title
from common.grading.courses.course import Course
from common.grading.editions.publish import colab_prefix, rewrite
from common.site.machines import TITLES, fidelity_alt_text, fidelity_figure, machine_page, md_escape, policy_doc

FIDELITY = Path("benchmarks/results")
# Text that only an instructor's notebook holds: nbgrader strips both from a release.
LEAK_MARKERS = ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS")


@dataclass(frozen=True)
class Lab:
    course: str
    lab: str
    title: str

    @property
    def path(self) -> str:
        return repo_path(self.course, self.lab)

    @property
    def doc(self) -> str:
        return self.path.removesuffix(".ipynb")


def badge(slug: str, path: str) -> str:
    return f"[![Open this lab in Google Colab]({colab.BADGE_IMAGE})]({colab_prefix(slug)}{path})"


def write_courses(src: Path, courses: list[Course], slug: str) -> tuple[list[str], list[Lab]]:
    """Each course's README as ``<course>/README.md`` and its release notebooks beside it, as published."""
    docs, labs = [], []
    for course in courses:
        readme = course.root / "README.md"
        if not readme.is_file():
            raise DFAError(f"course {course.name} has no README.md: the site's page for it would be missing")
        (src / course.name).mkdir(parents=True, exist_ok=True)
        (src / course.name / "README.md").write_text(rewrite(readme.read_text(encoding="utf-8"), slug), "utf-8")
        docs.append(f"{course.name}/README")
        for lab in course.labs():
            item = write_notebook(src, course, lab, slug)
            labs.append(item)
            docs.append(item.doc)
    return docs, labs


def write_notebook(src: Path, course: Course, lab: str, slug: str) -> Lab:
    """The release notebook with its badge on the published repository; one is added where none is."""
    release = course.release_notebook(lab)
    if not release.is_file():
        raise DFAError(f"{course.name}/{lab} has no release notebook ({release}): run  dfa release {course.name}")
    nb = nbformat.read(release, as_version=4)
    item = Lab(course.name, lab, lab_title(nb))
    for cell in nb.cells:
        leak = next((m for m in LEAK_MARKERS if m in cell.source), None)
        if leak:
            raise DFAError(f"{item.path} holds {leak!r}: a release notebook must hold no solution or hidden test")
        cell.source = rewrite(cell.source, slug)
    if not any(colab_prefix(slug) + item.path in cell.source for cell in nb.cells):
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(badge(slug, item.path)))
    target = src / item.path
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return item


def write_lab_index(src: Path, labs: list[Lab], slug: str) -> list[str]:
    lines = ["# Labs", "", f"{len(labs)} notebooks, as learners get them: no solutions, no hidden tests, no outputs. "
             "Each opens in Google Colab from the published repository, "
             f"[github.com/{slug}](https://github.com/{slug}).", "",
             "| course | lab | open |", "| --- | --- | --- |"]
    lines += [f"| [{lab.course}]({lab.course}/README.md) | [{lab.title}]({lab.path}) | {badge(slug, lab.path)} |"
              for lab in labs]
    lines += ["", "```{toctree}", ":hidden:", "", *[lab.doc for lab in labs], "```", ""]
    (src / "labs.md").write_text("\n".join(lines), encoding="utf-8")
    return ["labs"]


def load_fidelity(root: Path) -> dict:
    path = root / FIDELITY / "fidelity.json"
    if not path.is_file():
        raise DFAError(f"no fidelity results at {path}: run  python benchmarks/fidelity.py")
    return json.loads(path.read_text(encoding="utf-8"))


def write_machines(src: Path, fidelity: dict) -> list[str]:
    (src / "machines").mkdir(exist_ok=True)
    docs = []
    for kind in TITLES:
        (src / "machines" / f"{kind}.md").write_text(machine_page(kind, fidelity), encoding="utf-8")
        docs.append(f"machines/{kind}")
    return docs


def write_fidelity(src: Path, root: Path, fidelity: dict) -> list[str]:
    table = root / FIDELITY / "fidelity.md"
    if not table.is_file():
        raise DFAError(f"no fidelity table at {table}: run  python benchmarks/fidelity.py")
    fidelity_figure(fidelity, src / "fidelity.png")
    machine = fidelity.get("machine", {})
    text = ["# Fidelity", "", "The simulators checked against published end-to-end figures, generated from "
            "`benchmarks/results/fidelity.json` and `fidelity.md` (re-run with `python benchmarks/fidelity.py`; "
            f"last run with torch {machine.get('torch', '?')} on {machine.get('cpu', '?')}). Nothing is tuned "
            "to these figures. Per machine, see its page under *Simulated machines*.", "",
            f"![{fidelity_alt_text(fidelity)}](fidelity.png)", "", table.read_text(encoding="utf-8")]
    (src / "fidelity.md").write_text("\n".join(text), encoding="utf-8")
    return ["fidelity"]


def write_licence(src: Path, root: Path) -> list[str]:
    parts = ["# Licence and citation", "",
             "The code (the `common` package, the labs' code cells, tests and tools) is under the Apache License "
             "2.0 (`LICENSE`). The course text and figures (READMEs, the labs' Markdown cells, the documentation "
             "and the figures on this site) are under Creative Commons Attribution 4.0 International "
             "(`LICENSE-CONTENT`).", ""]
    for name, lang in (("LICENSE-CONTENT", "text"), ("CITATION.cff", "yaml")):
        path = root / name
        if not path.is_file():
            raise DFAError(f"{path} is missing: a published course carries it (README, 'Licence and citation')")
        parts += [f"## `{name}`", "", f"```{lang}", path.read_text(encoding="utf-8").strip(), "```", ""]
    (src / "licence.md").write_text("\n".join(parts), encoding="utf-8")
    return ["licence"]


def machine_summary(fidelity: dict) -> list[str]:
    """Per machine: its policy's summary line and what the fidelity results check of it."""
    lines = ["| machine | what its compiler models | fidelity figures |", "| --- | --- | --- |"]
    for kind in TITLES:
        stats = fidelity.get("per_architecture", {}).get(kind)
        bounds = sum(r["backend"] == kind and r["group"] != "sourced" for r in fidelity["rows"])
        checked = [f"{stats['n']} sourced: median sim / published {stats['median']:.2f}, worst {stats['worst']:.2f}"
                   ] if stats else []
        checked += [f"{bounds} bound(s)"] if bounds else []
        summary = md_escape(policy_doc(kind).split("\n", 1)[0])
        lines.append(f"| [{TITLES[kind]}](machines/{kind}.md) | {summary} | {'; '.join(checked) or 'none'} |")
    return [*lines, ""]


def write_index(src: Path, root: Path, courses: list[Course], slug: str, fidelity: dict) -> list[str]:
    """The front page: the README's opening paragraph, then the navigation (every page sits in a toctree)."""
    readme = (root / "README.md").read_text(encoding="utf-8").split("\n\n")
    title = readme[0].lstrip("# ").strip()
    intro = readme[1].strip()

    def toctree(caption: str, docs: list[str], hidden: bool = False) -> list[str]:
        return ["```{toctree}", f":caption: {caption}", ":maxdepth: 1", *([":hidden:"] if hidden else []), "",
                *docs, "```", ""]

    lines = [f"# {title}", "", intro, "",
             f"The labs run on Google Colab or any Jupyter; the course's public repository is "
             f"[github.com/{slug}](https://github.com/{slug}).", ""]
    lines += toctree("Courses", [f"{c.name}/README" for c in courses])
    lines += toctree("Labs", ["labs"])
    lines += toctree("Simulated machines", [f"machines/{k}" for k in TITLES], hidden=True)
    lines += ["Simulated machines", "", *machine_summary(fidelity)]
    lines += toctree("Fidelity", ["fidelity"])
    lines += toctree("About", ["licence"])
    (src / "index.md").write_text("\n".join(lines), encoding="utf-8")
    return ["index"]
