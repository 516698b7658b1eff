"""Capacity per SLO tier, with interpolation between measured levels."""

from __future__ import annotations

import pytest

from analysis import ResultError, SloTier, capacity_table, parse_tier
from analysis._metrics import PrefixReuse, RequestCounts, RunSummary, Speculation
from analysis._stats import Distribution


def _level(users: int, p90_inter: float | None, p90_ttft: float, per_gpu: float) -> RunSummary:
    tpot = Distribution(unit="s", count=10, p90=None if p90_inter is None else 1 / p90_inter)
    empty = Distribution(unit="s")
    return RunSummary(
        label="auto", runs=["r"], model="m", users=users, gpu_count=4, simulated=False,
        incomplete=False, window_s=100.0,
        counts=RequestCounts(total_records=0, in_window=0, ok=0, error=0, timeout=0,
                             cancelled=0),
        ttft=empty, ttft_due=Distribution(unit="s", count=10, p90=p90_ttft), e2e=empty,
        tpot=tpot, itl=empty,
        interactivity=Distribution(unit="tok/s", higher_is_better=True, count=10, p90=p90_inter),
        interactivity_user=empty, session_latency=empty, schedule_lag=empty,
        decode_tok_s=per_gpu * 4, decode_tok_s_per_gpu=per_gpu, output_tok_s=None,
        prefill_tok_s=None, goodput=[],
        prefix=PrefixReuse(prompt_tokens=0, expected_cached_tokens=None, expected_share=None,
                           reported_cached_tokens=None, reported_share=None,
                           measured_hits=None, measured_queries=None, measured_share=None),
        speculation=Speculation(drafts=None, draft_tokens=None, accepted_tokens=None,
                                acceptance_length=None),
    )


LEVELS = [_level(1, 400, 1.0, 100), _level(8, 200, 2.0, 600), _level(32, 80, 20.0, 1500)]


def test_interpolates_between_the_last_good_and_first_bad_level() -> None:
    (row,) = capacity_table({"auto": LEVELS}, [SloTier(floor_tok_s=100, ttft_s=15)])
    # interactivity crosses 100 at 8 + (200-100)/(200-80)*24 = 28;
    # TTFT crosses 15 at 8 + (15-2)/(20-2)*24 = 25.33: the smaller wins
    assert row.how == "interpolated"
    assert row.users == pytest.approx(8 + 13 / 18 * 24)
    assert row.users_per_gpu == pytest.approx(row.users / 4)
    assert row.decode_tok_s_per_gpu == pytest.approx(600 + (row.users - 8) / 24 * 900)


def test_all_levels_meet_is_at_least_the_largest() -> None:
    (row,) = capacity_table({"auto": LEVELS}, [SloTier(floor_tok_s=30, ttft_s=60)])
    assert (row.users, row.how, row.decode_tok_s_per_gpu) == (32, "at least", 1500)


def test_smallest_level_failing_gives_none() -> None:
    (row,) = capacity_table({"auto": LEVELS}, [SloTier(floor_tok_s=500, ttft_s=15)])
    assert row.users is None and row.how == "none"


def test_missing_value_at_next_level_stays_at_measured_level() -> None:
    levels = [_level(1, 400, 1.0, 100), _level(8, None, 2.0, 600)]
    (row,) = capacity_table({"auto": levels}, [SloTier(floor_tok_s=300, ttft_s=15)])
    assert (row.users, row.how) == (1, "measured")


def test_parse_tier() -> None:
    assert parse_tier("100:10") == SloTier(floor_tok_s=100, ttft_s=10)
    assert parse_tier("30") == SloTier(floor_tok_s=30, ttft_s=15)
    for bad in ("fast", "100:x", "-1:10", "100:0"):
        with pytest.raises(ResultError):
            parse_tier(bad)
