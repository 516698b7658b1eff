"""The client's fast paths give the same answers as the plain ones they replace."""

from __future__ import annotations

import numpy as np
import pytest

from replay.client._sse import SSEError, SSEParser
from traces._materialise import Vocab, block_tokens, build_prompt
from traces._models import Request

STREAMS = [
    b'data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n',
    b": keep-alive\n\ndata: x\n\nevent: ping\nid: 7\ndata: one\ndata: two\n\n"
    b"data:no-space\n\n\n\ndata: y\n\nretry: 5\ndata\n\ndata: [DONE]\n\n",
    b"data: a\r\n\r\ndata: b\n\ndata: c\r\rdata: [DONE]\n\n",
    b'data: {"choices": [{"text": " t"}]}\n\n' * 50 + b"data: [DONE]\n\n",
]


def _plain(stream: bytes, cuts: list[int]) -> list[bytes]:
    p = SSEParser()
    out: list[bytes] = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        out.extend(ev.data for ev in p.feed(stream[a:b]))
    out.extend(ev.data for ev in p.close())
    return out


def _fast(stream: bytes, cuts: list[int]) -> list[bytes]:
    p = SSEParser()
    out: list[bytes] = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        out.extend(p.feed_payloads(stream[a:b]))
    out.extend(ev.data for ev in p.close())
    return out


@pytest.mark.parametrize("stream", STREAMS)
def test_payloads_match_the_general_parser_at_any_split(stream: bytes) -> None:
    rng = np.random.default_rng(len(stream))
    whole = _plain(stream, [])
    assert whole[-1] == b"[DONE]"
    for i in range(1, len(stream)):
        assert _fast(stream, [i]) == whole, i
    for _ in range(200):
        cuts = sorted(set(rng.integers(1, len(stream), size=int(rng.integers(1, 8))).tolist()))
        assert _fast(stream, cuts) == whole, cuts


def test_payloads_bound_long_lines() -> None:
    p = SSEParser(max_line_bytes=64)
    assert p.feed_payloads(b"data: " + b"x" * 40 + b"\n\n") == [b"x" * 40]
    with pytest.raises(SSEError):
        p.feed_payloads(b"data: " + b"x" * 100 + b"\n\n")
    p = SSEParser(max_line_bytes=64)
    with pytest.raises(SSEError):
        for _ in range(10):
            p.feed_payloads(b"data: " + b"y" * 20)


@pytest.mark.parametrize("shared", [0, 3, 41])
def test_build_prompt_is_the_blocks_tokens(shared: int) -> None:
    """Vectorised materialisation equals block-by-block :func:`block_tokens`."""
    bs, vocab, salt = 16, Vocab(size=32000, low=5), 12345
    ids = tuple(range(7, 7 + 40)) + (2**63 + 11,)
    req = Request(prompt_tokens=len(ids) * bs - 5, output_tokens=1, new_block_ids=ids,
                  shared_blocks=shared)
    got = build_prompt(req, bs, vocab, salt, None, ())
    want = np.concatenate([block_tokens(b, 0 if k < shared else salt, bs, vocab)
                           for k, b in enumerate(ids)])[: req.prompt_tokens]
    assert got.dtype == np.int32
    assert np.array_equal(got, want)
