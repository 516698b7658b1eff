"""From a run's records to samples: which request counts where.

Rules (written in the report's methodology):
- only requests *sent* inside the steady window are accounted, each in exactly
  one outcome (ok, error kind, timeout, incomplete, cancelled);
- each declared metric draws its samples with its own sampler (``RunSummary``'s
  declarations; ``_samplers``);
- throughputs count every token that *arrived* in the window, whatever the
  request's outcome or the phase it was sent in.
"""

from __future__ import annotations

import numpy as np

from analysis.metrics._catalogue import DECLARED
from analysis.metrics._declare import Window
from analysis.metrics._energy import series_energy_j
from analysis.metrics._samplers import chunk_counts, itl_reads, uncached_prompt, window_of
from analysis.metrics._samples import Samples
from analysis.read import RunData, counter_delta
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
    u_pre = np.bincount(user_code[p_in], weights=uncached_prompt(r, p_in), minlength=n_users)
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


_Arrays = dict[str, np.ndarray]


def _declared_samples(w: Window) -> tuple[_Arrays, _Arrays, _Arrays, _Arrays, _Arrays]:
    """(values, groups, weights, censored, censored groups) of every declared metric
    that draws its own samples, and of the ITL-by-read diagnostic."""
    values: _Arrays = {}
    groups: _Arrays = {}
    weights: _Arrays = {}
    censored: _Arrays = {}
    censored_groups: _Arrays = {}
    drawn = [(m.key, m.sample(w)) for m in DECLARED if m.sample is not None]
    for name, d in [*drawn, ("itl_reads", itl_reads(w))]:
        values[name], groups[name] = d.values, d.groups
        if d.weights is not None:
            weights[name] = d.weights
        if d.censored is not None and d.censored_groups is not None:
            censored[name], censored_groups[name] = d.censored, d.censored_groups
    return values, groups, weights, censored, censored_groups


def measure(run: RunData) -> Samples:
    """Samples of every metric of one run (see the module docstring for the rules)."""
    man = run.manifest
    r = run.requests
    w = window_of(run)
    values, groups, weights, censored, censored_groups = _declared_samples(w)
    later, same = chunk_counts(w)
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
        req_user=user_code[win_idx], req_ttft_due=w.lat.ttft_due[win_idx],
        req_tpot=w.lat.tpot[win_idx], req_output=r.output_tokens[win_idx],
        req_asked=r.output_tokens_asked[win_idx],
        req_cut_rate=_cut_rate(r, w.ran_until)[win_idx], total_records=len(r),
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


def _energy(run: RunData, w: Window) -> float | None:
    """The GPUs' energy over the window, from the run's DCGM samples (None: missing)."""
    gpu = run.gpu
    if gpu is None or not w.found:
        return None
    return series_energy_j(gpu.t_s, gpu.get("power_w"), gpu.replica, w.start, w.end)


def _window_counters(
    run: RunData, w: Window,
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
