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
    Comparison,
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
    read_run,
    read_runs,
)
from analysis.schema import (
    DEFAULT_MAX_FAILURE_SHARE,
    DEFAULT_TIERS,
    REDACTED,
    ErrorKind,
    LoadLevel,
    LoadSettings,
    RecordDict,
    RequestRecord,
    RequestStatus,
    ResultError,
    RunManifest,
    SloTier,
    Validity,
    ValidityReason,
    duplicate_replica,
    is_secret_name,
    parse_tier,
    public_url,
    replica_key,
    scrub_secrets,
    split_metric_values,
)

if _typing.TYPE_CHECKING:
    from analysis.report import (
        EXPERIMENT_FILE,
        capacity_view,
        read_extras,
        render_report,
        report_bundle,
    )

_LAZY = frozenset({
    "EXPERIMENT_FILE",
    "capacity_view",
    "read_extras",
    "render_report",
    "report_bundle",
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
    "Comparison",
    "DEFAULT_MAX_FAILURE_SHARE",
    "DEFAULT_TIERS",
    "EXPERIMENT_FILE",
    "ErrorKind",
    "LoadLevel",
    "LoadSettings",
    "REDACTED",
    "RecordDict",
    "RequestRecord",
    "RequestStatus",
    "ResultError",
    "Rules",
    "RunData",
    "RunManifest",
    "RunSummary",
    "SloTier",
    "Validity",
    "ValidityReason",
    "assess_run",
    "bracket_of",
    "capacity_view",
    "compare_runs",
    "duplicate_replica",
    "is_secret_name",
    "judge_fairness",
    "measure",
    "parse_tier",
    "public_url",
    "read_extras",
    "read_run",
    "read_runs",
    "record_latencies",
    "render_report",
    "replica_diffs",
    "replica_key",
    "report_bundle",
    "scrub_secrets",
    "split_metric_values",
    "summarize",
]
