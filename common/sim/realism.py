"""Deployment realism: a simulated deployment larger than any on record, or in a precision the vendor does not
serve, gets a WARNING naming the record it exceeds (``common.chips.catalog.deployments``). Nothing is refused: a
what-if is allowed, but never passes unremarked (``Report.warnings``; ``dfa simulate`` prints them)."""
from __future__ import annotations

from common.chips.catalog.deployments import LARGEST_DEPLOYMENT, SERVED_DTYPES


def deployment_warnings(chip: str, chips: int, dtype: str) -> list[str]:
    """One line per way the deployment (``chips`` x ``chip`` in ``dtype``) goes beyond the records."""
    out = []
    if chip in LARGEST_DEPLOYMENT:
        most, source = LARGEST_DEPLOYMENT[chip]
        if chips > most:
            out.append(f"WARNING: {chips} x {chip} is larger than any deployment on record ({most} chips: "
                       f"{source}); this is a machine nobody has built")
    if chip in SERVED_DTYPES:
        served, source = SERVED_DTYPES[chip]
        if dtype not in served:
            out.append(f"WARNING: {dtype} is not a precision the vendor serves {chip} in (served: "
                       f"{', '.join(served)}: {source})")
    return out


def add_warnings(report) -> list[str]:
    """Set ``report.warnings`` (and repeat each in ``report.notes``); returns them."""
    chip = getattr(report.chip, "name", report.chip)
    warnings = deployment_warnings(chip, report.chips, report.dtype)
    report.warnings = warnings
    report.notes.extend(w for w in warnings if w not in report.notes)
    return warnings
