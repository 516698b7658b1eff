"""``--scenario agentx``: the AgentX rules set, locked, judged and carried.

Refusals are checked at the command line against a listening socket that must
never see a connection (nothing is sent before the rules are checked). Runs on
the simulator check what the lanes did against known truth: the workload's own
turn counts (entry points) and the server's prefix-cache counts (cache busting).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pytest

from analysis import LoadSettings, RunManifest, compare_runs, read_run
from replay.cli import main
from replay.errors import ConfigError
from replay.load import SCENARIOS, entry_turn, judge_scenario, scenario_values
from replay.servers.sim import SimServerProcess
from tests.support.workloads import chain_requests
from traces import Session, WorkloadHeader, write_workload

BS = 16
SHARED_BLOCKS = 2
AGENTX = SCENARIOS["agentx"]


def _weka_like(path: Path, *, sessions: int, turns: int, source: str = "weka",
               params: dict[str, object] | None = None, think_s: float = 0.05) -> Path:
    """Small sessions under a WEKA header (what ``traces import weka`` writes), each
    with a shared head of ``SHARED_BLOCKS`` blocks (system prompt and tools)."""
    shared_ids = tuple(range(1, SHARED_BLOCKS + 1))
    out = [Session(id=f"s{s}", requests=chain_requests(
        turns=turns, new_blocks=4, block_size=BS, output=8, think_s=think_s,
        first_id=10_000 * (s + 1), shared=SHARED_BLOCKS, shared_ids=shared_ids))
        for s in range(sessions)]
    header = WorkloadHeader(source=source, block_size=BS, params=params or {})
    write_workload(path, header, out)
    return path


@pytest.fixture
def listener(uses_sim: None) -> Iterator[tuple[str, socket.socket]]:
    """A server socket that accepts nothing: any connection attempt stays pending."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", sock
    finally:
        sock.close()


