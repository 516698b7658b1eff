"""The step fit on controlled input: records made by the clockless sim engine (exact
model times, no clock), so the fitted parameters must be the profile's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis import read_run
from analysis.fit import fit_steps, running_at, step_samples, ttft_samples
from replay.servers.sim import SimProfile
from tests.analysis.builders import make_run
from tests.support.fit import PROFILE, engine_records


def _fit_levels(tmp_path: Path, levels: tuple[int, ...], profile: SimProfile = PROFILE,
                per_user: int = 6) -> Any:
    from analysis.fit import StepSamples, TtftSamples

    steps, ttfts = [], []
    for users in levels:
        run = make_run(tmp_path / f"u{users}", engine_records(profile, users, seed=users,
                                                             per_user=per_user),
                       load={"users": users, "duration_s": 10, "warmup_s": 0, "drain_s": 5})
        cols = read_run(run).requests
        steps.append(step_samples(cols, group=users, chunk_tokens=PROFILE.max_num_batched_tokens))
        ttfts.append(ttft_samples(cols, group=users,
                                  chunk_tokens=PROFILE.max_num_batched_tokens))
    return fit_steps(StepSamples.concat(steps), TtftSamples.concat(ttfts))


def test_fit_recovers_the_profile_from_engine_records(tmp_path: Path) -> None:
    fit = _fit_levels(tmp_path, (1, 2, 4, 8))
    timing = PROFILE.backends["auto"]
    assert fit.step_s_batch1 == pytest.approx(timing.step_s_batch1, rel=0.01)
    assert fit.step_s_batch1 + 63 * fit.slope_s_per_seq == pytest.approx(
        timing.step_s_batch64, rel=0.02)
    assert fit.ctx_ref_tokens == pytest.approx(PROFILE.ctx_ref_tokens, rel=0.03)
    assert fit.prefill_tokens_per_s == pytest.approx(PROFILE.prefill_tokens_per_s, rel=0.03)
    assert fit.ttft_overhead_s == pytest.approx(0.0, abs=1e-3)
    for g in fit.groups:
        assert abs(g.gap_error) < 0.01
    assert fit.noise is not None and fit.noise[0] == pytest.approx(fit.noise[-1], rel=1e-4)


_NOISE = (0.7, 0.9, 1.0, 1.1, 1.3, 4.0)
"""Quantiles at 0, 20 .. 100%: mean 1.33, median 1.05, p90 2.65 (a heavy top fifth)."""


def test_fit_keeps_the_typical_step_and_the_stalls_apart(tmp_path: Path) -> None:
    """Steps times a heavy-tailed factor: the structure is still the profile's (up to
    one constant factor, the typical step), and the noise fitted carries the rest, so
    mean and tail of the steps are the engine's own."""
    noisy = PROFILE.model_copy(update={"step_noise": _NOISE})
    fit = _fit_levels(tmp_path, (1, 2, 4, 8), noisy, per_user=80)  # noise needs samples
    timing = noisy.backends["auto"]
    assert fit.noise is not None
    q = np.asarray(fit.noise)
    typical = fit.step_s_batch1 / timing.step_s_batch1  # the factor the fit calls 1
    slope = (timing.step_s_batch64 - timing.step_s_batch1) / 63
    assert fit.slope_s_per_seq / slope == pytest.approx(typical, rel=0.05)
    assert fit.ctx_ref_tokens == pytest.approx(noisy.ctx_ref_tokens, rel=0.1)
    assert fit.prefill_tokens_per_s == pytest.approx(noisy.prefill_tokens_per_s, rel=0.1)
    # the step distribution itself: fitted typical step x noise = profile step x factor
    assert typical * fit.noise_mean == pytest.approx(1.33, rel=0.03)
    assert typical * np.interp(0.5, np.linspace(0, 1, len(q)), q) == pytest.approx(1.05, rel=0.03)
    assert typical * np.interp(0.9, np.linspace(0, 1, len(q)), q) == pytest.approx(2.65, rel=0.05)
    for g in fit.groups:  # so each level's mean gap is the mean step
        assert abs(g.gap_error) < 0.03


def test_reconstructed_batch_counts_the_requests_in_decode(tmp_path: Path) -> None:
    run = make_run(tmp_path / "u3", engine_records(PROFILE, 3, per_user=3),
                   load={"users": 3, "duration_s": 10, "warmup_s": 0, "drain_s": 5})
    cols = read_run(run).requests
    s = step_samples(cols)
    assert set(np.unique(s.batch)) <= {1.0, 2.0, 3.0}
    assert (s.batch == 3).mean() > 0.5
    assert running_at(cols, np.array([-1.0]))[0] == 0


def test_too_few_gaps_is_a_value_error(tmp_path: Path) -> None:
    recs = engine_records(PROFILE, 1, per_user=1)
    recs[0]["chunk_times_s"] = recs[0]["chunk_times_s"][:3]
    recs[0]["chunk_tokens"] = recs[0]["chunk_tokens"][:3]
    cols = read_run(make_run(tmp_path / "r", recs)).requests
    with pytest.raises(ValueError, match="too few"):
        fit_steps(step_samples(cols), ttft_samples(cols))


def test_a_level_run_under_other_stalls_has_its_own_stall_factor(tmp_path: Path) -> None:
    """The fit's noise is the fitted levels' stalls; a level measured under half again
    as much (every step factor x1.5) shows that factor over the fitted typical step,
    and a level under the same stalls shows the fitted noise mean."""
    from analysis.fit import StepSamples, level_stall_factor

    noisy = PROFILE.model_copy(update={"step_noise": _NOISE})
    stormy = PROFILE.model_copy(update={"step_noise": tuple(1.5 * x for x in _NOISE)})
    samples = []
    for users, profile in ((1, noisy), (2, noisy), (4, noisy), (8, noisy), (9, stormy)):
        run = make_run(tmp_path / f"u{users}", engine_records(profile, users, seed=users,
                                                             per_user=80),
                       load={"users": users, "duration_s": 10, "warmup_s": 0, "drain_s": 5})
        samples.append(step_samples(read_run(run).requests, group=users,
                                    chunk_tokens=PROFILE.max_num_batched_tokens))
    every = StepSamples.concat(samples)
    fitted = np.isin(every.group, (1, 2, 4))
    fit = fit_steps(StepSamples(**{k: getattr(every, k)[fitted]
                                   for k in every.__dataclass_fields__}))
    same, other = level_stall_factor(fit, every, 8), level_stall_factor(fit, every, 9)
    assert same is not None and other is not None
    assert same == pytest.approx(fit.noise_mean, rel=0.05)
    assert other / same == pytest.approx(1.5, rel=0.05)
    assert level_stall_factor(fit, every, 3) is None  # no such level: no steps to tell
