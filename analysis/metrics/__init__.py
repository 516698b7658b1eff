"""Metrics of one run: latencies derived per request, samples, percentiles with bootstrap
intervals, the run summary.
"""

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
from analysis.metrics._summary import (
    Goodput,
    PrefixReuse,
    RequestCounts,
    RunSummary,
    Speculation,
    clusters_of,
    summarize,
)
from analysis.metrics._tiers import (
    MIN_ALL_MET_REQUESTS,
    TIER_QUANTILE,
    TierOutcome,
    judge_tier,
    tier_shares,
    wilson_interval,
)

__all__ = [
    "BOOTSTRAP_REPS",
    "Distribution",
    "Energy",
    "Goodput",
    "Latencies",
    "MIN_ALL_MET_REQUESTS",
    "PrefixReuse",
    "RecordLatencies",
    "RequestCounts",
    "RunSummary",
    "Samples",
    "Speculation",
    "TIER_QUANTILE",
    "TierOutcome",
    "bootstrap_quantiles",
    "bootstrap_sums",
    "claimed_acceptance",
    "clusters_of",
    "column_latencies",
    "distribution",
    "draw_counts",
    "interval_energy_j",
    "invert_distribution",
    "judge_tier",
    "measure",
    "metric_rng",
    "pool",
    "record_latencies",
    "series_energy_j",
    "small_sample_widening",
    "summarize",
    "tier_shares",
    "wilson_interval",
    "window_energy",
]
