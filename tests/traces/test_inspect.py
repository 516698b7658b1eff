"""Workload statistics against hand-counted truth."""

from __future__ import annotations

import pytest

from traces import Request, Session, Subagent, format_stats, inspect_sessions


def _req(tokens: int, prefix: int, ids: tuple[int, ...], think: float = 0.0,
         kind: str = "tool_result", subagents: tuple[Subagent, ...] = ()) -> Request:
    return Request(prompt_tokens=tokens, output_tokens=10, prefix_blocks=prefix,
                   new_block_ids=ids, think_time_s=think, kind=kind,  # type: ignore[arg-type]
                   subagents=subagents)


def test_reuse_counts_blocks_with_an_infinite_cache() -> None:
    bs = 10
    a = Session(id="a", requests=(
        _req(30, 0, (1, 2, 3), kind="user_text"),            # 3 new
        _req(50, 3, (4, 5), think=70),                         # 3 hit, 2 new
        _req(30, 1, (6, 7), think=400),                        # 1 hit, 2 new
    ))
    b = Session(id="b", requests=(
        _req(40, 0, (1, 2, 9, 10), kind="user_text"),        # 2 hit (across sessions), 2 new
        _req(40, 4, (), think=5),                              # 4 hit
    ))
    stats = inspect_sessions([a, b])
    assert bs  # block size does not matter: shares count blocks
    assert stats.requests == 5 and stats.sessions == 2
    assert stats.reuse_share == pytest.approx((0 + 3 + 1 + 2 + 4) / (3 + 5 + 3 + 4 + 4))
    assert stats.session_reuse_share == pytest.approx((0 + 3 + 1 + 0 + 4) / 19)
    assert stats.gaps_over_60s_share == pytest.approx(2 / 3)
    assert stats.gaps_over_300s_share == pytest.approx(1 / 3)
    assert stats.turns_per_session.p50 == pytest.approx(2.5)
    assert stats.first_prompt_tokens.mean == pytest.approx(35)
    assert stats.user_text_share == pytest.approx(2 / 5)
    assert stats.prompt_tokens_total == 190 and stats.output_tokens_total == 50


def test_a_block_hits_only_when_its_whole_prefix_was_seen() -> None:
    a = Session(id="a", requests=(_req(20, 0, (1, 2)),))
    b = Session(id="b", requests=(_req(20, 0, (3, 2)),))  # block 2 after another prefix
    assert inspect_sessions([a, b]).reuse_share == 0.0


def test_subagents_counted() -> None:
    sub = Subagent(id="x", requests=(_req(20, 0, (50, 51)), _req(30, 2, (52,), think=3)))
    s = Session(id="a", requests=(_req(10, 0, (1,), subagents=(sub,)), _req(20, 1, (2,))))
    stats = inspect_sessions([s])
    assert stats.subagents == 1 and stats.sessions_with_subagents == 1
    assert stats.requests == 4
    assert stats.subagent_prompt_tokens.count == 2
    assert stats.turns_per_session.p50 == 2


def test_empty_workload_and_rendering() -> None:
    stats = inspect_sessions([])
    assert stats.reuse_share is None and stats.prompt_tokens.p50 is None
    text = format_stats(stats)
    assert "prefix reuse" in text and "-" in text


def test_large_key_sets_spill_to_numpy() -> None:
    from traces._inspect import _SeenKeys

    seen = _SeenKeys(spill=4)
    seen.update([1, 2, 3])
    seen.update([4, 5])  # spills
    seen.update([2**63 + 7])
    assert all(k in seen for k in (1, 2, 3, 4, 5, 2**63 + 7))
    assert 6 not in seen and 0 not in seen
