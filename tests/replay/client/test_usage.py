"""Token counting and usage checks, pure: one rule per stream, impossible usage named."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from replay.client._sse import SSEParser
from replay.client._usage import (
    BY_IDS,
    BY_TEXT,
    BY_USAGE,
    TokenCounter,
    clean_usage,
    usage_problem,
)

_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"


def _count(events: list[tuple[int, int | None, bool, bool]]) -> tuple[TokenCounter, list[int]]:
    c = TokenCounter()
    return c, [c.count(*e) for e in events]


def test_ids_with_usage_on_the_last_choice_chunk_counts_once() -> None:
    # (token ids, usage completion_tokens, has a choice, has text)
    c, per = _count([(1, None, True, True), (1, None, True, True), (1, 3, True, True),
                     (0, 3, False, False)])
    assert c.mode == BY_IDS and per == [1, 1, 1, 0] and c.streamed == 3


def test_continuous_usage_counts_its_rise_on_choice_chunks_only() -> None:
    c, per = _count([(0, 0, True, False), (0, 2, True, True), (0, 3, True, True),
                     (0, 3, False, False)])
    assert c.mode == BY_USAGE and per == [0, 2, 1, 0] and c.streamed == 3


def test_text_only_counts_one_per_text_chunk_and_ignores_a_late_usage() -> None:
    c, per = _count([(0, None, True, True), (0, None, True, True), (0, 7, True, False)])
    assert c.mode == BY_TEXT and per == [1, 1, 0] and c.streamed == 2


@pytest.mark.parametrize(("name", "mode", "tokens"), [
    ("completions_stream_token_ids.txt", BY_IDS, 5),
    ("completions_stream.txt", BY_USAGE, 5),
    ("chat_stream.txt", BY_USAGE, 5),
])
def test_real_vllm_streams_count_what_usage_says(name: str, mode: str, tokens: int) -> None:
    c = TokenCounter()
    usage = None
    for payload in SSEParser().feed_payloads((_FIXTURES / name).read_bytes()):
        if payload == b"[DONE]":
            break
        obj = orjson.loads(payload)
        usage = clean_usage(obj.get("usage"))
        assert usage is not None
        ch = obj["choices"][0] if obj["choices"] else {}
        ids = ch.get("token_ids") or []
        text = ch.get("text") or (ch.get("delta") or {}).get("content")
        c.count(len(ids), usage.get("completion_tokens"), bool(obj["choices"]), bool(text))
    assert usage is not None and usage["completion_tokens"] == tokens
    assert c.mode == mode and c.streamed == tokens
    assert usage_problem(usage, c, max_tokens=tokens) is None


@pytest.mark.parametrize("usage", ["x", [1], {"completion_tokens": 1.5},
                                   {"completion_tokens": True}, {"prompt_tokens": "3"},
                                   {"prompt_tokens_details": []},
                                   {"prompt_tokens_details": {"cached_tokens": "1"}}])
def test_clean_usage_rejects_what_is_not_a_count(usage: object) -> None:
    assert clean_usage(usage) is None


def _ids(n: int) -> TokenCounter:
    c = TokenCounter()
    for _ in range(n):
        c.count(1, None, True, True)
    return c


@pytest.mark.parametrize(("usage", "counter", "asked", "bad"), [
    ({"completion_tokens": 3}, 3, 4, False),
    ({"completion_tokens": 10**15}, 3, 4, True),
    ({"completion_tokens": 10**15}, 3, None, True),  # disagrees with the ids that arrived
    ({"completion_tokens": 2}, 3, 4, True),
    ({"completion_tokens": 3, "prompt_tokens": 5,
      "prompt_tokens_details": {"cached_tokens": 5}}, 3, 4, False),
    ({"completion_tokens": 3, "prompt_tokens": 5,
      "prompt_tokens_details": {"cached_tokens": 6}}, 3, 4, True),
    ({"completion_tokens": 3, "prompt_tokens": -5}, 3, 4, True),
    ({"completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": -1}}, 3, 4, True),
    ({"completion_tokens": 3, "prompt_tokens_details": None}, 3, 4, False),
])
def test_usage_problem(usage: dict[str, object], counter: int, asked: int | None,
                       bad: bool) -> None:
    assert clean_usage(usage) is usage
    assert (usage_problem(usage, _ids(counter), asked) is not None) == bad


def test_text_mode_allows_coalesced_chunks_but_not_fewer_tokens_than_chunks() -> None:
    c = TokenCounter()
    for _ in range(3):
        c.count(0, None, True, True)
    assert usage_problem({"completion_tokens": 5}, c, 8) is None  # chunks may hold several
    assert usage_problem({"completion_tokens": 2}, c, 8) is not None
