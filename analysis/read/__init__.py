"""Reading result directories into columns, manifests and metric series; the steady window."""

from analysis.read._read import (
    MetricSeries,
    RunData,
    find_run_dirs,
    metric_series,
    read_manifest,
    read_run,
    read_runs,
    run_data,
)
from analysis.read._window import (
    counter_delta,
    steady_window,
)

__all__ = [
    "MetricSeries",
    "RunData",
    "counter_delta",
    "find_run_dirs",
    "metric_series",
    "read_manifest",
    "read_run",
    "read_runs",
    "run_data",
    "steady_window",
]
