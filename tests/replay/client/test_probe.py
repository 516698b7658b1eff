"""A bare OpenAI-compatible server (no /server_info): the vocabulary is never assumed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import pytest
from aiohttp import web

from analysis.schema._schema import RunManifest
from replay.client._probe import connect_url, find_key, public_target
from replay.errors import ConfigError
from replay.load import RunConfig, run_load
from tests.support.servers import serve_app
from tests.support.workloads import make_workload

SEEN: list[dict[str, object]] = []


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "bare", "max_model_len": 4096}]})


async def completions(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    SEEN.append({"body": body, "auth": request.headers.get("Authorization"),
                 "rid": request.headers.get("X-Request-Id")})
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    n = body["max_tokens"]
    for i in range(n):
        await resp.write(b'data: {"choices": [{"text": "w"}]}\n\n')
        if i == 0:
            await asyncio.sleep(0.005)
    usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": n}
    await resp.write(b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    return resp


async def _with_bare(fn: Callable[[str], Awaitable[None]]) -> None:
    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    async with serve_app(app) as base:
        await fn(base)


@pytest.mark.sim
def test_no_vocab_anywhere_fails_fast(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl")

    async def go(url: str) -> None:
        with pytest.raises(ConfigError, match="--vocab-size"):
            await run_load(RunConfig(target=url, duration_s=1), wl, tmp_path / "run")

    asyncio.run(_with_bare(go))
    assert not (tmp_path / "run").exists()


@pytest.mark.sim
def test_vocab_option_and_default_block_size(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", output=5, think_s=0.0)
    monkeypatch.setenv("BARE_KEY", "k-123")
    SEEN.clear()

    async def go(url: str) -> None:
        await run_load(RunConfig(target=url + "/v1", users=1, duration_s=0.4, vocab_size=500,
                                 api_key_env="BARE_KEY", metrics_interval_s=None),
                       wl, tmp_path / "run")

    asyncio.run(_with_bare(go))
    m = RunManifest.model_validate_json((tmp_path / "run" / "run.json").read_bytes())
    assert (m.vocab_size, m.server_block_size, m.gpu_count, m.server_info) == (500, 16, None,
                                                                                None)
    assert SEEN and all(s["auth"] == "Bearer k-123" for s in SEEN)
    prompts = [p for s in SEEN for p in s["body"]["prompt"]]  # type: ignore[index]
    assert max(prompts) < 500 and min(prompts) >= 0
    recs = [orjson.loads(x) for x in (tmp_path / "run" / "requests.jsonl").read_bytes()
            .splitlines()]
    assert {r["id"] for r in recs} == {s["rid"] for s in SEEN}
    ok = [r for r in recs if r["status"] == "ok"]
    assert ok and all(r["chunk_tokens"] == [1] * 5 and r["output_tokens"] == 5 for r in ok)


def test_url_helpers() -> None:
    assert public_target("https://u:p@h.example:8443/v1/?x=1") == "https://h.example:8443"
    url, auth = connect_url("http://u:p%40ss@h:80/v1")
    assert url == "http://h:80" and auth == "Basic dTpwQHNz"
    assert connect_url("http://h:80/") == ("http://h:80", None)
    assert find_key({"a": [{"b": {"vocab_size": 7}}]}, "vocab_size") == 7
    assert find_key({"a": 1}, "vocab_size") is None
