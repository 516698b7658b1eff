"""A/B(/C...) comparison: arms by label, levels by load, repeats pooled.

Every headline metric gets a ratio other/baseline at each level with a 95%
bootstrap interval (users resampled independently in each arm, runs first when
repeats are pooled, the ratio taken replicate by replicate). The fairness
verdict comes first: an unfair set of runs raises before any number is computed
unless explicitly overridden. A difference is *established* only when its
interval excludes 1, each arm has enough users and requests (``Rules``), and no
run of the level is invalid; otherwise the ratio says why not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from analysis.judge._capacity import CapacityRow, capacity_table
from analysis.judge._drift import drift_evidence, drift_of, drift_reasons
from analysis.judge._fairness import FairnessVerdict, judge_fairness
from analysis.judge._level import Level, Ratio
from analysis.judge._rules import DEFAULT_RULES, Rules
from analysis.judge._validity import (
    assess_comparison,
    assess_run,
    length_evidence,
    merge_validity,
)
from analysis.judge._verdict import verdict_sentence
from analysis.metrics import (
    BOOTSTRAP_REPS,
    Metric,
    RunSummary,
    Samples,
    bootstrap_quantiles,
    bootstrap_sums,
    clusters_of,
    measure,
    metric,
    metric_rng,
    pool,
    small_sample_widening,
    summarize,
)
from analysis.read import RunData
from analysis.schema import (
    DEFAULT_TIERS,
    RESULT_FORMAT_VERSION,
    ResultError,
    RunManifest,
    SloTier,
    Validity,
    level_of,
)
from analysis.text import plural

__all__ = ["Comparison", "HEADLINE", "Level", "Ratio", "compare_runs"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class _Metric:
    """A headline metric: its catalogue key (label, unit, direction come from there),
    how to read it from a summary and how to resample it."""

    key: str
    point: Callable[[RunSummary], float | None]
    replicates: Callable[[Samples, np.random.Generator], np.ndarray | None]

    def __post_init__(self) -> None:
        metric(self.key)  # a key missing from the catalogue fails at import, not in a report

    @property
    def info(self) -> Metric:
        return metric(self.key)

    @property
    def label(self) -> str:
        return self.info.label

    @property
    def unit(self) -> str:
        return self.info.unit

    @property
    def higher_is_better(self) -> bool:
        return self.info.higher_is_better


_Reps = Callable[[Samples, np.random.Generator], np.ndarray | None]


def _quantile_reps(name: str, pct: float, invert: bool = False) -> _Reps:
    def reps(s: Samples, rng: np.random.Generator) -> np.ndarray | None:
        v, g = s.values[name], s.groups[name]
        if name in s.censored and len(s.censored[name]):
            v = np.concatenate([v, s.censored[name]])
            g = np.concatenate([g, s.censored_groups[name]])
        if len(v) == 0 or len(np.unique(g)) < 2:
            return None
        r = bootstrap_quantiles(v, g, [pct], reps=BOOTSTRAP_REPS, rng=rng,
                                weights=s.weights.get(name), clusters=clusters_of(s))[:, 0]
        if invert:
            with np.errstate(divide="ignore"):
                return 1.0 / r
        return r
    return reps


def _rate_reps(attr: str, per_gpu: bool = False) -> _Reps:
    def reps(s: Samples, rng: np.random.Generator) -> np.ndarray | None:
        tokens = getattr(s, attr)
        if s.window_s is None or s.window_s <= 0 or len(tokens) < 2:
            return None
        r = bootstrap_sums(tokens, reps=BOOTSTRAP_REPS, rng=rng,
                           clusters=clusters_of(s)) / s.window_s
        if per_gpu:
            return r / s.gpu_count if s.gpu_count else None
        return r
    return reps


HEADLINE: tuple[_Metric, ...] = (
    _Metric("interactivity.p90", lambda s: s.interactivity.p90,
            _quantile_reps("tpot", 90.0, invert=True)),
    _Metric("interactivity.p50", lambda s: s.interactivity.p50,
            _quantile_reps("tpot", 50.0, invert=True)),
    _Metric("interactivity_user.p90", lambda s: s.interactivity_user.p90,
            _quantile_reps("interactivity_user", 10.0)),
    _Metric("decode_tok_s_per_gpu", lambda s: s.decode_tok_s_per_gpu,
            _rate_reps("user_decode_tokens", per_gpu=True)),
    _Metric("decode_tok_s", lambda s: s.decode_tok_s, _rate_reps("user_decode_tokens")),
    _Metric("output_tok_s", lambda s: s.output_tok_s, _rate_reps("user_output_tokens")),
    _Metric("prefill_tok_s", lambda s: s.prefill_tok_s, _rate_reps("user_prefill_tokens")),
    _Metric("ttft.p50", lambda s: s.ttft.p50, _quantile_reps("ttft", 50.0)),
    _Metric("ttft.p90", lambda s: s.ttft.p90, _quantile_reps("ttft", 90.0)),
    _Metric("ttft_due.p90", lambda s: s.ttft_due.p90, _quantile_reps("ttft_due", 90.0)),
    _Metric("tpot.p90", lambda s: s.tpot.p90, _quantile_reps("tpot", 90.0)),
    _Metric("e2e.p90", lambda s: s.e2e.p90, _quantile_reps("e2e", 90.0)),
    _Metric("session_latency.p90", lambda s: s.session_latency.p90,
            _quantile_reps("session_latency", 90.0)),
)
"""The metrics every comparison ratios, in the order summary.json lists them; their
wording is the catalogue's (``analysis.metrics.METRICS``)."""


