"""The twin's prediction interval on the held-out level, beside what was measured there.

``calibrate --holdout`` stores a prediction interval (``calibration.interval``:
``replay.twin._interval``) and ``plan --twin`` draws it around the twin's own value at
each level. On the held-out level its half-width is at least the held-out miss
(``hypot(miss, t * spread)``), so the interval holds the measured value it was sized
on nearly by construction: that it covers the held-out runs says little. What can
show it wrong is a measurement it was not sized on: the same level measured again
afterwards (the rerun). So each metric is printed with the interval, every measured
run's value and its own 95% bootstrap interval (the requests it rests on), whether
the two intervals overlap, and whether the interval holds each value, the rerun's
counted apart. Pure: the caller reads the runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from replay.twin import PredictionInterval
from replay.twin._holdout import MeasuredLevel

__all__ = ["MetricCheck", "check_metric", "interval_lines"]

NAMES = {"p90_interactivity": ("P90 interactivity", "tok/s/user", 1.0),
         "p90_ttft_s": ("P90 TTFT from schedule", "ms", 1e3),
         "output_tok_s": ("output throughput", "tok/s", 1.0)}
"""Each metric's printed name, unit and factor from the stored unit to the printed one."""


@dataclass(frozen=True)
class MetricCheck:
    """One metric at the held-out level: the twin's interval against the measurements."""

    metric: str
    predicted: float
    low: float
    high: float
    half_width: float
    """log half-width of the interval."""
    miss: float
    """The stored held-out miss (log), part of the half-width."""
    covered: tuple[bool | None, ...]
    """Whether the interval holds each held-out run's value (None: the run has none)."""
    overlaps: tuple[bool | None, ...]
    """Whether it overlaps each such run's 95% interval (None: the run has none)."""
    rerun_covered: bool | None
    """Whether it holds the rerun's value (None: no rerun or no value)."""
    rerun_overlaps: bool | None


def _overlap(lo: float, hi: float, ci: tuple[float, float] | None) -> bool | None:
    return None if ci is None else lo <= ci[1] and ci[0] <= hi


def check_metric(interval: PredictionInterval, metric: str, predicted: float,
                 measured: Sequence[MeasuredLevel],
                 rerun: MeasuredLevel | None = None) -> MetricCheck:
    """The interval ``plan --twin`` draws around ``predicted`` at the checked level,
    checked against each measured run of that level and the rerun."""
    users = interval.checked_users
    lo, hi = interval.bounds(metric, predicted, users)

    def holds(v: float | None) -> bool | None:
        return None if v is None else lo <= v <= hi

    covered = tuple(holds(m.values.get(metric)) for m in measured)
    overlaps = tuple(_overlap(lo, hi, m.ci.get(metric)) for m in measured)
    r_val = None if rerun is None else rerun.values.get(metric)
    return MetricCheck(metric, predicted, lo, hi, interval.half_width(metric, users),
                       interval.miss.get(metric, 0.0), covered, overlaps, holds(r_val),
                       None if rerun is None else _overlap(lo, hi, rerun.ci.get(metric)))


def _value(metric: str, v: float | None) -> str:
    return "n/a" if v is None else f"{v * NAMES[metric][2]:.4g}"


def _run_text(metric: str, m: MeasuredLevel) -> str:
    ci = m.ci.get(metric)
    span = "" if ci is None else \
        f", 95% CI [{_value(metric, ci[0])}, {_value(metric, ci[1])}]"
    return f"{_value(metric, m.values.get(metric))} ({m.requests} requests{span})"


def _yes(flag: bool | None, yes: str, no: str) -> str:
    return "-" if flag is None else (yes if flag else no)


def interval_lines(interval: PredictionInterval, predicted: Mapping[str, float | None],
                   measured: Sequence[MeasuredLevel],
                   rerun: MeasuredLevel | None = None) -> list[str]:
    """Per metric: the twin's interval at the held-out level, each measured run with its
    95% interval, overlap and cover; then how many reruns the interval held."""
    users = interval.checked_users
    lines = [f"the twin's {interval.nominal:.0%} prediction interval at the held-out "
             f"{users} users (as plan --twin draws it; sized on the held-out runs' miss, "
             f"so the rerun is the check it was not sized on):"]
    held = total = 0
    for metric in NAMES:
        p = predicted.get(metric)
        if p is None or p <= 0:
            lines.append(f"  {NAMES[metric][0]}: no prediction")
            continue
        c = check_metric(interval, metric, p, measured, rerun)
        name, unit, _ = NAMES[metric]
        runs = "; ".join(_run_text(metric, m) for m in measured)
        cover = ", ".join(_yes(f, "inside", "OUTSIDE") for f in c.covered)
        over = ", ".join(_yes(f, "overlap", "DISJOINT") for f in c.overlaps)
        b = interval.between_runs.get(metric)
        between = "" if b is None else (
            f", between-run spread {b:.1%} on {interval.between_dof.get(metric, 0)} dof"
            f" adds {interval.between_excess(metric):.1%}")
        line = (f"  {name}: twin {_value(metric, p)} {unit}, interval "
                f"[{_value(metric, c.low)}, {_value(metric, c.high)}] (+-{c.half_width:.1%} "
                f"log, of which miss {c.miss:.1%}{between}); measured {runs}: value "
                f"{cover}, intervals {over}")
        if rerun is not None and c.rerun_covered is not None:
            total += 1
            held += c.rerun_covered
            line += (f"; rerun {_run_text(metric, rerun)}: "
                     f"{_yes(c.rerun_covered, 'inside', 'OUTSIDE')}, intervals "
                     f"{_yes(c.rerun_overlaps, 'overlap', 'DISJOINT')}")
        lines.append(line)
    if total:
        lines.append(f"  the rerun (not used for the fit or the interval): {held} of {total} "
                     f"metrics inside the twin's interval")
    return lines
