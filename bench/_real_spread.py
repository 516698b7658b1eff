"""How far one level's repeated runs differ: the floor under any prediction error.

A twin cannot be checked closer than the measurement repeats: two runs of the same
level on the same server differ by their step noise, the requests in the window and
the machine's load then. Per level with two or more runs, each metric's spread is
the largest run's value over the smallest one's, minus 1. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["level_spread", "spread_lines"]

METRICS = ("p90_interactivity", "p90_ttft_s", "output_tok_s")


def level_spread(runs: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    """max / min - 1 of each metric over ``runs`` (None: fewer than two positive values)."""
    out: dict[str, float | None] = {}
    for m in METRICS:
        have = [v for r in runs if (v := r.get(m)) is not None and v > 0]
        out[m] = max(have) / min(have) - 1 if len(have) >= 2 else None
    return out


def spread_lines(by_level: Mapping[int, Sequence[Mapping[str, float | None]]]) -> list[str]:
    """One line per level with repeated runs, and the largest spread of each metric."""
    lines: list[str] = []
    worst: dict[str, float] = {}
    for users in sorted(by_level):
        runs = by_level[users]
        if len(runs) < 2:
            continue
        s = level_spread(runs)
        parts = []
        for m in METRICS:
            v = s[m]
            parts.append(f"{m} {'n/a' if v is None else f'{v:.1%}'}")
            if v is not None:
                worst[m] = max(worst.get(m, 0.0), v)
        lines.append(f"rerun spread at {users} users ({len(runs)} runs, max/min - 1): "
                     + ", ".join(parts))
    if worst:
        lines.append("largest rerun spread: "
                     + ", ".join(f"{m} {v:.1%}" for m, v in worst.items()))
    return lines
