"""The roofline model and its charts (Course 6, used by every course that draws one): ceilings and rooflines from
the catalog, from measured peaks or from a simulator, the overhead (scheduling) ceiling, ops as points under them
(``model``), and the log-log chart that draws them (``charts``). Measuring this machine's roofs lives in
``common.measure.roofs``; no hardware number lives here.

May import: ``chips``.
"""
from common.roofline.charts import plot_roofline
from common.roofline.model import (
    CEILING_KINDS,
    POINT_KINDS,
    SOURCES,
    TIME_COLUMNS,
    Ceiling,
    Roofline,
    add_overhead_ceiling,
    best_measured_roof,
    eng,
    points_from_node_table,
    points_over_roof,
    roofline_for_chip,
    roofline_from_measured,
    with_measured_gemms,
)

__all__ = ["CEILING_KINDS", "POINT_KINDS", "SOURCES", "TIME_COLUMNS", "Ceiling", "Roofline", "add_overhead_ceiling",
           "best_measured_roof", "eng", "plot_roofline", "points_from_node_table", "points_over_roof",
           "roofline_for_chip", "roofline_from_measured", "with_measured_gemms"]
