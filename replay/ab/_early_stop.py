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

A verdict on the requests so far is not yet the whole window's: a coding-agent
workload's contexts grow through a run, so the first minutes after warmup are another
load than the rest (bench/README.md, "Search": every wrong early verdict found was
"fails" settled on a level whose whole window is indeterminate). So a verdict settles
only if the *whole* window, as judged (95% Wilson), would still give it with the rest of
the window added: the rest's requests forecast from the window's send rate so far
(:func:`forecast_remaining`), meeting each limit at the late half's share (the requests
sent in the second half of the elapsed window) taken at the bound that argues against
the verdict: for "fails" the late half's 99% upper bound, at least ``fail_floor`` (92%);
for "meets" its 99% lower bound (the rest's failures: for "fails" at the late half's 99%
lower bound, for "meets" at its observed share, the judge reading the failure share as a
point).

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
from analysis.metrics import (
    TIER_CONFIDENCE_Z,
    TIER_QUANTILE,
    column_latencies,
    record_latencies,
    wilson_interval,
)
from analysis.read import steady_window

__all__ = ["Known", "Settled", "StopRule", "TierStop", "forecast_remaining", "known_at",
           "settle", "settled_at"]

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
    z_whole: float = TIER_CONFIDENCE_Z
    """The whole window's projected shares are judged as the judge does (95%)."""
    fail_floor: float = 0.92
    """"fails" settles only if the window fails with the rest meeting at least this."""


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


def _settle_known(k: Known, max_failure: float, rule: StopRule) -> tuple[Verdict | None, str]:
    """The verdict the known requests decide whatever the pending ones do."""
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


def forecast_remaining(seen: int, t_s: float, planned_s: float) -> float:
    """Requests the rest of the window is forecast to bring: the ``seen`` requests sent
    in its first ``t_s`` seconds (finished and pending), at that rate, over what is left
    of ``planned_s`` (0 once the window is over)."""
    if t_s <= 0 or planned_s <= t_s:
        return 0.0
    return seen / t_s * (planned_s - t_s)


def _late_bounds(late: Known | None, z: float) -> list[tuple[float, float]]:
    """The late half's 99% intervals of the TTFT share and the interactivity share
    ((0, 1): none finished yet, nothing known)."""
    if late is None:
        return [(0.0, 1.0), (0.0, 1.0)]
    return [wilson_interval(late.ttft_ok, late.sent, z), wilson_interval(late.fast, late.rated, z)]


def _whole_window(verdict: Verdict, k: Known, late: Known | None, m: float,
                  max_failure: float, rule: StopRule) -> tuple[bool, str]:
    """Whether the whole window (the known requests, the pending, and ``m`` more) would
    still give ``verdict`` with the rest at the late half's bound against it, and why."""
    bounds = _late_bounds(late, rule.z)
    total = k.sent + k.pending + m
    says = f"{m:.0f} more forecast"
    shares = ((k.ttft_ok, k.sent, "TTFT"), (k.fast, k.rated, "interactivity"))
    if verdict == "fails":
        for (ok, n, what), (_, hi_late) in zip(shares, bounds, strict=True):
            q = max(hi_late, rule.fail_floor)
            hi = wilson_interval(ok + k.pending + m * q, n + k.pending + m, rule.z_whole)[1]
            if hi < TIER_QUANTILE:
                return True, f"{says} meeting {what} at {q:.0%}: the whole window's share " \
                    f"would still lie under {TIER_QUANTILE:.0%} (up to {hi:.1%})"
        lf = 0.0 if late is None else wilson_interval(late.failed, late.sent, rule.z)[0]
        share = (k.failed + m * lf) / total
        if share > max_failure:
            return True, f"{says} failing at {lf:.0%}: {share:.0%} of the whole window " \
                f"would still fail (> {max_failure:.0%})"
        return False, f"{says} (the late half's upper bounds " + \
            ", ".join(f"{hi:.0%}" for _, hi in bounds) + ") could still lift it"
    for (ok, n, what), (lo_late, _) in zip(shares, bounds, strict=True):
        lo = wilson_interval(ok + m * lo_late, n + k.pending + m, rule.z_whole)[0]
        if lo < TIER_QUANTILE:
            return False, f"{says} meeting {what} at the late half's lower bound " \
                f"{lo_late:.0%} could still sink it (to {lo:.1%})"
    fp = 0.0 if late is None or late.sent == 0 else late.failed / late.sent
    share = (k.failed + k.pending + m * fp) / total
    if share > max_failure:
        return False, f"{says} failing at {fp:.0%} could still fail {share:.0%} of it"
    return True, f"{says} meeting each limit at the late half's lower bound " + \
        ", ".join(f"{lo:.0%}" for lo, _ in bounds) + ": the whole window would still meet"


def settle(k: Known, max_failure: float, rule: StopRule = StopRule(),
           remaining: float = 0.0, late: Known | None = None) -> tuple[Verdict | None, str]:
    """The verdict the known requests decide whatever the pending ones do (None: not
    yet), and why; the floor on requests applies, the floor on time is the caller's.

    ``remaining`` is the forecast of requests the rest of the window brings
    (:func:`forecast_remaining`; 0: the window is over) and ``late`` the counts of the
    requests sent in the second half of the elapsed window (``pending`` unused): a
    verdict settles only if the whole window would still give it (the module's text)."""
    verdict, why = _settle_known(k, max_failure, rule)
    if verdict is None or remaining <= 0:
        return verdict, why
    holds, note = _whole_window(verdict, k, late, remaining, max_failure, rule)
    if not holds:
        return None, f"{why}; not yet the whole window's {verdict!r}: {note}"
    return verdict, f"{why}; {note}"


