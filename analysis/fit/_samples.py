"""What the engine did, reconstructed from the client's records alone.

A serving engine (vLLM, serve-sim) runs steps; every request decoding in a step
gets its next token at the step's end. So each gap between two token reads of one
request is (about) one step, and the step's shape can be counted from all records
at that moment: the requests in decode (first token before it, last token at or
after it), their context (prompt plus the tokens they had by then) and the prompt
tokens prefilled in it (the uncached prompt of every request whose first token came
at the gap's end). Reads of one step by different requests land within a small
tolerance of each other (the client reads sockets one after another).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from analysis.schema import RequestColumns

__all__ = ["StepSamples", "TtftSamples", "running_at", "step_samples", "ttft_samples"]

_MAX_TOLERANCE_S = 0.003
_BURST_SHARE = 0.2


@dataclass(frozen=True)
class StepSamples:
    """One row per inter-token gap of a request."""

    gap_s: np.ndarray
    steps: np.ndarray
    """Tokens in the read that ended the gap (>1: reads coalesced, the gap spans that
    many steps)."""
    batch: np.ndarray
    ctx_tokens: np.ndarray
    prefill_tokens: np.ndarray
    group: np.ndarray
    """Caller's label of the run the row came from (a load level)."""
    buffered: np.ndarray
    """The gap ends a hold-up or starts a catch-up (it, or the request's next gap, is
    under a fifth of the typical gap): tokens made during the hold-up were read late,
    all at once (a client's or a server frontend's stall, not the engine's steps)."""
    t_s: np.ndarray
    """When the gap ended (the run's clock): the window a resampling block holds it in."""

    def __len__(self) -> int:
        return len(self.gap_s)

    @staticmethod
    def concat(parts: list[StepSamples]) -> StepSamples:
        return StepSamples(**{f.name: np.concatenate([getattr(p, f.name) for p in parts])
                              for f in fields(StepSamples)})


@dataclass(frozen=True)
class TtftSamples:
    """One row per request with a first token: TTFT, its uncached prompt, and the
    decode batch it was sent into."""

    ttft_s: np.ndarray
    uncached_tokens: np.ndarray
    batch_at_send: np.ndarray
    alone: np.ndarray
    """Sent to an idle server (nothing else in flight)."""
    group: np.ndarray
    chunks: np.ndarray
    """Engine steps its prefill took on an idle server (the uncached prompt over the
    step token budget, chunked prefill; 1 where the budget is unknown)."""
    t_s: np.ndarray
    """When the request was sent (the run's clock)."""

    def __len__(self) -> int:
        return len(self.ttft_s)

    @staticmethod
    def concat(parts: list[TtftSamples]) -> TtftSamples:
        return TtftSamples(**{f.name: np.concatenate([getattr(p, f.name) for p in parts])
                              for f in fields(TtftSamples)})


