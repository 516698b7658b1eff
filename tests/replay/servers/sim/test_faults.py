"""Each fault mode, seen from a plain aiohttp client; parsing; determinism."""

from __future__ import annotations

import time

import aiohttp
import orjson
import pytest

from replay.errors import ConfigError
from replay.servers.sim import SimConfig, SimServer, parse_faults
from tests.replay.servers.sim._util import body, run, stream

MAX = 10


def _one(faults: str, b: dict | None = None, rid: str = "f1"):
    async def go():
        cfg = SimConfig(time_scale=20.0, faults=parse_faults(faults))
        async with SimServer(cfg) as srv, aiohttp.ClientSession() as s:
            got = await stream(s, srv.url + "/v1/completions", b or body([30] * 5, MAX),
                               headers={"X-Request-Id": rid})
            return got, list(srv.truth)
    return run(go())


def test_parse_faults_errors_are_clear() -> None:
    spec = parse_faults("error_rate=0.1, stall_rate=0.2,stall_s=1.5")
    assert spec.error_rate == 0.1 and spec.stall_s == 1.5
    for bad, words in (("nonsense=1", "unknown kind 'nonsense'"), ("error_rate", "KIND=VALUE"),
                       ("error_rate=abc", "error_rate"), ("stall_rate=1.5", "stall_rate"),
                       ("error_rate=0.7,disconnect_rate=0.7", "more than 1")):
        with pytest.raises(ConfigError, match=words):
            parse_faults(bad)


@pytest.mark.sim
def test_rate_limit_is_429_with_retry_after() -> None:
    got, truth = _one("rate_limit_rate=1,retry_after_s=3")
    assert got.status == 429 and got.headers["Retry-After"] == "3"
    assert truth[0].fault == "rate_limit" and truth[0].http_status == 429


@pytest.mark.sim
def test_error_is_http_500_json() -> None:
    async def go():
        async with SimServer(SimConfig(faults=parse_faults("error_rate=1"))) as srv, \
                aiohttp.ClientSession() as s:
            async with s.post(srv.url + "/v1/completions", json=body([30] * 5, MAX)) as r:
                return r.status, await r.json()
    status, payload = run(go())
    assert status == 500 and payload["error"]["code"] == 500


@pytest.mark.sim
def test_stream_error_is_an_event_under_200_then_done() -> None:
    got, truth = _one("stream_error_rate=1")
    assert got.status == 200 and got.done
    events = got.json_events()
    assert events[-1]["error"]["code"] == 500
    assert set(events[-1]["error"]) == {"message", "type", "param", "code"}
    assert len(got.token_ids()) == MAX // 2
    assert truth[0].status == "stream_error" and truth[0].fault == "stream_error"


@pytest.mark.sim
def test_stall_pauses_mid_stream() -> None:
    got, truth = _one("stall_rate=1,stall_s=0.6")
    assert got.done and len(got.token_ids()) == MAX
    gaps = [b - a for a, b in zip(got.times, got.times[1:], strict=False)]
    # the client stamps an event when it reads it, possibly late for the one before the
    # stall: the gap it sees may be a little under 0.6 s, never far under
    assert sum(g >= 0.5 for g in gaps) == 1
    assert truth[0].fault == "stall" and truth[0].status == "ok"


@pytest.mark.sim
def test_disconnect_drops_the_connection_mid_stream() -> None:
    got, truth = _one("disconnect_rate=1")
    assert got.status == 200 and not got.done
    assert isinstance(got.error, aiohttp.ClientPayloadError)
    assert len(got.token_ids()) == MAX // 2
    assert truth[0].status == "disconnected"


@pytest.mark.sim
def test_malformed_event_then_stream_continues() -> None:
    got, truth = _one("malformed_rate=1")
    assert got.done
    bad = []
    for e in got.events[:-1]:
        try:
            orjson.loads(e)
        except orjson.JSONDecodeError:
            bad.append(e)
    assert len(bad) == 1
    good = [e for e in got.events[:-1] if e not in bad]
    ids = [t for e in good for ch in orjson.loads(e)["choices"] for t in ch.get("token_ids", [])]
    assert len(ids) == MAX


@pytest.mark.sim
def test_slow_accept_delays_the_response() -> None:
    t0 = time.monotonic()
    got, _truth = _one("slow_accept_s=0.4")
    assert got.t_headers >= 0.4 and got.done
    assert time.monotonic() - t0 >= 0.4


@pytest.mark.sim
def test_faults_are_deterministic_given_seed() -> None:
    def faulted(seed: int) -> list[str]:
        async def go():
            cfg = SimConfig(time_scale=50.0, seed=seed, faults=parse_faults("error_rate=0.5"))
            async with SimServer(cfg) as srv, aiohttp.ClientSession() as s:
                out = []
                for i in range(24):
                    async with s.post(srv.url + "/v1/completions", json=body([30], 1),
                                      headers={"X-Request-Id": f"q{i}"}) as r:
                        await r.read()
                        if r.status == 500:
                            out.append(f"q{i}")
                return out
        return run(go())
    a, b, c = faulted(1), faulted(1), faulted(2)
    assert a == b and 0 < len(a) < 24 and a != c


@pytest.mark.sim
def test_a_retry_under_the_same_id_draws_again() -> None:
    async def go():
        cfg = SimConfig(time_scale=50.0, seed=0, faults=parse_faults("rate_limit_rate=0.5"))
        async with SimServer(cfg) as srv, aiohttp.ClientSession() as s:
            statuses = []
            for _ in range(12):
                async with s.post(srv.url + "/v1/completions", json=body([30], 1),
                                  headers={"X-Request-Id": "same"}) as r:
                    await r.read()
                    statuses.append(r.status)
            return statuses
    a, b = run(go()), run(go())
    assert a == b and {200, 429} <= set(a)
