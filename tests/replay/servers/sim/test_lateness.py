"""The simulator reports how late it ran: ``vllm_sim:`` counters equal its step log, and a
forced slowdown shows in them while the modelled time stays the profile's."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import aiohttp
import orjson
import pytest

from replay.cli import main
from replay.client import parse_prometheus
from replay.servers.sim import (
    SimConfig,
    SimServer,
    SimServerProcess,
    StepTruth,
    read_step_log,
    step_log_path,
)
from tests.replay.servers.sim._util import body, run, stream

ACTUAL = "vllm_sim:engine_step_actual_seconds_total"
MODEL = "vllm_sim:engine_step_model_seconds_total"


def _counters(text: str) -> dict[str, float]:
    return parse_prometheus(text, prefix="vllm_sim:")


def _drive(config: SimConfig, users: int = 3,
           tokens: int = 30) -> tuple[dict[str, float], list[StepTruth], SimServer]:
    async def go() -> tuple[str, SimServer]:
        async with SimServer(config) as srv, aiohttp.ClientSession() as s:
            await asyncio.gather(*(stream(s, srv.url + "/v1/completions",
                                          body([90 + u] * 20, tokens)) for u in range(users)))
            async with s.get(srv.url + "/metrics") as r:
                return await r.text(), srv
    text, srv = run(go())
    return _counters(text), list(srv.steps), srv


@pytest.mark.sim
def test_counters_equal_the_step_log_sums() -> None:
    counters, steps, srv = _drive(SimConfig(profile="small", time_scale=4.0))
    assert steps and counters[MODEL] > 0
    assert counters[MODEL] == sum(s.model_s for s in steps)
    assert counters[ACTUAL] == sum(s.actual_s for s in steps)
    assert sum(s.emitted_tokens for s in steps) == srv.engine.counters.generation_tokens


@pytest.mark.sim
def test_slowdown_makes_the_simulator_late_by_that_factor() -> None:
    counters, steps, srv = _drive(SimConfig(profile="small", time_scale=4.0, slowdown=1.5))
    assert counters[MODEL] == pytest.approx(sum(s.model_s for s in steps))
    # the model figure is still the profile's (before the slowdown)
    for st in steps:
        assert st.model_s == pytest.approx(srv.profile.step_s(
            "latency_specialized", st.decode_batch, st.ctx_tokens, st.prefill_tokens) / 4.0)
    # forced: every deadline is 1.5x the modelled step (a busy machine only adds to it)
    assert counters[ACTUAL] / counters[MODEL] >= 1.3


@pytest.mark.sim
def test_server_info_states_the_slowdown() -> None:
    async def go() -> dict[str, object]:
        async with SimServer(SimConfig(slowdown=2.0)) as srv, aiohttp.ClientSession() as s:
            async with s.get(srv.url + "/server_info?config_format=json") as r:
                return dict(await r.json())
    assert run(go())["slowdown"] == 2.0


@pytest.mark.sim
def test_serve_sim_writes_the_step_log_beside_the_truth_log(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    with SimServerProcess("small", time_scale=4.0, slowdown=1.5, truth_path=str(truth)) as srv:
        req = urllib.request.Request(
            srv.url + "/v1/completions", method="POST",
            data=orjson.dumps({"prompt": [20, 21, 22], "max_tokens": 12}),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert orjson.loads(r.read())["usage"]["completion_tokens"] == 12
        with urllib.request.urlopen(srv.url + "/metrics", timeout=10) as r:
            counters = _counters(r.read().decode())
    steps = read_step_log(step_log_path(str(truth)))
    assert step_log_path(str(truth)) == str(tmp_path / "truth.steps.jsonl")
    assert len(truth.read_bytes().splitlines()) == 1  # the request log holds requests only
    assert sum(s.emitted_tokens for s in steps) == 12
    assert counters[MODEL] == pytest.approx(sum(s.model_s for s in steps), rel=1e-12)
    assert counters[ACTUAL] == pytest.approx(sum(s.actual_s for s in steps), rel=1e-12)
    assert counters[ACTUAL] / counters[MODEL] >= 1.3


def test_serve_sim_refuses_a_speedup(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve-sim", "--slowdown", "0.5"]) == 2
    assert "--slowdown" in capsys.readouterr().err
