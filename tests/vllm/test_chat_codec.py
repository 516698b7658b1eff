"""Chat-mode prompts built from single-token words (no server: a toy tokenizer).

The toy server below answers /tokenize and /detokenize like vLLM for a tiny
byte-level vocabulary whose words are the tokens with a leading space; the real
server is exercised in test_chat_real.py.
"""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from replay.client import BodySpec, ChainEncoder, PrefixCacheModel
from replay.client._chat import ChatCodec, fetch_chat_codec

pytestmark = pytest.mark.sim

# id -> text; "\n" is id 2, ids 3.. are words, 40 holds a newline (skipped), 41 is
# a word that the tokenizer would split (it must be dropped by verification).
VOCAB = {0: "<s>", 1: "</s>", 2: "\n"}
VOCAB.update({i: f" w{chr(97 + (i % 26))}{chr(97 + (i // 26))}" for i in range(3, 40)})
VOCAB[40] = "x\ny"
VOCAB[41] = " split"
HEADER, FOOTER = [0, 2], [1, 2]
BY_TEXT = {t: i for i, t in VOCAB.items() if i != 41}


def _tokenize_text(text: str) -> list[int]:
    out = []
    for piece in re.findall(r" [a-z]+|\n|<s>|</s>|[^ \n]+", text):
        if piece == " split":
            out += [BY_TEXT[" wbb"], BY_TEXT[" wcb"]]
        else:
            out.append(BY_TEXT[piece])
    return out


async def _tokenize(request: web.Request) -> web.Response:
    body = await request.json()
    if "messages" in body:
        content = body["messages"][0]["content"]
        tokens = HEADER + _tokenize_text(content) + FOOTER
    else:
        tokens = _tokenize_text(body["prompt"])
    return web.json_response({"tokens": tokens, "count": len(tokens), "max_model_len": 99})


async def _detokenize(request: web.Request) -> web.Response:
    body = await request.json()
    return web.json_response({"prompt": "".join(VOCAB.get(t, "") for t in body["tokens"])})


def _codec() -> ChatCodec:
    async def main() -> ChatCodec:
        app = web.Application()
        app.router.add_post("/tokenize", _tokenize)
        app.router.add_post("/detokenize", _detokenize)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            import aiohttp

            async with aiohttp.ClientSession() as session:
                return await fetch_chat_codec(session, str(server.make_url("")).rstrip("/"),
                                              {}, "toy", 42)
        finally:
            await server.close()
    return asyncio.run(main())


def test_codec_keeps_exact_single_token_words_and_finds_the_template() -> None:
    codec = _codec()
    assert set(codec.word_ids) == set(range(3, 40))  # no newline token, no splitting word
    assert codec.prefix_ids == tuple(HEADER) and codec.suffix_ids == tuple(FOOTER)


def test_text_tokenizes_to_server_ids_of_the_planned_length() -> None:
    codec = _codec()
    rng = np.random.default_rng(1)
    for n in (4, 5, 50, 700):
        ids = rng.integers(0, 5000, n)
        server = HEADER + _tokenize_text(codec.text(ids)) + FOOTER
        assert server == codec.server_ids(ids).tolist()
        assert len(server) == n


def test_shared_workload_prefix_stays_shared_in_text() -> None:
    codec = _codec()
    a = np.arange(100, 400)
    b = np.concatenate([a[:200], np.arange(900, 1000)])
    ta, tb = codec.server_ids(a), codec.server_ids(b)
    common = int(np.argmin(ta[: len(tb)] == tb))
    assert common >= len(HEADER) + 200 - 1 - codec.overhead + len(HEADER)


def test_chat_prefix_prediction_hashes_the_server_sequence() -> None:
    codec = _codec()
    spec = BodySpec(model="toy", api="chat", chat=codec)
    cache = PrefixCacheModel(16)
    first = np.arange(1000, 1100)
    body, hashed = ChainEncoder(spec, cache).prepare(first, 5)
    assert b'"messages"' in body
    assert np.array_equal(hashed.ids, codec.server_ids(first))
    mark = cache.observe(first, 0, "s", hashed)
    assert mark.expected == 0
    again = ChainEncoder(spec, cache).prepare(np.arange(1000, 1164), 5)[1]
    # the second prompt shares the first's server sequence up to its footer
    assert cache.observe(np.arange(1000, 1164), 0, "s", again).expected == \
        ((100 - len(FOOTER)) // 16) * 16
