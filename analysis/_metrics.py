"""The metrics of DESIGN.md, as pure functions over a run's columns.

``measure(run)`` turns records into samples (one array per metric, each value
tagged with its user, the bootstrap's unit) and per-user token totals inside
the steady window. ``summarize(samples)`` turns samples into a ``RunSummary``.
Samples of repeated runs pool with ``pool`` (each run's users stay distinct),
which is how a comparison level is summarised.

Rules held everywhere: only requests *sent* inside the steady window count;
only status ``ok`` enters latency statistics; an empty sample is None.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from analysis._read import MetricSeries, RequestColumns, RunData
from analysis._slo import DEFAULT_TIERS, SloTier
from analysis._stats import Distribution, distribution, invert_distribution, metric_rng

__all__ = [
    "Goodput",
    "PrefixReuse",
    "RequestCounts",
    "RunSummary",
    "Samples",
    "Speculation",
    "analyse_run",
    "counter_delta",
    "measure",
    "pool",
    "steady_window",
    "summarize",
]

LATENCY_METRICS = ("ttft", "ttft_due", "e2e", "tpot", "itl", "session_latency", "schedule_lag")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestCounts(_Model):
    """Requests sent inside the steady window, by outcome."""

    total_records: int
    in_window: int
    ok: int
    error: int
    timeout: int
    cancelled: int
    by_error_kind: dict[str, int] = Field(default_factory=dict)
    error_rate: float | None = None
    timeout_rate: float | None = None
    output_mismatch: int = 0
    """ok requests whose output token count differs from the one asked for."""


class Goodput(_Model):
    tier: SloTier
    requests: float | None
    """Share of requests sent in the window that met both limits (failures miss)."""
    users: float | None
    """Share of users whose interactivity met the floor and of whose requests at
    least 90% met the TTFT ceiling."""


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


class Speculation(_Model):
    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None
    acceptance_length: float | None
    """1 + accepted / drafts over the window, measured; None without counters."""


class RunSummary(_Model):
    """Everything computed about one run (or pooled repeats of one arm and level)."""

    kind: str = "agentreplay-summary"
    label: str
    runs: list[str]
    model: str
    users: int
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


@dataclass
class Samples:
    """Per-metric values with user codes, and per-user totals in the window."""

    label: str
    runs: list[str]
    model: str
    users: int
    gpu_count: int | None
    simulated: bool
    incomplete: bool
    reasons: list[str]
    window_s: float | None
    values: dict[str, np.ndarray]
    groups: dict[str, np.ndarray]
    weights: dict[str, np.ndarray]
    """Repeat counts for metrics whose samples are weighted (ITL: tokens per chunk)."""
    n_users: int
    """Distinct user codes (0..n_users-1) across all arrays below."""
    user_decode_tokens: np.ndarray
    user_output_tokens: np.ndarray
    user_prefill_tokens: np.ndarray
    # requests sent in the window (any status), for goodput and counts
    req_status: np.ndarray
    req_error_kind: np.ndarray
    req_user: np.ndarray
    req_ttft_due: np.ndarray
    req_tpot: np.ndarray
    total_records: int
    output_mismatch: int
    prompt_tokens: int
    expected_cached: int | None
    reported_cached: int | None
    counters: dict[str, float | None]


def steady_window(run: RunData) -> tuple[float, float] | None:
    """The manifest's window, else the span of records in phase ``measure``."""
    if run.manifest.window is not None:
        return run.manifest.window.start_s, run.manifest.window.end_s
    r = run.requests
    m = r.phase == "measure"
    if not m.any():
        return None
    end = np.nanmax(np.concatenate([r.last_token_s[m], r.sent_s[m]]))
    return float(r.sent_s[m].min()), float(end)


def counter_delta(metrics: MetricSeries, name: str, start: float, end: float) -> float | None:
    """Increase of a server counter over [start, end], linearly interpolated
    between scrapes; None when the counter is absent or not scraped twice."""
    v = metrics.get(name)
    if v is None:
        return None
    ok = np.isfinite(v)
    t, v = metrics.t_s[ok], v[ok]
    if len(t) < 2:
        return None
    return float(np.interp(end, t, v) - np.interp(start, t, v))


