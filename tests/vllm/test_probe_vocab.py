"""The vocabulary without --vocab-size: server config, model files, or the server's own check.

A loopback aiohttp server plays vLLM 0.32: ``/server_info`` without ``vocab_size``,
and ``/v1/completions`` that answers HTTP 400 "out of vocabulary" past the end.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from replay.client import probe_server

pytestmark = pytest.mark.sim


def _probe(model_config: dict[str, Any], vocab: int, override: int | None = None,
           ) -> tuple[int, list[int]]:
    asked: list[int] = []

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "tiny", "max_model_len": 4096}]})

    async def info(_: web.Request) -> web.Response:
        return web.json_response({"vllm_config": {"model_config": model_config,
                                                  "cache_config": {"block_size": 128}}})

    async def complete(request: web.Request) -> web.Response:
        body = await request.json()
        token = body["prompt"][0]
        asked.append(token)
        if token >= vocab:
            return web.json_response({"error": {"message": f"Token id {token} is out of "
                                                "vocabulary", "code": 400}}, status=400)
        return web.json_response({"choices": [{"text": "x"}]})

    async def main() -> int:
        app = web.Application()
        app.router.add_get("/v1/models", models)
        app.router.add_get("/server_info", info)
        app.router.add_post("/v1/completions", complete)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            async with aiohttp.ClientSession() as session:
                facts = await probe_server(session, str(server.make_url("")).rstrip("/"), {},
                                           model=None, vocab_size=override, block_size=None)
                return facts.vocab_size
        finally:
            await server.close()

    return asyncio.run(main()), asked


@pytest.mark.parametrize("vocab", [1, 2048, 2049, 151_665, 262_144])
def test_search_finds_the_first_rejected_id(vocab: int) -> None:
    found, asked = _probe({"model": "/nowhere/on/this/host"}, vocab)
    assert found == vocab
    assert len(asked) <= 2 * max(vocab, 1024).bit_length() + 2


def test_model_files_named_by_server_info_are_read(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 3000}))
    (tmp_path / "tokenizer.json").write_text(json.dumps({
        "model": {"vocab": {"a": 0, "b": 1}}, "added_tokens": [{"id": 3100}]}))
    found, asked = _probe({"model": str(tmp_path), "tokenizer": str(tmp_path)}, 5000)
    assert found == 3101 and asked == []


def test_override_wins_and_sends_nothing() -> None:
    found, asked = _probe({"model": "/nowhere", "vocab_size": 100}, 5000, override=512)
    assert found == 512 and asked == []


def test_reported_vocab_size_is_used() -> None:
    found, asked = _probe({"model": "/nowhere", "hf_config": {"vocab_size": 777}}, 5000)
    assert found == 777 and asked == []
