"""Energy from GPU power samples: integration over the window, and missing stays missing."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.metrics import interval_energy_j, series_energy_j, window_energy


def test_sample_and_hold_integrates_a_known_power_exactly() -> None:
    # samples every 0.5 s, each the mean power of the half second before it
    t = np.arange(0.5, 10.01, 0.5)
    p = np.where(t <= 4.0, 100.0, 700.0)  # idle until 4 s, busy after
    # window [2, 8]: (2, 4] at 100 W, (4, 8] at 700 W
    assert interval_energy_j(t, p, 2.0, 8.0) == pytest.approx(2 * 100 + 4 * 700)
    # a window edge inside a sample's interval takes its share
    assert interval_energy_j(t, p, 3.75, 4.25) == pytest.approx(0.25 * 100 + 0.25 * 700)


def test_a_window_the_samples_miss_is_missing_not_zero() -> None:
    t = np.arange(0.5, 5.01, 0.5)
    p = np.full(t.shape, 300.0)
    assert interval_energy_j(t, p, 1.0, 6.0) is None  # no sample at or after the end
    assert interval_energy_j(t, p, -5.0, 2.0) is None  # none near the start
    assert interval_energy_j(t[:1], p[:1], 0.0, 0.5) is None
    nan = p.copy()
    nan[:] = np.nan
    assert interval_energy_j(t, nan, 1.0, 2.0) is None
    assert series_energy_j(t, None, None, 1.0, 2.0) is None
    assert window_energy(None, 10.0, 100) is None


def test_exporters_add_and_one_missing_makes_the_total_missing() -> None:
    t = np.concatenate([np.arange(0.5, 6.01, 0.5), np.arange(0.5, 6.01, 0.5)])
    p = np.concatenate([np.full(12, 200.0), np.full(12, 50.0)])
    src = np.repeat([0, 1], 12)
    assert series_energy_j(t, p, src, 1.0, 5.0) == pytest.approx(4 * 250.0)
    short = t.copy()
    short[12:] -= 3.0  # the second exporter stopped early
    assert series_energy_j(short, p, src, 1.0, 5.0) is None


def test_per_token_figures() -> None:
    e = window_energy(7000.0, 10.0, 3500)
    assert e is not None
    assert (e.power_w, e.j_per_output_tok, e.output_tok_per_j) == pytest.approx((700.0, 2.0, 0.5))
    none = window_energy(7000.0, 10.0, 0)
    assert none is not None and none.j_per_output_tok is None
