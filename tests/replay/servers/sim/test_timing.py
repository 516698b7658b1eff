"""Timing against the simulator's own truth, never against the profile's nominal speed.

What a test can know for certain on a busy machine: the client cannot see a token
before the server delivered it; a step is never delivered before its deadline; the
step log's wall times add up to the wall time that passed; its modelled times are the
profile's figures, exactly. How close the achieved step times come to the profile
is a figure of the machine, printed by ``bench/sim_bench.py --modes timing``.
"""

from __future__ import annotations

import asyncio

import aiohttp
import numpy as np
import pytest

from replay.servers.sim import Engine, SimConfig, SimServer, StepTruth, TruthRecord, load_profile
from tests.replay.servers.sim._util import Stream, body, run, stream

pytestmark = pytest.mark.sim

_EARLY_NS = 2_000_000
"""Slack for clock rounding (the step loop itself never delivers before a deadline)."""


def _serve(config: SimConfig, prompts: list[tuple[list[int], int]],
           ) -> tuple[list[Stream], list[TruthRecord], list[StepTruth], SimServer]:
    async def go() -> tuple[list[Stream], SimServer]:
        async with SimServer(config) as srv, aiohttp.ClientSession() as s:
            got = await asyncio.gather(*(
                stream(s, srv.url + "/v1/completions", body(p, n), {"X-Request-Id": f"r{i}"})
                for i, (p, n) in enumerate(prompts)))
            return list(got), srv
    got, srv = run(go())
    return got, sorted(srv.truth, key=lambda t: t.request_id), list(srv.steps), srv


def _busy_periods(steps: list[StepTruth]) -> list[list[StepTruth]]:
    """Runs of steps where each started at the previous one's deadline or later."""
    periods: list[list[StepTruth]] = []
    for st in steps:
        if periods and st.start_ns <= periods[-1][-1].end_ns + _EARLY_NS:
            periods[-1].append(st)
        else:
            periods.append([st])
    return periods


def test_client_never_sees_a_token_before_the_server_delivered_it() -> None:
    config = SimConfig(profile="small", time_scale=4.0)
    prompts = [([60 + u] * 16, 60) for u in range(4)]
    got, truth, _steps, srv = _serve(config, prompts)
    for (prompt, n), g, t in zip(prompts, got, truth, strict=True):
        assert g.done and t.output_tokens == n
        # the very tokens the engine made for this request id, in order
        replica = Engine(srv.profile, config.backend, seed=config.seed)
        req = replica.add(t.request_id, prompt, n)
        while replica.has_work():
            replica.step()
        assert g.token_ids() == req.tokens[len(prompt):]
        done = np.cumsum(t.emit_tokens)  # tokens delivered by the end of each step
        seen = 0
        for ev, at in zip(g.json_events(), g.times, strict=False):
            ids = [i for ch in ev["choices"] for i in ch.get("token_ids") or []]
            if not ids:
                continue
            seen += len(ids)
            step = int(np.searchsorted(done, seen))  # the step that delivered the last one
            assert at * 1e9 - t.emit_ns[step] >= -1e3, "a token arrived before it was sent"
        assert seen == t.output_tokens


def test_steps_are_never_early_and_model_time_is_the_profiles() -> None:
    config = SimConfig(profile="small", time_scale=4.0)
    _got, _truth, steps, srv = _serve(config, [([70 + u] * 40, 30 + 10 * u) for u in range(3)])
    assert steps and [s.index for s in steps] == list(range(len(steps)))
    profile = srv.profile
    for st in steps:
        modelled = profile.step_s("latency_specialized", st.decode_batch, st.ctx_tokens,
                                  st.prefill_tokens) / 4.0
        assert st.model_s == pytest.approx(modelled, rel=1e-12)
        assert st.end_ns >= st.start_ns + st.model_s * 1e9 - _EARLY_NS
    for period in _busy_periods(steps):
        # the deadline chain: a busy period lasts at least its modelled time
        assert sum(s.actual_s for s in period) >= sum(s.model_s for s in period) - 2e-3


def test_step_log_wall_times_add_up_to_the_time_that_passed() -> None:
    _got, truth, steps, _srv = _serve(SimConfig(profile="small", time_scale=4.0),
                                      [([80] * 30, 40)])
    (rec,) = truth
    # one request: one busy period; after its first step, wall times telescope exactly
    assert len(_busy_periods(steps)) == 1
    span = sum(s.actual_s for s in steps[1:])
    assert span == pytest.approx((steps[-1].end_ns - steps[0].end_ns) / 1e9, abs=1e-6)
    # the first step's wall time runs from the moment work arrived (after queueing)
    assert rec.queued_ns is not None
    assert steps[0].actual_s * 1e9 <= steps[0].end_ns - rec.queued_ns + 1e3
    # the request's record carries the same figures as the step log
    by_end = {s.end_ns: s for s in steps}
    assert [by_end[e].actual_s for e in rec.emit_ns] == pytest.approx(
        [a / 1e9 for a in rec.step_actual_ns], abs=2e-9)  # ns ints
    assert rec.emit_ns == [s.end_ns for s in steps if s.emitted_tokens]


def test_time_scale_divides_the_modelled_step() -> None:
    _got, truth, steps, _srv = _serve(SimConfig(profile="small", time_scale=10.0),
                                      [([60] * 8, 20)])
    decode = [s for s in steps if s.decode_batch == 1 and not s.prefill_tokens]
    assert decode
    for st in decode:
        assert st.model_s == pytest.approx(0.020 * (1 + st.ctx_tokens / 1_000_000) / 10.0)
    assert truth[0].step_model_ns[1:] == [int(s.model_s * 1e9) for s in decode]


def test_chunked_prefill_sets_ttft() -> None:
    """A 4000-token prompt at 20K tokens/s in 2048-token chunks: the steps before the first
    token are modelled at 4000 / 20K s in all, and the truth's TTFT is no shorter."""
    profile = load_profile("small").model_copy(update={"prefill_tokens_per_s": 20_000.0})
    got, truth, steps, _srv = _serve(SimConfig(profile=profile),
                                     [(list(range(100, 4100)), 2)])
    (rec,) = truth
    assert got[0].done and rec.prefill_tokens == 4000
    assert rec.first_token_ns is not None and rec.scheduled_ns is not None
    before = [s for s in steps if s.end_ns <= rec.first_token_ns]
    assert [s.prefill_tokens for s in before] == [2048, 1952]
    assert sum(s.model_s for s in before) == pytest.approx(4000 / 20_000)
    assert rec.step_model_ns[0] == pytest.approx(1952 / 20_000 * 1e9, rel=1e-6)
    ttft = (rec.first_token_ns - rec.scheduled_ns) / 1e9
    assert ttft >= sum(s.model_s for s in before) - 2e-3