class Comparison(_Model):
    """What summary.json holds: every level, ratio, capacity row and verdict."""

    format_version: int = RESULT_FORMAT_VERSION
    kind: str = "agentreplay-comparison"
    baseline: str
    arms: list[str]
    levels: list[Level]
    fairness: FairnessVerdict
    verdict: str
    tiers: list[SloTier]
    capacity: list[CapacityRow]
    incomplete: bool
    """True when a run was cut short or a planned run is missing (``missing``)."""
    reasons: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    """Planned runs that did not finish (an interrupted comparison): no capacity is
    claimed from their levels."""
    simulated: bool
    validity: Validity = Field(default_factory=Validity)
    rules: Rules = DEFAULT_RULES
    run_validity: dict[str, Validity] = Field(default_factory=dict)
    """Per run id."""
    scenario: str | None = None
    """The named replay rules the runs followed (``--scenario``), when they all did."""
    scenario_satisfied: bool | None = None
    """True when every run satisfied the scenario (None: no scenario)."""
    scenario_notes: list[str] = Field(default_factory=list)
    """Why not: each run's reasons, prefixed by its run id."""


def _ratio(metric: _Metric, a: RunSummary, b: RunSummary, sa: Samples, sb: Samples,
           seed: int, level: str, arm: str, evidence: str | None,
           min_effect: float) -> Ratio:
    pa, pb = metric.point(a), metric.point(b)
    ratio = pb / pa if pa and pb is not None and pa > 0 else None
    ci = None
    if ratio is not None:
        rng_a = metric_rng(seed, f"{metric.key}/{level}/{a.label}")
        rng_b = metric_rng(seed, f"{metric.key}/{level}/{arm}")
        ra, rb = metric.replicates(sa, rng_a), metric.replicates(sb, rng_b)
        if ra is not None and rb is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                rr = rb / ra
            rr = rr[np.isfinite(rr) & (rr > 0)]
            if len(rr) >= 0.9 * BOOTSTRAP_REPS:
                ci = _widened(ratio, rr, min(sa.n_users, sb.n_users))
    better = None if ratio is None or ratio == 1 else (ratio > 1) == metric.higher_is_better
    sure = ci is not None and (ci[0] > 1 or ci[1] < 1)
    if sure and evidence is None and ratio is not None and abs(ratio - 1) < min_effect:
        evidence = (f"a {abs(ratio - 1):.1%} difference is below the {min_effect:.0%} that "
                    "drift between runs of one machine can cause")
    return Ratio(metric=metric.key, label=metric.label, unit=metric.unit,
                 higher_is_better=metric.higher_is_better, baseline=pa, other=pb,
                 ratio=ratio, ci=ci, better=better, sure=sure,
                 established=sure and evidence is None,
                 not_established=evidence if sure else None)


def _widened(point: float, reps: np.ndarray, units: int) -> tuple[float, float] | None:
    """The replicates' 95% interval, widened about the point in log space for the
    few units it rests on (``small_sample_widening``)."""
    lo, hi = np.log(np.quantile(reps, [0.025, 0.975]))
    mid = float(np.log(point))
    lo, hi = min(lo, mid), max(hi, mid)
    k = small_sample_widening(units)
    out = float(np.exp(mid - k * (mid - lo))), float(np.exp(mid + k * (hi - mid)))
    return out if np.isfinite(out).all() else None


