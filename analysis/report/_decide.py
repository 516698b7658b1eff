"""The decision, said once: per SLO tier each arm's capacity and users per GPU, the arms'
capacity ratio, the validity, then the interactivity verdict.

Every surface (``compare``, ``demo``, ``compare --search``, ``plan``, ``report`` and the
top of report.html) prints these same lines, so a reader never meets two wordings of
one answer. Nothing is computed here that analysis did not already judge: the
brackets, their ratio and the verdict come from the ``Comparison``; a twin's estimate
(``twin-plan.json`` tiers) is added beside the measured bracket, labelled modelled,
never in its place. A bound is printed as a bound (``≥ 4.00``), never as a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from analysis.judge import CapacityRow, Comparison, verdict_sentence
from analysis.report._decision import level_label, measured_text
from analysis.report._format import per_gpu_text
from analysis.report._stored_plan import usable_twin
from analysis.text import plural

__all__ = ["ArmCapacity", "Decision", "TierDecision", "decide", "twin_text"]


@dataclass(frozen=True)
class ArmCapacity:
    """One arm's capacity at one tier: the measured bracket, and a twin's if stored."""

    arm: str
    measured: str
    """``between 4 and 16 users`` (the bracket's own words)."""
    per_gpu: str
    modelled: str = ""
    """The arm's own twin (fitted on its runs: the demo) at this tier, labelled
    modelled and checked against the measured bracket; empty without one."""

    def text(self) -> str:
        """``auto below 16 users measured (< 1.00 users per GPU), indeterminate at 4
        (...)``: the bracket's note after its label, joined by commas, since semicolons
        part the arms of a tier."""
        words, _, note = self.measured.partition("; ")
        text = (f"{self.arm or 'the run'} capacity unknown" if words == "unknown" else
                f"{self.arm or 'the run'} {words} measured ({self.per_gpu})")
        if note:
            text += ", " + note.replace("; ", ", ")
        return text + (f", {self.modelled}" if self.modelled else "")


@dataclass(frozen=True)
class TierDecision:
    """One SLO tier: each arm's capacity, then each other arm's ratio to the baseline."""

    tier: str
    arms: list[ArmCapacity]
    ratios: list[str]
    modelled: str = ""
    """A stored twin's estimate at this tier, labelled modelled; empty without one."""

    def text(self) -> str:
        parts = [a.text() for a in self.arms] + self.ratios
        if self.modelled:
            parts.append(self.modelled)
        return f"Capacity at {self.tier}: " + "; ".join(parts) + "."


@dataclass(frozen=True)
class Decision:
    """The decision's parts and its lines (what every surface prints, in order)."""

    tiers: list[TierDecision]
    validity: str
    interactivity: str
    simulated: bool
    single: bool = False
    """One arm: the last line says what it measured (no comparison to judge)."""

    def lines(self) -> list[str]:
        out = [t.text() for t in self.tiers]
        if not out:
            out.append("Capacity: no SLO tier judged (no complete level).")
        if self.simulated:
            out[0] = "[SIMULATED] " + out[0]
        head = "Measured" if self.single else "Interactivity"
        return out + [f"Validity: {self.validity}.", f"{head}: {self.interactivity}"]

    def text(self) -> str:
        return " ".join(self.lines())


def _ratio_text(row: CapacityRow, baseline: str) -> str:
    r = row.ratio
    if r is None:
        return f"{row.arm} / {baseline} capacity: n/a"
    if r.verdict == "unknown":
        why = ("neither bracket bounds it" if r.low is None and r.high is None
               else f"the brackets allow {r.range_text()}")
        return f"{row.arm} / {baseline} capacity unknown, either arm may serve more ({why})"
    return f"{row.arm} / {baseline} capacity {r.range_text()} ({row.arm} {r.meaning()})"


def twin_text(rec: Mapping[str, Any], twin: Mapping[str, Any]) -> str:
    """A twin tier record (``twin-plan.json``) as ``twin (backend B, R replicas x G
    GPUs) modelled: between 8 and 16 users (...per GPU), prediction interval ...``."""
    replicas = int(twin.get("replicas") or 1)
    per = twin.get("gpus_per_replica")
    shape = plural(replicas, "replica") + (f" x {plural(int(per), 'GPU')}" if per else "")
    backend = f"backend {twin['backend']}, " if twin.get("backend") else ""
    text = f"twin ({backend}{shape}) modelled: {rec.get('text', 'n/a')}"
    lo, hi = (list(rec.get("bracket") or []) + [None, None])[:2]
    if per:
        text += f" ({per_gpu_text(lo, hi, replicas * int(per))})"
    if rec.get("interval"):
        text += f", prediction interval {rec['interval']}"
    return text


def _validity(c: Comparison) -> str:
    v = c.validity
    codes = list(dict.fromkeys(r.code for r in v.reasons if v.verdict != "valid"))
    return v.verdict.upper() + (f" ({', '.join(codes)})" if codes else "")


def _interactivity(c: Comparison) -> str:
    """The verdict without its validity prefix (the decision states validity itself);
    for one arm, what it measured at each level."""
    if len(c.arms) == 1:
        return "; ".join(measured_text(level_label(lv), lv.arms[c.arms[0]])
                         for lv in c.levels) + "."
    return verdict_sentence(c.baseline, c.arms, c.levels, c.fairness, None, c.capacity,
                            c.rules.max_failure_share)


def _tiers_of(twin: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    return {str(t.get("tier")): t for t in (twin or {}).get("tiers", [])
            if isinstance(t, Mapping)}


def _arm_twin_text(rec: Mapping[str, Any], twin: Mapping[str, Any], row: CapacityRow) -> str:
    """An arm's own twin beside its bracket, short (the decision stays on the first
    screen), and whether the two can both hold (the twin passes a level the arm failed,
    or fails one it passed: the measurement holds)."""
    lo, hi = (list(rec.get("bracket") or []) + [None, None])[:2]
    b = row.bracket
    outside = (lo is not None and b.failed is not None and lo >= b.failed) or \
        (hi is not None and b.passed is not None and hi <= b.passed)
    text = (f"its twin ({plural(int(twin.get('replicas') or 1), 'replica')}) modelled "
            f"{str(rec.get('text', 'n/a')).replace('; ', ', ')}")  # ';' parts the arms
    if rec.get("interval"):
        text += f", prediction interval {rec['interval']}"
    return text + (", outside the measured bracket (the measurement holds)" if outside
                   else ", consistent with the measured bracket")


def decide(c: Comparison, twin: Mapping[str, Any] | None = None) -> Decision:
    """The decision of a comparison, with a stored twin plan's tiers beside it: one
    twin's (``plan --twin``) after the tier's brackets, or each arm's own (``twins``,
    the demo's: one fitted per arm) beside that arm's bracket. A damaged stored plan is
    left out (``usable_twin``)."""
    twin = usable_twin(twin)
    per_arm = {str(t.get("arm")): t for t in (twin or {}).get("twins", [])
               if isinstance(t, Mapping)}
    arm_tiers = {a: _tiers_of(t) for a, t in per_arm.items()}
    twin_tiers = {} if per_arm else _tiers_of(twin)
    by_tier: dict[str, list[CapacityRow]] = {}
    for r in c.capacity:
        by_tier.setdefault(r.tier.label, []).append(r)
    tiers = []
    for label, rows in by_tier.items():
        rec = twin_tiers.get(rows[0].tier.name)
        beside = (twin or {}).get("arms")
        if isinstance(beside, list) and not any(r.arm in beside for r in rows):
            rec = None  # a twin of another backend or replica count than these runs
        arms = [ArmCapacity(
            arm=r.arm, measured=r.bracket.text(r.load_kind),
            per_gpu=per_gpu_text(r.bracket.passed, r.bracket.failed, r.gpu_count, r.load_kind),
            modelled=_arm_twin_text(own, per_arm[r.arm], r)
            if (own := arm_tiers.get(r.arm, {}).get(r.tier.name)) else "")
            for r in rows]
        ratios = [_ratio_text(r, c.baseline) for r in rows if r.arm != c.baseline]
        tiers.append(TierDecision(tier=label, arms=arms, ratios=ratios,
                                  modelled=twin_text(rec, twin or {}) if rec else ""))
    return Decision(tiers=tiers, validity=_validity(c), interactivity=_interactivity(c),
                    simulated=c.simulated, single=len(c.arms) == 1)
