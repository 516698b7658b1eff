"""The workload: what coding agents do, as pure data (no network, no clock)."""

from traces._errors import TraceError
from traces._models import (
    FORMAT_VERSION,
    Request,
    Session,
    Subagent,
    Workload,
    WorkloadHeader,
    iter_block_ids,
)

__all__ = [
    "FORMAT_VERSION",
    "Request",
    "Session",
    "Subagent",
    "TraceError",
    "Workload",
    "WorkloadHeader",
    "iter_block_ids",
]
