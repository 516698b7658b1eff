"""The synthetic generator: calibration to WEKA, determinism, context limits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from traces import (
    PROFILES,
    Session,
    TraceError,
    check_session,
    expected_blocks,
    generate,
    iter_block_ids,
)

REPO = Path(__file__).resolve().parents[3]  # children import this checkout's traces

@pytest.fixture(scope="module")
def sessions_300() -> list[Session]:
    header, sessions = generate(sessions=300, seed=0)
    assert header.max_context == 131_072 and header.block_size == 64
    return list(sessions)


def test_every_session_is_consistent_and_fits_context(sessions_300: list[Session]) -> None:
    for s in sessions_300:
        check_session(s, 64)
        chains = [s.requests] + [sub.requests for r in s.requests for sub in r.subagents]
        for chain in chains:
            for req, full in zip(chain, iter_block_ids(chain), strict=True):
                assert req.prompt_tokens + req.output_tokens <= 131_072
                assert len(full) == expected_blocks(req.prompt_tokens, 64)


def test_shared_prefix_is_shared_across_sessions_of_one_agent_type(
    sessions_300: list[Session],
) -> None:
    heads: dict[str, set[tuple[int, ...]]] = {}
    for s in sessions_300:
        first = s.requests[0]
        heads.setdefault(s.agent_type, set()).add(first.new_block_ids[: first.shared_blocks])
    assert len(heads) >= 3
    assert all(len(h) == 1 for h in heads.values())  # one prefix per agent type
    assert len({next(iter(h)) for h in heads.values()}) == len(heads)  # distinct per type


def test_history_grows_and_compaction_is_counted(sessions_300: list[Session]) -> None:
    compacted = [s for s in sessions_300 if s.compactions]
    assert compacted, "128K context must force some compactions"
    for s in sessions_300:
        resets = 0
        for prev, req in zip(s.requests, s.requests[1:], strict=False):
            if req.prefix_blocks == prev.prompt_tokens // 64:
                assert req.prompt_tokens > prev.prompt_tokens  # appended to the history
            else:
                assert req.prefix_blocks == req.shared_blocks  # compaction keeps the head
                resets += 1
        own = s.compactions - sum(
            1 for r in s.requests for sub in r.subagents
            for p, q in zip(sub.requests, sub.requests[1:], strict=False)
            if q.prefix_blocks != p.prompt_tokens // 64
        )
        assert resets == own


def test_subagents_appear_at_about_the_published_rate() -> None:
    _, sessions = generate(sessions=600, seed=11, prompt_scale=0.05, max_context=32_768)
    spawning = [s for s in sessions if any(r.subagents for r in s.requests)]
    # 2.4% of 600 = 14.4 expected; a binomial stays well inside [3, 30].
    assert 3 <= len(spawning) <= 30
    for s in spawning:
        last = s.requests[-1]
        assert not last.subagents  # a subagent always has a parent request after it
        for prev, req in zip(s.requests, s.requests[1:], strict=False):
            if prev.subagents:
                assert req.kind == "subagent_return"


def test_scales_fit_a_small_context_model() -> None:
    _, sessions = generate(sessions=40, seed=2, max_context=4096, prompt_scale=0.02,
                           output_scale=0.2, think_scale=0.01)
    n = 0
    for s in sessions:
        check_session(s, 64)
        for r in s.requests:
            assert r.prompt_tokens + r.output_tokens <= 4096
            assert r.think_time_s <= 7_200 * 0.01 * 12  # scaled pauses stay scaled
            n += 1
    assert n > 40


_FINGERPRINT = (
    "import sys, tempfile, os;"
    "from traces import generate, write_workload;"
    "h, s = generate(sessions=25, seed=int(sys.argv[1]));"
    "d = tempfile.mkdtemp();"
    "print(write_workload(os.path.join(d, 'w.jsonl'), h, s).fingerprint)"
)


def _fingerprint_in_subprocess(seed: int) -> str:
    out = subprocess.run([sys.executable, "-c", _FINGERPRINT, str(seed)], capture_output=True,
                         text=True, check=True, cwd=REPO)
    return out.stdout.strip()


@pytest.mark.cli
def test_same_seed_same_fingerprint_across_processes() -> None:
    a = _fingerprint_in_subprocess(5)
    b = _fingerprint_in_subprocess(5)
    c = _fingerprint_in_subprocess(6)
    assert len(a) == 64
    assert a == b
    assert a != c


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"sessions": -1}, "sessions"),
        ({"sessions": 1, "prompt_scale": 0.0}, "prompt_scale"),
        ({"sessions": 1, "think_scale": float("nan")}, "think_scale"),
        ({"sessions": 1, "max_context": 8192, "prompt_scale": 1.0}, "max_context"),
        ({"sessions": 1, "agent_types": 0}, "agent_types"),
        ({"sessions": 1, "block_size": 0}, "block_size"),
    ],
)
def test_bad_knobs_are_trace_errors(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(TraceError) as err:
        generate(**kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


def test_unknown_profile() -> None:
    with pytest.raises(TraceError, match="coding-agent"):
        generate("chatbot", sessions=1)
    assert "coding-agent" in PROFILES


def test_agent_types_knob_limits_types() -> None:
    _, sessions = generate(sessions=30, seed=1, agent_types=1)
    assert {s.agent_type for s in sessions} == {PROFILES["coding-agent"].agent_types[0].name}