def _uncached_prompt(r: RequestColumns, idx: np.ndarray) -> np.ndarray:
    """Prompt minus cached tokens: the server's counts where reported, else the
    client's prompt and expected reuse."""
    server = r.prompt_tokens_server[idx]
    prompt = np.where(server >= 0, server, r.prompt_tokens[idx])
    reported = r.cached_tokens[idx]
    cached = np.where(reported >= 0, reported, np.maximum(r.expected_cached_tokens[idx], 0))
    return np.maximum(prompt - cached, 0).astype(np.float64)


def measure(run: RunData) -> Samples:
    """Samples of every metric of one run (see the module docstring for the rules)."""
    man = run.manifest
    r = run.requests
    window = steady_window(run)
    start, end = window if window else (np.inf, -np.inf)
    window_s = (end - start) if window else None
    user_ids, user_code = np.unique(r.user, return_inverse=True)
    user_code = user_code.reshape(-1)
    n_users = len(user_ids)

    in_win = (r.sent_s >= start) & (r.sent_s < end)
    ok = r.status == "ok"
    good = in_win & ok
    ttft = r.first_token_s - r.sent_s
    ttft_due = r.first_token_s - r.due_s
    e2e = r.last_token_s - r.sent_s
    decode_time = r.last_token_s - r.first_token_s
    multi = r.output_tokens >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(multi, decode_time / (r.output_tokens - 1), np.nan)
    values: dict[str, np.ndarray] = {}
    groups: dict[str, np.ndarray] = {}

    def put(name: str, v: np.ndarray, g: np.ndarray) -> None:
        keep = np.isfinite(v)
        values[name], groups[name] = v[keep], g[keep]

    put("ttft", ttft[good], user_code[good])
    put("ttft_due", ttft_due[good], user_code[good])
    put("e2e", e2e[good], user_code[good])
    put("tpot", tpot[good & multi], user_code[good & multi])
    put("schedule_lag", (r.sent_s - r.due_s)[in_win], user_code[in_win])

    # per-user interactivity: sum(out - 1) / sum(decode time) over its requests
    sel = good & multi & np.isfinite(decode_time)
    tok = np.bincount(user_code[sel], weights=r.output_tokens[sel] - 1, minlength=n_users)
    dt = np.bincount(user_code[sel], weights=decode_time[sel], minlength=n_users)
    has = np.bincount(user_code[sel], minlength=n_users) > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        per_user = np.where(has & (dt > 0), tok / dt, np.nan)
    put("interactivity_user", per_user, np.arange(n_users))

    # ITL: a chunk of k tokens arriving g after the previous one gives k gaps of g/k;
    # the extra tokens of the first chunk arrived with the first token (gaps of 0)
    lengths = np.diff(r.chunk_offsets)
    first_chunk = np.zeros(len(r.chunk_times_s), dtype=bool)
    first_chunk[r.chunk_offsets[:-1][lengths > 0]] = True
    # per-record values spread over chunks (int32: these arrays are the largest here)
    chunk_user = np.repeat(user_code.astype(np.int32), lengths)
    t = r.chunk_times_s
    k = r.chunk_tokens
    gap = np.empty_like(t)
    gap[0:1] = 0.0
    np.subtract(t[1:], t[:-1], out=gap[1:])
    gap[first_chunk] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        per_tok = gap / np.maximum(k, 1)
    del gap
    reps = np.maximum(k - first_chunk, 0)
    keep_itl = np.repeat(good, lengths) & (reps > 0) & np.isfinite(per_tok)
    weights: dict[str, np.ndarray] = {}
    values["itl"], groups["itl"] = per_tok[keep_itl], chunk_user[keep_itl]
    weights["itl"] = reps[keep_itl]
    del per_tok, reps, keep_itl

    # tokens received inside the window (ok requests), per user
    in_t = np.repeat(ok, lengths) & (t >= start) & (t < end)
    u_dec = np.bincount(chunk_user[in_t], weights=(k - first_chunk)[in_t], minlength=n_users)
    u_out = np.bincount(chunk_user[in_t], weights=k[in_t], minlength=n_users)
    # records without chunk data: first token at first_token_s, the rest at last_token_s
    bare = ok & (lengths == 0) & np.isfinite(r.first_token_s) & (r.output_tokens > 0)
    f_in = bare & (r.first_token_s >= start) & (r.first_token_s < end)
    l_in = bare & (r.last_token_s >= start) & (r.last_token_s < end)
    rest = np.maximum(r.output_tokens - 1, 0).astype(np.float64)
    u_dec += np.bincount(user_code[l_in], weights=rest[l_in], minlength=n_users)
    u_out += np.bincount(user_code[l_in], weights=rest[l_in], minlength=n_users)
    u_out += np.bincount(user_code[f_in], minlength=n_users)

    # prefill: uncached prompt tokens of ok requests whose first token came in the window
    p_in = np.flatnonzero(ok & (r.first_token_s >= start) & (r.first_token_s < end))
    u_pre = np.bincount(user_code[p_in], weights=_uncached_prompt(r, p_in), minlength=n_users)

    put("session_latency", *_session_latency(run, user_code, start, end))

    win_idx = np.flatnonzero(in_win)
    ok_win = np.flatnonzero(good)
    expected = r.expected_cached_tokens[win_idx]
    cached = r.cached_tokens[win_idx]
    counters: dict[str, float | None] = {}
    if window:
        for name in ("prefix_cache_hits_total", "prefix_cache_queries_total",
                     "spec_decode_num_drafts_total", "spec_decode_num_draft_tokens_total",
                     "spec_decode_num_accepted_tokens_total"):
            counters[name] = counter_delta(run.metrics, name, start, end)
    return Samples(
        label=man.label, runs=[man.run_id], model=man.model, users=man.load.users,
        gpu_count=man.gpu_count, simulated=man.simulated, incomplete=run.incomplete,
        reasons=[f"{man.run_id}: {x}" for x in run.reasons], window_s=window_s,
        values=values, groups=groups, weights=weights, n_users=n_users,
        user_decode_tokens=u_dec, user_output_tokens=u_out, user_prefill_tokens=u_pre,
        req_status=r.status[win_idx], req_error_kind=r.error_kind[win_idx],
        req_user=user_code[win_idx], req_ttft_due=ttft_due[win_idx], req_tpot=tpot[win_idx],
        total_records=len(r),
        output_mismatch=int((r.output_tokens[ok_win] != r.output_tokens_asked[ok_win]).sum()),
        prompt_tokens=int(r.prompt_tokens[win_idx].sum()),
        expected_cached=int(expected[expected >= 0].sum()) if (expected >= 0).any() else None,
        reported_cached=int(cached[cached >= 0].sum()) if (cached >= 0).any() else None,
        counters=counters,
    )


