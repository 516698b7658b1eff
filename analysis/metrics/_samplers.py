"""Samplers of the metrics that are not one value per request: ITL per streamed token,
interactivity per user lane, latency per session; and the window they all draw from.

Rules (written in the report's methodology):
- only requests *sent* inside the steady window are accounted;
- latency samples come from ok requests; an incomplete request's latency is
  right-censored (it ran at least until it was cut), kept as a lower bound;
  its TTFT is exact when its first token came, and so are its TPOT and ITL
  over the tokens that arrived before the cut (a decode rate, not a duration).
"""

from __future__ import annotations

import numpy as np

from analysis.metrics._declare import Drawn, Window
from analysis.metrics._derived import column_latencies
from analysis.read import RunData, steady_window
from analysis.schema import RequestColumns

__all__ = ["chunk_counts", "interactivity_per_user", "itl", "itl_reads", "session_latency",
           "uncached_prompt", "window_of"]


def _cut_time(r: RequestColumns, drain_end: float) -> np.ndarray:
    """When each request was last known running: its end, else the drain's end,
    never before anything it received."""
    seen = np.fmax(np.fmax(r.sent_s, r.first_token_s), r.last_token_s)
    out: np.ndarray = np.fmax(np.where(np.isfinite(r.end_s), r.end_s, drain_end), seen)
    return out


def window_of(run: RunData) -> Window:
    """The run's steady window and what each request was in it."""
    r = run.requests
    window = steady_window(run)
    start, end = window if window else (np.inf, -np.inf)
    user_ids, user_code = np.unique(r.user, return_inverse=True)
    in_win = (r.sent_s >= start) & (r.sent_s < end)
    drain_end = end + run.manifest.load.drain_s if window else np.inf
    return Window(run, column_latencies(r), start, end, window is not None,
                  user_code.reshape(-1), len(user_ids), in_win, in_win & (r.status == "ok"),
                  in_win & (r.status == "incomplete"), _cut_time(r, drain_end))


def uncached_prompt(r: RequestColumns, idx: np.ndarray) -> np.ndarray:
    """Prompt minus cached tokens of the requests ``idx``: the server's counts where
    reported, else the client's prompt and expected reuse."""
    server = r.prompt_tokens_server[idx]
    prompt = np.where(server >= 0, server, r.prompt_tokens[idx])
    reported = r.cached_tokens[idx]
    cached = np.where(reported >= 0, reported, np.maximum(r.expected_cached_tokens[idx], 0))
    out: np.ndarray = np.maximum(prompt - cached, 0).astype(np.float64)
    return out


def _finite(v: np.ndarray, g: np.ndarray) -> Drawn:
    keep = np.isfinite(v)
    return Drawn(v[keep], g[keep])


def _chunk_gaps(
    r: RequestColumns, good: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per chunk: the gap to the chunk before (0 for a request's first), whether it is a
    request's first, whether its request is in ``good``, and whether it arrived in the
    same read as the one before (a later chunk with a gap of 0)."""
    lengths = np.diff(r.chunk_offsets)
    first_chunk = np.zeros(len(r.chunk_times_s), dtype=bool)
    first_chunk[r.chunk_offsets[:-1][lengths > 0]] = True
    t = r.chunk_times_s
    gap = np.empty_like(t)
    gap[0:1] = 0.0
    np.subtract(t[1:], t[:-1], out=gap[1:])
    gap[first_chunk] = 0.0
    mine = np.repeat(good, lengths)
    same = mine & ~first_chunk & (gap == 0.0)
    return gap, first_chunk, mine, same


def chunk_counts(w: Window) -> tuple[int, int]:
    """Chunks of the decoding requests after each one's first, and of those the ones
    that arrived in the same read as the chunk before."""
    _, first_chunk, mine, same = _chunk_gaps(w.requests, w.decoding)
    return int((mine & ~first_chunk).sum()), int(same.sum())


def _itl(w: Window, *, by_read: bool) -> Drawn:
    """ITL samples of the decoding requests: per-token gap, user, weight.

    A chunk of k tokens arriving g after the previous one gives k gaps of g/k; the
    extra tokens of the first chunk arrived with the first token (gaps of 0).
    ``by_read``: chunks with the same timestamp (one socket read) count as one
    arrival of their summed tokens, so coalesced chunks give no gaps of 0."""
    r = w.requests
    gap, first_chunk, mine, same = _chunk_gaps(r, w.decoding)
    k = r.chunk_tokens
    chunk_user = np.repeat(w.user_code.astype(np.int32), np.diff(r.chunk_offsets))
    if by_read:  # one sample group per read: the chunks of a read are merged
        t = r.chunk_times_s
        starts = np.flatnonzero(~same | first_chunk) if len(t) else np.zeros(0, np.int64)
        k = np.add.reduceat(k, starts) if len(starts) else k[:0]
        gap, first_chunk = gap[starts], first_chunk[starts]
        mine, chunk_user = mine[starts], chunk_user[starts]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_tok = gap / np.maximum(k, 1)
    reps = np.maximum(k - first_chunk, 0)
    keep = mine & (reps > 0) & np.isfinite(per_tok)
    return Drawn(per_tok[keep], chunk_user[keep], weights=reps[keep])


def itl(w: Window) -> Drawn:
    """Per streamed token: the gap to the token before (a chunk of k tokens: k gaps)."""
    return _itl(w, by_read=False)


def itl_reads(w: Window) -> Drawn:
    """ITL with the chunks of one socket read merged."""
    return _itl(w, by_read=True)


def interactivity_per_user(w: Window) -> Drawn:
    """Per user lane: sum(output tokens - 1) / sum(decode time) (none measured: left out)."""
    r, lat = w.requests, w.lat
    multi = w.decoding & (r.output_tokens >= 2) & (lat.decode_time > 0)  # NaN-safe
    code = w.user_code[multi]
    tok = np.bincount(code, weights=r.output_tokens[multi] - 1, minlength=w.n_users)
    dt = np.bincount(code, weights=lat.decode_time[multi], minlength=w.n_users)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate: np.ndarray = np.where(dt > 0, tok / dt, np.nan)
    return _finite(rate, np.arange(w.n_users))


def session_latency(w: Window) -> Drawn:
    """First request sent to last token of each session, pauses included.

    A session counts when its first main-agent request (turn 0) was sent in the
    window, all its requests are ok, and its user went on to a later session
    (so the session really ended rather than being cut by the window's end).
    """
    r, user_code = w.requests, w.user_code
    if len(r) == 0:
        return Drawn(np.zeros(0), np.zeros(0, dtype=np.int64))
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
    s_idx = np.flatnonzero(is_start & (r.sent_s >= w.start) & (r.sent_s < w.end))
    started[code[s_idx]] = True
    max_inst = np.full(int(user_code.max()) + 1, -1)
    np.maximum.at(max_inst, user_code, r.session_instance)
    sess_user = np.zeros(n, dtype=np.int64)
    sess_user[code] = user_code
    later = uniq[:, 2] < max_inst[sess_user]
    keep = started & ~bad & later & np.isfinite(last)
    return _finite((last - first_sent)[keep], sess_user[keep])
