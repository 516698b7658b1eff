"""From samples to a run summary: every declared metric, counts, SLO tiers, prefix reuse
and speculation."""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.metrics._catalogue import DECLARED
from analysis.metrics._energy import window_energy
from analysis.metrics._parts import Goodput, PrefixReuse, RequestCounts, Speculation
from analysis.metrics._run_summary import RunSummary
from analysis.metrics._samples import Samples
from analysis.metrics._stats import distribution, invert_distribution, metric_rng
from analysis.metrics._tiers import TierShares, judge_tier, tier_shares
from analysis.schema import DEFAULT_MAX_FAILURE_SHARE, DEFAULT_TIERS, SloTier

__all__ = ["clusters_of", "share", "summarize"]


def clusters_of(s: Samples) -> np.ndarray | None:
    """The run of each user when the sample pools several runs, else None."""
    return s.user_run if len(s.runs) > 1 else None


def share(num: float | None, den: float | None) -> float | None:
    """num / den; None when either is unknown or den is not positive (never 0 or NaN)."""
    if num is None or den is None or den <= 0:
        return None
    return float(num / den)


def _counts(s: Samples) -> RequestCounts:
    status = s.req_status
    n = len(status)
    per = {k: int((status == k).sum()) for k in ("ok", "error", "timeout", "incomplete",
                                                  "cancelled", "lost")}
    kinds: dict[str, int] = {}
    failed = status != "ok"
    if failed.any():
        labels = [k if k is not None else st for k, st in
                  zip(s.req_error_kind[failed], status[failed], strict=True)]
        u, c = np.unique(np.array(labels, dtype=str), return_counts=True)
        kinds = {str(a): int(b) for a, b in zip(u, c, strict=True)}
    fails = per["error"] + per["timeout"] + per["incomplete"] + per["lost"]
    return RequestCounts(
        total_records=s.total_records, in_window=n, **per, by_error_kind=kinds,
        error_rate=share(per["error"], n), timeout_rate=share(per["timeout"], n),
        incomplete_rate=share(per["incomplete"], n),
        failure_share=share(fails, n - per["cancelled"]), output_mismatch=s.output_mismatch,
        prompt_mismatch=s.prompt_mismatch,
        no_interactivity=int(((status == "ok") & ~(s.req_tpot > 0)).sum()),
        cut_received=int(s.req_output[status == "incomplete"].sum()),
        cut_asked=int(s.req_asked[status == "incomplete"].sum()),
    )


def _goodput(s: Samples, tier: SloTier, shares: TierShares, max_failure: float) -> Goodput:
    """The tier's shares at their point values (see ``TierShares``)."""
    if shares.sent.sum() == 0:
        return Goodput(tier=tier, requests=None, users=None, outcome="indeterminate",
                       why="no request was sent in the window")
    ones = np.ones((1, len(shares.sent)))
    fail, ttft_ok, fast = (float(x[0]) for x in shares.replicate(ones))
    meets_both = share(float(shares.both.sum()), float(shares.rated.sum()))
    user_rate = np.full(s.n_users, np.nan)
    user_rate[s.groups["interactivity_user"]] = s.values["interactivity_user"]
    with np.errstate(divide="ignore", invalid="ignore"):
        ttft_user = shares.ttft_ok / shares.sent >= 0.9
        # a user with no measured rate is a miss when it failed requests or the TTFT
        # ceiling; one whose every answer was too short to rate and that met the ceiling
        # has no interactivity to judge: left out, never counted as fast
        present = (shares.sent > 0) & (~np.isnan(user_rate) | (shares.failed > 0)
                                       | ~ttft_user)
        user_ok = present & (user_rate >= tier.floor_tok_s) & ttft_user
    outcome, why = judge_tier(shares, max_failure)
    return Goodput(
        tier=tier, requests=meets_both, users=share(float(user_ok.sum()), float(present.sum())),
        ttft_share=ttft_ok, fast_share=fast if np.isfinite(fast) else None, failure_share=fail,
        meets=outcome == "meets", outcome=outcome, why=why, unrated=shares.unrated,
        censored=shares.censored,
    )