def _session_latency(
    run: RunData, user_code: np.ndarray, start: float, end: float
) -> tuple[np.ndarray, np.ndarray]:
    """First request sent to last token of each session, pauses included.

    A session counts when its first main-agent request (turn 0) was sent in the
    window, all its requests are ok, and its user went on to a later session
    (so the session really ended rather than being cut by the window's end).
    """
    r = run.requests
    if len(r) == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    names: dict[object, int] = {}
    sess = np.fromiter((names.setdefault(x, len(names)) for x in r.session),
                       dtype=np.int64, count=len(r))
    n_u, n_i = int(r.user.max()) + 1, int(r.session_instance.max()) + 1
    if len(names) * n_u * n_i < 2**62:
        combined = (sess * n_u + r.user) * n_i + r.session_instance
        first_of, code = np.unique(combined, return_index=True, return_inverse=True)[1:]
        uniq = np.stack([r.user, sess, r.session_instance], axis=1)[first_of]
    else:  # pragma: no cover - astronomically many sessions
        key = np.stack([r.user, sess, r.session_instance], axis=1)
        uniq, code = np.unique(key, axis=0, return_inverse=True)
    code = code.reshape(-1)
    n = len(uniq)
    first_sent = np.full(n, np.inf)
    np.minimum.at(first_sent, code, r.sent_s)
    last = np.full(n, -np.inf)
    np.maximum.at(last, code, np.where(np.isfinite(r.last_token_s), r.last_token_s, np.inf))
    bad = np.bincount(code, weights=(r.status != "ok"), minlength=n) > 0
    is_start = (r.turn == 0) & np.array([a is None for a in r.agent], dtype=bool)
    started = np.zeros(n, dtype=bool)
    s_idx = np.flatnonzero(is_start & (r.sent_s >= start) & (r.sent_s < end))
    started[code[s_idx]] = True
    max_inst = np.full(int(user_code.max()) + 1, -1)
    np.maximum.at(max_inst, user_code, r.session_instance)
    sess_user = np.zeros(n, dtype=np.int64)
    sess_user[code] = user_code
    later = uniq[:, 2] < max_inst[sess_user]
    keep = started & ~bad & later & np.isfinite(last)
    return (last - first_sent)[keep], sess_user[keep]


