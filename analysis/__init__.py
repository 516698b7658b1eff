"""Reading results: schema, metrics, comparison, capacity, reports. Pure computation."""

from analysis._errors import FairnessError, ResultError
from analysis._schema import (
    RESULT_FORMAT_VERSION,
    ClockInfo,
    HostInfo,
    LoadSettings,
    MetricSample,
    RequestRecord,
    RunManifest,
    RunWindow,
    WorkloadRef,
)

__all__ = [
    "ClockInfo",
    "FairnessError",
    "HostInfo",
    "LoadSettings",
    "MetricSample",
    "RESULT_FORMAT_VERSION",
    "RequestRecord",
    "ResultError",
    "RunManifest",
    "RunWindow",
    "WorkloadRef",
]
