"""Re-judge stored battery outcomes with the interval rule the code has now.

A stored outcome keeps, per question, the prediction, the truth it is judged against
and the twin's interval as ``calibrate`` measured it (miss, spreads, quantile). The
rule that turns those into a width (how it widens per doubling of the load, for a
what-if, for a fleet) is code: re-judging with today's rule on the stored cases is how
a rule change is chosen on development seeds without rerunning them. The capacity per
tier and the ``--agents`` ranges rest on ladders that are not stored: they keep the
rule of the run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from _battery_case import METRICS, Outcome


def current_rule(interval: dict[str, Any], rule: dict[str, Any] | None = None) -> Any:
    """The stored interval with ``rule`` (default: today's; its measured parts kept)."""
    from replay.twin import PredictionInterval
    from replay.twin._interval import current_rule as today

    pi = PredictionInterval(**interval)
    if not pi.refits:  # a twin from before the refits: its own rule, as calibrate stored
        return pi
    return replace(pi, **(today() if rule is None else rule))


def rescore(outcomes: Sequence[Outcome], rule: dict[str, Any] | None = None) -> list[Outcome]:
    """``outcomes`` with each row's ``<metric>_covered`` judged by ``rule`` (default:
    today's; ``replay.twin._interval.current_rule`` fields)."""
    out = []
    for o in outcomes:
        if o.error or not o.interval:
            out.append(o)
            continue
        pi = current_rule(o.interval, rule)
        rows = []
        for r in o.rows:
            r = dict(r)
            for m in METRICS:
                if r.get(f"{m}_covered") is None:
                    continue
                r[f"{m}_covered"] = pi.holds(m, r[f"{m}_pred"], r[f"{m}_held"],
                                             r["per_replica"], r["what_if"], r["replicas"])
            rows.append(r)
        out.append(replace(o, rows=rows))
    return out
