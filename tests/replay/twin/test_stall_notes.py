"""A held-out level measured under other stalls than the fitted ones is named, with
both factors, so a reader sees how much of the held-out error is the machine's."""

from __future__ import annotations

from replay.twin._calibrate import LevelFacts, _stall_notes


def _level(users: int, stall: float | None) -> LevelFacts:
    return LevelFacts(users=users, runs=[f"runs/u{users}"], gaps=1000, mean_batch=1.0,
                      mean_running_scraped=None, mean_running_records=None, mean_gap_s=0.01,
                      mean_pred_gap_s=0.01, mean_idle_ttft_s=None, mean_pred_idle_ttft_s=None,
                      cache_hit_share=None, stall_factor=stall)


def test_a_held_out_level_under_other_stalls_is_named() -> None:
    levels = [_level(1, 1.30), _level(2, 1.35), _level(8, 1.70)]
    (note,) = _stall_notes(levels, 1.33, holdout=(8,))
    assert note.startswith("8 users (held out): its steps ran at 1.70x")
    assert "1.33x" in note and "+28%" in note


def test_levels_within_the_tolerance_or_fitted_are_not_named() -> None:
    levels = [_level(1, 2.0), _level(4, 1.40), _level(8, None)]
    assert _stall_notes(levels, 1.33, holdout=(4, 8)) == []  # 1 is fitted, 4 within 10%
    assert _stall_notes(levels, 0.0, holdout=(1,)) == []     # no noise fitted: nothing to say
