"""How long a lab takes a competent learner: a stated model over the source notebook, part by part.

Nobody can time every learner, so the header's "Expected time" is computed, not guessed, from what a learner
must do in each section::

    minutes = prose_words / PROSE_WPM                    # read the explanation and the specs
            + given_code_lines / CODE_LINES_PER_MIN      # read (skim) the code the lab gives
            + stubs * STUB_MIN + solution_lines * SOLUTION_LINE_MIN   # write and debug your code
            + written_points * WRITTEN_MIN_PER_POINT     # written answers, by their weight

The rates are assumptions stated here, once (see `Rates`), and calibrated against the one walkthrough the
project has (110 to 160 minutes for the core labs as they stood then; this model gives 105 to 149 for
those notebooks). Lines are non-blank, non-comment code lines; hidden tests and mark schemes are not counted,
because a learner never sees them. A solution that only commits a prediction (``P.commit(...)``, see
``common.explore.predict``) is not a stub: there is no spec to read, no API to look up and no check to pass; its
thinking is the written question that follows the reveal, timed by that question's points, so it costs its
lines only. Cells after a ``## Going further`` heading are optional: they are reported but not counted in the
core time, which the lab standard wants between 90 and 120 minutes.

    from common.grading.authoring.lab_length import estimate
    est = estimate(nbformat.read("lab2_dataflow.ipynb", 4))
    est.core_minutes, est.optional_minutes, est.frame()   # one row per section
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from common.grading.courses import standard

CORE_RANGE = (90, 120)  # LAB_STANDARD: a core lab is 90 to 120 minutes of the learner's own work
GOING_FURTHER = standard.GOING_FURTHER
PREDICTION_COMMIT = re.compile(r"[A-Za-z_]\w*\.commit\(")  # a learner's prediction (common.explore.predict)
SECTION = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)
EXPECTED = re.compile(r"\*\*Expected time:\*\*\s*(?:about\s+)?(\d+)\s*minutes", re.IGNORECASE)


@dataclass(frozen=True)
class Rates:
    """The model's rates. Each is an assumption about a competent graduate learner, with its reason."""

    # Brysbaert (2019), "How many words do we read per minute?", J. Memory and Language 109: 238 wpm for
    # silent reading of English non-fiction. Studying a technical text with formulas is taken at half that.
    prose_wpm: float = 120.0
    # Given code is skimmed for what it does (names, shapes), not traced line by line.
    code_lines_per_min: float = 25.0
    # Per stub: reread its spec, look up the API it needs, run its check; then per line of the reference
    # solution (a learner's own code is longer or shorter; the reference measures the work).
    stub_min: float = 2.0
    solution_line_min: float = 0.4
    # Written answers: about 2.5 minutes per point (a 3-point question is a short paragraph with a number).
    written_min_per_point: float = 2.5


RATES = Rates()


def _code_lines(source: str) -> tuple[int, int, int]:
    """(given lines, solution lines, stubs) of a code cell; hidden tests are not counted, and a solution region
    of prediction commits only is no stub (module docstring)."""
    given = solution = stubs = 0
    region, lines = None, []
    for line in source.splitlines():
        text = line.strip()
        if "### BEGIN SOLUTION" in text:
            region, lines = "solution", []
            continue
        if "### BEGIN HIDDEN TESTS" in text:
            region = "hidden"
            continue
        if "### END SOLUTION" in text or "### END HIDDEN TESTS" in text:
            if region == "solution":
                solution += len(lines)
                stubs += 0 if lines and all(PREDICTION_COMMIT.match(t) for t in lines) else 1
            region = None
            continue
        if not text or text.startswith("#"):
            continue
        if region == "solution":
            lines.append(text)
        elif region is None:
            given += 1
    if region == "solution":  # a region left open is still work to do
        solution, stubs = solution + len(lines), stubs + 1
    return given, solution, stubs


def _words(markdown: str) -> int:
    return len(re.sub(r"[`*|#>_\\$-]", " ", markdown).split())


