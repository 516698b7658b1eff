"""Every threshold that judges a run or a comparison, in one place.

``Rules`` holds them as a settings model (defaults below), so a caller can
tighten or relax one (``Rules(max_failure_share=0.01)``) and the report can
print the values that were applied.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from analysis.schema import DEFAULT_MAX_FAILURE_SHARE

__all__ = ["DEFAULT_RULES", "Rules"]


class Rules(BaseModel):
    """Thresholds of the validity checks and of "established"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_failure_share: float = Field(default=DEFAULT_MAX_FAILURE_SHARE, ge=0, le=1)
    """Errors + timeouts + incomplete over requests sent: above it a level fails
    every SLO tier and the run carries a caveat."""
    min_users: int = Field(default=4, ge=1)
    """Independent units (users, across pooled runs) per arm before a difference
    can be called established."""
    min_requests: int = Field(default=20, ge=1)
    """Requests sent in the window per arm before a difference can be established."""
    min_effect: float = Field(default=0.02, ge=0)
    """A ratio closer to 1 than this is never established, interval or not: a
    machine drifts this much between runs."""
    min_window_requests: int = Field(default=3, ge=1)
    """Requests a run's window needs before its percentiles mean anything (a caveat)."""
    schedule_lag_p99_caveat_s: float = 0.050
    """Client sent requests late: P99 schedule lag above this is a caveat..."""
    schedule_lag_p99_invalid_s: float = 0.500
    """...and above this the run is invalid (the load was not what was asked)."""
    cpu_share_caveat: float = 0.9
    """Client CPU near a full core (one event loop saturated)."""
    loop_lag_max_caveat_s: float = 0.250
    """An event-loop stall this long during the window."""
    loop_lag_max_invalid_s: float = 1.0
    imbalance_factor: float = 3.0
    """Client schedule-lag P99 of one arm this many times the other's (and above
    ``imbalance_floor_s``): the arms ran on differently loaded clients."""
    imbalance_floor_s: float = 0.010
    """(a caveat; above ``schedule_lag_p99_caveat_s`` in the worse arm it is invalid:
    the difference may be the client's)."""
    sim_lateness_invalid: float = 0.05
    """Simulated engine steps this much slower than their profile: no speed verdict."""
    cache_share_ratio_caveat: float = 0.8
    """Measured prefix-hit share below this fraction of the expected share."""
    cache_rise_caveat: float = 0.10
    """Measured prefix-hit share rising by this much (absolute) from the first to
    the second half of the window: the cache was still warming (checked from
    ``min_requests`` requests in the window)."""
    failure_burst_share: float = 0.5
    """Failure share in the last quarter of the window that, with few failures
    before it, says the server died or restarted (errors and timeouts; a request the
    drain cut is not counted: a short drain cuts the last quarter's, ``drain_cut``)."""
    failure_burst_min: int = 5
    """Requests the last quarter needs for the burst check."""
    drain_cut_caveat: float = Field(default=0.01, ge=0, le=1)
    """Share of requests sent in the window still running when the drain ended above
    which the run carries a caveat naming ``--drain``."""
    output_mismatch_caveat: float = Field(default=0.01, ge=0, le=1)
    """Share of ok requests whose output length is not the one asked for (fewer
    tokens despite ``ignore_eos``, or usage disagreeing with the stream) above which
    the run carries a caveat, and an arm's interactivity and E2E ratios are never
    established (shorter answers are less work: their latencies are not the
    workload's)..."""
    output_mismatch_invalid: float = Field(default=0.10, ge=0, le=1)
    """...and above which the run is invalid (a proxy or server cut the answers)."""
    worker_lost_caveat_share: float = Field(default=0.01, ge=0, le=1)
    """A lost worker (``--ray`` node or actor) is only a caveat when the users it carried
    are at most this share of the run's users and its ``lost`` requests at most this
    share of the requests recorded: above it the load fell for the rest of the window,
    so the run is invalid."""


DEFAULT_RULES = Rules()
