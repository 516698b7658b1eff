"""From a run's records to samples: which request counts where.

Rules (written in the report's methodology):
- only requests *sent* inside the steady window are accounted, each in exactly
  one outcome (ok, error kind, timeout, incomplete, cancelled);
- latency samples come from ok requests; an incomplete request's latency is
  right-censored (it ran at least until it was cut), kept as a lower bound;
  its TTFT is exact when its first token came, and so are its TPOT and ITL
  over the tokens that arrived before the cut (a decode rate, not a duration);
- throughputs count every token that *arrived* in the window, whatever the
  request's outcome or the phase it was sent in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.metrics._derived import Latencies, column_latencies
from analysis.metrics._energy import series_energy_j
from analysis.metrics._samples import Samples
from analysis.read import RunData, counter_delta, steady_window
from analysis.schema import RequestColumns, level_of

__all__ = ["CLAIMED_ACCEPTANCE_KEYS", "COUNTERS", "claimed_acceptance", "measure"]

COUNTERS = (
    "prefix_cache_hits_total", "prefix_cache_queries_total",
    "spec_decode_num_drafts_total", "spec_decode_num_draft_tokens_total",
    "spec_decode_num_accepted_tokens_total",
    "vllm_sim:engine_step_actual_seconds_total", "vllm_sim:engine_step_model_seconds_total",
)
"""Server counters whose deltas over the window are kept."""


CLAIMED_ACCEPTANCE_KEYS = ("sim_acceptance_length", "claimed_acceptance_length")
"""Top-level ``/server_info`` keys holding a claimed mean acceptance length (the
simulator writes the first, from its profile; real vLLM claims none)."""


def claimed_acceptance(server_info: dict[str, object]) -> float | None:
    """The speculative acceptance length the server claims, shown beside the measured
    one (a claim is never used as a measurement)."""
    for key in CLAIMED_ACCEPTANCE_KEYS:
        v = server_info.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
            return float(v)
    return None


def _uncached_prompt(r: RequestColumns, idx: np.ndarray) -> np.ndarray:
    """Prompt minus cached tokens: the server's counts where reported, else the
    client's prompt and expected reuse."""
    server = r.prompt_tokens_server[idx]
    prompt = np.where(server >= 0, server, r.prompt_tokens[idx])
    reported = r.cached_tokens[idx]
    cached = np.where(reported >= 0, reported, np.maximum(r.expected_cached_tokens[idx], 0))
    out: np.ndarray = np.maximum(prompt - cached, 0).astype(np.float64)
    return out


def _cut_time(r: RequestColumns, drain_end: float) -> np.ndarray:
    """When each request was last known running: its end, else the drain's end,
    never before anything it received."""
    seen = np.fmax(np.fmax(r.sent_s, r.first_token_s), r.last_token_s)
    out: np.ndarray = np.fmax(np.where(np.isfinite(r.end_s), r.end_s, drain_end), seen)
    return out


