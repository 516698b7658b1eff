"""Twin-guided probe placement for ``compare --search --search-method twin``.

After the first ``TWIN_MIN_LEVELS`` levels of an arm, the twin is fitted on the
probes so far (``replay.twin.calibrate``, the fit ``agentreplay calibrate`` does, in
memory) and replayed on its virtual clock with each probe's load shape. Its capacity
``c`` for the tier (the largest count, inside the measured bracket, up to which the
twin does not fail it) places the next probes: ``c`` (expected to meet), then
``c + 1`` (expected to fail). Both as expected closes a one-user bracket at once.

Where the twin cannot be trusted the step falls back to bisection (stated rules):

- *fit failed*: ``calibrate`` refused the probes (too few samples);
- *wide*: the twin's interval is the capacity it gives with the tier's limits
  made stricter and looser by its largest relative miss of P90 interactivity or
  P90 TTFT (relative to the tier's ceiling where under it) at the measured levels
  near its capacity (:func:`near_levels`; rounded up to one of ``MARGINS``, at least
  ``MIN_MARGIN``); wider than
  ``WIDE_SHARE`` of ``c`` (and more than 2 users) it is too wide to place at ``c``:
  its ends are probed instead (the strict end expected to meet, one past the loose
  end to fail), and bisection runs inside it;
- *disagrees*: refitted, the twin does not give the verdict a probe measured
  (meets where it failed, or fails where it met) at some probed count;
- *contradicted*: a probe the twin placed came out the other way (met where
  it expected a failure, or failed where it expected met): that step bisects,
  and the twin is refitted with the probe that contradicted it (often the first
  fit's farthest extrapolation). After ``MAX_MISSES`` contradictions that arm's
  tier is bisected for good.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis import RunData, SloTier, read_run
from analysis.judge import meets_tier
from replay.errors import ConfigError

__all__ = ["MIN_MARGIN", "TWIN_MIN_LEVELS", "WIDE_SHARE", "TwinGuide", "TwinTrack"]

TWIN_MIN_LEVELS = 2
"""Distinct probe levels (with valid runs) before the twin is fitted."""
MIN_MARGIN = 0.05
"""Smallest relative widening of the tier's limits for the twin's interval."""
WIDE_SHARE = 0.25
"""A twin interval wider than this share of its capacity is too wide to place on."""
MAX_MARGIN = 0.5
MARGINS = (MIN_MARGIN, 0.1, 0.15, 0.2, 0.3, 0.4, MAX_MARGIN)
"""The widenings the twin's levels are judged at (its miss rounded up to one of them):
every level is simulated once per fit, judged at all of them."""
MAX_MISSES = 2
"""Probes that may contradict the twin before its arm's tier is bisected for good."""


@dataclass
class TwinTrack:
    """One arm and tier: what the twin expected of the probes it placed, and why the
    search fell back to bisection for good (None: it did not)."""

    expected: dict[int, bool] = field(default_factory=dict)
    """Probes the twin placed and not yet checked: met (True) or failed expected."""
    contradicted: str | None = None
    misses: int = 0
    placed: int = 0
    notes: list[str] = field(default_factory=list)
    """Why each step went where it did (search.json's ``twin`` notes)."""


Verdicts = Mapping[int, bool | None]
"""Measured outcome per probed count: met, failed, or None (no evidence)."""


def _tightened(tier: SloTier, m: float) -> SloTier:
    return SloTier(floor_tok_s=tier.floor_tok_s * (1 + m), ttft_s=tier.ttft_s / (1 + m))


def _loosened(tier: SloTier, m: float) -> SloTier:
    return SloTier(floor_tok_s=tier.floor_tok_s / (1 + m), ttft_s=tier.ttft_s * (1 + m))


def _users_of(run_dir: Path) -> int:
    """The count of a probe's run directory (``<arm>-u<users>-r<repeat>``)."""
    return int(run_dir.name.rsplit("-u", 1)[1].split("-r", 1)[0])


def _miss(pred: float | None, meas: float | None) -> float:
    if pred is None or meas is None or pred <= 0 or meas <= 0:
        return 0.0
    return abs(pred / meas - 1)


