"""Exact percentiles of weighted samples (value i repeated weights[i] times).

A million requests give tens of millions of ITL samples, each chunk of k tokens
weighing k: these functions answer ``np.percentile`` of the expanded sample
without expanding it, and past a size without a full sort.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["weighted_percentile"]


def weighted_percentile(
    values: np.ndarray, weights: np.ndarray, percentiles: Sequence[float],
    *, sort_limit: int = 200_000,
) -> np.ndarray:
    """``np.percentile`` of the sample in which value i appears weights[i] times.

    Exact either way; past ``sort_limit`` values (a million requests give millions
    of ITL values) it sorts only the few histogram bins holding the wanted ranks
    instead of the whole sample.
    """
    w = np.asarray(weights, dtype=np.int64)
    h = (int(w.sum()) - 1) * np.asarray(percentiles, dtype=np.float64) / 100.0
    lo = np.floor(h)
    ranks = np.concatenate([lo, np.ceil(h)])
    if len(values) <= sort_limit:
        at = _values_at_ranks(values, w, ranks, 0)
    else:
        at = _select_ranks(values, w, ranks)
    k = len(lo)
    out: np.ndarray = at[:k] + (h - lo) * (at[k:] - at[:k])
    return out


def _values_at_ranks(values: np.ndarray, weights: np.ndarray, ranks: np.ndarray,
                     before: float) -> np.ndarray:
    """Value at each 0-based rank of the expanded sample, ``before`` ranks below these."""
    order = np.argsort(values, kind="stable")
    c = np.cumsum(weights[order]) + before
    return values[order][np.searchsorted(c, ranks, side="right")]


def _select_ranks(values: np.ndarray, weights: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Exact values at ranks without a full sort: a sample of the values brackets
    each rank, the bracket is checked by counting, and only the values inside it
    are sorted (the bracket widens until the count proves it holds the rank)."""
    # a random sample (fixed seed: the answer is exact whatever it draws; a stride
    # could alias with a pattern in the data)
    pick = np.random.default_rng(0).integers(0, len(values), size=min(len(values), 100_000))
    order = np.argsort(values[pick])
    sample = values[pick][order]
    sample_cum = np.cumsum(weights[pick][order])
    total = float(weights.sum())
    out = np.empty(len(ranks))
    for j, k in enumerate(ranks):
        where = k / total
        margin = 0.005
        while True:
            lo_at, hi_at = (where - margin) * sample_cum[-1], (where + margin) * sample_cum[-1]
            a = -np.inf if lo_at <= 0 else sample[np.searchsorted(sample_cum, lo_at)]
            b = np.inf if hi_at >= sample_cum[-1] else sample[np.searchsorted(sample_cum, hi_at)]
            below = float(np.sum(weights, where=values < a))
            upto = float(np.sum(weights, where=values <= b))
            if below <= k < upto:
                break
            margin *= 4
        inside = (values >= a) & (values <= b)
        out[j] = _values_at_ranks(values[inside], weights[inside], ranks[j:j + 1], below)[0]
    return out
