"""A/B(/C...) comparison: arms by label, levels by users, repeats pooled.

Every headline metric gets a ratio other/baseline at each level with a 95%
bootstrap interval (users resampled independently in each arm, the ratio taken
replicate by replicate). The fairness verdict comes first: an unfair set of
runs raises before any number is computed unless explicitly overridden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from analysis._capacity import CapacityRow, capacity_table
from analysis._errors import ResultError
from analysis._fairness import FairnessVerdict, judge_fairness
from analysis._metrics import RunSummary, Samples, measure, pool, summarize
from analysis._read import RunData
from analysis._slo import DEFAULT_TIERS, SloTier
from analysis._stats import BOOTSTRAP_REPS, bootstrap_quantiles, bootstrap_sums, metric_rng

__all__ = ["Comparison", "HEADLINE", "Level", "Ratio", "compare_runs"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class _Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    point: Callable[[RunSummary], float | None]
    replicates: Callable[[Samples, np.random.Generator], np.ndarray | None]


_Reps = Callable[[Samples, np.random.Generator], np.ndarray | None]


def _quantile_reps(name: str, pct: float, invert: bool = False) -> _Reps:
    def reps(s: Samples, rng: np.random.Generator) -> np.ndarray | None:
        v, g = s.values[name], s.groups[name]
        if len(v) == 0 or len(np.unique(g)) < 2:
            return None
        r = bootstrap_quantiles(v, g, [pct], reps=BOOTSTRAP_REPS, rng=rng,
                                weights=s.weights.get(name))[:, 0]
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
        r = bootstrap_sums(tokens, reps=BOOTSTRAP_REPS, rng=rng) / s.window_s
        if per_gpu:
            return r / s.gpu_count if s.gpu_count else None
        return r
    return reps


HEADLINE: tuple[_Metric, ...] = (
    _Metric("interactivity.p90", "P90 interactivity (1/P90 TPOT)", "tok/s/user", True,
            lambda s: s.interactivity.p90, _quantile_reps("tpot", 90.0, invert=True)),
    _Metric("interactivity.p50", "P50 interactivity (1/P50 TPOT)", "tok/s/user", True,
            lambda s: s.interactivity.p50, _quantile_reps("tpot", 50.0, invert=True)),
    _Metric("interactivity_user.p90", "P90 interactivity per user lane", "tok/s/user", True,
            lambda s: s.interactivity_user.p90, _quantile_reps("interactivity_user", 10.0)),
    _Metric("decode_tok_s_per_gpu", "decode throughput per GPU", "tok/s/GPU", True,
            lambda s: s.decode_tok_s_per_gpu, _rate_reps("user_decode_tokens", per_gpu=True)),
    _Metric("decode_tok_s", "decode throughput", "tok/s", True,
            lambda s: s.decode_tok_s, _rate_reps("user_decode_tokens")),
    _Metric("output_tok_s", "output throughput", "tok/s", True,
            lambda s: s.output_tok_s, _rate_reps("user_output_tokens")),
    _Metric("prefill_tok_s", "prefill throughput (uncached)", "tok/s", True,
            lambda s: s.prefill_tok_s, _rate_reps("user_prefill_tokens")),
    _Metric("ttft.p50", "P50 TTFT", "s", False, lambda s: s.ttft.p50,
            _quantile_reps("ttft", 50.0)),
    _Metric("ttft.p90", "P90 TTFT", "s", False, lambda s: s.ttft.p90,
            _quantile_reps("ttft", 90.0)),
    _Metric("ttft_due.p90", "P90 TTFT from schedule", "s", False, lambda s: s.ttft_due.p90,
            _quantile_reps("ttft_due", 90.0)),
    _Metric("tpot.p90", "P90 TPOT", "s", False, lambda s: s.tpot.p90,
            _quantile_reps("tpot", 90.0)),
    _Metric("e2e.p90", "P90 E2E latency", "s", False, lambda s: s.e2e.p90,
            _quantile_reps("e2e", 90.0)),
    _Metric("session_latency.p90", "P90 session latency", "s", False,
            lambda s: s.session_latency.p90, _quantile_reps("session_latency", 90.0)),
)


class Ratio(_Model):
    metric: str
    label: str
    unit: str
    higher_is_better: bool
    baseline: float | None
    other: float | None
    ratio: float | None
    """other / baseline; None when either side is missing."""
    ci: tuple[float, float] | None = None
    better: bool | None = None
    """Whether the other arm is better (direction-aware); None when unknown."""
    sure: bool = False
    """Whether the 95% interval of the ratio excludes 1."""


class Level(_Model):
    users: int
    arms: dict[str, RunSummary]
    ratios: dict[str, list[Ratio]] = Field(default_factory=dict)
    """Per non-baseline arm label, the ratios against the baseline."""


class Comparison(_Model):
    kind: str = "agentreplay-comparison"
    baseline: str
    arms: list[str]
    levels: list[Level]
    fairness: FairnessVerdict
    verdict: str
    tiers: list[SloTier]
    capacity: list[CapacityRow]
    incomplete: bool
    reasons: list[str] = Field(default_factory=list)
    simulated: bool


def _ratio(metric: _Metric, a: RunSummary, b: RunSummary, sa: Samples, sb: Samples,
           seed: int, users: int, arm: str) -> Ratio:
    pa, pb = metric.point(a), metric.point(b)
    ratio = pb / pa if pa and pb is not None and pa > 0 else None
    ci = None
    if ratio is not None:
        rng_a = metric_rng(seed, f"{metric.key}/{users}/{a.label}")
        rng_b = metric_rng(seed, f"{metric.key}/{users}/{arm}")
        ra, rb = metric.replicates(sa, rng_a), metric.replicates(sb, rng_b)
        if ra is not None and rb is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                rr = rb / ra
            rr = rr[np.isfinite(rr)]
            if len(rr) >= 0.9 * BOOTSTRAP_REPS:
                lo, hi = np.quantile(rr, [0.025, 0.975])
                ci = (float(lo), float(hi))
    better = None if ratio is None or ratio == 1 else (ratio > 1) == metric.higher_is_better
    sure = ci is not None and (ci[0] > 1 or ci[1] < 1)
    return Ratio(metric=metric.key, label=metric.label, unit=metric.unit,
                 higher_is_better=metric.higher_is_better, baseline=pa, other=pb,
                 ratio=ratio, ci=ci, better=better, sure=sure)


def _pick_baseline(labels: list[str], baseline: str | None) -> str:
    if baseline is not None:
        if baseline not in labels:
            raise ResultError(f"baseline arm {baseline!r} not among the runs' labels: "
                              + ", ".join(labels), field="baseline")
        return baseline
    return "auto" if "auto" in labels else labels[0]


def compare_runs(
    runs: Sequence[RunData], *, allow_unfair: bool = False, baseline: str | None = None,
    tiers: Sequence[SloTier] = DEFAULT_TIERS, seed: int = 0,
) -> Comparison:
    """Fairness verdict, then pooled summaries and ratios per level, then capacity."""
    if not runs:
        raise ResultError("no runs to analyse")
    labels = list(dict.fromkeys(r.manifest.label for r in runs))
    base = _pick_baseline(labels, baseline)
    arms = [base] + [x for x in labels if x != base]
    ordered = sorted(runs, key=lambda r: (arms.index(r.manifest.label), r.manifest.load.users))
    verdict_f = judge_fairness([r.manifest for r in ordered], allow_unfair=allow_unfair,
                               require_config=len(arms) > 1)
    tiers_t = tuple(tiers)

    groups: dict[tuple[int, str], list[Samples]] = {}
    for r in ordered:
        groups.setdefault((r.manifest.load.users, r.manifest.label), []).append(measure(r))
    levels: list[Level] = []
    for users in sorted({u for u, _ in groups}):
        pooled = {arm: pool(groups[(users, arm)]) for arm in arms if (users, arm) in groups}
        summaries = {arm: summarize(s, seed=seed, tiers=tiers_t) for arm, s in pooled.items()}
        ratios: dict[str, list[Ratio]] = {}
        if base in pooled:
            for arm in arms[1:]:
                if arm in pooled:
                    ratios[arm] = [
                        _ratio(m, summaries[base], summaries[arm], pooled[base], pooled[arm],
                               seed, users, arm) for m in HEADLINE]
        levels.append(Level(users=users, arms=summaries, ratios=ratios))
    cap = capacity_table(
        {arm: [lv.arms[arm] for lv in levels if arm in lv.arms] for arm in arms}, tiers_t)
    reasons = [x for r in ordered for x in (f"{r.manifest.run_id}: {y}" for y in r.reasons)]
    return Comparison(
        baseline=base, arms=arms, levels=levels, fairness=verdict_f,
        verdict=verdict_sentence(base, arms, levels, verdict_f), tiers=list(tiers_t),
        capacity=cap, incomplete=bool(reasons), reasons=reasons,
        simulated=any(r.manifest.simulated for r in runs),
    )


def _fmt_users(users: list[int]) -> str:
    text = ", ".join(str(u) for u in users)
    return text + (" user" if users == [1] else " users")


def _span(rs: list[float]) -> str:
    lo, hi = f"{min(rs):.2f}x", f"{max(rs):.2f}x"
    return lo if lo == hi else f"{lo} to {hi}"


def verdict_sentence(
    base: str, arms: list[str], levels: list[Level], fairness: FairnessVerdict
) -> str:
    """One plain sentence per other arm: where it wins, by how much, how sure."""
    prefix = "" if fairness.fair else "WARNING, UNFAIR COMPARISON: "
    if len(arms) == 1:
        parts = []
        for lv in levels:
            p90 = lv.arms[base].interactivity.p90
            parts.append(f"{_fmt_users([lv.users])}: P90 interactivity "
                         + (f"{p90:.1f} tok/s/user" if p90 is not None else "n/a"))
        return prefix + f"Single arm {base!r} (no comparison): " + "; ".join(parts) + "."
    sentences = []
    for arm in arms[1:]:
        groups: dict[str, list[tuple[int, float]]] = {
            "wins": [], "losses": [], "unsure": [], "no_ci": []}
        for lv in levels:
            r = next((x for x in lv.ratios.get(arm, []) if x.metric == "interactivity.p90"), None)
            if r is None or r.ratio is None:
                continue
            key = ("no_ci" if r.ci is None else "unsure" if not r.sure
                   else "wins" if r.better else "losses")
            groups[key].append((lv.users, r.ratio))
        if not any(groups.values()):
            sentences.append(f"{arm} vs {base}: no level has P90 interactivity for both arms.")
            continue
        bits = []
        texts = {
            "wins": "faster than {b} at {u} (P90 interactivity {s} of {b}; 95% interval "
                    "excludes 1)",
            "losses": "slower than {b} at {u} (P90 interactivity {s} of {b}; 95% interval "
                      "excludes 1)",
            "unsure": "not distinguishable from {b} at {u} (P90 interactivity {s}; 95% "
                      "interval includes 1)",
            "no_ci": "at {u} P90 interactivity {s} of {b}, but with no interval (fewer than "
                     "two users per arm), so not established",
        }
        for key, template in texts.items():
            g = groups[key]
            if g:
                bits.append(template.format(b=base, u=_fmt_users([u for u, _ in g]),
                                            s=_span([x for _, x in g])))
        sentences.append(f"{arm} is " + "; ".join(bits) + ".")
    return prefix + " ".join(sentences)
