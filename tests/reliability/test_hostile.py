"""A hostile server: oversized events, endless streams, invalid UTF-8, junk ``usage``,
huge ``/metrics``, silence. Every request ends with a clear status, memory stays
bounded and nothing waits without a limit."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import pytest
from aiohttp import web

from analysis import read_run
from replay.client._failures import RedirectRefused
from replay.client._poller import MetricsPoller
from replay.client._stream import StreamOutcome, Timeouts, make_session, stream_request
from replay.load import run_load
from tests.reliability.hostile_server import EXPECTED, hostile_server
from tests.support.runs import cfg, manifest, records
from tests.support.workloads import make_workload

pytestmark = pytest.mark.sim

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_MODEL = "hostile/m"


def _chunk(text: str = "a", usage: object = None, ids: list[int] | None = None) -> bytes:
    choice: dict[str, object] = {"index": 0, "text": text, "finish_reason": None}
    if ids is not None:
        choice["token_ids"] = ids
    obj: dict[str, object] = {"id": "c", "object": "text_completion", "model": _MODEL,
                              "choices": [choice]}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def _open(request: web.Request) -> web.StreamResponse:
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    return resp


async def _oversized(request: web.Request) -> web.StreamResponse:
    """One ``data:`` line that never ends."""
    resp = await _open(request)
    await resp.write(b"data: ")
    block = b"x" * 65536
    for _ in range(10_000):  # 640 MiB if nobody stops reading
        await resp.write(block)
    return resp


async def _endless(request: web.Request) -> web.StreamResponse:
    """Tokens forever, far past max_tokens, never [DONE]."""
    resp = await _open(request)
    n = 0
    while True:
        n += 1
        await resp.write(_chunk(ids=[n % 100], usage={"prompt_tokens": 8,
                                                      "completion_tokens": n}))
        if n % 64 == 0:
            await asyncio.sleep(0)


async def _bad_utf8(request: web.Request) -> web.StreamResponse:
    resp = await _open(request)
    await resp.write(_chunk(ids=[1]))
    await resp.write(b'data: {"choices":[{"index":0,"text":"\xff\xfe\xc3("}]}\n\n')
    await resp.write(_chunk(ids=[2]) + b"data: [DONE]\n\n")
    return resp


def _usage_junk(usage: object) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await _open(request)
        await resp.write(_chunk(ids=[1]) + _chunk(ids=[2]))
        await resp.write(b"data: " + orjson.dumps({"id": "c", "choices": [], "usage": usage})
                         + b"\n\ndata: [DONE]\n\n")
        return resp
    return handler


async def _silent(request: web.Request) -> web.StreamResponse:
    await request.read()
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


async def _comments_only(request: web.Request) -> web.StreamResponse:
    """Keep-alive comments forever: bytes arrive, tokens never do."""
    resp = await _open(request)
    await resp.write(_chunk(ids=[1]))
    while True:
        await resp.write(b": ping\n\n")
        await asyncio.sleep(0.01)


async def _error_500_bad_utf8(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(status=500, body=b"\xff\xfe boom " + b"y" * 200_000)


@asynccontextmanager
async def hostile(completions: Handler, metrics: Handler | None = None) -> AsyncIterator[str]:
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": _MODEL, "object": "model", "max_model_len": 4096}]})

    async def default_metrics(request: web.Request) -> web.Response:
        return web.Response(text="vllm:num_requests_running 1\n")

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics or default_metrics)
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def _one(completions: Handler, timeouts: Timeouts, *, max_line_bytes: int = 1 << 20,
               max_tokens: int | None = 16) -> tuple[StreamOutcome, float]:
    async with hostile(completions) as url, make_session(4) as session:
        out = StreamOutcome()
        t = time.monotonic()
        await stream_request(session, f"{url}/v1/completions", b"{}", {}, timeouts, out,
                             max_line_bytes=max_line_bytes, max_tokens=max_tokens)
        return out, time.monotonic() - t


_SHORT = Timeouts(connect_s=2.0, first_token_s=1.0, itl_s=1.0, total_s=5.0)


def test_oversized_event_is_cut_at_the_line_limit() -> None:
    tracemalloc.start()
    try:
        out, took = asyncio.run(_one(_oversized, _SHORT, max_line_bytes=1 << 20))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (out.status, out.error_kind) == ("error", "line_too_long")  # not a timeout
    assert took > 0  # no wall-clock bound: the kind says the cut came first, not a timer
    assert peak < 32 << 20  # the client stopped near 1 MiB, far below the 640 MiB sent


def test_endless_stream_stops_past_max_tokens() -> None:
    out, took = asyncio.run(_one(_endless, _SHORT, max_tokens=16))
    assert (out.status, out.error_kind) == ("error", "too_many_tokens")
    assert 16 < out.streamed_tokens <= 16 + 64  # the kind, not a timer, ended it
    assert len(out.output_ids) <= 80


def test_invalid_utf8_event_is_malformed() -> None:
    out, _ = asyncio.run(_one(_bad_utf8, _SHORT))
    assert (out.status, out.error_kind) == ("error", "malformed")


@pytest.mark.parametrize("usage", [
    "lots", [1, 2], {"completion_tokens": "two"}, {"completion_tokens": [2]},
    {"completion_tokens": 2.0}, {"prompt_tokens": {"x": 1}, "completion_tokens": 2},
    {"completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": "many"}},
    {"completion_tokens": True},
])
def test_non_numeric_usage_is_malformed(usage: object) -> None:
    out, _ = asyncio.run(_one(_usage_junk(usage), _SHORT))
    assert (out.status, out.error_kind) == ("error", "malformed"), out
    assert out.usage is None or all(isinstance(v, int) for k, v in out.usage.items()
                                    if k != "prompt_tokens_details")


@pytest.mark.parametrize("usage", [
    {"completion_tokens": -3}, {"completion_tokens": 2, "prompt_tokens": -1},
    {"completion_tokens": 10**15}, {"completion_tokens": 17},
    {"completion_tokens": 3}, {"completion_tokens": 1},
    {"prompt_tokens": 4, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 5}},
])
def test_impossible_usage_is_bad_usage_and_not_kept(usage: object) -> None:
    """Counts that cannot be true (2 token ids arrived, 16 asked for) are a server
    error and never the count of record."""
    out, _ = asyncio.run(_one(_usage_junk(usage), _SHORT))
    assert (out.status, out.error_kind) == ("error", "bad_usage"), out
    assert out.usage is None and out.streamed_tokens == 2


def test_valid_usage_is_kept() -> None:
    out, _ = asyncio.run(_one(_usage_junk({"prompt_tokens": 4, "completion_tokens": 2,
                                           "prompt_tokens_details": {"cached_tokens": 1}}),
                              _SHORT))
    assert out.status == "ok" and out.usage is not None
    assert out.usage["completion_tokens"] == 2


def test_silent_server_times_out_first_token() -> None:
    t = Timeouts(connect_s=1.0, first_token_s=0.4, itl_s=1.0, total_s=5.0)
    out, took = asyncio.run(_one(_silent, t))
    assert (out.status, out.error_kind) == ("timeout", "timeout_first_token")
    # the first-token timer fired (its kind), not the total one: no upper bound on a
    # busy machine's wall clock, but it cannot have fired before its 0.4 s
    assert took > 0.35


def test_keepalive_comments_do_not_reset_the_token_timeout() -> None:
    t = Timeouts(connect_s=1.0, first_token_s=1.0, itl_s=0.3, total_s=5.0)
    out, took = asyncio.run(_one(_comments_only, t))
    assert (out.status, out.error_kind) == ("timeout", "timeout_itl")  # not first-token
    assert took > 0.25  # the 0.3 s ITL timer, never earlier (no upper wall-clock bound)


def test_huge_error_body_with_invalid_utf8() -> None:
    out, _ = asyncio.run(_one(_error_500_bad_utf8, _SHORT))
    assert (out.status, out.error_kind, out.http_status) == ("error", "http_500", 500)
    assert out.error_message is not None and len(out.error_message) <= 500


async def _endless_metrics(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await resp.prepare(request)
    line = b'vllm:num_requests_running{engine="0"} 1\n' * 1000
    while True:
        await resp.write(line)
        await asyncio.sleep(0)


async def _bad_utf8_metrics(request: web.Request) -> web.Response:
    return web.Response(body=b"vllm:num_requests_running 2\n\xff\xfe junk\n",
                        content_type="text/plain")


async def _gzip_metrics(request: web.Request) -> web.Response:
    import gzip

    return web.Response(body=gzip.compress(b"vllm:num_requests_running 2\n"),
                        headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})


async def _noop(request: web.Request) -> web.StreamResponse:
    raise AssertionError("not used")


@pytest.mark.parametrize("mode", ["endless", "bad_utf8", "gzip"])
def test_hostile_metrics_never_stop_the_poller(mode: str) -> None:
    handler = {"endless": _endless_metrics, "bad_utf8": _bad_utf8_metrics,
               "gzip": _gzip_metrics}[mode]

    async def go() -> tuple[dict[str, float] | None, int, float, int]:
        samples: list[dict[str, float]] = []
        async with hostile(_noop, handler) as url, make_session(4) as session:
            poller = MetricsPoller(session, f"{url}/metrics", 10.0,
                                   lambda t, v: samples.append(v), time.monotonic_ns(),
                                   max_bytes=1 << 20)
            t = time.monotonic()
            got = await poller.scrape()
            return got, poller.failures, time.monotonic() - t, len(samples)

    tracemalloc.start()
    try:
        got, failures, took, n = asyncio.run(go())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    if mode == "endless":
        assert got is None and failures == 1 and n == 0
        # stopped at the cap, not at the poller's 10 s timeout (the memory says it too)
        assert took < 10.0 and peak < 32 << 20
    elif mode == "gzip":
        assert got is None and failures == 1 and n == 0  # not parsed as garbage
    else:
        assert got == {"vllm:num_requests_running": 2.0} and failures == 0 and n == 1


@pytest.mark.parametrize("name", ["endless", "usage", "oversized"])
def test_whole_run_against_a_hostile_server(tmp_path: Path, name: str) -> None:
    """A full run: records are readable by analysis, statuses clear, the run ends."""
    handler: Handler = {"endless": _endless, "usage": _usage_junk({"completion_tokens": [1]}),
                        "oversized": _oversized}[name]
    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=3, output=10, think_s=0.0)

    async def go() -> Path:
        async with hostile(handler, _endless_metrics) as url:
            return await run_load(cfg(url, users=2, warmup_s=0.0, duration_s=0.6, drain_s=0.5,
                                      vocab_size=1000, metrics_interval_s=0.3,
                                      max_line_bytes=1 << 20, itl_timeout_s=1.0,
                                      total_timeout_s=3.0), wl, tmp_path / "run")

    t = time.monotonic()
    run = asyncio.run(go())
    assert time.monotonic() - t < 10
    recs = records(run)
    want = {"endless": "too_many_tokens", "usage": "malformed",
            "oversized": "line_too_long"}[name]
    assert recs and all(r.error_kind == want or r.status == "incomplete" for r in recs)
    assert any(r.error_kind == want for r in recs)
    assert manifest(run).complete
    read_run(run)  # the analysis reads what was written


_MODES_T = Timeouts(connect_s=2.0, first_token_s=0.5, itl_s=0.5, total_s=10.0)


async def _against(mode: str, asked: int = 4) -> tuple[StreamOutcome, list[str], list[str]]:
    async with hostile_server(mode) as srv, make_session(4) as session:
        out = StreamOutcome()
        await stream_request(session, f"{srv.url}/v1/completions",
                             orjson.dumps({"max_tokens": asked}), {"X-Request-Id": "r1"},
                             _MODES_T, out, max_tokens=asked)
        return out, srv.seen, srv.elsewhere_seen


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_each_misbehaviour_is_recorded_as_its_kind(mode: str) -> None:
    out, seen, elsewhere = asyncio.run(_against(mode))
    assert (out.status, out.error_kind) == EXPECTED[mode], out
    assert seen == ["r1"] and elsewhere == []  # asked once, never anywhere else
    if out.status == "ok":
        assert out.done and out.streamed_tokens == 4 and out.chunk_tokens == [1, 1, 1, 1]
        assert out.usage is not None and out.usage["completion_tokens"] == 4
    else:
        assert out.error_message


def test_redirect_names_the_location_and_is_not_followed() -> None:
    async def go() -> tuple[StreamOutcome, str, list[str]]:
        async with hostile_server("redirect") as srv, make_session(4) as session:
            out = StreamOutcome()
            await stream_request(session, f"{srv.url}/v1/completions", b"{}", {}, _MODES_T,
                                 out)
            # any other request of the session (probes, /metrics) is refused too
            with pytest.raises(RedirectRefused):
                async with session.post(f"{srv.url}/v1/completions", data=b"{}"):
                    pass
            return out, srv.url, srv.elsewhere_seen

    out, url, elsewhere = asyncio.run(go())
    assert out.http_status == 307 and out.error_kind == "redirect"
    assert out.error_message is not None and "/v1/completions" in out.error_message
    assert url not in out.error_message  # it names where it pointed, not where we were
    assert elsewhere == []


def test_client_asks_for_an_uncompressed_body() -> None:
    got: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        got.append(request.headers.get("Accept-Encoding", ""))
        resp = await _open(request)
        await resp.write(_chunk(ids=[1]) + b"data: [DONE]\n\n")
        return resp

    out, _ = asyncio.run(_one(handler, _SHORT))
    assert out.status == "ok" and got == ["identity"]


def test_usage_on_the_last_choice_chunk_is_not_counted_twice() -> None:
    out, _, _ = asyncio.run(_against("double_count", asked=9))
    assert out.status == "ok" and out.streamed_tokens == 9 and len(out.output_ids) == 9
