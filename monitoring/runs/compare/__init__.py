"""Runs side by side (the compare page): each run's series downsampled to the chart's width
(`curves`), the default y range, group bands and settings that differ (`bands`), the runs
left out and why (`left_out`), the series the runs log (`series`), the y axis' unit
(`units`), and the chart's whole answer (`chart`). A module per part, so that a new part of
the chart is a module and a key in `chart.compare_chart`.
"""

from monitoring.runs.compare.bands import group_bands, settings_diff, y_range
from monitoring.runs.compare.chart import RUN_GROUP, compare_chart
from monitoring.runs.compare.curves import MAX_RUNS, Curve, curves_read

__all__ = [
    "MAX_RUNS",
    "RUN_GROUP",
    "Curve",
    "compare_chart",
    "curves_read",
    "group_bands",
    "settings_diff",
    "y_range",
]
