"""Issue 24's traps on the simulator, judged against its truth log: a proxy that cuts
max_tokens in front of one arm, and requests cut by a short drain.

Each trap is made by construction (a proxy that rewrites every body, outputs far
longer than the drain), never by how fast this machine happens to be.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp import web

from analysis import assess_run, compare_runs, measure, read_run, read_runs, summarize
from replay.load import RunSettings, auto_drain, resolve_drain, run_load
from replay.servers.sim import SimConfig, SimServer, TruthRecord
from tests.support.servers import serve_app
from tests.support.workloads import make_workload
from traces import iter_sessions

_HOP = {"content-length", "transfer-encoding", "connection", "content-encoding"}


@asynccontextmanager
async def cutting_proxy(upstream: str, keep: float) -> AsyncIterator[str]:
    """A loopback proxy that forwards everything to ``upstream``, asking for only
    ``keep`` of every completion's max_tokens (and min_tokens)."""
    client = aiohttp.ClientSession(auto_decompress=False)

    async def handle(req: web.Request) -> web.StreamResponse:
        body = await req.read()
        if req.method == "POST" and body:
            obj = orjson.loads(body)
            for key in ("max_tokens", "min_tokens"):
                if isinstance(obj.get(key), int):
                    obj[key] = max(1, int(obj[key] * keep))
            body = orjson.dumps(obj)
        headers = {k: v for k, v in req.headers.items() if k.lower() not in _HOP | {"host"}}
        out = web.StreamResponse()
        try:
            async with client.request(req.method, upstream + req.path_qs, data=body or None,
                                      headers=headers) as up:
                out = web.StreamResponse(status=up.status, headers={
                    k: v for k, v in up.headers.items() if k.lower() not in _HOP})
                await out.prepare(req)
                async for chunk in up.content.iter_any():
                    await out.write(chunk)
                await out.write_eof()
        except (ConnectionResetError, aiohttp.ClientError):
            pass  # the client hung up (the run's end cancels what is still streaming)
        return out

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    try:
        async with serve_app(app) as url:
            yield url
    finally:
        await client.close()


def _records(run: Path) -> list[dict[str, object]]:
    return [orjson.loads(x) for x in (run / "requests.jsonl").read_bytes().splitlines()]


@pytest.mark.sim
def test_a_proxy_that_cuts_max_tokens_makes_its_arm_invalid(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=4, turns=30, output=90, think_s=0.0)
    cfg = RunSettings(target="http://127.0.0.1:1", users=4, warmup_s=0.2, duration_s=3.5,
                      drain_s=20.0, metrics_interval_s=None)

    async def go() -> tuple[Path, Path, list[TruthRecord]]:
        async with SimServer(SimConfig(profile="small", time_scale=4.0)) as srv:
            direct = await run_load(cfg.model_copy(update={"target": srv.url,
                                                           "label": "auto"}),
                                    wl, tmp_path / "runs" / "direct")
            seen = len(srv.truth)
            async with cutting_proxy(srv.url, keep=1 / 3) as url:
                cut = await run_load(cfg.model_copy(update={"target": url, "label": "cut"}),
                                     wl, tmp_path / "runs" / "cut")
            return direct, cut, list(srv.truth)[seen:]

    direct, cut, truth = asyncio.run(go())
    by_id = {t.request_id: t for t in truth}
    recs = [r for r in _records(cut) if r["status"] == "ok"]
    assert recs and all(by_id[str(r["id"])].max_tokens == 30 for r in recs)  # the truth
    assert all(r["output_tokens"] == 30 and r["output_tokens_asked"] == 90 for r in recs)
    s = summarize(measure(read_run(cut)), bootstrap=False, tiers=())
    in_window_ok = s.counts.ok
    assert s.counts.output_mismatch == in_window_ok > 0
    v = assess_run(read_run(cut))
    assert v.verdict == "invalid"
    assert {r.code: r.severity for r in v.reasons}["output_mismatch"] == "invalid"
    direct_v = assess_run(read_run(direct))
    assert "output_mismatch" not in {r.code for r in direct_v.reasons}
    c = compare_runs(read_runs([tmp_path / "runs"]), allow_unfair=True, baseline="auto")
    assert c.validity.verdict == "invalid"
    ratios = {r.metric: r for r in c.levels[0].ratios["cut"]}
    for key in ("e2e.p90", "interactivity.p90", "interactivity.p50"):
        assert not ratios[key].established, key  # whatever this machine's timing