@dataclass
class Estimate:
    rows: list[dict] = field(default_factory=list)
    rates: Rates = RATES

    def frame(self) -> pd.DataFrame:
        """One row per section: what a learner reads and writes there, and the minutes it costs."""
        return pd.DataFrame(self.rows)

    def _sum(self, optional: bool) -> float:
        return sum(r["minutes"] for r in self.rows if r["optional"] == optional)

    @property
    def core_minutes(self) -> float:
        return self._sum(False)

    @property
    def optional_minutes(self) -> float:
        return self._sum(True)


def estimate(nb, rates: Rates = RATES) -> Estimate:
    """The minutes per section of ``nb`` (an nbformat notebook, source or release) under ``rates``."""
    est = Estimate(rates=rates)
    row = None
    optional = False
    for cell in nb["cells"]:
        source = cell.get("source", "")
        markdown = cell.get("cell_type") == "markdown"
        heading = SECTION.search(source) if markdown and source.lstrip().startswith("## ") else None
        if heading or row is None:
            optional = optional or bool(heading and GOING_FURTHER.search(source))
            row = dict(section=heading.group(1) if heading else "Header and setup", optional=optional, words=0,
                       given_lines=0, stubs=0, solution_lines=0, written_points=0, minutes=0.0)
            est.rows.append(row)
        if standard.is_manual_answer(cell):
            row["written_points"] += int(standard.nbgrader_meta(cell).get("points", 0))
        elif markdown:
            row["words"] += _words(source)
        elif cell.get("cell_type") == "code":
            given, solution, stubs = _code_lines(source)
            row["given_lines"] += given
            row["solution_lines"] += solution
            row["stubs"] += stubs
    for r in est.rows:
        r["minutes"] = round(r["words"] / rates.prose_wpm + r["given_lines"] / rates.code_lines_per_min
                             + r["stubs"] * rates.stub_min + r["solution_lines"] * rates.solution_line_min
                             + r["written_points"] * rates.written_min_per_point, 1)
    return est


def stated_minutes(nb) -> int | None:
    """The minutes the header states ("**Expected time:** about 105 minutes"), or None if it states a range."""
    for cell in nb["cells"]:
        if cell.get("cell_type") == "markdown":
            found = EXPECTED.search(cell.get("source", ""))
            if found:
                return int(found.group(1))
    return None


def length_problems(nb, core: bool, core_range: tuple[float, float] = CORE_RANGE) -> list[str]:
    """The header must state the model's core estimate (to within 5 minutes); a core lab must fit ``core_range``
    (the lab standard's 90 to 120 minutes unless the course config sets ``c.Offering.core_lab_minutes``)."""
    est = estimate(nb)
    minutes = round(est.core_minutes)
    problems = []
    stated = stated_minutes(nb)
    if stated is None:
        problems.append(f"the header does not state '**Expected time:** about {minutes} minutes' (the estimate of "
                        "common.grading.authoring.lab_length)")
    elif abs(stated - minutes) > 5:
        problems.append(f"the header states {stated} minutes, the estimate is {minutes} "
                        "(common.grading.authoring.lab_length)")
    low, high = core_range
    if core and not low <= minutes <= high:
        problems.append(f"core lab estimate {minutes} minutes is outside {low}-{high}: move a part that does not "
                        "carry the course's point under '## Going further (optional)'")
    return problems


def readme_problems(readme: str, lab: str, stated: int | None) -> list[str]:
    """The course README's row for ``lab`` (``| `lab` ... | about N min ...``) must state the header's minutes."""
    row = next((line for line in readme.splitlines() if line.startswith(f"| `{lab}`")), None)
    if row is None or stated is None:
        return []
    found = re.search(r"\|\s*about (\d+) min", row)
    if found is None or int(found.group(1)) != stated:
        return [f"the course README's row for {lab} does not say 'about {stated} min' (the header's estimate)"]
    return []