def _tokens_in_window(
    run: RunData, user_code: np.ndarray, n_users: int, start: float, end: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per user: decode, output and uncached prefill tokens that arrived in the window."""
    r = run.requests
    lengths = np.diff(r.chunk_offsets)
    first_chunk = np.zeros(len(r.chunk_times_s), dtype=bool)
    first_chunk[r.chunk_offsets[:-1][lengths > 0]] = True
    chunk_user = np.repeat(user_code.astype(np.int32), lengths)
    t, k = r.chunk_times_s, r.chunk_tokens
    in_t = (t >= start) & (t < end)
    u_dec = np.bincount(chunk_user[in_t], weights=(k - first_chunk)[in_t],
                        minlength=n_users).astype(np.float64)
    u_out = np.bincount(chunk_user[in_t], weights=k[in_t], minlength=n_users).astype(np.float64)
    # records without chunk data: first token at first_token_s, the rest at last_token_s
    bare = (lengths == 0) & np.isfinite(r.first_token_s) & (r.output_tokens > 0)
    f_in = bare & (r.first_token_s >= start) & (r.first_token_s < end)
    l_in = bare & (r.last_token_s >= start) & (r.last_token_s < end)
    rest = np.maximum(r.output_tokens - 1, 0).astype(np.float64)
    u_dec += np.bincount(user_code[l_in], weights=rest[l_in], minlength=n_users)
    u_out += np.bincount(user_code[l_in], weights=rest[l_in], minlength=n_users)
    u_out += np.bincount(user_code[f_in], minlength=n_users)
    # prefill: uncached prompt tokens of requests whose first token came in the window
    p_in = np.flatnonzero((r.first_token_s >= start) & (r.first_token_s < end))
    u_pre = np.bincount(user_code[p_in], weights=_uncached_prompt(r, p_in), minlength=n_users)
    return u_dec, u_out, u_pre


def _cut_rate(r: RequestColumns, ran_until: np.ndarray) -> np.ndarray:
    """The decode pace an incomplete request kept until it was cut: tokens after the
    first over first token to the cut (NaN for other requests or without a token)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.maximum(r.output_tokens - 1, 0) / (ran_until - r.first_token_s)
    out: np.ndarray = np.where((r.status == "incomplete") & np.isfinite(r.first_token_s)
                               & (ran_until > r.first_token_s), rate, np.nan)
    return out


def _output_mismatch(r: RequestColumns, idx: np.ndarray) -> int:
    """Requests of ``idx`` whose length is not the one asked for (``ignore_eos``: an
    answer is exactly that long), or whose streamed tokens outnumber the usage count
    (text-only streams count chunks, which may be fewer, never more)."""
    cum = np.concatenate([[0], np.cumsum(r.chunk_tokens, dtype=np.int64)])
    streamed = cum[r.chunk_offsets[1:]] - cum[r.chunk_offsets[:-1]]
    has_chunks = np.diff(r.chunk_offsets) > 0
    bad = (r.output_tokens[idx] != r.output_tokens_asked[idx]) \
        | (has_chunks[idx] & (streamed[idx] > r.output_tokens[idx]))
    return int(bad.sum())


def _itl(
    r: RequestColumns, good: np.ndarray, user_code: np.ndarray, *, by_read: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """ITL samples of the ``good`` requests: (per-token gap, user, weight, chunks after the
    first, of which arrived in the same read as the one before).

    A chunk of k tokens arriving g after the previous one gives k gaps of g/k; the
    extra tokens of the first chunk arrived with the first token (gaps of 0).
    ``by_read``: chunks with the same timestamp (one socket read) count as one
    arrival of their summed tokens, so coalesced chunks give no gaps of 0."""
    lengths = np.diff(r.chunk_offsets)
    first_chunk = np.zeros(len(r.chunk_times_s), dtype=bool)
    first_chunk[r.chunk_offsets[:-1][lengths > 0]] = True
    t, k = r.chunk_times_s, r.chunk_tokens
    gap = np.empty_like(t)
    gap[0:1] = 0.0
    np.subtract(t[1:], t[:-1], out=gap[1:])
    gap[first_chunk] = 0.0
    mine = np.repeat(good, lengths)
    later = mine & ~first_chunk
    same = later & (gap == 0.0)
    counts = (int(later.sum()), int(same.sum()))
    chunk_user = np.repeat(user_code.astype(np.int32), lengths)
    if by_read:  # one sample group per read: the chunks of a read are merged
        starts = np.flatnonzero(~same | first_chunk) if len(t) else np.zeros(0, np.int64)
        k = np.add.reduceat(k, starts) if len(starts) else k[:0]
        gap, first_chunk = gap[starts], first_chunk[starts]
        mine, chunk_user = mine[starts], chunk_user[starts]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_tok = gap / np.maximum(k, 1)
    del gap
    reps = np.maximum(k - first_chunk, 0)
    keep = mine & (reps > 0) & np.isfinite(per_tok)
    return per_tok[keep], chunk_user[keep], reps[keep], *counts


@dataclass(frozen=True)
class _Window:
    """Which requests a run's samples come from: the steady window and, per request,
    its user (as a dense code) and whether it was sent in the window, ok or cut."""

    start: float
    end: float
    found: bool
    user_code: np.ndarray
    n_users: int
    in_win: np.ndarray
    good: np.ndarray
    """Sent in the window and answered in full."""
    cut: np.ndarray
    """Sent in the window and cut short (incomplete: measured until the cut)."""

    @property
    def decoding(self) -> np.ndarray:
        """Whose decode rate was measured."""
        both: np.ndarray = self.good | self.cut
        return both


def _window_of(run: RunData) -> _Window:
    r = run.requests
    window = steady_window(run)
    start, end = window if window else (np.inf, -np.inf)
    user_ids, user_code = np.unique(r.user, return_inverse=True)
    in_win = (r.sent_s >= start) & (r.sent_s < end)
    return _Window(start, end, window is not None, user_code.reshape(-1), len(user_ids),
                   in_win, in_win & (r.status == "ok"), in_win & (r.status == "incomplete"))


def measure(run: RunData) -> Samples:
    """Samples of every metric of one run (see the module docstring for the rules)."""
    man = run.manifest
    r = run.requests
    w = _window_of(run)
    lat = column_latencies(r)
    values, groups, weights, later, same = _latency_samples(run, lat, w)
    drain_end = w.end + man.load.drain_s if w.found else np.inf
    ran_until = _cut_time(r, drain_end)
    censored, censored_groups = _censored(r, lat, w, ran_until, values, groups)
    u_dec, u_out, u_pre = _tokens_in_window(run, w.user_code, w.n_users, w.start, w.end)
    counters, halves = _window_counters(run, w)
    win_idx = np.flatnonzero(w.in_win)
    ok_win = np.flatnonzero(w.good)
    expected = r.expected_cached_tokens[win_idx]
    cached = r.cached_tokens[win_idx]
    user_code = w.user_code
    return Samples(
        label=man.label, runs=[man.run_id], model=man.model,
        level=level_of(man), gpu_count=man.gpu_count, simulated=man.simulated,
        incomplete=run.incomplete, reasons=[f"{man.run_id}: {x}" for x in run.reasons],
        window_s=(w.end - w.start) if w.found else None,
        values=values, groups=groups, weights=weights, censored=censored,
        censored_groups=censored_groups, n_users=w.n_users,
        user_run=np.zeros(w.n_users, dtype=np.int64),
        user_decode_tokens=u_dec, user_output_tokens=u_out, user_prefill_tokens=u_pre,
        req_status=r.status[win_idx], req_error_kind=r.error_kind[win_idx],
        req_user=user_code[win_idx], req_ttft_due=lat.ttft_due[win_idx],
        req_tpot=lat.tpot[win_idx], req_output=r.output_tokens[win_idx],
        req_asked=r.output_tokens_asked[win_idx],
        req_cut_rate=_cut_rate(r, ran_until)[win_idx], total_records=len(r),
        output_mismatch=_output_mismatch(r, ok_win),
        prompt_mismatch=int(((r.prompt_tokens_server[ok_win] >= 0)
                             & (r.prompt_tokens_server[ok_win] != r.prompt_tokens[ok_win])).sum()),
        prompt_tokens=int(r.prompt_tokens[win_idx].sum()),
        expected_cached=int(expected[expected >= 0].sum()) if (expected >= 0).any() else None,
        reported_cached=int(cached[cached >= 0].sum()) if (cached >= 0).any() else None,
        counters=counters, half_counters=halves, chunks_after_first=later,
        claimed_acceptance=claimed_acceptance(man.server_info or {}),
        chunks_same_read=same,
        energy_j=_energy(run, w),
    )


def _energy(run: RunData, w: _Window) -> float | None:
    """The GPUs' energy over the window, from the run's DCGM samples (None: missing)."""
    gpu = run.gpu
    if gpu is None or not w.found:
        return None
    return series_energy_j(gpu.t_s, gpu.get("power_w"), gpu.replica, w.start, w.end)


_Arrays = dict[str, np.ndarray]


def _latency_samples(run: RunData, lat: Latencies,
                     w: _Window) -> tuple[_Arrays, _Arrays, _Arrays, int, int]:
    """(values, groups, weights) of every per-request, per-token and per-user metric of
    the window, with the ITL reader's chunk counts (after the first, in one read)."""
    r = run.requests
    user_code = w.user_code
    values: _Arrays = {}
    groups: _Arrays = {}

    def put(name: str, v: np.ndarray, g: np.ndarray) -> None:
        keep = np.isfinite(v)
        values[name], groups[name] = v[keep], g[keep]

    good, decoding = w.good, w.decoding
    for name in ("ttft", "ttft_due", "e2e"):
        put(name, getattr(lat, name)[good], user_code[good])
    put("tpot", lat.tpot[decoding], user_code[decoding])
    timed = w.in_win & (r.status != "lost")  # a lost request's send time is not known
    put("schedule_lag", (r.sent_s - r.due_s)[timed], user_code[timed])
    put("interactivity_user", _user_interactivity(r, lat, w), np.arange(w.n_users))
    weights: _Arrays = {}
    values["itl"], groups["itl"], weights["itl"], later, same = _itl(r, decoding, user_code)
    values["itl_reads"], groups["itl_reads"], weights["itl_reads"], _, _ = _itl(
        r, decoding, user_code, by_read=True)
    put("session_latency", *_session_latency(run, user_code, w.start, w.end))
    return values, groups, weights, later, same


def _user_interactivity(r: RequestColumns, lat: Latencies, w: _Window) -> np.ndarray:
    """Per user lane: sum(output tokens - 1) / sum(decode time) (NaN: none measured)."""
    multi = w.decoding & (r.output_tokens >= 2) & (lat.decode_time > 0)  # NaN-safe
    code = w.user_code[multi]
    tok = np.bincount(code, weights=r.output_tokens[multi] - 1, minlength=w.n_users)
    dt = np.bincount(code, weights=lat.decode_time[multi], minlength=w.n_users)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate: np.ndarray = np.where(dt > 0, tok / dt, np.nan)
    return rate


def _censored(r: RequestColumns, lat: Latencies, w: _Window, ran_until: np.ndarray,
              values: _Arrays, groups: _Arrays) -> tuple[_Arrays, _Arrays]:
    """Incomplete requests' latencies, at least what they ran (right-censored); a TTFT
    seen before the cut joins the observed ones (``values`` and ``groups`` grow)."""
    cut, user_code = w.cut, w.user_code
    no_first = cut & ~np.isfinite(r.first_token_s)
    censored = {"ttft": (ran_until - r.sent_s)[no_first],
                "ttft_due": (ran_until - r.due_s)[no_first],
                "e2e": (ran_until - r.sent_s)[cut]}
    censored_groups = {"ttft": user_code[no_first], "ttft_due": user_code[no_first],
                       "e2e": user_code[cut]}
    first_in = cut & np.isfinite(r.first_token_s)  # TTFT observed before the cut
    for name in ("ttft", "ttft_due"):
        values[name] = np.concatenate([values[name], getattr(lat, name)[first_in]])
        groups[name] = np.concatenate([groups[name], user_code[first_in]])
    return censored, censored_groups


def _window_counters(
    run: RunData, w: _Window,
) -> tuple[dict[str, float | None], list[dict[str, float | None]]]:
    """The server counters' deltas over the window and over each of its halves."""
    counters: dict[str, float | None] = {}
    halves: list[dict[str, float | None]] = [{}, {}]
    if w.found:
        mid = (w.start + w.end) / 2.0
        for name in COUNTERS:
            counters[name] = counter_delta(run.metrics, name, w.start, w.end)
            halves[0][name] = counter_delta(run.metrics, name, w.start, mid)
            halves[1][name] = counter_delta(run.metrics, name, mid, w.end)
    return counters, halves


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