def pool(parts: list[Samples]) -> Samples:
    """Repeats of one arm and level as one sample: users of each run stay distinct."""
    if len(parts) == 1:
        return parts[0]
    offsets = np.cumsum([0] + [p.n_users for p in parts])
    first = parts[0]

    def cat(attr: str, shift: bool = False) -> np.ndarray:
        arrays = [getattr(p, attr) for p in parts]
        if shift:
            arrays = [a + o for a, o in zip(arrays, offsets, strict=False)]
        return np.concatenate(arrays)

    def cat_groups(metric: str) -> np.ndarray:
        return np.concatenate(
            [p.groups[metric] + o for p, o in zip(parts, offsets, strict=False)])

    def total(attr: str) -> int | None:
        vals = [getattr(p, attr) for p in parts if getattr(p, attr) is not None]
        return int(sum(vals)) if vals else None

    counters: dict[str, float | None] = {}
    for name in first.counters:
        vals = [p.counters.get(name) for p in parts]
        known = [v for v in vals if v is not None]
        counters[name] = float(sum(known)) if len(known) == len(vals) else None
    windows = [p.window_s for p in parts]
    gpus = {p.gpu_count for p in parts}
    return Samples(
        label=first.label, runs=[x for p in parts for x in p.runs], model=first.model,
        users=first.users, gpu_count=first.gpu_count if len(gpus) == 1 else None,
        simulated=any(p.simulated for p in parts), incomplete=any(p.incomplete for p in parts),
        reasons=[x for p in parts for x in p.reasons],
        window_s=float(sum(w for w in windows if w is not None))
        if all(w is not None for w in windows) else None,
        values={m: np.concatenate([p.values[m] for p in parts]) for m in first.values},
        groups={m: cat_groups(m) for m in first.groups},
        weights={m: np.concatenate([p.weights[m] for p in parts]) for m in first.weights},
        n_users=int(offsets[-1]),
        user_decode_tokens=cat("user_decode_tokens"),
        user_output_tokens=cat("user_output_tokens"),
        user_prefill_tokens=cat("user_prefill_tokens"),
        req_status=cat("req_status"), req_error_kind=cat("req_error_kind"),
        req_user=cat("req_user", shift=True), req_ttft_due=cat("req_ttft_due"),
        req_tpot=cat("req_tpot"),
        total_records=sum(p.total_records for p in parts),
        output_mismatch=sum(p.output_mismatch for p in parts),
        prompt_tokens=sum(p.prompt_tokens for p in parts),
        expected_cached=total("expected_cached"), reported_cached=total("reported_cached"),
        counters=counters,
    )


def _rate(tokens: np.ndarray, window_s: float | None, n: int) -> float | None:
    """Tokens per second of window; None (not 0) when no request was sent in it."""
    if window_s is None or window_s <= 0 or n == 0:
        return None
    return float(tokens.sum() / window_s)