def known_at(run: RunData, tier: SloTier, t_s: float, since_s: float = 0.0) -> Known:
    """The counts known ``t_s`` seconds into the run's window (run-clock seconds) of the
    requests sent from ``since_s`` seconds into it (``t_s / 2``: the late half)."""
    window = steady_window(run)
    r = run.requests
    if window is None:
        return Known(0, 0, 0, 0, 0)
    start = window[0]
    now = start + t_s
    lat = column_latencies(r)
    sent = (r.sent_s >= start + since_s) & (r.sent_s < now) & (r.status != "cancelled")
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
               rule: StopRule = StopRule(), planned_s: float | None = None) -> Settled | None:
    """The first checkpoint of the run's window at which its verdict for ``tier``
    settles (after the floor), or None when the whole window was needed.
    ``planned_s``: the window the rest is forecast over (default: the run's window)."""
    window = steady_window(run)
    if window is None:
        return None
    length = window[1] - window[0]
    planned = length if planned_s is None else planned_s
    t = max(rule.min_fraction * planned, rule.step_s)
    while t < length:
        k = known_at(run, tier, t)
        remaining = forecast_remaining(k.sent + k.pending, t, planned)
        verdict, why = settle(k, max_failure, rule, remaining, known_at(run, tier, t, t / 2))
        if verdict is not None:
            return Settled(verdict, round(t, 3), k.sent + k.pending, why)
        t += rule.step_s
    return None


def rule_text(rule: StopRule) -> str:
    """The rule in words (``run.json``'s ``early_stop.rule``)."""
    return (f"every searched tier settled at {rule.z:g} sigma (Wilson, whichever way the "
            f"requests in flight end), and the whole window would still give it with the "
            f"rest (forecast at the send rate so far) at the late half's {rule.z:g}-sigma "
            f"bound against it (for fails at least {rule.fail_floor:.0%}), judged at "
            f"{rule.z_whole:.3g} sigma; after {rule.min_requests} requests and "
            f"{rule.min_fraction:.0%} of the window, looked at every {rule.step_s:g} s")


class TierStop:
    """The early-stop rule while a probe runs (``replay.load.WindowStop``): keeps the
    window's finished records per tier as they come (each with its sent time from the
    window's start, ``window_start_s`` on the run clock: the warmup), and ends the
    window once every tier's verdict is settled (after the floor: ``min_fraction`` of
    ``planned_s``; the rest forecast over ``planned_s``)."""

    def __init__(self, tiers: Sequence[SloTier], max_failure: float, planned_s: float,
                 window_start_s: float, rule: StopRule = StopRule()) -> None:
        self.tiers = tuple(tiers)
        self.max_failure = max_failure
        self.planned_s = planned_s
        self.window_start_s = window_start_s
        self.floor_s = max(rule.min_fraction * planned_s, rule.step_s)
        self.stop_rule = rule
        self.step_s = rule.step_s
        self.rule = rule_text(rule)
        self._sent: list[float] = []  # each window record's sent time, window seconds
        self._rows: list[list[tuple[bool, bool, bool, bool]]] = [[] for _ in self.tiers]
        """Per tier, per record: failed, TTFT ok, fast, rated."""
        self.settled: dict[str, Settled] = {}
        """Per tier: the verdict it stopped on (set when the window ends early)."""

    def record(self, rec: RecordDict) -> None:
        if rec["phase"] != "measure" or rec["status"] == "cancelled":
            return
        ok = rec["status"] == "ok"
        lat = record_latencies(rec)
        tpot = lat.tpot if lat.tpot is not None and lat.tpot > 0 else None
        self._sent.append(float(rec["sent_s"]) - self.window_start_s)
        for tier, rows in zip(self.tiers, self._rows, strict=True):
            rows.append((not ok, ok and lat.ttft_due is not None and lat.ttft_due <= tier.ttft_s,
                         ok and tpot is not None and 1.0 / tpot >= tier.floor_tok_s,
                         not ok or tpot is not None))

    def _known(self, rows: list[tuple[bool, bool, bool, bool]], since_s: float,
               pending: int) -> Known:
        c = [0, 0, 0, 0]
        n = 0
        for sent_s, row in zip(self._sent, rows, strict=True):
            if sent_s >= since_s:
                n += 1
                for i, v in enumerate(row):
                    c[i] += v
        return Known(sent=n, failed=c[0], ttft_ok=c[1], fast=c[2], rated=c[3], pending=pending)

    def check(self, t_s: float, pending: int) -> str | None:
        if t_s < self.floor_s or not self.tiers:
            return None
        found: dict[str, Settled] = {}
        for tier, rows in zip(self.tiers, self._rows, strict=True):
            k = self._known(rows, float("-inf"), pending)
            remaining = forecast_remaining(k.sent + k.pending, t_s, self.planned_s)
            verdict, why = settle(k, self.max_failure, self.stop_rule, remaining,
                                  self._known(rows, t_s / 2, 0))
            if verdict is None:
                return None
            found[tier.name] = Settled(verdict, round(t_s, 3), k.sent + k.pending, why)
        self.settled = found
        return "; ".join(f"{name} {s.verdict}: {s.why}" for name, s in found.items())
