"""One exception type for every bad input a learner or instructor can give us.

The CLI prints ``dfa: error: <message>`` and exits 2 on a ``DFAError``, without a traceback; library users
catch it as a ``ValueError``. Messages are one line and name the bad value and the valid choices.
"""
from __future__ import annotations

from collections.abc import Iterable


class DFAError(ValueError):
    """A bad input: the message names the value and what would have been valid."""


def unknown(kind: str, value: object, valid: Iterable[str]) -> DFAError:
    """``unknown("chip", "h300", names)`` → DFAError("unknown chip 'h300'; valid: a100-40gb, ...")."""
    return DFAError(f"unknown {kind} {value!r}; valid: {', '.join(sorted(valid))}")
