"""Percentiles with 95% bootstrap intervals that resample users, not requests.

Requests of one user are not independent (same session, same cache state, same
place in the batch), so the unit of resampling is the user lane: each bootstrap
replicate draws users with replacement and keeps all their samples. Replicates
are computed in blocks of a matrix, never one Python loop per replicate:

- up to ``EXACT_LIMIT`` samples, exactly: a replicate is the sample weighted by
  how often each user was drawn, and its quantile is the linearly interpolated
  quantile of that expanded sample (what ``np.percentile`` would give);
- above, on a fine histogram per user (equal-count edges plus log-spaced edges
  of relative width ``HIST_REL_WIDTH``), interpolated inside the bin: an error
  far below the width of any interval this tool reports, at a cost that grows
  with users x bins, not with the sample.

Samples may carry integer weights (a streamed chunk of k tokens is k ITL
samples of one value): every statistic is then that of the expanded sample.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from analysis.metrics._weighted import weighted_percentile

__all__ = [
    "BOOTSTRAP_REPS",
    "Distribution",
    "bootstrap_quantiles",
    "bootstrap_sums",
    "distribution",
    "draw_counts",
    "group_codes",
    "invert_distribution",
    "metric_rng",
    "small_sample_widening",
    ]

BOOTSTRAP_REPS = 1000
CONFIDENCE = 0.95
EXACT_LIMIT = 50_000
HIST_REL_WIDTH = 0.002
HIST_COUNT_EDGES = 1000
HIST_LOG_EDGES = 1500
_BLOCK_CELLS = 4_000_000
QUANTILES = (50.0, 90.0, 99.0)


class Distribution(BaseModel):
    """One metric's sample: count, mean, P50/P90/P99 and their 95% intervals.

    For a lower-is-better metric (latencies) ``pXX`` is the XXth percentile. For
    a higher-is-better one (rates: interactivity) ``pXX`` is the value that XX%
    of the sample meets or beats, i.e. the (100-XX)th percentile: "P90
    interactivity" is always the slow tail. Empty samples carry None, never 0.
    """

    model_config = ConfigDict(extra="forbid")

    unit: str
    higher_is_better: bool = False
    count: int = 0
    groups: int = 0
    """Distinct users the sample came from (the bootstrap's resampling unit)."""
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p50_ci: tuple[float, float] | None = None
    p90_ci: tuple[float, float] | None = None
    p99_ci: tuple[float, float] | None = None
    censored: int = 0
    """Values that are lower bounds (requests cut at the drain's end)."""
    bounds: list[str] = []
    """Statistics that are lower bounds because of censored values (``≥``)."""

    def value(self, name: str) -> float | None:
        """A statistic by name (``mean``, ``p50``, ``p90``, ``p99``)."""
        v: float | None = getattr(self, name)
        return v

    def ci(self, name: str) -> tuple[float, float] | None:
        c: tuple[float, float] | None = getattr(self, f"{name}_ci", None)
        return c


_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
"""Student's t 97.5% quantiles for 1..30 degrees of freedom."""


def small_sample_widening(units: int) -> float:
    """How much wider a percentile-bootstrap interval over ``units`` resampled units
    must be to hold its 95% coverage: t(units-1)/z times sqrt(units/(units-1)).

    The plain bootstrap treats the few units it has as the whole population and
    undercovers badly below ~10 units (with 4 users per arm, two identical arms
    "differ" about three times as often as 5%); this is the usual correction."""
    if units < 2:
        return float("inf")
    df = units - 1
    t = _T975[df - 1] if df <= len(_T975) else 1.959964 + 2.4 / df
    return float(t / 1.959964 * np.sqrt(units / df))


def metric_rng(seed: int, name: str) -> np.random.Generator:
    """A generator per (seed, metric): results do not depend on metric order."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def group_codes(*keys: np.ndarray) -> np.ndarray:
    """Dense int codes 0..G-1 for the distinct combinations of the key arrays."""
    if not keys or len(keys[0]) == 0:
        return np.zeros(0, dtype=np.int64)
    if len(keys) == 1:
        k = np.asarray(keys[0])
        if k.dtype.kind in "iu" and k.min() >= 0 and k.max() < 4 * len(k) + 1024:
            present = np.bincount(k) > 0
            out: np.ndarray = (np.cumsum(present) - 1)[k].astype(np.int64)
            return out
        _, codes = np.unique(k, return_inverse=True)
        return codes.reshape(-1).astype(np.int64)
    stacked = np.stack([np.asarray(k, dtype=np.int64) for k in keys], axis=1)
    _, codes = np.unique(stacked, axis=0, return_inverse=True)
    return codes.reshape(-1).astype(np.int64)


def draw_counts(
    n_groups: int, reps: int, rng: np.random.Generator, clusters: np.ndarray | None = None
) -> np.ndarray:
    """How often each group is drawn in each replicate: (reps, n_groups).

    With ``clusters`` (the cluster of each group, e.g. the run a user belongs
    to) and more than one cluster, the draw is two-level: clusters with
    replacement, then groups with replacement within each drawn cluster, so the
    spread between clusters (drift between runs) is in the replicates."""
    if clusters is not None and len(np.unique(clusters)) > 1:
        return _draw_nested(np.asarray(clusters), reps, rng)
    draws = rng.integers(0, n_groups, size=(reps, n_groups))
    draws += np.arange(reps)[:, None] * n_groups
    return np.bincount(draws.ravel(), minlength=reps * n_groups).reshape(reps, n_groups)


def _draw_nested(clusters: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    order = np.argsort(clusters, kind="stable")  # groups of one cluster side by side
    _, cl_code = np.unique(clusters, return_inverse=True)
    sizes = np.bincount(cl_code.reshape(-1))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    n_cl, n_groups = len(sizes), len(clusters)
    out = np.zeros((reps, n_groups), dtype=np.int64)
    for i in range(reps):
        picked = np.bincount(rng.integers(0, n_cl, size=n_cl), minlength=n_cl)
        draws = picked * sizes
        base = np.repeat(starts, draws)
        within = np.floor(rng.random(len(base)) * np.repeat(sizes, draws)).astype(np.int64)
        out[i, order] = np.bincount(base + within, minlength=n_groups)
    return out


def _exact_quantiles(
    values: np.ndarray, codes: np.ndarray, counts: np.ndarray, qs: np.ndarray,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    v = values[order]
    g = codes[order]
    wt = None if weights is None else weights[order]
    reps = counts.shape[0]
    out = np.empty((reps, len(qs)))
    block = max(1, _BLOCK_CELLS // max(1, len(v)))
    for start in range(0, reps, block):
        w = counts[start:start + block][:, g]
        if wt is not None:
            w = w * wt
        c = np.cumsum(w, axis=1)
        total = c[:, -1]
        for j, q in enumerate(qs):
            h = (total - 1) * q
            lo = np.floor(h)
            frac = h - lo
            # index of the element holding expanded position k: #(c <= k)
            i_lo = (c <= lo[:, None]).sum(axis=1)
            i_hi = (c <= np.ceil(h)[:, None]).sum(axis=1)
            out[start:start + block, j] = v[i_lo] + frac * (v[i_hi] - v[i_lo])
    return out


def _edges(values: np.ndarray) -> np.ndarray:
    """Bin edges fine where the data are dense (equal-count edges) and in relative
    terms everywhere positive (log-spaced edges), whatever the scale."""
    vmin, vmax = float(values.min()), float(values.max())
    ranks = np.linspace(0.0, 1.0, HIST_COUNT_EDGES + 1)
    step = max(1, len(values) // 200_000)  # the edges need not come from every value
    parts = [np.quantile(values[::step], ranks), [vmin, vmax]]
    pos = values[values > 0]
    if len(pos):
        lo = float(pos.min())
        n = int(np.ceil(np.log(vmax / lo) / np.log1p(HIST_REL_WIDTH))) if vmax > lo else 1
        parts.append(np.geomspace(lo, vmax, min(max(n, 2), HIST_LOG_EDGES) + 1))
    return np.unique(np.concatenate(parts))


def _hist_quantiles(
    values: np.ndarray, codes: np.ndarray, counts: np.ndarray, qs: np.ndarray,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    n_groups = counts.shape[1]
    vmin = float(values.min())
    if vmin == float(values.max()):
        return np.full((counts.shape[0], len(qs)), vmin)
    edges = _edges(values)
    n_bins = len(edges) - 1
    idx = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, n_bins - 1)
    hist = np.bincount(codes * n_bins + idx, weights=weights, minlength=n_groups * n_bins)
    # float32 halves the cost of the product; quantile positions need no more
    hist = hist.reshape(n_groups, n_bins).astype(np.float32)
    out = np.empty((counts.shape[0], len(qs)))
    block = max(1, _BLOCK_CELLS // n_bins)
    for start in range(0, counts.shape[0], block):
        h = (counts[start:start + block].astype(np.float32) @ hist).astype(np.float64)
        c = np.cumsum(h, axis=1)
        total = c[:, -1]
        for j, q in enumerate(qs):
            target = q * total
            b = np.minimum((c < target[:, None]).sum(axis=1), n_bins - 1)
            rows = np.arange(len(b))
            before = np.where(b > 0, c[rows, np.maximum(b - 1, 0)], 0.0)
            inside = np.maximum(h[rows, b], 1e-300)
            frac = np.clip((target - before) / inside, 0.0, 1.0)
            out[start:start + block, j] = edges[b] + frac * (edges[b + 1] - edges[b])
    return out


def bootstrap_quantiles(
    values: np.ndarray,
    groups: np.ndarray,
    percentiles: Sequence[float],
    *,
    reps: int = BOOTSTRAP_REPS,
    rng: np.random.Generator,
    weights: np.ndarray | None = None,
    clusters: np.ndarray | None = None,
) -> np.ndarray:
    """Replicates of the given percentiles, resampling groups: (reps, len(percentiles)).

    ``clusters[g]`` is the cluster of group id ``g`` (ids as in ``groups``): see
    ``draw_counts``; groups without samples are then still drawn (as empty)."""
    values = np.asarray(values, dtype=np.float64)
    qs = np.asarray(percentiles, dtype=np.float64) / 100.0
    if len(values) == 0:
        raise ValueError("empty sample")
    if clusters is not None:
        codes = np.asarray(groups, dtype=np.int64)
        counts = draw_counts(len(clusters), reps, rng, clusters)
        if np.any(counts[:, np.unique(codes)].sum(axis=1) == 0):
            counts = _redraw_empty(counts, codes, rng, clusters)
    else:
        codes = group_codes(np.asarray(groups))
        counts = draw_counts(int(codes.max()) + 1, reps, rng)
    if len(values) <= EXACT_LIMIT:
        return _exact_quantiles(values, codes, counts, qs, weights)
    return _hist_quantiles(values, codes, counts, qs, weights)


def _redraw_empty(
    counts: np.ndarray, codes: np.ndarray, rng: np.random.Generator, clusters: np.ndarray
) -> np.ndarray:
    """Replace replicates that drew no group holding a sample (possible when
    some users have none) by fresh ones, so every replicate has a quantile."""
    present = np.unique(codes)
    for _ in range(100):
        empty = np.flatnonzero(counts[:, present].sum(axis=1) == 0)
        if len(empty) == 0:
            break
        counts[empty] = draw_counts(len(clusters), len(empty), rng, clusters)
    else:  # pragma: no cover - a sample that almost no draw reaches
        raise ValueError("bootstrap draws keep missing every sample")
    return counts


def bootstrap_sums(
    per_group: np.ndarray, *, reps: int = BOOTSTRAP_REPS, rng: np.random.Generator,
    clusters: np.ndarray | None = None,
) -> np.ndarray:
    """Replicates of the total of per-group amounts, resampling groups: (reps,)."""
    per_group = np.asarray(per_group, dtype=np.float64)
    if len(per_group) == 0:
        raise ValueError("empty sample")
    counts = draw_counts(len(per_group), reps, rng, clusters)
    sums: np.ndarray = counts @ per_group
    return sums


def _interval(replicates: np.ndarray) -> tuple[float, float]:
    alpha = (1.0 - CONFIDENCE) / 2.0
    lo, hi = np.quantile(replicates, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def distribution(
    values: np.ndarray,
    groups: np.ndarray,
    *,
    unit: str,
    higher_is_better: bool = False,
    rng: np.random.Generator | None,
    reps: int = BOOTSTRAP_REPS,
    weights: np.ndarray | None = None,
    censored: np.ndarray | None = None,
    clusters: np.ndarray | None = None,
) -> Distribution:
    """Summarise a sample (integer ``weights``: repeat counts); ``rng=None`` skips
    the intervals.

    ``censored`` marks values that are only lower bounds (unweighted samples): a
    percentile is exact when every such value lies above it, else it is reported
    as a lower bound (named in ``bounds``). ``clusters`` (cluster of each group
    id) makes the bootstrap two-level (see ``bootstrap_quantiles``)."""
    values = np.asarray(values, dtype=np.float64)
    groups = np.asarray(groups)
    keep = np.isfinite(values)
    if weights is not None:
        weights = np.asarray(weights, dtype=np.int64)
        keep &= weights > 0
    if not keep.all():  # the big samples arrive filtered already: no copies then
        values, groups = values[keep], groups[keep]
        weights = None if weights is None else weights[keep]
        censored = None if censored is None else censored[keep]
    del keep
    if len(values) == 0:
        return Distribution(unit=unit, higher_is_better=higher_is_better)
    pct = [100.0 - q for q in QUANTILES] if higher_is_better else list(QUANTILES)
    if weights is None:
        point = np.percentile(values, pct)
        count, mean = len(values), float(values.mean())
    else:
        point = weighted_percentile(values, weights, pct)
        count = int(weights.sum())
        mean = float(np.dot(values, weights) / count)
    cis: list[tuple[float, float] | None] = [None, None, None]
    n_groups = int(group_codes(groups).max()) + 1
    if rng is not None and n_groups >= 2:
        reps_arr = bootstrap_quantiles(values, groups, pct, reps=reps, rng=rng, weights=weights,
                                       clusters=clusters)
        cis = [_interval(reps_arr[:, j]) for j in range(len(pct))]
    n_cens = int(censored.sum()) if censored is not None else 0
    bounds = _bound_stats(values, censored, pct) if censored is not None and n_cens else []
    return Distribution(
        unit=unit, higher_is_better=higher_is_better, count=count, groups=n_groups,
        mean=mean, p50=float(point[0]), p90=float(point[1]),
        p99=float(point[2]), p50_ci=cis[0], p90_ci=cis[1], p99_ci=cis[2],
        censored=n_cens, bounds=bounds,
    )


def _bound_stats(values: np.ndarray, censored: np.ndarray, pct: Sequence[float]) -> list[str]:
    """Statistics that censored values can still move: a percentile is a lower
    bound when some censored value lies at or below the upper rank it reads."""
    ordered = np.sort(values)
    lowest = float(values[censored].min())
    out = ["mean"]
    for q, name in zip(pct, ("p50", "p90", "p99"), strict=True):
        hi = int(np.ceil((len(values) - 1) * q / 100.0))
        if lowest <= ordered[hi]:
            out.append(name)
    return out


def _inv(x: float | None) -> float | None:
    if x is None or x <= 0:
        return None
    return 1.0 / x


def invert_distribution(d: Distribution, *, unit: str, mean: float | None) -> Distribution:
    """The rate view of a time-per-unit distribution: pXX(rate) = 1 / pXX(time).

    1/x reverses order, so the slow tail of the time is the slow tail of the
    rate: P90 interactivity = 1 / P90(TPOT). ``mean`` is passed in because the
    mean of rates is not 1 / mean of times.
    """

    def ci(c: tuple[float, float] | None) -> tuple[float, float] | None:
        if c is None or c[0] <= 0:
            return None
        return (1.0 / c[1], 1.0 / c[0])

    return Distribution(
        unit=unit, higher_is_better=True, count=d.count, groups=d.groups, mean=mean,
        p50=_inv(d.p50), p90=_inv(d.p90), p99=_inv(d.p99),
        p50_ci=ci(d.p50_ci), p90_ci=ci(d.p90_ci), p99_ci=ci(d.p99_ci),
    )