class TwinGuide:
    """Fits the twin on an arm's probes and says where to probe next."""

    def __init__(self, workload: str, max_failure: float) -> None:
        self.workload_path = workload
        self.max_failure = max_failure
        self._workload: Any = None

    def advise(self, dirs: Sequence[Path], verdicts: Verdicts, tier: SloTier, lo: int,
               hi: int | None, max_users: int, track: TwinTrack) -> tuple[int | None, str]:
        """The next count to probe and why, or None with why the step bisects."""
        why = self._advise(dirs, verdicts, tier, lo, hi, max_users, track)
        track.notes.append(why[1])
        return why

    def _advise(self, dirs: Sequence[Path], verdicts: Verdicts, tier: SloTier, lo: int,
                hi: int | None, max_users: int, track: TwinTrack) -> tuple[int | None, str]:
        if track.contradicted is not None:
            return None, track.contradicted
        for u, want in list(track.expected.items()):
            got = verdicts.get(u)
            if got is not None and got != want:
                del track.expected[u]
                track.misses += 1
                why = (f"twin contradicted at {u} users (expected "
                       f"{'met' if want else 'failed'})")
                if track.misses >= MAX_MISSES:
                    track.contradicted = why + f", {MAX_MISSES} times: bisecting from here"
                    return None, track.contradicted
                return None, why + ": bisecting this step, refitting with it"
        levels = sorted({_users_of(d) for d in dirs})
        if len(levels) < TWIN_MIN_LEVELS:
            return None, "too few levels to fit the twin"
        try:
            if self._workload is None:
                from replay.twin import load_workload

                self._workload = load_workload(self.workload_path)
            sim = _TwinSim(dirs, self._workload, self.max_failure)
        except (ConfigError, ValueError) as exc:
            return None, f"twin fit failed ({str(exc)[:120]}): bisecting"
        top = hi - 1 if hi is not None else max_users
        if top <= lo:
            return None, "bracket closed"
        sim.tiers = (tier, *(_tightened(tier, m) for m in MARGINS),
                     *(_loosened(tier, m) for m in MARGINS))  # one simulation per level
        ok = sim.ok(tier)
        for u, v in sorted(verdicts.items()):
            if v is not None and ok(u) != v:
                return None, (f"the twin fitted so far {'fails' if v else 'meets'} the tier at "
                              f"{u} users, where the probe {'met' if v else 'failed'}: "
                              "bisecting")
        c = sim.capacity(tier, lo, top)
        miss = max([0.0, *(sim.miss(u, tier) for u in near_levels(levels, c, hi))])
        margin = next((m for m in MARGINS if m >= miss), MARGINS[-1])
        strict_t, loose_t = _tightened(tier, margin), _loosened(tier, margin)
        strict = sim.capacity(strict_t, lo, top)
        loose = sim.capacity(loose_t, lo, top)
        wide = loose - strict > max(2, WIDE_SHARE * max(c, 1))
        # narrow: just inside and just outside the boundary; wide: the interval's ends,
        # so the bisection that follows runs inside the twin's interval
        picks = ((strict, True), (loose + 1, False)) if wide else ((c, True), (c + 1, False))
        for u, want in picks:
            if lo < u <= top and u not in verdicts:
                track.expected[u] = want
                track.placed += 1
                where = (f"interval {strict}-{loose} users (limits \u00b1{margin:.0%}) wide "
                         f"around {c}: bounding it at") if wide else \
                    f"capacity {c} (interval {strict}-{loose}), probing"
                return u, f"twin: {where} {u} (expected to {'meet' if want else 'fail'})"
        if wide:
            return None, (f"twin interval {strict}-{loose} users (limits \u00b1{margin:.0%}) "
                          f"too wide around {c}, its ends probed: bisecting")
        return None, f"twin capacity {c} already probed: bisecting"


def near_levels(levels: Sequence[int], c: int, hi: int | None) -> list[int]:
    """The measured levels that say how well the twin knows its boundary ``c``: within
    a factor 2 of it and not past the first failure ``hi`` (an overloaded level's
    queueing decides no verdict near the line); all up to ``hi`` when none is that
    near (the first fit, on 1 and 2 users, extrapolates: its misses there are all it has)."""
    capped = [u for u in levels if hi is None or u <= hi]
    near = [u for u in capped if c / 2 <= u <= 2 * c + 1]
    return near or capped or list(levels)


