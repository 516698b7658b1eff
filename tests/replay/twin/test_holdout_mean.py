"""A held-out level run several times is measured as the mean of its runs, each
metric over the runs that have it."""

from __future__ import annotations

import pytest

from replay.twin import LevelMetrics
from replay.twin._calibrate import Holdout
from replay.twin._predict import mean_metrics


def test_each_metric_is_the_mean_of_the_runs_that_have_it() -> None:
    runs = [LevelMetrics(100.0, 0.2, None), LevelMetrics(200.0, None, None),
            LevelMetrics(150.0, 0.4, None)]
    mean = mean_metrics(runs)
    assert mean.p90_interactivity == pytest.approx(150.0)
    assert mean.p90_ttft_s == pytest.approx(0.3)
    assert mean.output_tok_s is None


def test_the_error_is_against_the_mean() -> None:
    each = (LevelMetrics(100.0, 0.2, 400.0), LevelMetrics(300.0, 0.4, 600.0))
    hold = Holdout(8, "runs/u8-r0", LevelMetrics(220.0, 0.3, 500.0), mean_metrics(list(each)),
                   each)
    assert hold.errors() == pytest.approx({"p90_interactivity": 0.1, "p90_ttft_s": 0.0,
                                           "output_tok_s": 0.0})
