"""The block bootstrap of the fit's data (``analysis.fit.resample``): whole time
windows per level, so one step's rows stay together, and a spread that shrinks as the
data grows (the fit's uncertainty, not a constant)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis import read_run
from analysis.fit import (
    WINDOWS,
    StepSamples,
    TtftSamples,
    fit_steps,
    resample,
    step_samples,
    ttft_samples,
)
from tests.analysis.builders import make_run
from tests.support.fit import PROFILE, engine_records

_NOISE = (0.8, 0.9, 1.0, 1.1, 1.3, 2.5)


def _samples(n_steps: int, groups: tuple[int, ...]) -> tuple[StepSamples, TtftSamples]:
    """Per group ``n_steps`` steps of batch 3 (three rows each, one time), and one idle
    TTFT per step; every row's ``gap_s`` is its step's number, so rows can be traced."""
    rows = np.repeat(np.arange(n_steps * len(groups), dtype=np.float64), 3)
    group = np.repeat(np.array(groups), n_steps * 3)
    t = np.tile(np.repeat(np.arange(n_steps, dtype=np.float64), 3), len(groups))
    one = np.ones(len(rows))
    s = StepSamples(gap_s=rows + 1, steps=one, batch=3 * one, ctx_tokens=one,
                    prefill_tokens=0 * one, group=group, buffered=one < 0, t_s=t)
    k = n_steps * len(groups)
    tt = TtftSamples(ttft_s=np.arange(k) + 1.0, uncached_tokens=np.ones(k),
                     batch_at_send=np.zeros(k), alone=np.ones(k, dtype=bool),
                     group=np.repeat(np.array(groups), n_steps),
                     chunks=np.ones(k), t_s=np.tile(np.arange(n_steps, dtype=np.float64),
                                                    len(groups)))
    return s, tt


def test_a_draw_takes_whole_windows_of_each_level() -> None:
    s, t = _samples(200, (1, 4))
    a, at = resample(s, t, np.random.default_rng(3))
    b, _ = resample(s, t, np.random.default_rng(3))
    assert np.array_equal(a.gap_s, b.gap_s)  # deterministic for a generator
    c, _ = resample(s, t, np.random.default_rng(4))
    assert not np.array_equal(a.gap_s, c.gap_s)
    for g in (1, 4):
        # every level keeps its size (equal windows) and only its own rows
        assert (a.group == g).sum() == (s.group == g).sum()
        assert (at.group == g).sum() == (t.group == g).sum()
    # a step's three rows are drawn together: every step appears a multiple of 3 times
    _, counts = np.unique(a.gap_s, return_counts=True)
    assert np.all(counts % 3 == 0)
    # some windows twice, some not at all (a bootstrap, not a permutation)
    assert len(np.unique(a.gap_s)) < len(np.unique(s.gap_s))
    # a window's steps and TTFTs come together: the same steps' times in both
    for g in (1, 4):
        assert set(np.unique(a.t_s[a.group == g])) == set(np.unique(at.t_s[at.group == g]))
    assert WINDOWS >= 10


def _level_samples(tmp_path: Path, per_user: int, noise: tuple[float, ...] | None = _NOISE,
                   ) -> tuple[StepSamples, TtftSamples]:
    profile = PROFILE.model_copy(update={"step_noise": noise})
    steps, ttfts = [], []
    for users in (1, 2, 4):
        run = make_run(tmp_path / f"p{per_user}u{users}{noise is None}",
                       engine_records(profile, users, seed=users, per_user=per_user),
                       load={"users": users, "duration_s": 10, "warmup_s": 0, "drain_s": 5})
        cols = read_run(run).requests
        steps.append(step_samples(cols, group=users,
                                  chunk_tokens=PROFILE.max_num_batched_tokens))
        ttfts.append(ttft_samples(cols, group=users,
                                  chunk_tokens=PROFILE.max_num_batched_tokens))
    return StepSamples.concat(steps), TtftSamples.concat(ttfts)


def _spread(s: StepSamples, t: TtftSamples, draws: int = 12) -> tuple[float, float]:
    """The bootstrap's log sd of the fitted mean batch-4 step and of the noise mean."""
    rng = np.random.default_rng(0)
    step, noise = [], []
    for _ in range(draws):
        f = fit_steps(*resample(s, t, rng))
        step.append(np.log(f.step_s(4.0) * f.noise_mean))
        noise.append(np.log(f.noise_mean))
    return float(np.std(step, ddof=1)), float(np.std(noise, ddof=1))


def test_the_refits_spread_is_the_noise_and_shrinks_as_the_data_grows(tmp_path: Path) -> None:
    """Exact steps: every draw fits the same model (no spread to speak of). Noisy
    steps: the draws disagree, and the mean stall (the noise mean) less so on eight
    times the requests per level (about 1/sqrt(8))."""
    exact, _ = _spread(*_level_samples(tmp_path, 15, None))
    small, small_noise = _spread(*_level_samples(tmp_path, 15))
    _, large_noise = _spread(*_level_samples(tmp_path, 120))
    print(f"bootstrap log sd of the mean batch-4 step: exact {exact:.4f}, noisy "
          f"{small:.4f}; of the noise mean {small_noise:.4f}, 8x the data {large_noise:.4f}")
    assert exact < 0.002
    assert small > 0.01
    assert large_noise < 0.6 * small_noise
