"""The comparison's verdict in plain sentences: who wins where, by how much, how
sure, and what stops a difference from being established."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from analysis.judge._capacity import CapacityRow
from analysis.judge._fairness import FairnessVerdict
from analysis.schema import Validity

if TYPE_CHECKING:
    from analysis.judge._comparison import Level

__all__ = ["verdict_sentence"]

_HEAD = "interactivity.p90"


def _span(rs: list[float]) -> str:
    lo, hi = f"{min(rs):.2f}x", f"{max(rs):.2f}x"
    return lo if lo == hi else f"{lo} to {hi}"


def _levels(labels: list[str]) -> str:
    return ", ".join(labels)


def _failures(levels: Sequence[Level], max_share: float) -> list[str]:
    out = []
    for lv in levels:
        for arm, s in lv.arms.items():
            c = s.counts
            if c.failure_share is not None and c.failure_share > max_share:
                out.append(f"at {lv.load.label}, {c.failure_share:.0%} of {arm}'s requests "
                           f"failed or were incomplete ({c.error} error, {c.timeout} timeout, "
                           f"{c.incomplete} incomplete), so it fails every SLO tier")
    return out


def _validity_text(v: Validity) -> str:
    """Invalid: the reasons in full (they void the verdict). Caveats: their codes
    only; the validity block lists them in full."""
    if v.verdict == "valid":
        return ""
    bad = [r for r in v.reasons if r.severity == "invalid"]
    if bad:
        more = f" (+{len(bad) - 4} more)" if len(bad) > 4 else ""
        return "INVALID: " + "; ".join(r.message for r in bad[:4]) + more + ". "
    codes = list(dict.fromkeys(r.code for r in v.reasons))
    return "With caveats (" + ", ".join(codes) + "; see validity). "


def _arm_sentence(arm: str, base: str, levels: Sequence[Level]) -> str:
    groups: dict[str, list[tuple[str, float]]] = {
        "wins": [], "losses": [], "unsure": [], "weak": [], "no_ci": []}
    why: list[str] = []
    for lv in levels:
        r = next((x for x in lv.ratios.get(arm, []) if x.metric == _HEAD), None)
        if r is None or r.ratio is None:
            continue
        if r.ci is None:
            key = "no_ci"
        elif not r.sure:
            key = "unsure"
        elif not r.established:
            key = "weak"
            if r.not_established:
                why.append(f"at {lv.load.label}: {r.not_established}")
        else:
            key = "wins" if r.better else "losses"
        groups[key].append((lv.load.label, r.ratio))
    if not any(groups.values()):
        return f"{arm} vs {base}: no level has P90 interactivity for both arms."
    texts = {
        "wins": "faster than {b} at {u} (P90 interactivity {s} of {b}; established: 95% "
                "interval excludes 1)",
        "losses": "slower than {b} at {u} (P90 interactivity {s} of {b}; established: 95% "
                  "interval excludes 1)",
        "unsure": "not distinguishable from {b} at {u} (P90 interactivity {s}; 95% "
                  "interval includes 1)",
        "weak": "at {u} P90 interactivity {s} of {b}, not established (" + "; ".join(why) + ")",
        "no_ci": "at {u} P90 interactivity {s} of {b}, but with no interval (fewer than "
                 "two users per arm), so not established",
    }
    bits = [t.format(b=base, u=_levels([u for u, _ in groups[k]]),
                     s=_span([x for _, x in groups[k]]))
            for k, t in texts.items() if groups[k]]
    return f"{arm} is " + "; ".join(bits) + "."


def verdict_sentence(
    base: str, arms: list[str], levels: Sequence[Level], fairness: FairnessVerdict,
    validity: Validity | None = None, capacity: Sequence[CapacityRow] = (),
    max_failure_share: float = 0.05,
) -> str:
    """One plain sentence per other arm, the failures that fail tiers, and the
    validity verdict first when it is not ``valid``."""
    prefix = "" if fairness.fair else "WARNING, UNFAIR COMPARISON: "
    if validity is not None:
        prefix += _validity_text(validity)
    fails = _failures(levels, max_failure_share)
    tail = (" Failures: " + "; ".join(fails) + ".") if fails else ""
    if len(arms) == 1:
        parts = []
        for lv in levels:
            p90 = lv.arms[base].interactivity.p90
            parts.append(f"{lv.load.label}: P90 interactivity "
                         + (f"{p90:.1f} tok/s/user" if p90 is not None else "n/a"))
        return prefix + f"Single arm {base!r} (no comparison): " + "; ".join(parts) + "." + tail
    sentences = [_arm_sentence(arm, base, levels) for arm in arms[1:]]
    if levels and all(lv.single_run for lv in levels):
        sentences.append("One run per arm and level: the intervals do not cover drift "
                         "between runs (repeat with --repeats for that).")
    return prefix + " ".join(sentences) + tail
