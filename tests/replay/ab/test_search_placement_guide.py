"""The twin guide's fallback rules, without a fit: a contradicted twin is not asked
again, and too few levels bisect."""

from __future__ import annotations

from pathlib import Path

from analysis import SloTier
from replay.ab._search_placement import TwinGuide, TwinTrack

TIER = SloTier(floor_tok_s=30, ttft_s=1.2)


def test_guide_refuses_for_good_once_contradicted_twice(tmp_path: Path) -> None:
    track = TwinTrack(expected={16: True})
    guide = TwinGuide(str(tmp_path / "none.jsonl"), 0.1)
    placed, why = guide.advise([], {1: True, 2: True, 16: False}, TIER, 2, 16, 64, track)
    assert placed is None and "contradicted at 16" in why and track.contradicted is None
    # a second placed probe that comes out the other way: bisected for good
    track.expected[9] = False
    placed, why = guide.advise([], {1: True, 2: True, 16: False, 9: True}, TIER, 9, 16, 64,
                               track)
    assert placed is None and track.contradicted == why and "for good" not in why
    assert "bisecting from here" in why
    # the next step, whatever the probes, bisects too
    placed, again = guide.advise([], {1: True, 2: True, 16: False, 9: True, 12: False}, TIER,
                                 9, 12, 64, track)
    assert placed is None and again == why


def test_guide_bisects_before_enough_levels(tmp_path: Path) -> None:
    guide = TwinGuide(str(tmp_path / "none.jsonl"), 0.1)
    placed, why = guide.advise([tmp_path / "sim-u1-r0"], {1: True}, TIER, 1, None, 64,
                               TwinTrack())
    assert placed is None and "too few levels" in why