def _no_connection(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


REFUSED_RUN = [
    (["--duration", "60"], "--duration 60", "900 s"),
    (["--think-scale", "2"], "--think-scale 2", "scale 1"),
    (["--think-time-cap", "5"], "--think-time-cap 5", "gaps as recorded"),
    (["--seed", "3"], "--seed 3", "seed 42"),
    (["--rate", "1"], "--rate", "closed loop"),
]


@pytest.mark.sim
@pytest.mark.parametrize(("extra", "flag", "rule"), REFUSED_RUN)
def test_run_refuses_each_contradicting_flag_before_any_connection(
    tmp_path: Path, listener: tuple[str, socket.socket], capsys: pytest.CaptureFixture[str],
    extra: list[str], flag: str, rule: str,
) -> None:
    url, sock = listener
    wl = _weka_like(tmp_path / "wl.jsonl", sessions=1, turns=4)
    args = ["run", "--target", url, "--workload", str(wl), "--out", str(tmp_path / "r"),
            "--scenario", "agentx", "--quiet", "--duration", "900", *extra]
    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert flag in err and rule in err and "--scenario-unsafe" in err
    assert _no_connection(sock)
    assert not (tmp_path / "r" / "run.json").exists()


REFUSED_WORKLOAD = [
    ({"source": "coding-agent"}, "source is 'coding-agent'"),
    ({"params": {"compactions": 3, "truncated_requests": 0}}, "forbids input truncation"),
    ({"params": {"token_scale": 0.25}}, "scaled by 0.25"),
]


@pytest.mark.sim
@pytest.mark.parametrize(("header", "rule"), REFUSED_WORKLOAD)
@pytest.mark.parametrize("command", ["run", "compare"])
def test_workloads_that_break_the_rules_are_refused(
    tmp_path: Path, listener: tuple[str, socket.socket], capsys: pytest.CaptureFixture[str],
    header: dict[str, object], rule: str, command: str,
) -> None:
    """Not WEKA sessions, or prompts the import truncated or rescaled: refused naming
    the workload file, by ``run`` and ``compare`` alike."""
    url, sock = listener
    wl = _weka_like(tmp_path / "wl.jsonl", sessions=1, turns=4, **header)  # type: ignore[arg-type]
    where = ["--target", url] if command == "run" else ["--arm", f"a={url}"]
    code = main([command, *where, "--workload", str(wl), "--out", str(tmp_path / "o"),
                 "--duration", "900", "--scenario", "agentx", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert f"--workload {wl}" in err and rule in err
    assert _no_connection(sock)


@pytest.mark.sim
@pytest.mark.parametrize(("extra", "flag"), [
    (["--duration", "60"], "--duration 60"),
    (["--duration", "900", "--rate", "0.5,1"], "--rate"),
    (["--duration", "900", "--think-scale", "0.5"], "--think-scale 0.5"),
])
def test_compare_refuses_contradicting_flags(
    tmp_path: Path, listener: tuple[str, socket.socket], capsys: pytest.CaptureFixture[str],
    extra: list[str], flag: str,
) -> None:
    url, sock = listener
    wl = _weka_like(tmp_path / "wl.jsonl", sessions=1, turns=4)
    code = main(["compare", "--arm", f"a={url}", "--arm", f"b={url}", "--workload", str(wl),
                 "--out", str(tmp_path / "c"), "--scenario", "agentx", "--quiet", *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert flag in err and "scenario agentx" in err
    assert _no_connection(sock)
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())


def test_unsafe_needs_a_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = _weka_like(tmp_path / "wl.jsonl", sessions=1, turns=4)
    code = main(["run", "--target", "http://127.0.0.1:9", "--workload", str(wl),
                 "--out", str(tmp_path / "r"), "--duration", "5", "--scenario-unsafe"])
    assert code == 2 and "--scenario-unsafe" in capsys.readouterr().err


def test_the_rules_fill_what_the_user_left_unset() -> None:
    """Unset knobs take the scenario's values; the ones given that agree stay."""
    header = WorkloadHeader(source="weka", block_size=64)
    values = {"duration_s": 900.0, "think_scale": 1.0, "think_time_cap_s": None, "seed": 0,
              "rate": None, "users": 4}
    out = scenario_values("agentx", False, values, header, "wl.jsonl")
    assert out["scenario"] == "agentx" and out["scenario_unsafe"] is False
    assert (out["seed"], out["think_time_cap_s"], out["think_scale"]) == (
        AGENTX.seed, AGENTX.think_time_cap_s, 1.0)
    assert out["users"] == 4 and out["duration_s"] == 900.0
    same = scenario_values("agentx", False, {**values, "seed": 42}, header, "wl.jsonl")
    assert same["think_time_cap_s"] is None and same["seed"] == 42
    with pytest.raises(ConfigError, match="--think-time-cap 10: .* gaps as recorded"):
        scenario_values("agentx", False, {**values, "think_time_cap_s": 10.0}, header,
                        "wl.jsonl")
    with pytest.raises(ConfigError, match="--duration 899"):
        scenario_values("agentx", False, {**values, "duration_s": 899.0}, header, "wl.jsonl")
    kept = scenario_values("agentx", True, {**values, "seed": 7}, header, "wl.jsonl")
    assert kept["seed"] == 7 and kept["scenario_unsafe"] is True


def _judge(**kw: object) -> list[str]:
    load = dict(users=4, duration_s=900.0, warmup_s=60.0, drain_s=30.0, seed=42,
                think_time_cap_s=None)
    load.update({k: v for k, v in kw.items() if k in LoadSettings.model_fields})
    rest: dict[str, object] = dict(source="weka", header_params={}, max_context=None,
                                   window_s=900.0, failure_share=0.01)
    rest.update({k: v for k, v in kw.items() if k not in LoadSettings.model_fields})
    verdict = judge_scenario("agentx", LoadSettings(**load), **rest)  # type: ignore[arg-type]
    assert verdict.satisfied == (not verdict.notes)
    return verdict.notes


def test_a_run_by_the_rules_is_satisfied_and_each_breach_is_named() -> None:
    assert _judge() == []
    assert _judge(duration_s=1800.0, window_s=1800.0, users=64) == []
    for kw, words in [
        (dict(duration_s=600.0, window_s=600.0), "900 s"),
        (dict(failure_share=0.06), "6.0% of the window's requests failed"),
        (dict(failure_share=None), "failure share unknown"),
        (dict(uncounted=3), "without the server's token counts"),
        (dict(interrupted=True, window_s=400.0), "interrupted"),
        (dict(think_time_cap_s=30.0), "think-time-cap 30"),
        (dict(think_scale=0.5), "think-scale 0.5"),
        (dict(seed=1), "seed 42"),
        (dict(arrival="open", rate=1.0), "closed loop"),
        (dict(source="mooncake"), "source is 'mooncake'"),
        (dict(header_params={"truncated_requests": 2}), "forbids input truncation"),
    ]:
        notes = _judge(**kw)
        assert notes and any(words in n for n in notes), (kw, notes)


@pytest.mark.parametrize("turns", [1, 2, 3, 4, 7, 20, 101])
def test_entry_turns_stay_within_the_ratio_and_cover_it(turns: int) -> None:
    """Every draw ``k`` has 0.25 <= k/turns <= 0.75 (turn 0 only for a one-turn
    session), and every turn in that range is drawn."""
    lo, hi = AGENTX.entry_ratio
    rng = np.random.default_rng(0)
    drawn = {entry_turn(rng, turns, lo, hi) for _ in range(4000)}
    allowed = {k for k in range(turns) if lo <= k / turns <= hi} or {0}
    assert drawn == allowed


@pytest.fixture(scope="module")
def sim(uses_sim: None) -> Iterator[SimServerProcess]:
    with SimServerProcess("small", time_scale=4.0) as srv:
        yield srv


def _records(run: Path) -> list[dict[str, object]]:
    return [orjson.loads(x) for x in (run / "requests.jsonl").read_bytes().splitlines()]


def _unsafe_run(sim: SimServerProcess, wl: Path, out: Path, users: int,
                *extra: str) -> int:
    return main(["run", "--target", sim.url, "--workload", str(wl), "--out", str(out),
                 "--users", str(users), "--duration", "2", "--drain", "10", "--quiet",
                 "--metrics-interval", "0", "--scenario", "agentx", "--scenario-unsafe",
                 *extra])


def test_a_short_unsafe_run_is_stamped_not_satisfied_naming_the_900s_rule(
    tmp_path: Path, sim: SimServerProcess, capsys: pytest.CaptureFixture[str],
) -> None:
    """--scenario-unsafe lets a 2 s run go ahead; run.json, summary.json (the
    comparison) and the report say it did not satisfy AgentX and why. Each user's
    first session was entered between 25% and 75% of its turns."""
    turns = 20
    wl = _weka_like(tmp_path / "wl.jsonl", sessions=4, turns=turns)
    out = tmp_path / "run"
    code = _unsafe_run(sim, wl, out, 8)
    err = capsys.readouterr().err
    assert code in (0, 3)
    m = RunManifest.model_validate_json((out / "run.json").read_bytes())
    assert m.scenario == "agentx" and m.scenario_satisfied is False
    assert any("900 s" in n and "window 2 s" in n for n in m.scenario_notes)
    assert "scenario agentx: NOT satisfied" in err and "900 s" in err
    assert (m.load.seed, m.load.think_time_cap_s, m.load.think_scale) == (42, None, 1.0)
    assert m.idle_cap is not None and (m.idle_cap.cap_s, m.idle_cap.scope) == (10.0, "run")

    firsts: dict[int, int] = {}
    for r in sorted(_records(out), key=lambda r: r["sent_s"]):  # type: ignore[arg-type,return-value]
        if r["session_instance"] == 0 and r["agent"] is None:
            firsts.setdefault(int(r["user"]), int(r["turn"]))  # type: ignore[call-overload]
    assert sorted(firsts) == list(range(8))
    lo, hi = AGENTX.entry_ratio
    assert all(lo <= k / turns <= hi for k in firsts.values()), firsts
    assert len(set(firsts.values())) > 1, "every lane entered at the same turn"

    comparison = compare_runs([read_run(out)])
    assert comparison.scenario == "agentx" and comparison.scenario_satisfied is False
    # a note names its run by its directory, as caveats do
    assert any(n.startswith(f"{out.name}: window 2 s") for n in comparison.scenario_notes)


def _first_cached(run: Path) -> dict[int, tuple[float, float | None, int]]:
    """Per user: (sent, first token, server's cached tokens) of its first request.

    Only the first is read: a later request the drain cut off (a busy machine) has no
    usage, so no cached count."""
    out: dict[int, tuple[float, float | None, int]] = {}
    for r in sorted(_records(run), key=lambda r: r["sent_s"]):  # type: ignore[arg-type,return-value]
        user = int(r["user"])  # type: ignore[call-overload]
        if user not in out:
            out[user] = (float(r["sent_s"]), r["first_token_s"],  # type: ignore[arg-type,assignment]
                         int(r["cached_tokens"]))  # type: ignore[call-overload]
    return out


def test_lanes_replaying_one_session_share_only_the_shared_head(
    tmp_path: Path, sim: SimServerProcess,
) -> None:
    """Two users replay the one session, both entering at turn 1 (of 2). The later
    one's first request is sent after the earlier one's was computed, yet the server
    finds only the shared head (system prompt and tools) of it in its cache."""
    wl = _weka_like(tmp_path / "wl.jsonl", sessions=1, turns=2, think_s=100.0)
    out = tmp_path / "run"
    _unsafe_run(sim, wl, out, 2, "--warmup", "2")
    (a_sent, a_first, _), (b_sent, _, b_cached) = sorted(_first_cached(out).values())
    assert a_first is not None and b_sent > a_first, "the lanes' first requests overlapped"
    assert b_cached == SHARED_BLOCKS * BS


def test_the_cache_bust_differs_run_to_run(tmp_path: Path, sim: SimServerProcess) -> None:
    """The same run twice (same seed, same entry turn): under the scenario the second
    run's first request hits only the shared head; without it (the control) the
    second run hits the whole prompt the first run sent."""
    wl = _weka_like(tmp_path / "wl.jsonl", sessions=1, turns=2)
    for name in ("a", "b"):
        _unsafe_run(sim, wl, tmp_path / name, 1)
    cached = _first_cached(tmp_path / "b")[0][2]
    assert cached == SHARED_BLOCKS * BS

    # A 10-s drain (as _unsafe_run's): with 1 s a busy machine could cut the first
    # request off unfinished, and a cut request has no usage (no cached count) to read.
    plain = ["run", "--target", sim.url, "--workload", str(wl), "--users", "1",
             "--duration", "2", "--drain", "10", "--quiet", "--metrics-interval", "0",
             "--seed", "42"]
    for name in ("c", "d"):
        assert main([*plain, "--out", str(tmp_path / name)]) in (0, 3)
    first = min(_records(tmp_path / "d"), key=lambda r: r["sent_s"])  # type: ignore[arg-type,return-value]
    prompt = int(first["prompt_tokens"])  # type: ignore[call-overload]
    assert int(first["cached_tokens"]) == (prompt - 1) // BS * BS > SHARED_BLOCKS * BS  # type: ignore[call-overload]


@pytest.mark.sim
def test_compare_carries_the_scenario_into_every_run_and_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """compare --scenario agentx --scenario-unsafe: every run follows the rules and
    is judged; summary.json and the report say the comparison did not satisfy them
    (its windows are 1 s), naming each run."""
    from tests.support.servers import sims

    wl = _weka_like(tmp_path / "wl.jsonl", sessions=2, turns=8)
    out = tmp_path / "cmp"
    with sims(("small", "auto"), ("small", "latency_specialized")) as urls:
        code = main(["compare", "--arm", f"auto={urls[0]}",
                     "--arm", f"latency_specialized={urls[1]}", "--workload", str(wl),
                     "--users", "1", "--duration", "1", "--drain", "0.5", "--out", str(out),
                     "--scenario", "agentx", "--scenario-unsafe", "--quiet"])
    assert code in (0, 3)
    assert "scenario agentx: NOT satisfied" in capsys.readouterr().err
    runs = sorted((out / "runs").iterdir())
    manifests = [RunManifest.model_validate_json((r / "run.json").read_bytes()) for r in runs]
    assert manifests and all(m.scenario == "agentx" and m.scenario_satisfied is False
                             and m.load.seed == 42 for m in manifests)
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["scenario"] == "agentx" and summary["scenario_satisfied"] is False
    for r in runs:  # a note names its run by its directory (auto-u1-r0), as caveats do
        assert any(n.startswith(f"{r.name}: window 1 s") and "900 s" in n
                   for n in summary["scenario_notes"])
    html = (out / "report.html").read_text()
    assert 'id="scenario"' in html and "NOT satisfied" in html
