"""Statistics of a workload, comparable with the published trace statistics.

Pure: one pass over an iterator of sessions (a streamed file works), returning
a pydantic model; ``format_stats`` renders it as text. Prefix reuse assumes an
infinite cache and counts blocks: a block is a hit when the same block ids,
from the first block up to it, were sent before. ``reuse_share`` looks across
the whole workload (shared system prompts count), ``session_reuse_share`` only
within each session and its subagents (the definition behind WEKA's 96.3%).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel

from traces._models import Request, Session, WorkloadHeader

__all__ = [
    "Distribution",
    "WorkloadStats",
    "format_stats",
    "header_rows",
    "inspect_sessions",
    "stats_rows",
]

_MASK = (1 << 64) - 1


class Distribution(BaseModel):
    """P50, P90 and mean of a sample (None when the sample is empty)."""

    count: int
    p50: float | None
    p90: float | None
    mean: float | None

    @classmethod
    def of(cls, values: list[float] | list[int]) -> Distribution:
        if not values:
            return cls(count=0, p50=None, p90=None, mean=None)
        arr = np.asarray(values, dtype=np.float64)
        p50, p90 = np.percentile(arr, [50, 90])
        return cls(count=len(values), p50=float(p50), p90=float(p90), mean=float(arr.mean()))


class WorkloadStats(BaseModel):
    """What a workload asks of a server, in the terms of SOURCES.md."""

    sessions: int
    requests: int
    """All LLM calls, subagents' included."""
    prompt_tokens_total: int
    output_tokens_total: int
    prompt_tokens: Distribution
    output_tokens: Distribution
    first_prompt_tokens: Distribution
    turns_per_session: Distribution
    think_time_s: Distribution
    """Pauses before every request but the first of each chain."""
    gaps_over_60s_share: float | None
    gaps_over_300s_share: float | None
    reuse_share: float | None
    session_reuse_share: float | None
    tool_result_share: float | None
    user_text_share: float | None
    subagents: int
    sessions_with_subagents: int
    subagent_prompt_tokens: Distribution
    compactions: int
    sessions_compacted: int


_P = np.uint64(0x100000001B3 | 1)  # odd, so invertible modulo 2**64
_P_INV = np.uint64(pow(int(_P), -1, 1 << 64))


class _Powers:
    """P**t and P**-t modulo 2**64 for t = 0, 1, ... (grown on demand)."""

    def __init__(self) -> None:
        self.pos = np.ones(1, dtype=np.uint64)
        self.neg = np.ones(1, dtype=np.uint64)

    def upto(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self.pos) < n + 1:
            size = max(n + 1, 2 * len(self.pos))
            self.pos = np.cumprod(np.concatenate(
                [np.ones(1, dtype=np.uint64), np.full(size - 1, _P, dtype=np.uint64)]))
            self.neg = np.cumprod(np.concatenate(
                [np.ones(1, dtype=np.uint64), np.full(size - 1, _P_INV, dtype=np.uint64)]))
        return self.pos[: n + 1], self.neg[: n + 1]


_POWERS = _Powers()


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return np.asarray(z ^ (z >> np.uint64(31)))


def _extend_keys(base: np.uint64, block_ids: tuple[int, ...]) -> np.ndarray:
    """Prefix keys of new blocks after a prefix whose last key is ``base``.

    A polynomial hash over mixed ids, H_i = H_{i-1} * P + x_i (mod 2**64),
    vectorised: H_t = base * P**(t+1) + P**t * cumsum(x_u * P**-u).
    """
    m = len(block_ids)
    if not m:
        return np.empty(0, dtype=np.uint64)
    try:
        raw = np.asarray(block_ids, dtype=np.int64).view(np.uint64)
    except OverflowError:  # ids beyond int64: wrap them one by one
        raw = np.fromiter((b & _MASK for b in block_ids), dtype=np.uint64, count=m)
    x = _mix(raw)
    pos, neg = _POWERS.upto(m)
    return np.asarray(base * pos[1:] + pos[:m] * np.cumsum(x * neg[:m], dtype=np.uint64))


