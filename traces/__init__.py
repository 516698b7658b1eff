"""The workload: what coding agents do, as pure data (no network, no clock)."""

from traces._checks import check_session, expected_blocks
from traces._errors import LocatedError, Problem, TraceError, first_problem
from traces._fingerprint import Fingerprinter, canonical_session_json
from traces._import_common import MAX_REQUEST_TOKENS, Counters, ImportedTrace
from traces._inspect import (
    Distribution,
    WorkloadStats,
    format_stats,
    header_rows,
    inspect_sessions,
    stats_rows,
)
from traces._io import (
    iter_sessions,
    read_header,
    read_workload,
    validate_workload,
    write_workload,
)
from traces._lines import MAX_LINE_BYTES
from traces._materialise import Vocab, block_tokens, build_prompt
from traces._models import (
    FORMAT_VERSION,
    Request,
    Session,
    Subagent,
    Workload,
    WorkloadHeader,
    iter_block_ids,
)
from traces._retime import count_arrivals, retime
from traces.generate import (
    DECODE,
    DEFAULT_MAX_CONTEXT,
    PROFILES,
    REFERENCE_CONTEXT,
    AgentType,
    LogNormal,
    Profile,
    Quantiles,
    generate,
    generate_trace,
    token_scale_for,
)
from traces.importers import (
    IMPORTERS,
    MOONCAKE_BLOCK_SIZE,
    import_azure,
    import_mooncake,
    import_tracelab,
    import_weka,
    sniff_trace_format,
)

__all__ = [
    "AgentType",
    "Counters",
    "DECODE",
    "DEFAULT_MAX_CONTEXT",
    "Distribution",
    "FORMAT_VERSION",
    "Fingerprinter",
    "IMPORTERS",
    "ImportedTrace",
    "LocatedError",
    "LogNormal",
    "MAX_LINE_BYTES",
    "MAX_REQUEST_TOKENS",
    "MOONCAKE_BLOCK_SIZE",
    "PROFILES",
    "Problem",
    "Profile",
    "Quantiles",
    "REFERENCE_CONTEXT",
    "Request",
    "Session",
    "Subagent",
    "TraceError",
    "Vocab",
    "Workload",
    "WorkloadHeader",
    "WorkloadStats",
    "block_tokens",
    "build_prompt",
    "canonical_session_json",
    "check_session",
    "count_arrivals",
    "expected_blocks",
    "first_problem",
    "format_stats",
    "generate",
    "generate_trace",
    "header_rows",
    "import_azure",
    "import_mooncake",
    "import_tracelab",
    "import_weka",
    "inspect_sessions",
    "iter_block_ids",
    "iter_sessions",
    "read_header",
    "read_workload",
    "retime",
    "sniff_trace_format",
    "stats_rows",
    "token_scale_for",
    "validate_workload",
    "write_workload",
]
