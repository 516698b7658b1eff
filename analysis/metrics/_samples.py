"""Samples: one run's (or pooled runs') metric values tagged with their users.

Each value carries the code of the user it came from (the bootstrap's unit);
``user_run`` says which run each user code belongs to, so a bootstrap can
resample runs first and users within them. ``pool`` joins repeats of one arm
and level, keeping each run's users distinct.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.schema import LoadLevel

__all__ = ["Samples", "pool"]


@dataclass
class Samples:
    """Per-metric values with user codes, and per-user totals in the window."""

    label: str
    runs: list[str]
    model: str
    level: LoadLevel
    """What set the load (users, a session rate, a time scale)."""
    gpu_count: int | None
    simulated: bool
    incomplete: bool
    reasons: list[str]
    window_s: float | None
    values: dict[str, np.ndarray]
    groups: dict[str, np.ndarray]
    weights: dict[str, np.ndarray]
    """Repeat counts for metrics whose samples are weighted (ITL: tokens per chunk)."""
    censored: dict[str, np.ndarray]
    """Lower bounds of latencies of incomplete requests (ran until the drain end)."""
    censored_groups: dict[str, np.ndarray]
    n_users: int
    """Distinct user codes (0..n_users-1) across all arrays below."""
    user_run: np.ndarray
    """Run index (0..len(runs)-1) of each user code."""
    user_decode_tokens: np.ndarray
    user_output_tokens: np.ndarray
    user_prefill_tokens: np.ndarray
    # requests sent in the window (any status), for goodput and counts
    req_status: np.ndarray
    req_error_kind: np.ndarray
    req_user: np.ndarray
    req_ttft_due: np.ndarray
    req_tpot: np.ndarray
    req_output: np.ndarray
    """Output tokens received (of record) per request sent in the window..."""
    req_asked: np.ndarray
    """...and asked for."""
    req_cut_rate: np.ndarray
    """Incomplete requests: tokens after the first over first token to the cut (the
    pace they kept until the drain ended; a stalled stream is slow); NaN otherwise."""
    total_records: int
    output_mismatch: int
    prompt_mismatch: int
    prompt_tokens: int
    expected_cached: int | None
    reported_cached: int | None
    counters: dict[str, float | None]
    """Server counter deltas over the window (summed over pooled runs)."""
    half_counters: list[dict[str, float | None]]
    """The same deltas over the first and the second half of the window."""
    claimed_acceptance: float | None = None
    """The speculative acceptance length the server (or simulator profile) claims."""
    chunks_after_first: int = 0
    """Chunks of ok requests in the window after each request's first chunk..."""
    chunks_same_read: int = 0
    """...of which arrived in the same socket read as the one before (same timestamp)."""
    energy_j: float | None = None
    """GPU energy over the window from the run's DCGM exporters (None: not scraped, or
    the samples miss the window; pooled: None unless every run has one)."""


def _sum_known(vals: list[float | None]) -> float | None:
    known = [v for v in vals if v is not None]
    return float(sum(known)) if len(known) == len(vals) else None


def _sum_counters(parts: list[dict[str, float | None]]) -> dict[str, float | None]:
    names = dict.fromkeys(n for p in parts for n in p)
    return {n: _sum_known([p.get(n) for p in parts]) for n in names}


def pool(parts: list[Samples]) -> Samples:
    """Repeats of one arm and level as one sample: users of each run stay distinct."""
    if len(parts) == 1:
        return parts[0]
    offsets = np.cumsum([0] + [p.n_users for p in parts])
    run_offsets = np.cumsum([0] + [len(p.runs) for p in parts])
    first = parts[0]

    def cat(attr: str) -> np.ndarray:
        return np.concatenate([getattr(p, attr) for p in parts])

    def shifted(arrays: list[np.ndarray], by: np.ndarray) -> np.ndarray:
        return np.concatenate([a + o for a, o in zip(arrays, by, strict=False)])

    def total(attr: str) -> int | None:
        vals = [getattr(p, attr) for p in parts if getattr(p, attr) is not None]
        return int(sum(vals)) if vals else None

    windows = [p.window_s for p in parts]
    energies = [p.energy_j for p in parts]
    gpus = {p.gpu_count for p in parts}
    return Samples(
        label=first.label, runs=[x for p in parts for x in p.runs], model=first.model,
        level=first.level,
        gpu_count=first.gpu_count if len(gpus) == 1 else None,
        simulated=any(p.simulated for p in parts), incomplete=any(p.incomplete for p in parts),
        reasons=[x for p in parts for x in p.reasons],
        window_s=float(sum(w for w in windows if w is not None))
        if all(w is not None for w in windows) else None,
        values={m: np.concatenate([p.values[m] for p in parts]) for m in first.values},
        groups={m: shifted([p.groups[m] for p in parts], offsets) for m in first.groups},
        weights={m: np.concatenate([p.weights[m] for p in parts]) for m in first.weights},
        censored={m: np.concatenate([p.censored[m] for p in parts]) for m in first.censored},
        censored_groups={m: shifted([p.censored_groups[m] for p in parts], offsets)
                         for m in first.censored_groups},
        n_users=int(offsets[-1]),
        user_run=shifted([p.user_run for p in parts], run_offsets),
        user_decode_tokens=cat("user_decode_tokens"),
        user_output_tokens=cat("user_output_tokens"),
        user_prefill_tokens=cat("user_prefill_tokens"),
        req_status=cat("req_status"), req_error_kind=cat("req_error_kind"),
        req_user=shifted([p.req_user for p in parts], offsets),
        req_ttft_due=cat("req_ttft_due"), req_tpot=cat("req_tpot"),
        req_output=cat("req_output"), req_asked=cat("req_asked"),
        req_cut_rate=cat("req_cut_rate"),
        total_records=sum(p.total_records for p in parts),
        output_mismatch=sum(p.output_mismatch for p in parts),
        prompt_mismatch=sum(p.prompt_mismatch for p in parts),
        prompt_tokens=sum(p.prompt_tokens for p in parts),
        expected_cached=total("expected_cached"), reported_cached=total("reported_cached"),
        counters=_sum_counters([p.counters for p in parts]),
        half_counters=[_sum_counters([p.half_counters[i] for p in parts])
                       for i in range(min(len(p.half_counters) for p in parts))],
        claimed_acceptance=first.claimed_acceptance
        if len({p.claimed_acceptance for p in parts}) == 1 else None,
        chunks_after_first=sum(p.chunks_after_first for p in parts),
        chunks_same_read=sum(p.chunks_same_read for p in parts),
        energy_j=float(sum(e for e in energies if e is not None))
        if all(e is not None for e in energies) else None,
    )
