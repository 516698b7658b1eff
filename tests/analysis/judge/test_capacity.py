"""Capacity per SLO tier: interpolation between levels on the tier's shares."""

from __future__ import annotations

import pytest

from analysis import (
    ResultError,
    RunSummary,
    SloTier,
    parse_tier,
)
from analysis.judge import capacity_table
from analysis.metrics import (
    Distribution,
    Goodput,
    PrefixReuse,
    RequestCounts,
    Speculation,
)
from analysis.schema import LoadLevel

TIER = SloTier(floor_tok_s=100, ttft_s=15)


def _level(users: int, fast: float | None, ttft: float, fail: float, per_gpu: float,
           tier: SloTier = TIER) -> RunSummary:
    empty = Distribution(unit="s")
    g = Goodput(tier=tier, requests=None, users=None, ttft_share=ttft, fast_share=fast,
                failure_share=fail,
                meets=fast is not None and fast >= 0.9 and ttft >= 0.9 and fail <= 0.05)
    return RunSummary(
        label="auto", runs=["r"], model="m", users=users, level=LoadLevel(value=users),
        gpu_count=4, simulated=False, incomplete=False, window_s=100.0,
        counts=RequestCounts(total_records=0, in_window=0, ok=0, error=0, timeout=0,
                             incomplete=0, cancelled=0),
        ttft=empty, ttft_due=empty, e2e=empty, tpot=empty, itl=empty, interactivity=empty,
        interactivity_user=empty, session_latency=empty, schedule_lag=empty,
        decode_tok_s=per_gpu * 4, decode_tok_s_per_gpu=per_gpu, output_tok_s=None,
        prefill_tok_s=None, goodput=[g],
        prefix=PrefixReuse(prompt_tokens=0, expected_cached_tokens=None, expected_share=None,
                           reported_cached_tokens=None, reported_share=None,
                           measured_hits=None, measured_queries=None, measured_share=None),
        speculation=Speculation(drafts=None, draft_tokens=None, accepted_tokens=None,
                                acceptance_length=None),
    )


def test_interpolates_between_the_last_good_and_first_bad_level() -> None:
    levels = [_level(1, 1.0, 1.0, 0.0, 100), _level(8, 0.95, 0.98, 0.0, 600),
              _level(32, 0.5, 0.5, 0.0, 1500)]
    (row,) = capacity_table({"auto": levels}, [TIER])
    # interactivity share crosses 0.9 at 8 + (0.95-0.9)/(0.95-0.5)*24 = 10.67;
    # TTFT share at 8 + (0.98-0.9)/(0.98-0.5)*24 = 12: the smaller wins
    assert row.how == "interpolated"
    assert row.users == pytest.approx(8 + 0.05 / 0.45 * 24)
    assert row.users_per_gpu == pytest.approx(row.users / 4)
    assert row.decode_tok_s_per_gpu == pytest.approx(600 + (row.users - 8) / 24 * 900)


def test_failures_cross_too() -> None:
    levels = [_level(1, 1.0, 1.0, 0.0, 100), _level(8, 1.0, 1.0, 0.45, 600)]
    (row,) = capacity_table({"auto": levels}, [TIER])
    assert row.how == "interpolated"
    assert row.users == pytest.approx(1 + 0.05 / 0.45 * 7)


def test_all_levels_meet_is_at_least_the_largest() -> None:
    levels = [_level(1, 1.0, 1.0, 0.0, 100), _level(32, 0.95, 0.95, 0.01, 1500)]
    (row,) = capacity_table({"auto": levels}, [TIER])
    assert (row.users, row.how, row.decode_tok_s_per_gpu) == (32, "at least", 1500)


def test_smallest_level_failing_gives_none() -> None:
    levels = [_level(1, 0.5, 1.0, 0.0, 100), _level(8, 0.2, 1.0, 0.0, 600)]
    (row,) = capacity_table({"auto": levels}, [TIER])
    assert row.users is None and row.how == "none"


def test_a_level_with_failures_fails_even_when_fast() -> None:
    levels = [_level(1, 1.0, 1.0, 0.4, 100)]
    (row,) = capacity_table({"auto": levels}, [TIER])
    assert row.how == "none"


def test_missing_value_at_next_level_stays_at_measured_level() -> None:
    levels = [_level(1, 1.0, 1.0, 0.0, 100), _level(8, None, 1.0, 0.0, 600)]
    (row,) = capacity_table({"auto": levels}, [TIER])
    assert (row.users, row.how) == (1, "measured")


def test_parse_tier() -> None:
    assert parse_tier("100:10") == SloTier(floor_tok_s=100, ttft_s=10)
    with pytest.raises(ResultError, match="no TTFT ceiling: give FLOOR:TTFT, e.g. 30:15"):
        parse_tier("30")
    for bad in ("fast", "100:x", "-1:10", "100:0"):
        with pytest.raises(ResultError):
            parse_tier(bad)
