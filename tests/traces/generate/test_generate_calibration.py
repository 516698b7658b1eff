"""The generator against the full WEKA/AgentX table; any context size; the decode profile."""

from __future__ import annotations

import numpy as np
import pytest

from traces import (
    REFERENCE_CONTEXT,
    Request,
    Session,
    TraceError,
    check_session,
    generate,
    generate_trace,
    inspect_sessions,
)

# The full-dataset table of shared/traces/SOURCES.md ("Statistics of the full WEKA
# dataset", 710 sessions): p10, p50, p90, p99. Main-agent requests unless noted.
TABLE = {
    "prompt tokens per request": (43_308, 104_644, 235_882, 499_848),
    "completion tokens per request (all)": (105, 216, 898, 3_686),
    "first request's prompt tokens": (15_458, 24_454, 258_903, 708_057),
    "requests (turns) per session": (7, 45, 155, 329),
    "new prompt tokens per turn": (230, 705, 4_077, 65_796),
    "think time between turns, s": (4.0, 10, 170, 3_039),
}
SESSION_REUSE = 0.963  # "96.3% of prompt tokens are a prefix already seen"
BS = 64


def _measures(sessions: list[Session]) -> dict[str, list[float]]:
    m: dict[str, list[float]] = {k: [] for k in TABLE}
    for s in sessions:
        m["requests (turns) per session"].append(len(s.requests))
        m["first request's prompt tokens"].append(s.requests[0].prompt_tokens)
        for i, r in enumerate(s.requests):
            m["prompt tokens per request"].append(r.prompt_tokens)
            m["completion tokens per request (all)"].append(r.output_tokens)
            m["completion tokens per request (all)"].extend(
                q.output_tokens for sub in r.subagents for q in sub.requests)
            if i:
                m["new prompt tokens per turn"].append(r.prompt_tokens - r.prefix_blocks * BS)
                m["think time between turns, s"].append(r.think_time_s)
    return m


@pytest.fixture(scope="module")
def uncapped() -> list[Session]:
    return list(generate(sessions=300, seed=0, max_context=1_000_000)[1])


def test_every_percentile_of_the_full_table(uncapped: list[Session]) -> None:
    measured = _measures(uncapped)
    for name, want in TABLE.items():
        got = np.percentile(measured[name], [10, 50, 90, 99])
        for pct, g, w, tol in zip((10, 50, 90, 99), got, want, (0.2, 0.2, 0.2, 0.35),
                                  strict=True):
            assert abs(g - w) <= tol * w, f"{name} p{pct}: {g:.1f} vs {w} (±{tol:.0%})"
    reuse = inspect_sessions(uncapped).session_reuse_share
    assert reuse is not None and abs(reuse - SESSION_REUSE) <= 0.03


def test_think_time_tail_reaches_tens_of_minutes(uncapped: list[Session]) -> None:
    think = np.array(_measures(uncapped)["think time between turns, s"])
    assert (think > 20 * 60).sum() >= 0.01 * len(think)
    assert think.max() > 60 * 60


def _all(s: Session) -> list[Request]:
    return [*s.requests, *(q for r in s.requests for sub in r.subagents for q in sub.requests)]


@pytest.mark.parametrize(("n", "bs"), [(2048, 16), (4096, 16), (32768, 64), (131072, 64)])
def test_any_context_size_keeps_the_shape(uncapped: list[Session], n: int, bs: int) -> None:
    trace = generate_trace(sessions=300, seed=0, max_context=n, block_size=bs)
    sessions = list(trace.sessions)
    header = trace.header()
    assert header.params["token_scale"] == pytest.approx(n / REFERENCE_CONTEXT)
    for s, ref in zip(sessions, uncapped, strict=True):
        check_session(s, bs)
        assert all(r.prompt_tokens + r.output_tokens <= n for r in _all(s))
        assert len(s.requests) == len(ref.requests)  # turns kept
        assert [r.think_time_s for r in s.requests] == [r.think_time_s for r in ref.requests]
        assert [r.kind for r in s.requests] == [r.kind for r in ref.requests]
    reuse = inspect_sessions(sessions).session_reuse_share
    ref_reuse = inspect_sessions(uncapped).session_reuse_share
    assert reuse is not None and ref_reuse is not None and abs(reuse - ref_reuse) <= 0.03
    # What the cap still changed is counted, and matches the sessions.
    assert header.params["compactions"] <= sum(s.compactions for s in sessions)
    assert header.params["sessions_compacted"] <= sum(s.compactions > 0 for s in sessions)


def test_explicit_prompt_scale_is_honoured_and_checked() -> None:
    header, _ = generate(sessions=1, max_context=32768, prompt_scale=0.1)
    assert "token_scale" not in header.params and header.params["prompt_scale"] == 0.1
    with pytest.raises(TraceError) as err:
        generate(sessions=1, max_context=32768, prompt_scale=1.0)
    assert err.value.field == "max_context"


def test_decode_profile_fixed_sizes_no_think_no_reuse() -> None:
    trace = generate_trace("decode", sessions=6, requests_per_session=3)
    sessions = list(trace.sessions)
    header = trace.header()
    assert header.source == "decode" and header.params["profile"] == "decode"
    assert header.params["ignore_eos"] is True
    reqs = [r for s in sessions for r in s.requests]
    assert len(reqs) == 18
    assert {(r.prompt_tokens, r.output_tokens, r.think_time_s) for r in reqs} == {(1, 1000, 0)}
    ids = [b for r in reqs for b in r.new_block_ids]
    assert len(ids) == len(set(ids)) and all(r.prefix_blocks == 0 for r in reqs)
    stats = inspect_sessions(sessions)
    assert stats.session_reuse_share == 0 and stats.reuse_share == 0
    for s in sessions:
        check_session(s, 64)


def test_decode_profile_sizes_and_limits() -> None:
    _, sessions = generate("decode", sessions=2, input_tokens=300, output_tokens=50)
    assert [(r.prompt_tokens, r.output_tokens) for s in sessions for r in s.requests] == \
        [(300, 50), (300, 50)]
    with pytest.raises(TraceError) as err:
        generate("decode", sessions=1, max_context=2048, output_tokens=4000)
    assert err.value.field == "output_tokens"
    with pytest.raises(TraceError) as err:
        generate("decode", sessions=1, input_tokens=0)
    assert err.value.field == "input_tokens"
