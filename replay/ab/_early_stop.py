"""Per-probe early stop: the window a probe's tier verdict needed, by a stated rule.

A probe only has to tell met from failed. Its verdict is *settled* at time ``t`` of
the window when the requests known by then decide it whichever way the requests
still in flight end: counted as misses, the shares still reach 90% (met); counted
as hits, a share's interval still lies under 90% or the failure share is over the
maximum (failed). Each share is judged as the judge does (``analysis.metrics``:
a Wilson score interval against 90%), at a stricter confidence (``z`` 2.576, 99%
two-sided) because the rule looks many times and stops at the first look that
settles. A floor keeps a probe from stopping on a handful of requests: at least
``min_requests`` known requests and ``min_fraction`` of the window.

:func:`settle` is the rule on counts (pure). :class:`TierStop` applies it while a
probe runs (``replay.load.WindowStop``: the run loop asks it every ``step_s`` and ends
the window once every searched tier is settled; the drain lets the window's requests
in flight finish, and ``run.json`` records the window covered and why). :func:`settled_at`
walks a finished run's records at the same checkpoints and names the first that
settles (None: the whole window was needed): what a probe run without early stop
would have needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from analysis import RecordDict, RunData, SloTier
from analysis.metrics import TIER_QUANTILE, column_latencies, record_latencies, wilson_interval
from analysis.read import steady_window

__all__ = ["Known", "Settled", "StopRule", "TierStop", "known_at", "settle", "settled_at"]

Verdict = Literal["meets", "fails"]


@dataclass(frozen=True)
class StopRule:
    """When a probe may stop: the confidence and the floor on its window."""

    z: float = 2.576
    """Two-sided 99% Wilson interval (the judge's own is 95%: several looks)."""
    min_requests: int = 40
    """Known requests before any stop (the judge needs 35, all meeting, for met)."""
    min_fraction: float = 0.25
    """Share of the window that must have passed before any stop."""
    step_s: float = 5.0
    """How often the rule looks (seconds of window)."""


@dataclass(frozen=True)
class Known:
    """What a probe knows at a moment: finished requests sent in the window, and how
    many sent in the window have not finished yet (``pending``)."""

    sent: int
    failed: int
    ttft_ok: int
    fast: int
    rated: int
    pending: int = 0


@dataclass(frozen=True)
class Settled:
    """A settled verdict: at ``window_s`` seconds into the window, on ``requests``."""

    verdict: Verdict
    window_s: float
    requests: int
    why: str


def _share_text(k: float, n: float, lo: float, hi: float, what: str) -> str:
    return f"{k:.0f} of {n:.0f} met {what} ({lo:.0%}-{hi:.0%})"


def settle(k: Known, max_failure: float, rule: StopRule = StopRule()
           ) -> tuple[Verdict | None, str]:
    """The verdict the known requests decide whatever the pending ones do (None: not
    yet), and why; the floor on requests applies, the floor on time is the caller's."""
    if k.sent < rule.min_requests:
        return None, f"{k.sent} known requests (< {rule.min_requests})"
    total = k.sent + k.pending
    if k.failed / total > max_failure:
        return "fails", f"{k.failed} of {total} failed (> {max_failure:.0%})"
    meets, notes = (k.failed + k.pending) / total <= max_failure, []
    for ok, n, what in ((k.ttft_ok, k.sent, "the TTFT ceiling"),
                        (k.fast, k.rated, "the interactivity floor")):
        hi = wilson_interval(ok + k.pending, n + k.pending, rule.z)[1]  # pending all hits
        lo = wilson_interval(ok, n + k.pending, rule.z)[0]  # pending all misses
        if hi < TIER_QUANTILE:
            return "fails", _share_text(ok + k.pending, n + k.pending, 0, hi, what) + \
                f", under {TIER_QUANTILE:.0%} at 99% even if the {k.pending} pending met it"
        if lo < TIER_QUANTILE:
            meets = False
        notes.append(_share_text(ok, n + k.pending, lo, hi, what))
    if meets:
        return "meets", "; ".join(notes) + f", at or above {TIER_QUANTILE:.0%} at 99% " \
            f"even if the {k.pending} pending missed"
    return None, "; ".join(notes)


def known_at(run: RunData, tier: SloTier, t_s: float) -> Known:
    """The counts known ``t_s`` seconds into the run's window (run-clock seconds)."""
    window = steady_window(run)
    r = run.requests
    if window is None:
        return Known(0, 0, 0, 0, 0)
    start = window[0]
    now = start + t_s
    lat = column_latencies(r)
    sent = (r.sent_s >= start) & (r.sent_s < now) & (r.status != "cancelled")
    done = sent & (r.end_s <= now)
    ok = done & (r.status == "ok")
    with np.errstate(invalid="ignore", divide="ignore"):
        rated = done & ~(ok & ~(lat.tpot > 0))
        fast = ok & (lat.tpot > 0) & (1.0 / lat.tpot >= tier.floor_tok_s)
        ttft_ok = ok & (lat.ttft_due <= tier.ttft_s)
    return Known(sent=int(done.sum()), failed=int((done & ~ok).sum()),
                 ttft_ok=int(ttft_ok.sum()), fast=int(fast.sum()), rated=int(rated.sum()),
                 pending=int((sent & ~done).sum()))


def settled_at(run: RunData, tier: SloTier, max_failure: float,
               rule: StopRule = StopRule()) -> Settled | None:
    """The first checkpoint of the run's window at which its verdict for ``tier``
    settles (after the floor), or None when the whole window was needed."""
    window = steady_window(run)
    if window is None:
        return None
    length = window[1] - window[0]
    t = max(rule.min_fraction * length, rule.step_s)
    while t < length:
        k = known_at(run, tier, t)
        verdict, why = settle(k, max_failure, rule)
        if verdict is not None:
            return Settled(verdict, round(t, 3), k.sent + k.pending, why)
        t += rule.step_s
    return None


def rule_text(rule: StopRule) -> str:
    """The rule in words (``run.json``'s ``early_stop.rule``)."""
    return (f"every searched tier settled at {rule.z:g} sigma (Wilson, whichever way the "
            f"requests in flight end), after {rule.min_requests} requests and "
            f"{rule.min_fraction:.0%} of the window, looked at every {rule.step_s:g} s")


class TierStop:
    """The early-stop rule while a probe runs (``replay.load.WindowStop``): counts the
    window's finished records per tier as they come, and ends the window once every
    tier's verdict is settled (after the floor: ``min_fraction`` of ``planned_s``)."""

    def __init__(self, tiers: Sequence[SloTier], max_failure: float, planned_s: float,
                 rule: StopRule = StopRule()) -> None:
        self.tiers = tuple(tiers)
        self.max_failure = max_failure
        self.floor_s = max(rule.min_fraction * planned_s, rule.step_s)
        self.stop_rule = rule
        self.step_s = rule.step_s
        self.rule = rule_text(rule)
        self._counts = [[0, 0, 0, 0, 0] for _ in self.tiers]  # sent failed ttft fast rated
        self.settled: dict[str, Settled] = {}
        """Per tier: the verdict it stopped on (set when the window ends early)."""

    def record(self, rec: RecordDict) -> None:
        if rec["phase"] != "measure" or rec["status"] == "cancelled":
            return
        ok = rec["status"] == "ok"
        lat = record_latencies(rec)
        tpot = lat.tpot if lat.tpot is not None and lat.tpot > 0 else None
        for tier, c in zip(self.tiers, self._counts, strict=True):
            c[0] += 1
            c[1] += not ok
            c[2] += ok and lat.ttft_due is not None and lat.ttft_due <= tier.ttft_s
            c[3] += ok and tpot is not None and 1.0 / tpot >= tier.floor_tok_s
            c[4] += not ok or tpot is not None

    def check(self, t_s: float, pending: int) -> str | None:
        if t_s < self.floor_s or not self.tiers:
            return None
        found: dict[str, Settled] = {}
        for tier, c in zip(self.tiers, self._counts, strict=True):
            k = Known(sent=c[0], failed=c[1], ttft_ok=c[2], fast=c[3], rated=c[4],
                      pending=pending)
            verdict, why = settle(k, self.max_failure, self.stop_rule)
            if verdict is None:
                return None
            found[tier.name] = Settled(verdict, round(t_s, 3), k.sent + k.pending, why)
        self.settled = found
        return "; ".join(f"{name} {s.verdict}: {s.why}" for name, s in found.items())
