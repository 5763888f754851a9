"""Which stderr output is harmless, so that a warning does not zero a correct answer.

nbgrader scores a test cell 0 when it printed anything to stderr. PyTorch, matplotlib and tqdm print warnings
and progress bars there even when everything is right. nbgrader's own ``IgnorePattern`` preprocessor drops a
stderr output when its regular expression matches; the pattern below matches only when *every* line of the
output is harmless, so a real message printed next to a warning still counts. Stderr never decides correctness
in these labs: the checks raise an exception, which is an ``error`` output, not stderr.

Each course's ``nbgrader_config.py`` sets ``c.IgnorePattern.pattern = HARMLESS_STDERR_PATTERN``.
"""

from __future__ import annotations

# One regular expression per kind of harmless line (no anchors; they are added below).
HARMLESS_STDERR_LINES: tuple[str, ...] = (
    # Python warnings: "path/file.py:12: UserWarning: message" and the indented source line after it
    r"[^\n]*:\d+: [A-Za-z]*Warning: [^\n]*",
    r"  [^\n]*",
    # PyTorch C++ warnings: "[W1202 09:08:00.123456 1234 torch/csrc/...] Warning: ..."
    r"\[W\d{4} [^\]\n]*\] (?:Warning: )?[^\n]*",
    # matplotlib's first import
    r"Matplotlib is building the font cache; this may take a moment\.",
    r"Matplotlib created a temporary cache directory at [^\n]*",
    # tqdm progress bars (carriage-return updates land on one line)
    r"[^\n]*\d+%\|[^\n]*",
    # blank lines
    r"[ \t\r]*",
)

# Matches a whole stderr text made only of harmless lines (``re.search`` is what IgnorePattern uses).
# Each line is matched inside a lookahead and then consumed with a backreference: Python never
# backtracks into a lookahead, so a line that fits several alternatives is tried once, and a long spam
# of such lines followed by one real message fails in linear time instead of trying every combination
# (an atomic group that also works on Python 3.10).
HARMLESS_STDERR_PATTERN = r"\A(?:(?=((?:" + "|".join(HARMLESS_STDERR_LINES) + r")(?:\n|\Z)))\1)+\Z"