class _TwinSim:
    """The twin fitted on some run directories, replayed like them at any count."""

    def __init__(self, dirs: Sequence[Path], workload: Any, max_failure: float) -> None:
        from replay.servers.sim import SimProfile
        from replay.twin import calibrate, clock_scale, decode_backend

        cal = calibrate([str(d) for d in dirs])
        self.profile = SimProfile.model_validate(cal.document())
        run: RunData = read_run(dirs[0])
        m = run.manifest
        self.scale = clock_scale(m)
        self.backend = decode_backend(m)
        self.load = m.load
        self.workload = workload
        self.max_failure = max_failure
        self.tiers: tuple[SloTier, ...] = ()
        """The tiers (run clock) the twin's levels are judged by."""
        self._summaries: dict[tuple[int, tuple[SloTier, ...]], Any] = {}
        self._measured: dict[int, tuple[float | None, float | None]] = {}
        for d in dirs:
            from analysis import measure, summarize

            r = read_run(d)
            s = summarize(measure(r), bootstrap=False, tiers=())
            self._measured.setdefault(int(r.manifest.load.users or 0), (
                s.interactivity.p90, s.ttft_due.p90))

    def _model(self, tier: SloTier) -> SloTier:
        """The tier on the twin's clock (the model's: a time-scaled server ran faster)."""
        return SloTier(floor_tok_s=tier.floor_tok_s / self.scale, ttft_s=tier.ttft_s * self.scale)

    def summary(self, users: int) -> Any:
        key = (users, self.tiers)
        if key not in self._summaries:
            from replay.twin import simulate_level

            ld, k = self.load, self.scale
            self._summaries[key] = simulate_level(
                self.profile, self.workload, users, ld.duration_s * k, ld.warmup_s * k,
                think_scale=ld.think_scale * k,
                think_time_cap_s=None if ld.think_time_cap_s is None
                else ld.think_time_cap_s * k,
                drain_s=ld.drain_s * k, seed=ld.seed,
                backend="latency_specialized" if self.backend == "latency_specialized"
                else "auto", tiers=tuple(self._model(t) for t in self.tiers),
                max_failure_share=self.max_failure).summary
        return self._summaries[key]

    def miss(self, users: int, tier: SloTier) -> float:
        """The twin's largest relative miss at a level, of P90 interactivity and of P90
        TTFT (the latter relative to the tier's ceiling where the measured P90 is under
        it: a 50 ms queue predicted as 100 ms moves no verdict on a 10 s ceiling)."""
        meas = self._measured.get(users)
        if meas is None:
            return 0.0
        s = self.summary(users)
        # the twin's clock is the model's: scale back to the run's clock
        inter = None if s.interactivity.p90 is None else s.interactivity.p90 * self.scale
        ttft = None if s.ttft_due.p90 is None else s.ttft_due.p90 / self.scale
        ttft_miss = 0.0
        if ttft is not None and meas[1] is not None and meas[1] > 0:
            ttft_miss = abs(ttft - meas[1]) / max(meas[1], tier.ttft_s)
        return max(_miss(inter, meas[0]), ttft_miss)

    def ok(self, tier: SloTier) -> Callable[[int], bool]:
        """Whether the twin does not fail ``tier`` at a count (indeterminate: not failed);
        ``tier`` must be one of :attr:`tiers`."""
        model_tier = self._model(tier)

        def at(users: int) -> bool:
            return meets_tier(self.summary(users), model_tier) is not False

        return at

    def capacity(self, tier: SloTier, lo: int, top: int) -> int:
        """The largest count in [lo, top] up to which the twin does not fail ``tier``
        (bisection: the twin's verdict is taken as monotone; ``lo`` as met)."""
        ok = self.ok(tier)
        if ok(top):
            return top
        a, b = lo, top  # ok(a) assumed, not ok(b)
        while b - a > 1:
            mid = (a + b) // 2
            if ok(mid):
                a = mid
            else:
                b = mid
        return a