@pytest.mark.sim
def test_requests_cut_by_the_drain_say_how_far_they_got(tmp_path: Path) -> None:
    """Outputs of 2000 tokens, a drain of 0.3 s: the requests still streaming are cut;
    each says how many tokens it had received (never more than the server sent, per its
    truth log), and the run carries a caveat naming --drain."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=3, turns=3, output=2000, think_s=0.0)
    cfg = RunSettings(target="http://127.0.0.1:1", users=3, warmup_s=0.0, duration_s=0.8,
                      drain_s=0.3, metrics_interval_s=None, warmup_start="start")

    async def go() -> tuple[Path, list[TruthRecord]]:
        async with SimServer(SimConfig(profile="small", time_scale=1.0)) as srv:
            run = await run_load(cfg.model_copy(update={"target": srv.url}), wl,
                                 tmp_path / "run")
            ids = {str(r["id"]) for r in _records(run)}
            for _ in range(200):  # the server logs an aborted request once it noticed
                if ids <= {t.request_id for t in srv.truth}:
                    break
                await asyncio.sleep(0.05)
            return run, list(srv.truth)

    run, truth = asyncio.run(go())
    by_id = {t.request_id: t for t in truth}
    cut = [r for r in _records(run) if r["status"] == "incomplete"]
    assert len(cut) == 3
    for r in cut:
        got = int(r["output_tokens"])  # type: ignore[call-overload]
        assert 0 < got < 2000 and got <= by_id[str(r["id"])].output_tokens
    counts = summarize(measure(read_run(run)), bootstrap=False, tiers=()).counts
    assert counts.cut_received == sum(int(r["output_tokens"]) for r in cut)  # type: ignore[call-overload]
    assert counts.cut_asked == 3 * 2000
    v = assess_run(read_run(run))
    (reason,) = [r for r in v.reasons if r.code == "drain_cut"]
    assert reason.severity == "caveat" and "--drain" in reason.message
    assert f"{counts.cut_received:,} of the 6,000 tokens asked" in reason.message


def test_the_default_drain_covers_the_longest_answer(tmp_path: Path) -> None:
    long = list(iter_sessions(make_workload(tmp_path / "a.jsonl", output=2000)))
    short = list(iter_sessions(make_workload(tmp_path / "b.jsonl", output=20)))
    assert auto_drain(long) == 2000 / 20 + 10
    assert auto_drain(short) == 30.0
    cfg = RunSettings(target="http://127.0.0.1:1", duration_s=1.0)
    assert cfg.drain_s is None
    settled, note = resolve_drain(cfg, long)
    assert settled.drain == 110.0 and note is not None
    assert "110 s" in note and "2,000 tokens" in note and "--drain" in note
    given, none = resolve_drain(cfg.model_copy(update={"drain_s": 5.0}), long)
    assert given.drain == 5.0 and none is None


@pytest.mark.sim
def test_the_claimed_acceptance_is_printed_beside_the_measured_one(tmp_path: Path) -> None:
    """The speculative profile claims acceptance length 6 (5 drafts accepted every step):
    the run's summary prints the measured length from the counters next to that claim."""
    from replay.cli._run_summary import run_summary_lines

    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=4, output=60, think_s=0.0)
    cfg = RunSettings(target="http://127.0.0.1:1", users=2, warmup_s=0.2, duration_s=1.5,
                      drain_s=20.0, metrics_interval_s=0.2)

    async def go() -> Path:
        async with SimServer(SimConfig(profile="kimi-k3-gb300-tp16-dspark",
                                       time_scale=4.0)) as srv:
            return await run_load(cfg.model_copy(update={"target": srv.url}), wl,
                                  tmp_path / "run")

    run = asyncio.run(go())
    s = summarize(measure(read_run(run)), bootstrap=False, tiers=())
    assert s.speculation.claimed_acceptance_length == pytest.approx(6.0)
    assert s.speculation.acceptance_length == pytest.approx(6.0, rel=0.02)
    lines = run_summary_lines(run)
    (spec,) = [x for x in lines if x.startswith("speculative acceptance length")]
    assert f"measured {s.speculation.acceptance_length:.2f}" in spec
    assert "claimed by the server/profile: 6.00" in spec
