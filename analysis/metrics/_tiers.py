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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.metrics._samples import Samples
from analysis.schema import SloTier

__all__ = ["TIER_QUANTILE", "TierShares", "tier_shares"]

TIER_QUANTILE = 0.9
"""Share of requests that must meet each limit (the tiers are P90 criteria)."""


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


def meets(fail: np.ndarray | float, ttft: np.ndarray | float, fast: np.ndarray | float,
          max_failure: float) -> np.ndarray:
    """Elementwise: the tier is met (NaN shares fail)."""
    return np.asarray((np.asarray(fail) <= max_failure) & (np.asarray(ttft) >= TIER_QUANTILE)
                      & (np.asarray(fast) >= TIER_QUANTILE))
