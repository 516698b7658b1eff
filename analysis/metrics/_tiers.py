"""Whether a level meets an SLO tier, as per-user counts a bootstrap can resample.

Over every request sent in the window (cancelled ones aside), a failed or
incomplete request misses both limits. An ok request whose interactivity was not
measured (fewer than 2 output tokens, or every token in one read: its TPOT is NaN)
has no interactivity: it is left out of the interactivity share and of the share
meeting both limits (``rated`` is their denominator), never counted as fast, and
still counts in the failure and TTFT shares.

Censoring: a request cut when the drain ended (``incomplete``) is a miss unless it
was on pace for the tier when cut: its first token came within the TTFT ceiling
and the tokens after it arrived at >= the floor's rate up to the cut. Such a
request is left out of every share of that tier (``censored``): only the tool's
own cut-off stopped it, so counting it as a miss would make a short ``--drain``
fail the level, and counting it as a hit would assume how it ended.

A level meets a tier when its failure share is at most the maximum and at least
90% of its requests met each limit: the same as P90 interactivity >= floor and
P90 TTFT from schedule <= ceiling over all requests sent. Per-user counts make
each statistic a ratio of sums, so a bootstrap replicate (how often each user
was drawn) costs one product.

Indeterminate: a share measured on few requests cannot tell 85% from 95%. Each
share that must reach 90% (TTFT, interactivity) gets its 95% Wilson score
interval over the requests it counts; when either interval holds 90% (the
sample is on both sides of the line), the level is ``indeterminate``: neither
met nor failed, and a bracket or a search treats it as unknown. The Wilson
interval is decisive from few requests only far from the line: 0 of 3 is a
miss, but a level every request of which met needs at least
``MIN_ALL_MET_REQUESTS`` (35) of them to be judged met. The failure share is
judged at its value (a level with more failures than allowed fails).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from analysis.metrics._samples import Samples
from analysis.schema import SloTier

__all__ = ["MIN_ALL_MET_REQUESTS", "TIER_CONFIDENCE_Z", "TIER_QUANTILE", "TierOutcome",
           "TierShares", "judge_tier", "tier_shares", "wilson_interval"]

TIER_QUANTILE = 0.9
"""Share of requests that must meet each limit (the tiers are P90 criteria)."""

TIER_CONFIDENCE_Z = 1.959964
"""z of the two-sided 95% Wilson interval a tier share is judged with."""

TierOutcome = Literal["meets", "fails", "indeterminate"]


def wilson_interval(k: float, n: float, z: float = TIER_CONFIDENCE_Z) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` trials ((0, 1) when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    den = 1.0 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


MIN_ALL_MET_REQUESTS = math.ceil(TIER_QUANTILE * TIER_CONFIDENCE_Z ** 2 / (1 - TIER_QUANTILE))
"""Requests a level needs, every one meeting the tier, before it can be judged met
(below it the Wilson interval of n of n still reaches under 90%)."""


@dataclass(frozen=True)
class TierShares:
    """Per user: requests sent (cancelled aside), failed, meeting the TTFT
    ceiling, meeting the interactivity floor, meeting both, and those with an
    interactivity to judge (sent minus ok requests whose TPOT was not measured)."""

    sent: np.ndarray
    failed: np.ndarray
    ttft_ok: np.ndarray
    fast: np.ndarray
    both: np.ndarray
    rated: np.ndarray
    censored: int = 0
    """Requests cut by the drain while on pace for the tier: in no share."""

    @property
    def unrated(self) -> int:
        """Requests without an interactivity (left out of the interactivity shares)."""
        return int(round(float(self.sent.sum() - self.rated.sum())))

    def replicate(self, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(failure share, TTFT share, interactivity share) per row of ``counts``
        (how often each user is drawn); NaN where a row drew no request."""
        sent = counts @ self.sent
        with np.errstate(divide="ignore", invalid="ignore"):
            return (counts @ self.failed / sent, counts @ self.ttft_ok / sent,
                    counts @ self.fast / (counts @ self.rated))


def tier_shares(s: Samples, tier: SloTier) -> TierShares:
    """The tier's per-user counts for a (pooled) sample."""
    st = s.req_status
    with np.errstate(invalid="ignore"):
        on_pace = (st == "incomplete") & (s.req_ttft_due <= tier.ttft_s) \
            & (s.req_cut_rate >= tier.floor_tok_s)
    counted = (st != "cancelled") & ~on_pace
    ok = st == "ok"
    failed = counted & ~ok
    unmeasured = ok & ~(s.req_tpot > 0)  # NaN: < 2 tokens or one read; never fast
    with np.errstate(divide="ignore", invalid="ignore"):
        fast = ok & ~unmeasured & (1.0 / s.req_tpot >= tier.floor_tok_s)
    ttft_ok = ok & (s.req_ttft_due <= tier.ttft_s)

    def per_user(mask: np.ndarray) -> np.ndarray:
        return np.bincount(s.req_user[mask], minlength=s.n_users).astype(np.float64)

    return TierShares(sent=per_user(counted), failed=per_user(failed),
                      ttft_ok=per_user(ttft_ok), fast=per_user(fast),
                      both=per_user(ttft_ok & fast), rated=per_user(counted & ~unmeasured),
                      censored=int(on_pace.sum()))


def _pct(x: float) -> str:
    return f"{x:.0%}"


def judge_tier(shares: TierShares, max_failure: float) -> tuple[TierOutcome, str]:
    """``meets``/``fails``/``indeterminate`` and, when indeterminate, why (one clause).

    Fails when the failure share is above the maximum or a share's interval lies wholly
    under 90%; meets when both intervals lie at or above 90%; else indeterminate."""
    sent = float(shares.sent.sum())
    if sent == 0:
        return "indeterminate", "no request was sent in the window"
    if float(shares.failed.sum()) / sent > max_failure:
        return "fails", ""
    unsure = []
    for k, n, what in ((float(shares.ttft_ok.sum()), sent, "the TTFT ceiling"),
                       (float(shares.fast.sum()), float(shares.rated.sum()),
                        "the interactivity floor")):
        lo, hi = wilson_interval(k, n)
        if hi < TIER_QUANTILE:
            return "fails", ""
        if lo < TIER_QUANTILE:
            unsure.append(f"{k:.0f} of {n:.0f} requests met {what} "
                          f"(95% interval {_pct(lo)}-{_pct(hi)} holds "
                          f"{_pct(TIER_QUANTILE)})")
    if not unsure:
        return "meets", ""
    return "indeterminate", ("; ".join(unsure) + ": too few requests to tell (at least "
                             f"{MIN_ALL_MET_REQUESTS}, all meeting, to be met; more the "
                             "nearer the share is to 90%)")