def _evidence(sa: Samples, sb: Samples, validity: Validity, rules: Rules) -> str | None:
    """Why no difference between two arms at a level can be established, or None."""
    for s in (sa, sb):
        sent = len(s.req_status)
        if s.n_users < rules.min_users:
            where = f" across {len(s.runs)} runs" if len(s.runs) > 1 else ""
            users = plural(s.n_users, 'user')
            return (f"arm {s.label!r} has {users}{where}, fewer than {rules.min_users} "
                    "independent users per arm")
        if sent < rules.min_requests:
            return (f"arm {s.label!r} sent {plural(sent, 'request')} in the window, fewer than "
                    f"{rules.min_requests} per arm")
    if validity.verdict == "invalid":
        codes = sorted({r.code for r in validity.reasons if r.severity == "invalid"})
        return "a run of this level is invalid (" + ", ".join(codes) + ")"
    return None


def _pick_baseline(labels: list[str], baseline: str | None) -> str:
    if baseline is not None:
        if baseline not in labels:
            raise ResultError(f"baseline arm {baseline!r} not among the runs' labels: "
                              + ", ".join(labels), field="baseline")
        return baseline
    return "auto" if "auto" in labels else labels[0]


def compare_runs(
    runs: Sequence[RunData], *, allow_unfair: bool = False, baseline: str | None = None,
    tiers: Sequence[SloTier] = DEFAULT_TIERS, seed: int = 0, rules: Rules = DEFAULT_RULES,
    missing: Sequence[str] = (),
) -> Comparison:
    """Fairness verdict, then pooled summaries and ratios per level, then capacity.

    ``missing``: planned runs that did not finish. A level holding a run cut short
    feeds no capacity (a capacity bracket needs every level below it measured in
    full); with runs missing, the comparison is stamped incomplete."""
    if not runs:
        raise ResultError("no runs to analyse")
    labels = list(dict.fromkeys(r.manifest.label for r in runs))
    base = _pick_baseline(labels, baseline)
    arms = [base] + [x for x in labels if x != base]
    ordered = sorted(runs, key=lambda r: (arms.index(r.manifest.label),
                                          level_of(r.manifest).key()))
    verdict_f = judge_fairness([r.manifest for r in ordered], allow_unfair=allow_unfair,
                               require_config=len(arms) > 1)
    tiers_t = tuple(tiers)
    mf = rules.max_failure_share

    groups: dict[tuple[tuple[str, float], str], list[Samples]] = {}
    per_run: dict[tuple[tuple[str, float], str], list[tuple[str, Samples, RunSummary]]] = {}
    run_valid: dict[str, Validity] = {}
    name = run_names(ordered)
    by_level: dict[tuple[str, float], list[str]] = {}
    for r in ordered:
        smp = measure(r)
        key = level_of(r.manifest).key()
        groups.setdefault((key, r.manifest.label), []).append(smp)
        one = summarize(smp, bootstrap=False, tiers=(), max_failure_share=mf)
        per_run.setdefault((key, r.manifest.label), []).append((r.manifest.run_id, smp, one))
        run_valid[r.manifest.run_id] = assess_run(r, rules=rules, summary=one)
        by_level.setdefault(key, []).append(r.manifest.run_id)
    started = {r.manifest.run_id: r.manifest.started_at for r in ordered}
    for reps in per_run.values():
        reps.sort(key=lambda x: str(started[x[0]]))
    levels: list[Level] = []
    cut_short = {r.manifest.run_id for r in ordered if r.reasons}
    cap_input: dict[str, list[RunSummary]] = {a: [] for a in arms}
    for key in sorted(by_level):
        pooled = {arm: pool(groups[(key, arm)]) for arm in arms if (key, arm) in groups}
        summaries = {arm: summarize(s, seed=seed, tiers=tiers_t, max_failure_share=mf)
                     for arm, s in pooled.items()}
        load = next(iter(pooled.values())).level
        lv_valid = assess_comparison([(name[rid], run_valid[rid]) for rid in by_level[key]],
                                     [(load.label, summaries)], rules=rules)
        drifts, rep_values = drift_of(
            load.label, HEADLINE, {a: per_run[(key, a)] for a in arms if (key, a) in per_run},
            seed)
        if drifts:
            lv_valid = Validity(verdict="invalid" if lv_valid.verdict == "invalid"
                                else "caveats", reasons=lv_valid.reasons + drift_reasons(drifts))
        for arm, smp in pooled.items():
            summaries[arm].validity = merge_validity(
                [(name[rid], run_valid[rid]) for rid in smp.runs])
            if not cut_short.intersection(smp.runs):
                cap_input[arm].append(summaries[arm])
        ratios: dict[str, list[Ratio]] = {}
        evidence: dict[str, str | None] = {}
        if base in pooled:
            for arm in arms[1:]:
                if arm in pooled:
                    ev = _evidence(pooled[base], pooled[arm], lv_valid, rules)
                    evidence[arm] = ev
                    pair = {base: summaries[base], arm: summaries[arm]}
                    ratios[arm] = []
                    for m in HEADLINE:
                        rt = _ratio(m, summaries[base], summaries[arm], pooled[base],
                                    pooled[arm], seed, load.label, arm,
                                    ev or length_evidence(m.key, pair, rules), rules.min_effect)
                        why = drift_evidence(m.key, rt.ratio, base, arm, drifts, rep_values,
                                             rules.min_effect) if rt.established else None
                        if why is not None:
                            rt = rt.model_copy(update={"established": False,
                                                       "not_established": why})
                        ratios[arm].append(rt)
        levels.append(Level(
            load=load, arms=summaries,
            ratios=ratios, validity=lv_valid, evidence=evidence,
            single_run=all(len(s.runs) == 1 for s in pooled.values()), drift=drifts))
    cap = capacity_table({a: v for a, v in cap_input.items() if v}, tiers_t)
    reasons = [x for r in ordered for x in (f"{name[r.manifest.run_id]}: {y}"
                                            for y in r.reasons)]
    validity = assess_comparison([(name[rid], v) for rid, v in run_valid.items()],
                                 [(lv.load.label, lv.arms) for lv in levels], rules=rules)
    all_drift = [d for lv in levels for d in lv.drift]
    if all_drift:
        validity = Validity(verdict="invalid" if validity.verdict == "invalid" else "caveats",
                            reasons=validity.reasons + drift_reasons(all_drift))
    return Comparison(
        baseline=base, arms=arms, levels=levels, fairness=verdict_f,
        verdict=verdict_sentence(base, arms, levels, verdict_f, validity, cap, mf),
        tiers=list(tiers_t), capacity=cap, incomplete=bool(reasons or missing), reasons=reasons,
        missing=list(missing),
        simulated=any(r.manifest.simulated for r in runs), validity=validity, rules=rules,
        run_validity=run_valid, **_scenario_stamp([r.manifest for r in ordered], name),
    )


