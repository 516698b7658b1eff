"""The battery's ``--agents K`` check: the replicas the twin says K agents need, per
tier, against the count found by measuring N engines of the hidden profile.

The twin answers as ``plan --twin --agents K`` does (``replay.twin.replicas_needed``:
K over the per-replica capacity read off the twin's one-engine ladder; "at most" when
every level met the tier). The truth is measured: the hidden profile at K users on
1, 2, ... ``MAX_REPLICAS`` engines (affinity routing), the smallest N whose level
meets the tier. Both sides beyond ``MAX_REPLICAS`` (or "cannot be met") agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["AGENTS_FACTOR", "MAX_REPLICAS", "agents_check"]

AGENTS_FACTOR = 3
"""K = this many times the held-out level (24 agents for a held-out 8)."""
MAX_REPLICAS = 8


def _need(capacity: float | None, agents: int) -> int | None:
    from replay.twin import replicas_needed

    n = replicas_needed(agents, None if capacity is None else int(capacity), 1)
    return None if n is None or n > MAX_REPLICAS else n


def agents_check(agents: int, tiers: Sequence[Any], twin_brackets: Sequence[Any],
                 loose_strict: Sequence[tuple[float | None, float | None]] | None,
                 measure: Callable[[int], Any]) -> list[dict[str, Any]]:
    """Per tier: the twin's count (and its interval's range) and the measured one.
    ``measure(n)`` is the hidden profile's summary at ``agents`` users on n engines."""
    from analysis.judge import meets_tier

    truth: dict[str, int | None] = {t.name: None for t in tiers}
    for n in range(1, MAX_REPLICAS + 1):
        summary = measure(n)
        for t in tiers:
            if truth[t.name] is None and meets_tier(summary, t) is True:
                truth[t.name] = n
        if all(v is not None for v in truth.values()):
            break
    out = []
    for k, (t, b) in enumerate(zip(tiers, twin_brackets, strict=True)):
        twin = _need(b.passed, agents)
        at_most = b.failed is None and b.passed is not None
        tv = truth[t.name]
        rec: dict[str, Any] = {"tier": t.name, "agents": agents, "twin": twin,
                               "twin_at_most": at_most, "truth": tv,
                               "right": _n(twin) == _n(tv) or (at_most and _n(tv) <= _n(twin))}
        if loose_strict is not None:
            strict_cap, loose_cap = loose_strict[k]
            hi, lo = _need(strict_cap, agents), _need(loose_cap, agents)
            rec["range"] = [lo, hi]
            rec["in_range"] = _n(lo) <= _n(tv) <= _n(hi)
        out.append(rec)
    return out


def _n(v: int | None) -> int:
    """A count with "more than MAX_REPLICAS, or never" as MAX_REPLICAS + 1."""
    return MAX_REPLICAS + 1 if v is None else v
