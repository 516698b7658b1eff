"""Reading results, as wings that stack one way: schema -> read -> metrics -> judge -> report.

Pure computation (no network, no clock). The names used outside analysis/ are
re-exported here; the report wing (jinja2, matplotlib) loads on first use of one
of its names, so ``import replay.load`` never pays for it. Everything else lives
in its wing: ``from analysis.metrics import distribution``.
"""

import importlib as _importlib
import typing as _typing

from analysis.judge import (
    Bracket,
    CapacityRow,
    Comparison,
    FairnessVerdict,
    Rules,
    assess_run,
    bracket_of,
    compare_runs,
    judge_fairness,
    replica_diffs,
)
from analysis.metrics import (
    RunSummary,
    measure,
    record_latencies,
    summarize,
)
from analysis.read import (
    RunData,
    read_manifest,
    read_run,
    read_runs,
)
from analysis.schema import (
    DEFAULT_MAX_FAILURE_SHARE,
    DEFAULT_TIERS,
    RESULT_FORMAT_VERSION,
    ClientHealth,
    ClockInfo,
    Coverage,
    ErrorKind,
    HostInfo,
    LoadKind,
    LoadLevel,
    LoadSettings,
    Phase,
    RecordDict,
    Replica,
    RequestRecord,
    RequestStatus,
    ResultError,
    RunManifest,
    RunWindow,
    ServerWatch,
    SloTier,
    Validity,
    ValidityReason,
    WorkerInfo,
    WorkloadRef,
    parse_tier,
    public_url,
    scrub_urls,
)

if _typing.TYPE_CHECKING:
    from analysis.report import (
        EXPERIMENT_FILE,
        SEARCH_FILE,
        TWIN_PLAN_FILE,
        HistoryEntry,
        capacity_view,
        check_history,
        entry_names,
        read_extras,
        render_history,
        render_report,
        report_bundle,
        validity_view,
        verdict_text,
    )

_LAZY = frozenset({
    "EXPERIMENT_FILE",
    "HistoryEntry",
    "SEARCH_FILE",
    "TWIN_PLAN_FILE",
    "capacity_view",
    "check_history",
    "entry_names",
    "read_extras",
    "render_history",
    "render_report",
    "report_bundle",
    "validity_view",
    "verdict_text",
})


def __getattr__(name: str) -> _typing.Any:
    if name in _LAZY:
        value = getattr(_importlib.import_module("analysis.report"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)


__all__ = [
    "Bracket",
    "CapacityRow",
    "ClientHealth",
    "ClockInfo",
    "Comparison",
    "Coverage",
    "DEFAULT_MAX_FAILURE_SHARE",
    "DEFAULT_TIERS",
    "EXPERIMENT_FILE",
    "ErrorKind",
    "FairnessVerdict",
    "HistoryEntry",
    "HostInfo",
    "LoadKind",
    "LoadLevel",
    "LoadSettings",
    "Phase",
    "RESULT_FORMAT_VERSION",
    "RecordDict",
    "Replica",
    "RequestRecord",
    "RequestStatus",
    "ResultError",
    "Rules",
    "RunData",
    "RunManifest",
    "RunSummary",
    "RunWindow",
    "SEARCH_FILE",
    "ServerWatch",
    "SloTier",
    "TWIN_PLAN_FILE",
    "Validity",
    "ValidityReason",
    "WorkerInfo",
    "WorkloadRef",
    "assess_run",
    "bracket_of",
    "capacity_view",
    "check_history",
    "compare_runs",
    "entry_names",
    "judge_fairness",
    "measure",
    "parse_tier",
    "public_url",
    "read_extras",
    "read_manifest",
    "read_run",
    "read_runs",
    "record_latencies",
    "render_history",
    "render_report",
    "replica_diffs",
    "report_bundle",
    "scrub_urls",
    "summarize",
    "validity_view",
    "verdict_text",
]
