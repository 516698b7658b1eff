"""Rendering: charts, HTML reports, history, CSV/JSON exports and the bundle written beside them."""

from analysis.report._bundle import (
    EXPERIMENT_FILE,
    SEARCH_FILE,
    read_extras,
    report_bundle,
)
from analysis.report._decide import (
    Decision,
    decide,
)
from analysis.report._decision import (
    capacity_view,
    validity_view,
    verdict_text,
)
from analysis.report._export import (
    CSV_COLUMNS,
    requests_csv,
)
from analysis.report._export_levels import (
    LEVEL_COLUMNS,
    levels_csv,
    summary_schema,
)
from analysis.report._format import per_gpu_text
from analysis.report._history import (
    HistoryEntry,
    check_history,
    entry_names,
    render_history,
)
from analysis.report._plan_view import TWIN_PLAN_FILE
from analysis.report._report import (
    METRIC_DEFINITIONS,
    render_report,
)

__all__ = [
    "CSV_COLUMNS",
    "Decision",
    "EXPERIMENT_FILE",
    "HistoryEntry",
    "LEVEL_COLUMNS",
    "METRIC_DEFINITIONS",
    "SEARCH_FILE",
    "TWIN_PLAN_FILE",
    "capacity_view",
    "check_history",
    "decide",
    "entry_names",
    "levels_csv",
    "per_gpu_text",
    "read_extras",
    "render_history",
    "render_report",
    "report_bundle",
    "requests_csv",
    "summary_schema",
    "validity_view",
    "verdict_text",
]
