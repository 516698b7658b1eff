"""A/B comparisons: options, run order, preflight, resumable state, the demo.

Other packages import these names from ``replay.ab``, never its private modules.
"""

from replay.ab._demo import DEMO_PROFILE, DemoSettings, demo_settings, run_demo
from replay.ab._driver import (
    CompareResult,
    Live,
    compare_arms,
    write_report,
)
from replay.ab._experiment import (
    EXPERIMENT_KEYS,
    apply_experiment,
    experiment_toml,
    load_experiment,
)
from replay.ab._launched import LaunchOptions, compare_launched
from replay.ab._options import CompareOptions, parse_levels, parse_rates, parse_slo
from replay.ab._order import (
    PlannedRun,
    is_run_complete,
    is_run_reusable,
    launch_groups,
    plan_runs,
    run_verdict,
)
from replay.ab._preflight import preflight, reset_prefix_cache
from replay.ab._search import (
    SearchAnswer,
    SearchResult,
    next_probe,
    search_capacity,
    search_lines,
)
from replay.ab._search_limits import SearchLimits, check_search_start
from replay.ab._state import missing_runs

__all__ = [
    "DEMO_PROFILE",
    "EXPERIMENT_KEYS",
    "LaunchOptions",
    "CompareOptions",
    "CompareResult",
    "DemoSettings",
    "Live",
    "PlannedRun",
    "SearchAnswer",
    "SearchLimits",
    "SearchResult",
    "apply_experiment",
    "check_search_start",
    "compare_arms",
    "compare_launched",
    "demo_settings",
    "experiment_toml",
    "is_run_complete",
    "missing_runs",
    "load_experiment",
    "is_run_reusable",
    "launch_groups",
    "next_probe",
    "parse_levels",
    "parse_rates",
    "parse_slo",
    "plan_runs",
    "preflight",
    "reset_prefix_cache",
    "run_demo",
    "run_verdict",
    "search_capacity",
    "search_lines",
    "write_report",
]
