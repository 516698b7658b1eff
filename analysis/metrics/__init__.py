"""Metrics of one run: each declared once on the run summary's field it fills (wording,
formula, samples), and the catalogue, samples, percentiles with bootstrap intervals and
summary derived from those declarations.
"""

from analysis.metrics._catalogue import (
    DECLARED,
    METRICS,
    QUANTITIES,
    axis_label,
    direction_text,
    metric,
    report_rows,
)
from analysis.metrics._declare import PERCENTILES, Drawn, Metric, Window, per_request
from analysis.metrics._derived import (
    Latencies,
    RecordLatencies,
    column_latencies,
    record_latencies,
)
from analysis.metrics._energy import Energy, interval_energy_j, series_energy_j, window_energy
from analysis.metrics._measure import (
    claimed_acceptance,
    measure,
)
from analysis.metrics._parts import Goodput, PrefixReuse, RequestCounts, Speculation
from analysis.metrics._run_summary import RunSummary
from analysis.metrics._samples import (
    Samples,
    pool,
)
from analysis.metrics._stats import (
    BOOTSTRAP_REPS,
    Distribution,
    bootstrap_quantiles,
    bootstrap_sums,
    distribution,
    draw_counts,
    invert_distribution,
    metric_rng,
    small_sample_widening,
)
from analysis.metrics._summary import clusters_of, summarize
from analysis.metrics._tiers import (
    MIN_ALL_MET_REQUESTS,
    TIER_CONFIDENCE_Z,
    TIER_QUANTILE,
    TierOutcome,
    judge_tier,
    tier_shares,
    wilson_interval,
)

__all__ = [
    "BOOTSTRAP_REPS",
    "DECLARED",
    "Distribution",
    "Drawn",
    "Energy",
    "Goodput",
    "Latencies",
    "METRICS",
    "MIN_ALL_MET_REQUESTS",
    "Metric",
    "PERCENTILES",
    "PrefixReuse",
    "QUANTITIES",
    "RecordLatencies",
    "RequestCounts",
    "RunSummary",
    "Samples",
    "Speculation",
    "TIER_CONFIDENCE_Z",
    "TIER_QUANTILE",
    "TierOutcome",
    "Window",
    "axis_label",
    "bootstrap_quantiles",
    "bootstrap_sums",
    "claimed_acceptance",
    "clusters_of",
    "column_latencies",
    "direction_text",
    "distribution",
    "draw_counts",
    "interval_energy_j",
    "invert_distribution",
    "judge_tier",
    "measure",
    "metric",
    "metric_rng",
    "per_request",
    "pool",
    "record_latencies",
    "report_rows",
    "series_energy_j",
    "small_sample_widening",
    "summarize",
    "tier_shares",
    "wilson_interval",
    "window_energy",
]