class _SeenKeys:
    """A large set of 64-bit keys: a Python set, spilled into sorted numpy runs.

    Runs are merged like a binary counter, so there are O(log n) of them and
    memory is ~8 bytes a key once spilled.
    """

    def __init__(self, spill: int = 1 << 18) -> None:
        self._recent: set[int] = set()
        self._runs: list[np.ndarray] = []
        self._spill = spill

    def __contains__(self, key: int) -> bool:
        if key in self._recent:
            return True
        k = np.uint64(key)
        for arr in self._runs:
            i = int(np.searchsorted(arr, k))
            if i < len(arr) and arr[i] == k:
                return True
        return False

    def update(self, keys: Iterable[int]) -> None:
        self._recent.update(keys)
        if len(self._recent) >= self._spill:
            run = np.sort(np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent)))
            self._recent = set()
            while self._runs and len(self._runs[-1]) <= 2 * len(run):
                run = _sorted_union(self._runs.pop(), run)
            self._runs.append(run)


def _sorted_union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Union of two sorted unique arrays (np.unique's hashing is slow on uint64)."""
    both = np.concatenate([a, b])
    both.sort(kind="stable")
    if len(both) < 2:
        return both
    return np.asarray(both[np.concatenate([[True], both[1:] != both[:-1]])])


class _Tally:
    def __init__(self) -> None:
        self.prompt: list[int] = []
        self.output: list[int] = []
        self.think: list[float] = []
        self.sub_prompt: list[int] = []
        self.blocks = 0
        self.hits_global = 0
        self.hits_session = 0
        self.kinds: dict[str, int] = {}
        self.subagents = 0
        self.seen = _SeenKeys()

    def chain(self, requests: tuple[Request, ...], local: set[int], is_sub: bool) -> None:
        keys = np.empty(0, dtype=np.uint64)
        for i, req in enumerate(requests):
            self.prompt.append(req.prompt_tokens)
            self.output.append(req.output_tokens)
            if is_sub:
                self.sub_prompt.append(req.prompt_tokens)
            if i:
                self.think.append(req.think_time_s)
            self.kinds[req.kind] = self.kinds.get(req.kind, 0) + 1
            kept = keys[: req.prefix_blocks]
            base = kept[-1] if len(kept) else np.uint64(0x243F6A8885A308D3)
            fresh = _extend_keys(base, req.new_block_ids)
            keys = np.concatenate([kept, fresh])
            new = fresh.tolist()
            self.blocks += len(keys)
            self.hits_global += req.prefix_blocks + _leading_hits(new, self.seen)
            self.hits_session += req.prefix_blocks + _leading_hits(new, local)
            self.seen.update(new)
            local.update(new)
            for sub in req.subagents:
                self.subagents += 1
                self.chain(sub.requests, local, True)


def _leading_hits(keys: list[int], seen: _SeenKeys | set[int]) -> int:
    n = 0
    for key in keys:
        if key not in seen:
            break
        n += 1
    return n


def inspect_sessions(sessions: Iterable[Session]) -> WorkloadStats:
    """One pass over the sessions; memory grows with distinct blocks (8-70 B each)."""
    t = _Tally()
    first: list[int] = []
    turns: list[int] = []
    n_sessions = with_subs = compactions = compacted = 0
    for session in sessions:
        n_sessions += 1
        first.append(session.requests[0].prompt_tokens)
        turns.append(len(session.requests))
        before = t.subagents
        t.chain(session.requests, set(), False)
        with_subs += t.subagents > before
        compactions += session.compactions
        compacted += session.compactions > 0
    n_req = len(t.prompt)
    think = np.asarray(t.think, dtype=np.float64)

    def share(x: int | float) -> float | None:
        return float(x) / n_req if n_req else None

    return WorkloadStats(
        sessions=n_sessions,
        requests=n_req,
        prompt_tokens_total=int(sum(t.prompt)),
        output_tokens_total=int(sum(t.output)),
        prompt_tokens=Distribution.of(t.prompt),
        output_tokens=Distribution.of(t.output),
        first_prompt_tokens=Distribution.of(first),
        turns_per_session=Distribution.of(turns),
        think_time_s=Distribution.of(t.think),
        gaps_over_60s_share=float((think > 60).mean()) if len(think) else None,
        gaps_over_300s_share=float((think > 300).mean()) if len(think) else None,
        reuse_share=t.hits_global / t.blocks if t.blocks else None,
        session_reuse_share=t.hits_session / t.blocks if t.blocks else None,
        tool_result_share=share(t.kinds.get("tool_result", 0)),
        user_text_share=share(t.kinds.get("user_text", 0)),
        subagents=t.subagents,
        sessions_with_subagents=with_subs,
        subagent_prompt_tokens=Distribution.of(t.sub_prompt),
        compactions=compactions,
        sessions_compacted=compacted,
    )


def _num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def stats_rows(stats: WorkloadStats) -> list[tuple[str, str, str, str]]:
    """(measure, p50, p90, mean) rows, for text or a rich table."""
    rows: list[tuple[str, str, str, str]] = []
    dists = [
        ("prompt tokens per request", stats.prompt_tokens, 0),
        ("output tokens per request", stats.output_tokens, 0),
        ("first prompt tokens", stats.first_prompt_tokens, 0),
        ("turns per session", stats.turns_per_session, 1),
        ("think time (s)", stats.think_time_s, 1),
        ("subagent prompt tokens", stats.subagent_prompt_tokens, 0),
    ]
    for name, d, digits in dists:
        rows.append((name, _num(d.p50, digits), _num(d.p90, digits), _num(d.mean, digits)))
    singles = [
        ("sessions", f"{stats.sessions:,}"),
        ("requests (subagents included)", f"{stats.requests:,}"),
        ("prompt tokens total", f"{stats.prompt_tokens_total:,}"),
        ("output tokens total", f"{stats.output_tokens_total:,}"),
        ("prefix reuse (workload, infinite cache)", _pct(stats.reuse_share)),
        ("prefix reuse (within session)", _pct(stats.session_reuse_share)),
        ("gaps > 60 s", _pct(stats.gaps_over_60s_share)),
        ("gaps > 300 s", _pct(stats.gaps_over_300s_share)),
        ("tool-result requests", _pct(stats.tool_result_share)),
        ("user-text requests", _pct(stats.user_text_share)),
        ("subagents (sessions with any)", f"{stats.subagents} ({stats.sessions_with_subagents})"),
        ("compactions (sessions compacted)", f"{stats.compactions} ({stats.sessions_compacted})"),
    ]
    rows.extend((name, value, "", "") for name, value in singles)
    return rows


def header_rows(header: WorkloadHeader) -> list[tuple[str, str]]:
    """(measure, value) rows for what the generator or importer changed or found.

    Read from the header's params, so they say what happened before any cap or
    scale was applied (the sessions alone cannot tell).
    """
    p = header.params
    rows: list[tuple[str, str]] = []
    if p.get("profile") == "decode":
        rows.append(("decode: input / output tokens",
                     f"{p.get('input_tokens')} / {p.get('output_tokens')} (ignore_eos)"))
    if header.max_context is not None:
        rows.append(("max context (tokens)", f"{header.max_context:,}"))
    if "token_scale" in p:
        rows.append(("token scale (sizes x, to fit the context)", f"{p['token_scale']:g}"))
    for key, name in (("truncated_requests", "requests truncated by the cap"),
                      ("compactions", "compactions forced by the cap"),
                      ("outputs_capped", "outputs capped")):
        if key in p:
            rows.append((name, f"{p[key]:,}"))
    if "duplicate_sessions" in p:
        what = "dropped" if p.get("dedupe") else "kept"
        rows.append(("duplicate sessions", f"{p['duplicate_sessions']:,} ({what})"))
    return rows


def format_stats(stats: WorkloadStats) -> str:
    """A plain-text table of the statistics."""
    rows = [("measure", "p50", "p90", "mean"), *stats_rows(stats)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, 4)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
