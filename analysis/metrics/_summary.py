"""From samples to a run summary: distributions, counts, throughputs, SLO tiers."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from analysis.metrics._energy import Energy, window_energy
from analysis.metrics._samples import Samples
from analysis.metrics._stats import Distribution, distribution, invert_distribution, metric_rng
from analysis.metrics._tiers import TierOutcome, TierShares, judge_tier, tier_shares
from analysis.schema import (
    DEFAULT_MAX_FAILURE_SHARE,
    DEFAULT_TIERS,
    RESULT_FORMAT_VERSION,
    LoadLevel,
    SloTier,
    Validity,
    metric,
)

__all__ = [
    "Goodput", "PrefixReuse", "RequestCounts", "RunSummary", "Speculation", "clusters_of",
    "summarize",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestCounts(_Model):
    """Requests sent inside the steady window, each in exactly one outcome."""

    total_records: int
    in_window: int
    ok: int
    error: int
    timeout: int
    incomplete: int
    """Still running when the drain ended (SLO misses)."""
    cancelled: int
    """Interrupted by the user (left out of the failure share)."""
    lost: int = 0
    """On a worker that was lost (``--ray``): a failure, its outcome unknown."""
    by_error_kind: dict[str, int] = Field(default_factory=dict)
    error_rate: float | None = None
    timeout_rate: float | None = None
    incomplete_rate: float | None = None
    failure_share: float | None = None
    """(errors + timeouts + incomplete + lost) / (requests sent in the window - cancelled)."""
    output_mismatch: int = 0
    """ok requests whose output token count differs from the one asked for (the
    client sends ``ignore_eos``: every answer should be exactly that long), or whose
    streamed tokens outnumber the usage count."""
    cut_received: int = 0
    """Output tokens the incomplete requests had received when the drain ended..."""
    cut_asked: int = 0
    """...of the tokens they asked for (how far they got)."""
    no_interactivity: int = 0
    """ok requests whose interactivity was not measured (fewer than 2 output tokens,
    or every token in one read): left out of the interactivity shares and floors."""
    prompt_mismatch: int = 0
    """ok requests whose server-reported prompt tokens differ from the workload's
    (chat mode: the template's tokens are counted in; a prompt shorter than them
    cannot be exact)."""


class Goodput(_Model):
    """How a level fares against one SLO tier, over every request sent in the window
    (failed and incomplete requests count as misses)."""

    tier: SloTier
    requests: float | None
    """Share of requests that met both limits (of those with an interactivity)."""
    users: float | None
    """Share of users whose interactivity met the floor and of whose requests at
    least 90% met the TTFT ceiling."""
    ttft_share: float | None = None
    """Share of requests whose TTFT from schedule met the ceiling."""
    fast_share: float | None = None
    """Share of requests whose interactivity (1/TPOT) met the floor, over the requests
    with an interactivity to judge (``unrated`` left out)."""
    censored: int = 0
    """Requests cut by the drain while on pace for this tier (first token within the
    ceiling, tokens so far at >= the floor): left out of its shares, not misses."""
    unrated: int = 0
    """Requests left out of ``fast_share`` and ``requests``: ok but with no measured
    interactivity (< 2 output tokens, or every token in one read)."""
    failure_share: float | None = None
    meets: bool = False
    """Met, as far as the sample can tell: failure share <= the maximum, and at least
    90% of requests met each limit (i.e. P90 interactivity >= floor and P90 TTFT from
    schedule <= ceiling over all requests sent), each share's 95% interval at or above
    90% (``outcome``)."""
    outcome: TierOutcome | None = None
    """``meets``, ``fails`` or ``indeterminate`` (a share's interval holds 90%: too few
    requests to tell); None in summaries written before it (``meets`` then says)."""
    why: str = ""
    """Why the level is indeterminate (the counts, the interval, the minimum)."""

    def judged(self) -> TierOutcome:
        """The outcome, also for a summary written before outcomes existed."""
        if self.outcome is not None:
            return self.outcome
        return "meets" if self.meets else "fails"


class PrefixReuse(_Model):
    prompt_tokens: int
    expected_cached_tokens: int | None
    expected_share: float | None
    """What an infinite cache could reuse, as the client predicted it."""
    reported_cached_tokens: int | None
    reported_share: float | None
    """What the server said it reused (usage.prompt_tokens_details)."""
    measured_hits: float | None
    measured_queries: float | None
    measured_share: float | None
    """``prefix_cache_hits`` / ``prefix_cache_queries`` counter deltas over the window."""
    measured_share_halves: tuple[float | None, float | None] = (None, None)
    """The measured share in the first and the second half of the window."""


class Speculation(_Model):
    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None
    acceptance_length: float | None
    """1 + accepted / drafts over the window, measured; None without counters."""
    claimed_acceptance_length: float | None = None
    """What the server or simulator profile claims (``/server_info``), for comparison."""


class RunSummary(_Model):
    """Everything computed about one run (or pooled repeats of one arm and level)."""

    format_version: int = RESULT_FORMAT_VERSION
    kind: str = "agentreplay-summary"
    label: str
    runs: list[str]
    model: str
    level: LoadLevel
    """What set the load (users, a session rate, a time scale). A summary written
    before it was recorded was a closed-loop run of its ``users``, the field it had."""
    gpu_count: int | None
    simulated: bool
    incomplete: bool
    reasons: list[str] = Field(default_factory=list)
    window_s: float | None
    counts: RequestCounts
    ttft: Distribution
    ttft_due: Distribution
    e2e: Distribution
    tpot: Distribution
    itl: Distribution
    interactivity: Distribution
    """Per request, 1/TPOT; pXX = 1 / pXX(TPOT) (P90 = the slow tail)."""
    interactivity_user: Distribution
    """Per user lane: sum(output - 1) / sum(decode time); P90 = 10th percentile."""
    session_latency: Distribution
    schedule_lag: Distribution
    decode_tok_s: float | None
    decode_tok_s_per_gpu: float | None
    output_tok_s: float | None
    prefill_tok_s: float | None
    goodput: list[Goodput]
    prefix: PrefixReuse
    speculation: Speculation
    itl_reads: Distribution | None = None
    """ITL with the chunks of one socket read merged (no gaps of 0 from coalescing)."""
    chunks_same_read_share: float | None = None
    """Share of chunks (after each request's first) that arrived in the same read as
    the one before: how much the client's reads coalesced the server's events."""
    sim_lateness: float | None = None
    """Simulated server only: delta(actual step seconds) / delta(modelled) - 1."""
    energy: Energy | None = None
    """GPU energy over the window (``run --gpu-metrics``); None: no telemetry (missing,
    never 0)."""
    validity: Validity | None = None

    @model_validator(mode="before")
    @classmethod
    def _level_of_old_summaries(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "users" not in data:
            return data
        data = dict(data)
        users = data.pop("users")
        if data.get("level") is None:
            data["level"] = {"kind": "users", "value": float(users)}
        return data


def clusters_of(s: Samples) -> np.ndarray | None:
    """The run of each user when the sample pools several runs, else None."""
    return s.user_run if len(s.runs) > 1 else None


def _rate(tokens: np.ndarray, window_s: float | None, n: int) -> float | None:
    """Tokens per second of window; None (not 0) when no request was sent in it."""
    if window_s is None or window_s <= 0 or n == 0:
        return None
    return float(tokens.sum() / window_s)


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


def summarize(
    s: Samples, *, seed: int = 0, tiers: tuple[SloTier, ...] = DEFAULT_TIERS,
    bootstrap: bool = True, max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE,
) -> RunSummary:
    """The summary of a (pooled) sample, with bootstrap intervals resampling users
    (and runs first, when several are pooled)."""
    clusters = clusters_of(s)

    def dist(name: str, unit: str | None = None) -> Distribution:
        """Unit and direction from the catalogue; ``unit`` for an uncatalogued one."""
        info = metric(name) if unit is None else None
        unit, higher = (info.unit, info.higher_is_better) if info else (str(unit), False)
        rng = metric_rng(seed, name) if bootstrap else None
        v, g = s.values[name], s.groups[name]
        cens = None
        if name in s.censored and len(s.censored[name]):
            v = np.concatenate([v, s.censored[name]])
            g = np.concatenate([g, s.censored_groups[name]])
            cens = np.arange(len(v)) >= len(s.values[name])
        return distribution(v, g, unit=unit, higher_is_better=higher, rng=rng,
                            weights=s.weights.get(name), censored=cens, clusters=clusters)

    tpot = dist("tpot")
    with np.errstate(divide="ignore"):
        rates = 1.0 / s.values["tpot"]
    rates = rates[np.isfinite(rates)]
    inter = invert_distribution(tpot, unit=metric("interactivity").unit,
                                mean=float(rates.mean()) if len(rates) else None)
    counts = _counts(s)
    sent = counts.in_window
    decode = _rate(s.user_decode_tokens, s.window_s, sent)
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
        ttft=dist("ttft"), ttft_due=dist("ttft_due"), e2e=dist("e2e"),
        tpot=tpot, itl=dist("itl"), interactivity=inter,
        interactivity_user=dist("interactivity_user"),
        session_latency=dist("session_latency"),
        schedule_lag=dist("schedule_lag"),
        decode_tok_s=decode,
        decode_tok_s_per_gpu=(decode / s.gpu_count) if decode is not None and s.gpu_count
        else None,
        output_tok_s=_rate(s.user_output_tokens, s.window_s, sent),
        prefill_tok_s=_rate(s.user_prefill_tokens, s.window_s, sent),
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
        itl_reads=dist("itl_reads", "s"),
        chunks_same_read_share=share(s.chunks_same_read, s.chunks_after_first),
        sim_lateness=(actual / model - 1.0) if actual is not None and model else None,
        energy=window_energy(s.energy_j, s.window_s, int(s.user_output_tokens.sum())),
    )
