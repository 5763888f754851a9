"""``dfa feedback``: one HTML page per graded submission, without the hidden tests.

nbgrader's ``generate_feedback`` renders the autograded notebook, whose test cells were restored from the
gradebook *with* their hidden tests (nbgrader issue #917). Here its pipeline gets ``HideHiddenTests`` between
reading the grades and rendering, and every page written is then searched for hidden-test lines: a page that
still contains one is deleted and reported, never left for students to read.

The page is also inert: a learner's markdown and outputs may hold ``<script>``, ``<iframe>``, event handlers or
``javascript:`` links (``display(HTML(...))``, a markdown cell), and whoever opens the page (the learner on
Coursera, an instructor) would run them. nbconvert's ``SanitizeHTML`` cleans the outputs (HTML and markdown
through bleach, JavaScript and SVG dropped) and markdown sources before rendering, and the markdown filter
cleans what the markdown renders to (a ``[link](javascript:...)`` is markdown, not a tag), keeping only the tags
and attributes in ``SAFE_TAGS`` / ``SAFE_ATTRIBUTES`` and the protocols http, https and mailto.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from traitlets.config import Config

from common.errors import DFAError
from common.grading.courses import regions
from common.grading.courses.course import Course, locked

SAFE_TAGS = ["a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em", "h1",
             "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span", "strong",
             "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "u", "ul"]
SAFE_ATTRIBUTES = {"*": ["class", "id", "title"], "a": ["href", "title", "class"], "img": ["src", "alt", "width",
                   "height"], "td": ["colspan", "rowspan", "align"], "th": ["colspan", "rowspan", "align"]}


def clean_html(text: str) -> str:
    """``text`` with only SAFE_TAGS and SAFE_ATTRIBUTES left (others removed, their text kept), and links only to
    http, https, mailto and anchors."""
    import bleach

    return bleach.clean(text, tags=SAFE_TAGS, attributes=SAFE_ATTRIBUTES, strip=True, strip_comments=True)


def safe_markdown2html(source: str) -> str:
    """nbconvert's markdown rendering, then ``clean_html`` on the result (the template's ``markdown2html``)."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return clean_html(markdown2html_mistune(source))


def _feedback_config() -> Config:
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbconvert.preprocessors.sanitize import SanitizeHTML
    from nbgrader.preprocessors import GetGrades

    from common.grading.gradebook.preprocessors import HideHiddenTests

    config = Config()
    config.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, SanitizeHTML, CSSHTMLHeaderPreprocessor]
    config.HideHiddenTests.enforce_metadata = False
    config.SanitizeHTML.enabled = True  # an nbconvert preprocessor is off unless enabled
    config.SanitizeHTML.tags = SAFE_TAGS
    config.SanitizeHTML.attributes = SAFE_ATTRIBUTES
    config.SanitizeHTML.strip = True
    config.HTMLExporter.filters = {"markdown2html": safe_markdown2html}  # links in markdown syntax (docstring)
    return config


SECRET_KINDS = ("hidden tests", "mark scheme")
SECRET_MARKERS = tuple(marker for kind in SECRET_KINDS for marker in regions.REGIONS[kind])


def hidden_test_lines(course: Course, lab: str) -> list[str]:
    """Lines of the lab's hidden tests (and mark schemes) that no page for students may contain."""
    nb = nbformat.read(course.source_notebook(lab), as_version=4)
    return regions.secret_lines(nb, kinds=SECRET_KINDS)


def _leaks(page: Path, course: Course, lab: str, secrets: list[str]) -> list[str]:
    """Secret text on a student's page that the student did not write themselves."""
    student = page.parent.parent.name
    own = ""
    for submitted in (course.submitted_dir / student / lab).glob("*.ipynb"):
        try:
            own += regions.notebook_text(nbformat.read(submitted, as_version=4))
        except Exception:  # an unreadable submission has no text of its own to excuse
            pass
    found = regions.find_leaks(regions.html_text(page.read_text(encoding="utf-8")), secrets, SECRET_MARKERS)
    return [leak for leak in found if leak not in own]


@locked("feedback")
def generate_feedback(course: Course, lab: str) -> tuple[list[Path], list[str]]:
    """Write ``feedback/<student>/<lab>/*.html``; returns (pages written, problems found)."""
    lab = course.require_lab(lab)  # a unique prefix names the lab
    if not (course.autograded_dir.is_dir() and any(course.autograded_dir.glob(f"*/{lab}"))):
        raise DFAError(
            f"nothing autograded for {course.name}/{lab} yet: run `dfa autograde {course.name} {lab}`"
        )
    result = course.api(_feedback_config()).generate_feedback(lab, force=True)
    problems = (
        [] if result["success"] else ["nbgrader generate_feedback reported errors; see the pages listed"]
    )
    secrets = hidden_test_lines(course, lab)
    pages = []
    for page in sorted(course.feedback_dir.glob(f"*/{lab}/*.html")):
        leaks = _leaks(page, course, lab, secrets)
        if leaks:
            page.unlink()
            problems.append(f"{page}: removed, it showed hidden-test text ({leaks[0][:60]!r})")
        else:
            pages.append(page)
    return pages, problems
