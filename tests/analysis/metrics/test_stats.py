"""Percentiles and the user-resampling bootstrap, against known truth."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from analysis.metrics import bootstrap_quantiles, distribution, invert_distribution
from analysis.metrics._stats import _exact_quantiles, _hist_quantiles, metric_rng


def test_unit_weights_reproduce_numpy_percentile() -> None:
    rng = np.random.default_rng(3)
    v = rng.lognormal(size=501)
    g = rng.integers(0, 20, size=501)
    counts = np.ones((1, 20), dtype=np.int64)
    qs = np.array([0.5, 0.9, 0.99])
    assert np.allclose(_exact_quantiles(v, g, counts, qs)[0], np.percentile(v, [50, 90, 99]))


def test_replicate_equals_percentile_of_expanded_sample() -> None:
    rng = np.random.default_rng(4)
    v = rng.normal(size=300)
    g = np.repeat(np.arange(30), 10)
    counts = rng.multinomial(30, np.full(30, 1 / 30), size=5)
    got = _exact_quantiles(v, g, counts, np.array([0.9]))[:, 0]
    for row, x in zip(counts, got, strict=True):
        expanded = np.concatenate([v[g == u].repeat(c) for u, c in enumerate(row) if c])
        assert x == pytest.approx(np.percentile(expanded, 90))


def test_histogram_path_is_close_to_exact() -> None:
    rng = np.random.default_rng(5)
    v = rng.lognormal(size=20_000)
    g = rng.integers(0, 50, size=20_000)
    counts = rng.multinomial(50, np.full(50, 1 / 50), size=20)
    qs = np.array([0.5, 0.9, 0.99])
    exact = _exact_quantiles(v, g, counts, qs)
    approx = _hist_quantiles(v, g, counts, qs)
    # within a bin the histogram interpolates by mass, the exact path between order
    # statistics: they differ by at most about one gap between neighbours in the tail
    assert np.allclose(approx[:, :2], exact[:, :2], rtol=0.005)
    assert np.allclose(approx[:, 2], exact[:, 2], rtol=0.03)
    spread = exact[:, 2].max() - exact[:, 2].min()
    assert np.abs(approx[:, 2] - exact[:, 2]).max() < spread


def test_bootstrap_interval_covers_true_p90() -> None:
    """Users have their own scale (clustered data); the true P90 of the marginal
    lognormal is exp(z90 * sqrt(s_user^2 + s_req^2)). Nominal coverage is 95%."""
    s_user, s_req = 0.3, 0.4
    truth = float(np.exp(NormalDist().inv_cdf(0.9) * np.hypot(s_user, s_req)))
    rng = np.random.default_rng(2026)
    users, per_user, experiments = 40, 15, 200
    hits = 0
    for e in range(experiments):
        a = rng.normal(0, s_user, size=users).repeat(per_user)
        v = np.exp(a + rng.normal(0, s_req, size=users * per_user))
        g = np.arange(users).repeat(per_user)
        d = distribution(v, g, unit="s", rng=metric_rng(e, "p90"), reps=400)
        assert d.p90_ci is not None
        hits += d.p90_ci[0] <= truth <= d.p90_ci[1]
    assert 0.90 * experiments <= hits <= 0.99 * experiments


def test_resampling_requests_instead_of_users_would_undercover() -> None:
    """The reason users are the unit: with strong per-user effects, treating each
    request as its own group gives intervals that miss the truth far more often."""
    s_user, s_req = 0.5, 0.1
    truth = float(np.exp(NormalDist().inv_cdf(0.9) * np.hypot(s_user, s_req)))
    rng = np.random.default_rng(7)
    by_user = by_request = 0
    for e in range(60):
        a = rng.normal(0, s_user, size=30).repeat(20)
        v = np.exp(a + rng.normal(0, s_req, size=600))
        g = np.arange(30).repeat(20)
        du = distribution(v, g, unit="s", rng=metric_rng(e, "u"), reps=300)
        dr = distribution(v, np.arange(600), unit="s", rng=metric_rng(e, "r"), reps=300)
        by_user += du.p90_ci[0] <= truth <= du.p90_ci[1]
        by_request += dr.p90_ci[0] <= truth <= dr.p90_ci[1]
    assert by_request < by_user


def test_empty_sample_is_none_not_zero() -> None:
    d = distribution(np.zeros(0), np.zeros(0), unit="s", rng=metric_rng(0, "x"))
    assert d.count == 0
    assert d.p50 is None and d.p90 is None and d.mean is None and d.p90_ci is None


def test_single_user_has_no_interval() -> None:
    d = distribution(np.array([1.0, 2.0, 3.0]), np.zeros(3), unit="s", rng=metric_rng(0, "x"))
    assert d.p50 == 2.0 and d.p50_ci is None


def test_higher_is_better_reports_the_slow_tail() -> None:
    v = np.arange(1.0, 101.0)
    d = distribution(v, np.arange(100) % 10, unit="tok/s", higher_is_better=True, rng=None)
    assert d.p90 == pytest.approx(np.percentile(v, 10))
    assert d.p99 == pytest.approx(np.percentile(v, 1))


def test_inverted_distribution_is_one_over_time() -> None:
    tpot = np.array([0.01, 0.02, 0.04, 0.05])
    d = distribution(tpot, np.arange(4), unit="s", rng=metric_rng(1, "t"))
    inv = invert_distribution(d, unit="tok/s", mean=None)
    assert inv.p90 == pytest.approx(1.0 / np.percentile(tpot, 90))
    assert inv.p90_ci == pytest.approx((1.0 / d.p90_ci[1], 1.0 / d.p90_ci[0]))


def test_bootstrap_is_seeded() -> None:
    v = np.arange(100.0)
    g = np.arange(100) % 7
    a = bootstrap_quantiles(v, g, [90], reps=50, rng=np.random.default_rng(1))
    b = bootstrap_quantiles(v, g, [90], reps=50, rng=np.random.default_rng(1))
    assert np.array_equal(a, b)


def test_weights_equal_repeated_values() -> None:
    from analysis.metrics._weighted import weighted_percentile

    rng = np.random.default_rng(8)
    v = rng.normal(size=200)
    w = rng.integers(0, 5, size=200)
    g = rng.integers(0, 10, size=200)
    expanded = np.repeat(v, w)
    assert np.allclose(weighted_percentile(v, w, [1, 50, 90, 99]),
                       np.percentile(expanded, [1, 50, 90, 99]))
    # the path for big samples (sorting only the bins that hold the ranks) is exact too
    for values in (v, np.round(v, 1), np.full(200, 3.0), rng.lognormal(size=200)):
        want = np.percentile(np.repeat(values, w), [0, 1, 50, 90, 99, 100])
        got = weighted_percentile(values, w, [0, 1, 50, 90, 99, 100], sort_limit=0)
        assert np.array_equal(got, want) or np.allclose(got, want, rtol=0, atol=1e-12)
    d = distribution(v, g, unit="s", rng=metric_rng(0, "w"), weights=w)
    e = distribution(expanded, np.repeat(g, w), unit="s", rng=metric_rng(0, "w"))
    assert d.count == e.count and d.mean == pytest.approx(e.mean)
    assert d.p90 == pytest.approx(e.p90) and d.p90_ci == pytest.approx(e.p90_ci)


def test_small_sample_widening_follows_student_t() -> None:
    from analysis.metrics._stats import small_sample_widening

    assert small_sample_widening(4) == pytest.approx(3.182 / 1.96 * (4 / 3) ** 0.5, rel=1e-3)
    assert small_sample_widening(1000) == pytest.approx(1.0, abs=0.01)
    assert small_sample_widening(1) == float("inf")
    widths = [small_sample_widening(n) for n in range(2, 60)]
    assert widths == sorted(widths, reverse=True)
