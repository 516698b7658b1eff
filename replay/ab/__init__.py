"""A/B comparisons: options, run order, preflight, resumable state, the demo.

Other packages import these names from ``replay.ab``, never its private modules.
"""

from replay.ab._demo import DEMO_PROFILE, DemoSettings, demo_settings, run_demo
from replay.ab._driver import (
    CompareResult,
    Live,
    compare_arms,
    compare_launched,
    preflight,
    reset_prefix_cache,
    write_report,
)
from replay.ab._options import CompareOptions, parse_levels
from replay.ab._order import PlannedRun, is_run_complete, plan_runs, plan_runs_by_arm
from replay.ab._search import (
    SearchAnswer,
    SearchResult,
    next_probe,
    search_capacity,
    search_lines,
)

__all__ = [
    "DEMO_PROFILE",
    "CompareOptions",
    "CompareResult",
    "DemoSettings",
    "Live",
    "PlannedRun",
    "SearchAnswer",
    "SearchResult",
    "compare_arms",
    "compare_launched",
    "demo_settings",
    "is_run_complete",
    "next_probe",
    "parse_levels",
    "plan_runs",
    "plan_runs_by_arm",
    "preflight",
    "reset_prefix_cache",
    "run_demo",
    "search_capacity",
    "search_lines",
    "write_report",
]
