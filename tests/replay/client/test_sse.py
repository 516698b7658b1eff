"""The SSE parser, without sockets: framing, splits, line endings, bounds."""

from __future__ import annotations

import pytest

from replay.client._sse import SSEError, SSEParser

STREAM = (
    b": keep-alive comment\n"
    b"data: {\"a\": 1}\n\n"
    b"event: ping\nid: 7\ndata: line one\ndata: line two\n\n"
    b"data:no-space\n\n"
    b"retry: 100\nunknown: x\ndata\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    (b'{"a": 1}', "message", None),
    (b"line one\nline two", "ping", "7"),
    (b"no-space", "message", "7"),
    (b"", "message", "7"),
    (b"[DONE]", "message", "7"),
]


def _events(parser: SSEParser, pieces: list[bytes]) -> list[tuple[bytes, str, str | None]]:
    out = []
    for piece in pieces:
        out.extend(parser.feed(piece))
    out.extend(parser.close())
    return [(e.data, e.event, e.id) for e in out]


def test_whole_stream() -> None:
    assert _events(SSEParser(), [STREAM]) == EXPECTED


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_split_point_and_line_ending(eol: bytes) -> None:
    stream = STREAM.replace(b"\n", eol)
    for cut in range(len(stream) + 1):
        got = _events(SSEParser(), [stream[:cut], stream[cut:]])
        assert got == EXPECTED, (eol, cut)


def test_byte_by_byte_crlf() -> None:
    stream = STREAM.replace(b"\n", b"\r\n")
    assert _events(SSEParser(), [stream[i : i + 1] for i in range(len(stream))]) == EXPECTED


def test_event_without_blank_line_is_dropped_at_close() -> None:
    p = SSEParser()
    assert p.feed(b"data: half") == []
    assert p.close() == []


def test_line_longer_than_limit_is_an_error_not_memory() -> None:
    p = SSEParser(max_line_bytes=1000)
    with pytest.raises(SSEError) as exc:
        for _ in range(100):
            p.feed(b"x" * 100)  # no newline ever
    assert exc.value.kind == "line_too_long"
    assert p.buffered == 0


def test_complete_long_line_is_an_error() -> None:
    p = SSEParser(max_line_bytes=50)
    with pytest.raises(SSEError):
        p.feed(b"data: " + b"y" * 100 + b"\n\n")


def test_line_at_limit_passes() -> None:
    p = SSEParser(max_line_bytes=106)
    events = p.feed(b"data: " + b"y" * 100 + b"\n\n")
    assert [e.data for e in events] == [b"y" * 100]


def test_first_line_that_is_no_sse_field_is_kept_as_junk() -> None:
    p = SSEParser()
    _events(p, [STREAM])
    assert p.junk == b"unknown: x"  # retry, comments, data, event and id are fields


def test_bare_json_lines_are_junk_not_events() -> None:
    for feed in ("feed", "feed_payloads"):
        p = SSEParser()
        got = getattr(p, feed)(b'{"choices": [{"text": "a"}]}\n\n[DONE]\n\n')
        assert got == [] and p.close() == []
        assert p.junk == b'{"choices": [{"text": "a"}]}', feed


@pytest.mark.parametrize("name", ["completions_stream.txt", "completions_stream_token_ids.txt",
                                  "chat_stream.txt"])
def test_real_vllm_streams_have_no_junk(name: str) -> None:
    from pathlib import Path

    raw = (Path(__file__).resolve().parents[2] / "fixtures" / "vllm" / name).read_bytes()
    p = SSEParser()
    payloads = p.feed_payloads(raw)
    assert payloads[-1] == b"[DONE]" and p.junk is None


def _payloads(parser: SSEParser, pieces: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for piece in pieces:
        out.extend(parser.feed_payloads(piece))
    out.extend(ev.data for ev in parser.close())
    return out


READS = [  # one read each, as a token stream's packets arrive
    b"data: {\"a\": 1}\n\n", b"data: {\"b\": 2}\n\n", b"data: two\ndata: lines\n\n",
    b"data: x\n\n", b": comment\n\n", b"data: tail\nmore\n\n", b"data:no-space\n\n",
    b"data: \n\n", b"event: e\ndata: y\n\n", b"data: half", b" done\n\n", b"data: z\n\n\n",
    b"data: crlf\r\n\r\n", b"data: after-cr\n\n", b"data: [DONE]\n\n",
]


def test_one_event_per_read_gives_what_the_line_parser_gives() -> None:
    """The one-event read (the commonest) must agree with the general line parser on
    every read shape: multi-line data, comments, junk lines, an event split over two
    reads, an extra blank line, CR line endings; then every prefix of the sequence."""
    for n in range(1, len(READS) + 1):
        line = SSEParser()
        want = [ev.data for ev in line.feed(b"".join(READS[:n]))] + [
            ev.data for ev in line.close()]
        assert _payloads(SSEParser(), READS[:n]) == want, n


@pytest.mark.parametrize("limit", [7, 8, 9])
def test_one_event_read_keeps_the_line_limit(limit: int) -> None:
    """``data: xy`` is 8 bytes: over a 7-byte limit it is an error, never a payload."""
    p = SSEParser(max_line_bytes=limit)
    if limit < 8:
        with pytest.raises(SSEError):
            p.feed_payloads(b"data: xy\n\n")
    else:
        assert p.feed_payloads(b"data: xy\n\n") == [b"xy"]
