"""Capacity per SLO tier: the bracket of measured levels, and the arms' ratio bounded by it."""

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


def _meets(users: int, ok: bool, per_gpu: float = 0.0) -> RunSummary:
    return _level(users, 1.0 if ok else 0.0, 1.0, 0.0, per_gpu or users * 10.0)


def _truth(threshold: float, grid: list[int]) -> list[RunSummary]:
    """Level summaries whose pass/fail follows a known capacity: met up to threshold."""
    return [_meets(u, u <= threshold) for u in grid]


def test_bracket_between_the_last_good_and_first_bad_level() -> None:
    levels = [_level(1, 1.0, 1.0, 0.0, 100), _level(8, 0.95, 0.98, 0.0, 600),
              _level(32, 0.5, 0.5, 0.0, 1500)]
    (row,) = capacity_table({"auto": levels}, [TIER])
    assert (row.bracket.passed, row.bracket.failed, row.bracket.kind) == (8, 32, "between")
    assert row.bracket.text() == "between 8 and 32 users"
    # per GPU numbers are the ones measured at the passing level, not interpolated
    assert (row.users_per_gpu, row.decode_tok_s_per_gpu) == (2.0, 600)


def test_failures_fail_the_level() -> None:
    levels = [_level(1, 1.0, 1.0, 0.0, 100), _level(8, 1.0, 1.0, 0.45, 600)]
    (row,) = capacity_table({"auto": levels}, [TIER])
    assert (row.bracket.passed, row.bracket.failed) == (1, 8)


def test_all_levels_meet_is_at_least_the_largest() -> None:
    levels = [_level(1, 1.0, 1.0, 0.0, 100), _level(32, 0.95, 0.95, 0.01, 1500)]
    (row,) = capacity_table({"auto": levels}, [TIER])
    assert row.bracket.kind == "at least" and row.bracket.text() == "at least 32 users"
    assert (row.bracket.passed, row.bracket.failed, row.decode_tok_s_per_gpu) == (32, None, 1500)


def test_smallest_level_failing_is_below_it() -> None:
    levels = [_level(1, 0.5, 1.0, 0.0, 100), _level(8, 0.2, 1.0, 0.0, 600)]
    (row,) = capacity_table({"auto": levels}, [TIER])
    assert row.bracket.kind == "below" and row.bracket.text() == "below 1 user"
    assert row.users_per_gpu is None and row.decode_tok_s_per_gpu is None


def test_a_level_with_failures_fails_even_when_fast() -> None:
    (row,) = capacity_table({"auto": [_level(1, 1.0, 1.0, 0.4, 100)]}, [TIER])
    assert row.bracket.kind == "below"


def test_one_level_that_meets_is_at_least_it() -> None:
    (row,) = capacity_table({"auto": [_meets(4, True)]}, [TIER])
    assert row.bracket.text() == "at least 4 users"


def test_missing_value_at_next_level_fails_it() -> None:
    levels = [_level(1, 1.0, 1.0, 0.0, 100), _level(8, None, 1.0, 0.0, 600)]
    (row,) = capacity_table({"auto": levels}, [TIER])
    assert (row.bracket.passed, row.bracket.failed) == (1, 8)


def test_not_monotone_brackets_below_the_first_failure_and_lists_the_rest() -> None:
    levels = [_meets(u, ok) for u, ok in [(2, True), (4, True), (8, False), (16, True),
                                          (32, False)]]
    (row,) = capacity_table({"auto": levels}, [TIER])
    b = row.bracket
    assert (b.passed, b.failed, b.passed_above) == (4, 8, [16])
    assert b.text() == "between 4 and 8 users; not monotone: met again at 16"


def test_levels_are_sorted_whatever_the_input_order() -> None:
    (row,) = capacity_table({"auto": [_meets(16, False), _meets(2, True), _meets(4, True)]},
                            [TIER])
    assert (row.bracket.passed, row.bracket.failed) == (4, 16)


def test_coarse_grid_brackets_the_truth() -> None:
    """Truth 6 on grid 2..32: interpolating the step gave 4.4 [4.4-4.4]; the bracket
    says what was measured, and holds the truth."""
    (row,) = capacity_table({"auto": _truth(6, [2, 4, 8, 16, 32])}, [TIER])
    b = row.bracket
    assert (b.passed, b.failed) == (4, 8) and b.passed <= 6 < b.failed


@pytest.mark.parametrize("truth", [1, 3, 5, 6, 7, 15, 31])
def test_bracket_always_holds_the_truth(truth: int) -> None:
    (row,) = capacity_table({"auto": _truth(truth, [1, 2, 4, 8, 16, 32])}, [TIER])
    b = row.bracket
    assert b.passed is not None and b.failed is not None
    assert b.passed <= truth < b.failed


def test_crossover_on_a_coarse_grid_gives_no_ratio() -> None:
    """Truth 8 vs 11 on grid 4, 32: both arms are between 4 and 32, and the ratio is
    unknown (it was 1.00x with interpolation)."""
    rows = capacity_table({"auto": _truth(8, [4, 32]), "fast": _truth(11, [4, 32])}, [TIER])
    auto, fast = rows
    assert auto.bracket == fast.bracket and (auto.bracket.passed, auto.bracket.failed) == (4, 32)
    assert auto.ratio is None and fast.ratio is not None
    assert fast.ratio.verdict == "unknown"
    assert (fast.ratio.low, fast.ratio.high) == (4 / 32, 32 / 4)
    assert fast.ratio.text() == "unknown (0.12x \u2013 8.00x)"
    assert "1.00x" not in fast.ratio.text()


def test_crossover_on_a_fine_grid_bounds_the_ratio() -> None:
    grid = [2, 4, 6, 8, 10, 12, 16]
    _, fast = capacity_table({"auto": _truth(8, grid), "fast": _truth(11, grid)}, [TIER])
    assert fast.ratio is not None and fast.ratio.verdict == "more"
    # fast in [10, 12), auto in [8, 10): the ratio lies in (10/10, 12/8)
    assert (fast.ratio.low, fast.ratio.high) == (1.0, 1.5)
    assert fast.ratio.text() == "1.00x \u2013 1.50x"


def test_parse_tier() -> None:
    assert parse_tier("100:10") == SloTier(floor_tok_s=100, ttft_s=10)
    with pytest.raises(ResultError, match="no TTFT ceiling: give FLOOR:TTFT, e.g. 30:15"):
        parse_tier("30")
    for bad in ("fast", "100:x", "-1:10", "100:0"):
        with pytest.raises(ResultError):
            parse_tier(bad)


def test_a_summary_written_without_a_level_reads_as_its_users() -> None:
    """summary.json files from before the level was recorded were closed-loop runs;
    one written with a rate keeps it (never read back as users)."""
    data = _level(6, 1.0, 1.0, 0.0, 1.0).model_dump(mode="json")
    data.pop("level")
    data["users"] = 6
    assert RunSummary.model_validate(data).level == LoadLevel(kind="users", value=6.0)
    assert "users" not in RunSummary.model_validate(data).model_dump()
    data.update(users=0, level={"kind": "rate", "value": 0.5})
    back = RunSummary.model_validate(data)
    assert back.level.label == "0.5 sessions/s"