def _share(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return float(num / den)


def goodput(s: Samples, tier: SloTier) -> Goodput:
    """Shares of requests and of users meeting the tier (see ``Goodput``)."""
    n = len(s.req_status)
    if n == 0:
        return Goodput(tier=tier, requests=None, users=None)
    with np.errstate(divide="ignore", invalid="ignore"):
        fast = np.isnan(s.req_tpot) | (1.0 / s.req_tpot >= tier.floor_tok_s)
    ttft_ok = (s.req_status == "ok") & (s.req_ttft_due <= tier.ttft_s)
    meets = ttft_ok & fast
    per_user_n = np.bincount(s.req_user, minlength=s.n_users)
    per_user_ttft = np.bincount(s.req_user, weights=ttft_ok, minlength=s.n_users)
    present = per_user_n > 0
    rate = np.full(s.n_users, np.nan)
    g = s.groups["interactivity_user"]
    rate[g] = s.values["interactivity_user"]
    user_fast = np.isnan(rate) | (rate >= tier.floor_tok_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        user_ok = present & user_fast & (per_user_ttft / per_user_n >= 0.9)
    return Goodput(
        tier=tier, requests=float(meets.mean()),
        users=float(user_ok.sum() / present.sum()) if present.any() else None,
    )


def summarize(
    s: Samples, *, seed: int = 0, tiers: tuple[SloTier, ...] = DEFAULT_TIERS,
    bootstrap: bool = True,
) -> RunSummary:
    """The summary of a (pooled) sample, with bootstrap intervals resampling users."""

    def dist(name: str, unit: str, higher: bool = False) -> Distribution:
        rng = metric_rng(seed, name) if bootstrap else None
        return distribution(s.values[name], s.groups[name], unit=unit,
                            higher_is_better=higher, rng=rng, weights=s.weights.get(name))

    tpot = dist("tpot", "s")
    with np.errstate(divide="ignore"):
        rates = 1.0 / s.values["tpot"]
    rates = rates[np.isfinite(rates)]
    inter = invert_distribution(tpot, unit="tok/s",
                                mean=float(rates.mean()) if len(rates) else None)
    status = s.req_status
    n = len(status)
    kinds: dict[str, int] = {}
    failed = status != "ok"
    if failed.any():
        labels = [k if k is not None else st for k, st in
                  zip(s.req_error_kind[failed], status[failed], strict=True)]
        u, c = np.unique(np.array(labels, dtype=str), return_counts=True)
        kinds = {str(a): int(b) for a, b in zip(u, c, strict=True)}
    counts = RequestCounts(
        total_records=s.total_records, in_window=n, ok=int((status == "ok").sum()),
        error=int((status == "error").sum()), timeout=int((status == "timeout").sum()),
        cancelled=int((status == "cancelled").sum()), by_error_kind=kinds,
        error_rate=_share(float((status == "error").sum()), n),
        timeout_rate=_share(float((status == "timeout").sum()), n),
        output_mismatch=s.output_mismatch,
    )
    sent = len(s.req_status)
    decode = _rate(s.user_decode_tokens, s.window_s, sent)
    hits = s.counters.get("prefix_cache_hits_total")
    queries = s.counters.get("prefix_cache_queries_total")
    drafts = s.counters.get("spec_decode_num_drafts_total")
    accepted = s.counters.get("spec_decode_num_accepted_tokens_total")
    return RunSummary(
        label=s.label, runs=s.runs, model=s.model, users=s.users, gpu_count=s.gpu_count,
        simulated=s.simulated, incomplete=s.incomplete, reasons=s.reasons,
        window_s=s.window_s, counts=counts,
        ttft=dist("ttft", "s"), ttft_due=dist("ttft_due", "s"), e2e=dist("e2e", "s"),
        tpot=tpot, itl=dist("itl", "s"), interactivity=inter,
        interactivity_user=dist("interactivity_user", "tok/s", higher=True),
        session_latency=dist("session_latency", "s"),
        schedule_lag=dist("schedule_lag", "s"),
        decode_tok_s=decode,
        decode_tok_s_per_gpu=(decode / s.gpu_count) if decode is not None and s.gpu_count
        else None,
        output_tok_s=_rate(s.user_output_tokens, s.window_s, sent),
        prefill_tok_s=_rate(s.user_prefill_tokens, s.window_s, sent),
        goodput=[goodput(s, t) for t in tiers],
        prefix=PrefixReuse(
            prompt_tokens=s.prompt_tokens, expected_cached_tokens=s.expected_cached,
            expected_share=_share(s.expected_cached, s.prompt_tokens),
            reported_cached_tokens=s.reported_cached,
            reported_share=_share(s.reported_cached, s.prompt_tokens),
            measured_hits=hits, measured_queries=queries,
            measured_share=_share(hits, queries),
        ),
        speculation=Speculation(
            drafts=drafts, draft_tokens=s.counters.get("spec_decode_num_draft_tokens_total"),
            accepted_tokens=accepted,
            acceptance_length=(1.0 + accepted / drafts)
            if drafts and accepted is not None and drafts > 0 else None,
        ),
    )


def analyse_run(
    run: RunData, *, seed: int = 0, tiers: tuple[SloTier, ...] = DEFAULT_TIERS
) -> RunSummary:
    """Measure and summarise one run."""
    return summarize(measure(run), seed=seed, tiers=tiers)
