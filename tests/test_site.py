"""The course website (``common.site``): generated pages hold the catalog's and the fidelity results' own
numbers, release notebooks keep their Colab badge on the published repository, and the Sphinx build fails on
a broken link or an orphan page."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from common.chips import chips_of_kind
from common.errors import DFAError
from common.grading.authoring import colab
from common.grading.courses.course import Course, all_courses
from common.grading.editions.publish import colab_prefix, published_repo
from common.site import machines, pages
from common.site.build import images_without_alt

ROOT = Path(__file__).resolve().parents[1]
FIDELITY = json.loads((ROOT / "benchmarks/results/fidelity.json").read_text(encoding="utf-8"))


def _row(backend: str, ratio: float, group: str = "sourced", **extra) -> dict:
    return {"figure": f"fig {backend} {ratio}", "published": 100, "simulated": 100 * ratio, "unit": "tok/s",
            "ratio": ratio, "backend": backend, "group": group, **extra}


def test_md_escape_keeps_a_table_cell_one_cell():
    assert machines.md_escape("a | b *c* [d]\n e") == r"a \| b \*c\* \[d\] e"


def test_si_prefixes_and_unpublished():
    assert machines.si(3.12e14, "FLOP/s") == "312 TFLOP/s"
    assert machines.si(2e6, "B") == "2 MB"
    assert machines.si(None, "Hz") == "not published"


@pytest.mark.parametrize("kind", list(machines.TITLES))
def test_machine_page_lists_every_chip_of_its_kind_with_every_source(kind):
    page = machines.machine_page(kind, FIDELITY)
    chips = chips_of_kind(kind)
    assert chips
    for chip in chips:
        assert f"### `{chip.name}`" in page
        for source in chip.sources.values():
            assert machines.md_escape(source) in page
        for estimate in chip.estimates.values():
            assert machines.md_escape(estimate.derivation) in page
    assert machines.md_escape(machines.policy_doc(kind).splitlines()[0]) in page


def test_wrong_section_reads_the_results_it_is_given():
    fidelity = {"rows": [_row("gpu", 1.1), _row("gpu", 0.4), _row("tpu", 1.0)]}
    text = "\n".join(machines.wrong_section("gpu", fidelity))
    assert "2 sourced figure(s); the worst is 0.40x (slower than published), 1 of them off by more than 1.4x" in text
    assert text.index("fig gpu 0.4") < text.index("fig gpu 1.1")  # worst first
    assert "fig tpu" not in text
    unchecked = "\n".join(machines.wrong_section("spyre", fidelity))
    assert "unchecked" in unchecked


def test_wrong_section_states_each_bound_and_its_unknowns():
    fidelity = {"rows": [_row("lpu", 1.3, "bound", check="upper", gap=1.3, holds=False, unknowns=["host cost"])]}
    text = "\n".join(machines.wrong_section("lpu", fidelity))
    assert "upper, gap 1.30, does NOT hold. Unknown: host cost." in text


def test_fidelity_alt_text_is_one_sentence_from_the_data():
    fidelity = {"rows": [_row("gpu", 0.9), _row("gpu", 2.5), _row("wse", 3.0, "bound")]}
    alt = machines.fidelity_alt_text(fidelity)
    assert "for 3 published figures" in alt and "between 0.90x and 2.50x, 1 of them inside" in alt
    assert "1 bounds" in alt and alt.endswith(".") and alt.count(". ") == 0


def test_images_without_alt_finds_the_bare_image(tmp_path):
    (tmp_path / "a.html").write_text('<img src="x.png" alt="A chart."><img src="y.png"><img src="z.png" alt=" ">')
    assert images_without_alt(tmp_path) == ["a.html: y.png", "a.html: z.png"]


def _course(tmp_path: Path, cells: list) -> Course:
    root = tmp_path / "course9_test"
    (root / "source" / "lab9").mkdir(parents=True)
    (root / "source" / "lab9" / "lab9.py").write_text("")
    (root / "release" / "lab9").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), root / "release" / "lab9" / "lab9.ipynb")
    return Course(root)


def test_release_notebook_badge_points_at_the_published_repository(tmp_path):
    path = "course9_test/release/lab9/lab9.ipynb"
    course = _course(tmp_path, [nbformat.v4.new_markdown_cell(f"# Lab 9\n\n{colab.badge_markdown(path)}")])
    lab = pages.write_notebook(tmp_path / "src", course, "lab9", "someone/fork")
    assert lab.title == "Lab 9" and lab.doc == "course9_test/release/lab9/lab9"
    nb = nbformat.read(tmp_path / "src" / path, as_version=4)
    assert len(nb.cells) == 1 and colab_prefix("someone/fork") + path in nb.cells[0].source


def test_release_notebook_without_badge_gets_one(tmp_path):
    course = _course(tmp_path, [nbformat.v4.new_markdown_cell("# Lab 9")])
    pages.write_notebook(tmp_path / "src", course, "lab9", "someone/fork")
    nb = nbformat.read(tmp_path / "src/course9_test/release/lab9/lab9.ipynb", as_version=4)
    assert "Open this lab in Google Colab" in nb.cells[0].source and nb.cells[1].source == "# Lab 9"


def test_a_solution_in_a_release_notebook_stops_the_build(tmp_path):
    course = _course(tmp_path, [nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION")])
    with pytest.raises(DFAError, match="no solution or hidden test"):
        pages.write_notebook(tmp_path / "src", course, "lab9", "someone/fork")


def test_whole_site_builds_and_a_broken_link_fails_it(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_nb")
    from common.site.build import build, sphinx_build

    site = build(tmp_path / "site", ROOT)
    courses = all_courses(ROOT)
    labs = sum(len(c.labs()) for c in courses)
    # front page, course READMEs, labs, lab index, five machines, fidelity, licence
    assert len(site.pages) == 1 + len(courses) + labs + 1 + len(machines.TITLES) + 1 + 1
    assert all((site.html / f"{doc}.html").is_file() for doc in site.pages)
    labs_page = (site.html / "labs.html").read_text(encoding="utf-8")
    assert labs_page.count(colab_prefix(published_repo(ROOT / "pyproject.toml"))) == labs

    readme = tmp_path / "site/src/course1_landscape/README.md"
    readme.write_text(readme.read_text(encoding="utf-8") + "\n[gone](release/nolab/nolab.ipynb)\n")
    (tmp_path / "site/src/orphan.md").write_text("# In no toctree\n")
    with pytest.raises(DFAError, match="does not build"):
        sphinx_build(tmp_path / "site/src", tmp_path / "site/html")
    warnings = (tmp_path / "site/sphinx-warnings.txt").read_text(encoding="utf-8")
    assert "nolab" in warnings and "orphan" in warnings


def test_front_page_machine_table_counts_what_the_results_check():
    fidelity = {"rows": [_row("lpu", 1.2, "bound"), _row("lpu", 1.5, "bound")],
                "per_architecture": {"gpu": {"n": 7, "median": 1.1, "worst": 1.9}}}
    table = "\n".join(pages.machine_summary(fidelity))
    assert "| [GPU](machines/gpu.md) |" in table and "7 sourced: median sim / published 1.10, worst 1.90 |" in table
    assert "| 2 bound(s) |" in table and table.count("| none |") == 3  # tpu, wse, spyre


def test_a_figure_below_its_band_states_the_cost_it_implies():
    row = _row("lpu", 4.0, "bound", check="band of upper bounds", gap=0.8, holds=True, unknowns=["host cost"],
               band=[125.0, 400.0], band_chips=[64, 568], inside=False, implied_s=0.0002)
    text = "\n".join(machines.wrong_section("lpu", {"rows": [row]}))
    assert "simulated band 125 (568 chips) to 400 (64 chips) tok/s, published 100 outside it" in text
    assert "implies at least 0.20 ms a token that the simulator does not charge" in text


def test_site_modules_import_only_what_its_init_names():
    import ast
    import re

    package = ROOT / "common" / "site"
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    allowed = set(re.findall(r"``(\w+)``", re.search(r"^May import: (.*)$", doc, re.MULTILINE).group(1)))
    allowed |= {"errors", "checks", "palette", "torch_compat", "site"}  # the base modules any package may use, itself
    for module in package.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                parts = name.split(".")
                if parts[0] == "common" and len(parts) > 1:
                    assert parts[1] in allowed, f"common/site/{module.name} imports {name}: not in 'May import'"
