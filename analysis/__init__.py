"""Reading results: schema, metrics, comparison, capacity, reports. Pure computation."""

from analysis._analyse import analyse_run
from analysis._bundle import EXPERIMENT_FILE, SEARCH_FILE, read_extras, report_bundle
from analysis._capacity import CapacityRow, capacity_table, meets_tier
from analysis._comparison import HEADLINE, Comparison, Level, Ratio, compare_runs
from analysis._derived import Latencies, RecordLatencies, column_latencies, record_latencies
from analysis._errors import FairnessError, ResultError
from analysis._export import CSV_COLUMNS, requests_csv
from analysis._export_levels import LEVEL_COLUMNS, levels_csv, summary_schema
from analysis._fairness import (
    ALLOWED_FIELDS,
    ConfigDiff,
    FairnessVerdict,
    diff_configs,
    gpu_count_of,
    judge_fairness,
)
from analysis._history import HistoryEntry, check_history, entry_names, render_history
from analysis._levels import LoadLevel, level_of
from analysis._manifest_parts import (
    ClientHealth,
    Coverage,
    ServerWatch,
    Validity,
    ValidityReason,
)
from analysis._measure import measure
from analysis._read import (
    MetricSeries,
    RequestColumns,
    RunData,
    find_run_dirs,
    read_manifest,
    read_run,
    read_runs,
)
from analysis._report import METRIC_DEFINITIONS, render_report
from analysis._report_decision import capacity_view, validity_view, verdict_text
from analysis._rules import DEFAULT_RULES, Rules
from analysis._samples import Samples, pool
from analysis._schema import (
    RESULT_FORMAT_VERSION,
    STATUSES,
    ClockInfo,
    ErrorKind,
    HostInfo,
    LoadKind,
    LoadSettings,
    MetricSample,
    Phase,
    RecordDict,
    RequestRecord,
    RequestStatus,
    RunManifest,
    RunWindow,
    WorkloadRef,
    is_error_kind,
)
from analysis._slo import DEFAULT_MAX_FAILURE_SHARE, DEFAULT_TIERS, SloTier, parse_tier
from analysis._stats import (
    BOOTSTRAP_REPS,
    Distribution,
    bootstrap_quantiles,
    bootstrap_sums,
    distribution,
    invert_distribution,
)
from analysis._summary import (
    Goodput,
    PrefixReuse,
    RequestCounts,
    RunSummary,
    Speculation,
    summarize,
)
from analysis._validity import assess_comparison, assess_run, merge_validity
from analysis._window import counter_delta, steady_window

__all__ = [
    "ALLOWED_FIELDS",
    "BOOTSTRAP_REPS",
    "CSV_COLUMNS",
    "CapacityRow",
    "ClientHealth",
    "ClockInfo",
    "Comparison",
    "ConfigDiff",
    "Coverage",
    "DEFAULT_MAX_FAILURE_SHARE",
    "DEFAULT_RULES",
    "DEFAULT_TIERS",
    "Distribution",
    "EXPERIMENT_FILE",
    "ErrorKind",
    "FairnessError",
    "FairnessVerdict",
    "Goodput",
    "HEADLINE",
    "HistoryEntry",
    "HostInfo",
    "LEVEL_COLUMNS",
    "Latencies",
    "Level",
    "LoadKind",
    "LoadLevel",
    "LoadSettings",
    "METRIC_DEFINITIONS",
    "MetricSample",
    "MetricSeries",
    "Phase",
    "PrefixReuse",
    "RESULT_FORMAT_VERSION",
    "Ratio",
    "RecordDict",
    "RecordLatencies",
    "RequestColumns",
    "RequestCounts",
    "RequestRecord",
    "RequestStatus",
    "ResultError",
    "Rules",
    "RunData",
    "RunManifest",
    "RunSummary",
    "RunWindow",
    "SEARCH_FILE",
    "STATUSES",
    "Samples",
    "ServerWatch",
    "SloTier",
    "Speculation",
    "Validity",
    "ValidityReason",
    "WorkloadRef",
    "analyse_run",
    "assess_comparison",
    "assess_run",
    "bootstrap_quantiles",
    "bootstrap_sums",
    "capacity_table",
    "capacity_view",
    "check_history",
    "column_latencies",
    "compare_runs",
    "counter_delta",
    "diff_configs",
    "distribution",
    "entry_names",
    "find_run_dirs",
    "gpu_count_of",
    "invert_distribution",
    "is_error_kind",
    "judge_fairness",
    "level_of",
    "levels_csv",
    "measure",
    "meets_tier",
    "merge_validity",
    "parse_tier",
    "pool",
    "read_extras",
    "read_manifest",
    "read_run",
    "read_runs",
    "record_latencies",
    "render_history",
    "render_report",
    "report_bundle",
    "requests_csv",
    "steady_window",
    "summarize",
    "summary_schema",
    "validity_view",
    "verdict_text",
]