@dataclass(frozen=True)
class _Timeline:
    """Sorted first/last token times with running sums, for counts at any moment."""

    first: np.ndarray
    first_prompt: np.ndarray
    last: np.ndarray
    last_prompt: np.ndarray
    last_output: np.ndarray
    emit_t: np.ndarray
    emit_cum: np.ndarray
    uncached_first: np.ndarray
    uncached_cum: np.ndarray

    def batch(self, t: np.ndarray) -> np.ndarray:
        """Requests in decode at ``t``: first token before it, last token not before it."""
        return (np.searchsorted(self.first, t, side="left")
                - np.searchsorted(self.last, t, side="right"))

    def ctx(self, t: np.ndarray) -> np.ndarray:
        """Total context (prompt + output so far) of the requests in decode at ``t``."""
        i_first = np.searchsorted(self.first, t, side="left")
        i_last = np.searchsorted(self.last, t, side="right")
        prompt = self.first_prompt[i_first] - self.last_prompt[i_last]
        emitted = self.emit_cum[np.searchsorted(self.emit_t, t, side="left")]
        return np.asarray(prompt + emitted - self.last_output[i_last], dtype=np.float64)

    def prefilled(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Uncached prompt tokens of the requests whose first token came in (lo, hi]."""
        cum = self.uncached_cum
        return np.asarray(cum[np.searchsorted(self.uncached_first, hi, side="right")]
                          - cum[np.searchsorted(self.uncached_first, lo, side="right")],
                          dtype=np.float64)


def _cum(values: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(values, dtype=np.float64)])


def _uncached(cols: RequestColumns) -> np.ndarray:
    """Prompt tokens the server had to compute: prompt minus cached (the server's
    count where it reported one, else the client's expectation)."""
    cached = np.where(cols.cached_tokens >= 0, cols.cached_tokens,
                      np.maximum(cols.expected_cached_tokens, 0))
    prompt = np.where(cols.prompt_tokens_server >= 0, cols.prompt_tokens_server,
                      cols.prompt_tokens)
    return np.asarray(np.maximum(prompt - cached, 0), dtype=np.float64)


def _timeline(cols: RequestColumns) -> _Timeline:
    first_t = cols.first_token_s
    last_t = np.where(np.isfinite(cols.last_token_s), cols.last_token_s, first_t)
    has = np.isfinite(first_t)
    prompt = np.where(cols.prompt_tokens_server >= 0, cols.prompt_tokens_server,
                      cols.prompt_tokens).astype(np.float64)
    counts = np.diff(cols.chunk_offsets)
    owner = np.repeat(np.arange(len(cols)), counts)
    out_tokens = np.bincount(owner, weights=cols.chunk_tokens, minlength=len(cols))
    fo = np.argsort(first_t[has], kind="stable")
    lo = np.argsort(last_t[has], kind="stable")
    eo = np.argsort(cols.chunk_times_s, kind="stable")
    unc = _uncached(cols)[has]
    return _Timeline(
        first=first_t[has][fo], first_prompt=_cum(prompt[has][fo]),
        last=last_t[has][lo], last_prompt=_cum(prompt[has][lo]),
        last_output=_cum(out_tokens[has][lo]),
        emit_t=cols.chunk_times_s[eo], emit_cum=_cum(cols.chunk_tokens[eo]),
        uncached_first=first_t[has][fo], uncached_cum=_cum(unc[fo]),
    )


def _tolerance(gaps: np.ndarray, tolerance_s: float | None) -> float:
    if tolerance_s is not None:
        return tolerance_s
    if not len(gaps):
        return _MAX_TOLERANCE_S
    return float(min(_MAX_TOLERANCE_S, 0.25 * np.median(gaps)))


def _step_ends(times: np.ndarray, eps: float) -> np.ndarray:
    """Distinct step ends: all token reads, those within ``eps`` of the one before merged."""
    t = np.sort(times[np.isfinite(times)])
    if not len(t):
        return t
    return np.asarray(t[np.concatenate([[True], np.diff(t) > eps])], dtype=np.float64)


def _prefill_by_step(cols: RequestColumns, tl: _Timeline, ends: np.ndarray, eps: float,
                     chunk_tokens: int | None) -> np.ndarray:
    """Prompt tokens computed in each step of ``ends``: a request's uncached prompt in
    chunks of the step budget (``chunk_tokens`` minus the decode batch), the last chunk
    in the step that gave its first token, the earlier ones in the steps before it.

    Only steps read after the request was sent can hold its chunks: a chunk computed in
    a step nobody read (no other request decoding then) is in no gap, and is dropped
    rather than laid on an unrelated earlier step (which made prefill look free: a
    gap of a plain decode step charged with a whole chunk).

    A first token is read later than the same step's other tokens (a new stream's first
    chunk takes the server longer; vLLM's CPU server: up to about 0.7 ms), so ``eps``
    here is wider than the merge tolerance: the step is the last end within ``eps``
    before the first token."""
    out = np.zeros(len(ends))
    has = np.isfinite(cols.first_token_s)
    first = cols.first_token_s[has]
    unc = _uncached(cols)[has]
    if not len(ends):
        return out
    k = np.clip(np.searchsorted(ends, first - eps, side="left"), 0, len(ends) - 1)
    if chunk_tokens is None:
        np.add.at(out, k, unc)
        return out
    sent = np.where(np.isfinite(cols.sent_s[has]), cols.sent_s[has], -np.inf)
    lo = np.searchsorted(ends, sent, side="right")
    budget = np.maximum(chunk_tokens - tl.batch(first - eps), 1)
    chunks = np.maximum(np.ceil(unc / budget), 1).astype(np.int64)
    last = unc - budget * (chunks - 1)
    for i in np.flatnonzero(chunks > 1):
        n = int(max(min(chunks[i], k[i] - lo[i] + 1), 1))
        out[k[i] - n + 1:k[i]] += budget[i]
        out[k[i]] += last[i]
    one = chunks == 1
    np.add.at(out, k[one], unc[one])
    return out


def step_samples(cols: RequestColumns, *, group: int = 0, tolerance_s: float | None = None,
                 chunk_tokens: int | None = None) -> StepSamples:
    """Every inter-token gap of every request, with the step shape at the gap's end.

    ``chunk_tokens`` is the server's step token budget (``max_num_batched_tokens``):
    a prompt longer than it is prefilled over several steps (chunked prefill)."""
    starts, ends = cols.chunk_offsets[:-1], cols.chunk_offsets[1:]
    n = ends - starts
    keep = np.ones(len(cols.chunk_times_s), dtype=bool)
    keep[starts[n > 0]] = False  # each request's first read has no gap before it
    prev = np.concatenate([[np.nan], cols.chunk_times_s[:-1]])
    t_next = cols.chunk_times_s[keep]
    t_prev = prev[keep]
    gaps = t_next - t_prev
    ok = np.isfinite(gaps) & (gaps > 0)
    t_next, t_prev, gaps = t_next[ok], t_prev[ok], gaps[ok]
    steps = cols.chunk_tokens[keep][ok].astype(np.float64)
    owner = np.repeat(np.arange(len(cols)), n)[keep][ok]
    eps = _tolerance(gaps, tolerance_s)
    eps_first = eps if tolerance_s is not None or not len(gaps) else max(
        eps, min(_MAX_TOLERANCE_S, 0.5 * float(np.median(gaps))))
    tl = _timeline(cols)
    step_end = _step_ends(cols.chunk_times_s, eps)
    cum = _cum(_prefill_by_step(cols, tl, step_end, eps_first, chunk_tokens))
    prefill = (cum[np.searchsorted(step_end, t_next + eps, side="right")]
               - cum[np.searchsorted(step_end, t_prev + eps, side="right")])
    at = t_next - eps
    return StepSamples(
        gap_s=gaps, steps=steps, batch=tl.batch(at).astype(np.float64),
        ctx_tokens=tl.ctx(at), prefill_tokens=prefill,
        group=np.full(len(gaps), group, dtype=np.int64), buffered=_buffered(gaps, owner),
        t_s=np.asarray(t_next, dtype=np.float64),
    )


def _buffered(gaps: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Gaps of a read burst, and the gap before it (see ``StepSamples.buffered``)."""
    if not len(gaps):
        return np.zeros(0, dtype=bool)
    short = gaps < _BURST_SHARE * float(np.median(gaps))
    before = np.zeros(len(gaps), dtype=bool)
    before[:-1] = short[1:] & (owner[1:] == owner[:-1])
    return np.asarray(short | before, dtype=bool)


def ttft_samples(cols: RequestColumns, *, group: int = 0,
                 chunk_tokens: int | None = None) -> TtftSamples:
    """TTFT of every request that got a first token, and what it had to prefill.

    ``alone`` marks the requests sent when no other was in flight: their TTFT is the
    prefill alone (plus the fixed overhead), in ``chunks`` steps of at most
    ``chunk_tokens`` (``max_num_batched_tokens``). Lanes' first requests count too: they
    carry the long uncached prompts that pin the prefill rate (opening a loopback
    connection costs well under a millisecond, and the robust fit shrugs off a cold
    first one)."""
    has = np.isfinite(cols.first_token_s) & np.isfinite(cols.sent_s)
    tl = _timeline(cols)
    sent = cols.sent_s[has]
    others = running_at(cols, sent) - 1
    unc = _uncached(cols)[has]
    chunks = np.ones(len(unc)) if chunk_tokens is None else np.maximum(
        np.ceil(unc / chunk_tokens), 1)
    return TtftSamples(
        ttft_s=cols.first_token_s[has] - sent, uncached_tokens=unc,
        batch_at_send=tl.batch(sent).astype(np.float64), alone=others <= 0,
        group=np.full(int(has.sum()), group, dtype=np.int64), chunks=chunks,
        t_s=np.asarray(sent, dtype=np.float64),
    )


def running_at(cols: RequestColumns, t: np.ndarray) -> np.ndarray:
    """Requests between send and last token at each time of ``t`` (what the server
    counts as running when nothing queues): to hold against ``num_requests_running``."""
    has = np.isfinite(cols.sent_s)
    end = np.where(np.isfinite(cols.last_token_s), cols.last_token_s, cols.end_s)[has]
    end = np.where(np.isfinite(end), end, np.inf)
    sent = np.sort(cols.sent_s[has])
    return (np.searchsorted(sent, t, side="right")
            - np.searchsorted(np.sort(end), t, side="right")).astype(np.float64)