def _declared_fields(s: Samples, *, seed: int, bootstrap: bool) -> dict[str, Any]:
    """The value of every metric declared on the summary: distributions of their own
    samples first, then those inverted from another, then the scalars."""
    clusters = clusters_of(s)
    out: dict[str, Any] = {}
    declared = [m for m in DECLARED if m.key in RunSummary.model_fields]
    for m in declared:
        if m.sample is None:
            continue
        name = m.key
        v, g = s.values[name], s.groups[name]
        cens = None
        if name in s.censored and len(s.censored[name]):
            v = np.concatenate([v, s.censored[name]])
            g = np.concatenate([g, s.censored_groups[name]])
            cens = np.arange(len(v)) >= len(s.values[name])
        out[name] = distribution(
            v, g, unit=m.unit, higher_is_better=m.higher_is_better,
            rng=metric_rng(seed, name) if bootstrap else None,
            weights=s.weights.get(name), censored=cens, clusters=clusters)
    for m in declared:
        if m.inverse_of is not None:
            with np.errstate(divide="ignore"):
                rates = 1.0 / s.values[m.inverse_of]
            rates = rates[np.isfinite(rates)]
            out[m.key] = invert_distribution(out[m.inverse_of], unit=m.unit,
                                             mean=float(rates.mean()) if len(rates) else None)
        elif m.value is not None:
            out[m.key] = m.value(s)
    return out


def summarize(
    s: Samples, *, seed: int = 0, tiers: tuple[SloTier, ...] = DEFAULT_TIERS,
    bootstrap: bool = True, max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE,
) -> RunSummary:
    """The summary of a (pooled) sample, with bootstrap intervals resampling users
    (and runs first, when several are pooled)."""
    counts = _counts(s)
    c = s.counters
    hits, queries = c.get("prefix_cache_hits_total"), c.get("prefix_cache_queries_total")
    drafts = c.get("spec_decode_num_drafts_total")
    accepted = c.get("spec_decode_num_accepted_tokens_total")
    actual = c.get("vllm_sim:engine_step_actual_seconds_total")
    model = c.get("vllm_sim:engine_step_model_seconds_total")
    halves = [share(h.get("prefix_cache_hits_total"), h.get("prefix_cache_queries_total"))
              for h in s.half_counters[:2]] + [None, None]
    return RunSummary(
        label=s.label, runs=s.runs, model=s.model, level=s.level,
        gpu_count=s.gpu_count, simulated=s.simulated, incomplete=s.incomplete,
        reasons=s.reasons, window_s=s.window_s, counts=counts,
        **_declared_fields(s, seed=seed, bootstrap=bootstrap),
        goodput=[_goodput(s, t, tier_shares(s, t), max_failure_share) for t in tiers],
        prefix=PrefixReuse(
            prompt_tokens=s.prompt_tokens, expected_cached_tokens=s.expected_cached,
            expected_share=share(s.expected_cached, s.prompt_tokens),
            reported_cached_tokens=s.reported_cached,
            reported_share=share(s.reported_cached, s.prompt_tokens),
            measured_hits=hits, measured_queries=queries,
            measured_share=share(hits, queries),
            measured_share_halves=(halves[0], halves[1]),
        ),
        speculation=Speculation(
            drafts=drafts, draft_tokens=c.get("spec_decode_num_draft_tokens_total"),
            accepted_tokens=accepted,
            acceptance_length=(1.0 + accepted / drafts)
            if drafts and accepted is not None and drafts > 0 else None,
            claimed_acceptance_length=s.claimed_acceptance,
        ),
        itl_reads=distribution(
            s.values["itl_reads"], s.groups["itl_reads"], unit="s",
            rng=metric_rng(seed, "itl_reads") if bootstrap else None,
            weights=s.weights.get("itl_reads"), clusters=clusters_of(s)),
        chunks_same_read_share=share(s.chunks_same_read, s.chunks_after_first),
        sim_lateness=(actual / model - 1.0) if actual is not None and model else None,
        energy=window_energy(s.energy_j, s.window_s, int(s.user_output_tokens.sum())),
    )
