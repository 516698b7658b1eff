"""The comparison's verdict in plain sentences: who wins where, by how much, how
sure, and what stops a difference from being established."""

from __future__ import annotations

import math
from collections.abc import Sequence

from analysis.judge._capacity import CapacityRow
from analysis.judge._fairness import FairnessVerdict
from analysis.judge._level import Level, Ratio
from analysis.metrics import metric
from analysis.schema import Validity

__all__ = ["NO_EVIDENCE_SPAN", "noise_floor_text", "ratio_interval_text", "verdict_sentence"]

_HEAD = "interactivity.p90"


NO_EVIDENCE_SPAN = 10.0
"""A ratio interval whose ends are more than this factor apart (or not positive and
finite) says nothing a reader can use: it is printed as "no evidence"."""


def ratio_interval_text(ci: tuple[float, float] | None) -> str:
    """``[1.82x – 1.92x]``, ``no interval`` or ``no evidence`` (an interval spanning
    more than a factor of ten, e.g. 0.00x to 90514x from two requests)."""
    if ci is None:
        return "no interval"
    lo, hi = ci
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0 or hi / lo > NO_EVIDENCE_SPAN:
        return "no evidence"
    return f"[{lo:.2f}x \u2013 {hi:.2f}x]"


def _ratio_words(ratio: float) -> str:
    """P90 interactivity is higher-better: above 1 the arm is faster."""
    if ratio > 1:
        return f"{ratio:.2f}x faster"
    if ratio < 1:
        return f"{ratio:.2f}x (slower)"
    return "1.00x (the same)"


def _failures(levels: Sequence[Level], max_share: float) -> list[str]:
    out = []
    for lv in levels:
        for arm, s in lv.arms.items():
            c = s.counts
            if c.failure_share is not None and c.failure_share > max_share:
                out.append(f"at {lv.load.label}, {c.failure_share:.0%} of {arm}'s requests "
                           f"failed or were incomplete ({c.error} error, {c.timeout} timeout, "
                           f"{c.incomplete} incomplete), so it fails every SLO tier"
                           + (" (but for requests cut by the drain while on pace)"
                              if c.incomplete else ""))
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


def _level_sentence(label: str, r: Ratio) -> str:
    """``at 4 users: 1.88x faster [1.82x – 1.92x], established``: the ratio, its
    interval, and how sure, in that order."""
    assert r.ratio is not None
    if r.ci is None:
        return (f"at {label}: {_ratio_words(r.ratio)} as a point estimate only, not "
                "established (no interval: fewer than two users per arm)")
    head = f"at {label}: {_ratio_words(r.ratio)} {ratio_interval_text(r.ci)}"
    if not r.sure:
        return head + ", not distinguishable (the interval includes 1)"
    if not r.established:
        return head + ", not established" + (f" ({r.not_established})"
                                              if r.not_established else "")
    return head + ", established (the 95% interval excludes 1)"


def _arm_sentence(arm: str, base: str, levels: Sequence[Level]) -> str:
    """One short sentence per level: ``arm vs base, P90 interactivity: at ...; at ...``."""
    bits = []
    for lv in levels:
        r = next((x for x in lv.ratios.get(arm, []) if x.metric == _HEAD), None)
        if r is not None and r.ratio is not None:
            bits.append(_level_sentence(lv.load.label, r))
    head = metric(_HEAD).label
    if not bits:
        return f"{arm} vs {base}: no level has {head} for both arms."
    return f"{arm} vs {base}, {head}: " + "; ".join(bits) + "."


def noise_floor_text(base: str, arms: Sequence[str], levels: Sequence[Level]) -> str:
    """An A/A run's measured noise floor: per level the head ratio and its interval, and
    the largest departure from 1 any of them reached (interval ends included)."""
    bits, worst = [], 0.0
    for lv in levels:
        for arm in arms:
            if arm == base:
                continue
            r = next((x for x in lv.ratios.get(arm, []) if x.metric == _HEAD), None)
            if r is None or r.ratio is None:
                continue
            bits.append(f"{arm} at {lv.load.label} {r.ratio:.2f}x {ratio_interval_text(r.ci)}")
            ends = [r.ratio, *(r.ci or ())]
            worst = max([worst, *(abs(math.log(x)) for x in ends if x > 0 and math.isfinite(x))])
    if not bits:
        return "Noise floor: no level has a ratio to measure it by."
    return (f"Noise floor ({metric(_HEAD).label}, identical arms): " + "; ".join(bits)
            + f"; the largest departure from 1.00x is {math.expm1(worst):.1%}.")


def verdict_sentence(
    base: str, arms: list[str], levels: Sequence[Level], fairness: FairnessVerdict,
    validity: Validity | None = None, capacity: Sequence[CapacityRow] = (),
    max_failure_share: float = 0.05,
) -> str:
    """One plain sentence per other arm, the failures that fail tiers, and the
    validity verdict first when it is not ``valid``."""
    prefix = "" if fairness.fair else "WARNING, UNFAIR COMPARISON: "
    if fairness.identical:
        prefix = "A/A RUN (the arms do not differ; any difference is noise): "
    if validity is not None:
        prefix += _validity_text(validity)
    fails = _failures(levels, max_failure_share)
    tail = (" Failures: " + "; ".join(fails) + ".") if fails else ""
    if len(arms) == 1:
        head, parts = metric(_HEAD), []
        for lv in levels:
            p90 = lv.arms[base].interactivity.p90
            parts.append(f"{lv.load.label}: {head.label} "
                         + (f"{p90:.1f} {head.unit}" if p90 is not None else "n/a"))
        return prefix + f"Single arm {base!r} (no comparison): " + "; ".join(parts) + "." + tail
    sentences = [_arm_sentence(arm, base, levels) for arm in arms[1:]]
    if fairness.identical:
        sentences.append(noise_floor_text(base, arms, levels))
    if levels and all(lv.single_run for lv in levels):
        sentences.append("One run per arm and level: the intervals do not cover drift "
                         "between runs (repeat with --repeats for that).")
    return prefix + " ".join(sentences) + tail