def run_names(runs: Sequence[RunData]) -> dict[str, str]:
    """Run id -> what a caveat calls the run: its directory's name (``auto-u8-r0``, the
    name a reader finds on disk), or the id where two runs' directories share a name."""
    names = {r.manifest.run_id: PurePath(r.path).name or r.manifest.run_id for r in runs}
    seen = Counter(names.values())
    return {rid: n if seen[n] == 1 else rid for rid, n in names.items()}


def _scenario_stamp(manifests: Sequence[RunManifest],
                    name: dict[str, str] | None = None) -> dict[str, Any]:
    """The comparison's scenario fields from its runs' stamps: satisfied only when
    every run followed the same scenario and satisfied it."""
    named = sorted({m.scenario for m in manifests if m.scenario is not None})
    if not named:
        return {}
    notes: list[str] = []

    def call(m: RunManifest) -> str:
        return (name or {}).get(m.run_id, m.run_id)

    for m in manifests:
        if m.scenario != named[0]:
            how = "without --scenario" if m.scenario is None else f"scenario {m.scenario}"
            notes.append(f"{call(m)}: ran {how}")
            continue
        notes += [f"{call(m)}: {x}" for x in m.scenario_notes]
        if m.scenario_satisfied is None:
            notes.append(f"{call(m)}: not judged (the run did not close normally)")
    satisfied = not notes and all(m.scenario_satisfied is True for m in manifests)
    return {"scenario": named[0], "scenario_satisfied": satisfied, "scenario_notes": notes}
