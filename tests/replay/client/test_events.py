"""The event reader, without sockets: what each event counts, read one event per read
(the token-stream case, counted inline) and all at once (the general rule)."""

from __future__ import annotations

import orjson
import pytest

from replay.client._events import EventReader
from replay.client._outcome import StreamOutcome
from replay.client._usage import TokenCounter


def _ev(obj: object) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _text(text: str, usage: dict[str, int] | None = None) -> bytes:
    return _ev({"object": "text_completion", "choices": [{"index": 0, "text": text}],
                "usage": usage})


def _chat(content: str | None) -> bytes:
    delta = {"role": "assistant"} if content is None else {"content": content}
    return _ev({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]})


USAGE = _ev({"object": "text_completion", "choices": [],
             "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}})
TEXT = [_text("a"), _text(""), _text("b"), _text("c", {"completion_tokens": 3}), _text("d"),
        USAGE, b"data: [DONE]\n\n"]
CHAT = [_chat(None), _chat(""), _chat("x"), _chat("y"), b"data: [DONE]\n\n"]


def _rule(events: list[bytes]) -> list[int]:
    """Tokens per event by TokenCounter's rule alone (the truth the reader must match)."""
    counter = TokenCounter()
    counts = []
    for raw in events:
        if raw == b"data: [DONE]\n\n":
            break
        obj = orjson.loads(raw[6:])
        choices = obj.get("choices") or []
        choice = choices[0] if choices else {}
        delta = choice.get("delta") or {}
        usage = obj.get("usage") or {}
        counts.append(counter.count(0, usage.get("completion_tokens"), bool(choices),
                                    bool(choice.get("text") or delta.get("content"))))
    return counts


@pytest.mark.parametrize("events", [TEXT, CHAT], ids=["completions", "chat"])
@pytest.mark.parametrize("per_read", [True, False], ids=["event-per-read", "one-read"])
def test_tokens_per_event_follow_the_counter_rule(events: list[bytes], per_read: bool) -> None:
    out = StreamOutcome()
    reader = EventReader(out, 1 << 20, True, None)
    reads = events if per_read else [b"".join(events)]
    stop = [reader.feed(data, t) for t, data in enumerate(reads)]
    want = [n for n in _rule(events) if n]
    assert out.done and stop[-1] and out.status == "ok"
    assert out.chunk_tokens == want
    if per_read:  # every chunk stamped with the time of the read that held it
        assert out.chunk_ns == [t for t, n in enumerate(_rule(events)) if n]
    assert reader.counter.streamed == sum(want)


def test_a_text_stream_past_max_tokens_stops_at_the_first_extra_token() -> None:
    out = StreamOutcome()
    reader = EventReader(out, 1 << 20, True, 2)
    stops = [reader.feed(_text(t), i) for i, t in enumerate("abc")]
    assert stops == [False, False, True]
    assert out.error_kind == "too_many_tokens" and out.chunk_tokens == [1, 1, 1]
