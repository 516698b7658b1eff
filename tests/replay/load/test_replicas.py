"""Several replicas as one target, against simulated servers.

Every check compares the run's records with each server's own truth log (what
that simulator did), never with how fast this machine is: which server answered
each request, that a session's turns stayed on one server (affinity) or went
round in turn (round robin), and that the client's per-replica prefix cache
prediction equals what each server hit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest

from analysis import RequestRecord, RunManifest, read_run
from analysis.schema import MetricSample
from replay.cli import main
from replay.servers.sim import SimServerProcess, TruthRecord
from tests.support.servers import big_kv_profile, profile_variant
from tests.support.workloads import make_workload

pytestmark = pytest.mark.sim

_SCALE = 4.0


def _big_kv(tmp: Path, **changes: object) -> str:
    """The ``small`` profile with a KV cache that never evicts here, as a file."""
    return str(big_kv_profile(tmp, **changes))


@contextlib.contextmanager
def _fleet(tmp: Path, *specs: tuple[str, str]) -> Iterator[tuple[list[str], list[Path]]]:
    """Simulators (profile, backend), each with its truth log; yields URLs and logs."""
    with contextlib.ExitStack() as stack:
        urls, logs = [], []
        for k, (profile, backend) in enumerate(specs):
            log = tmp / f"truth{k}.jsonl"
            srv = stack.enter_context(SimServerProcess(profile, backend, time_scale=_SCALE,
                                                       truth_path=str(log)))
            urls.append(srv.url)
            logs.append(log)
        yield urls, logs


def _truth(log: Path) -> list[TruthRecord]:
    if not log.exists():
        return []
    return [TruthRecord.model_validate(orjson.loads(line))
            for line in log.read_bytes().splitlines() if line.strip()]


def _records(run: Path) -> list[RequestRecord]:
    return [RequestRecord.model_validate(orjson.loads(line))
            for line in (run / "requests.jsonl").read_bytes().splitlines()]


def _with_user(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://agent:s3cret@{parts.netloc}"


def _run(urls: list[str], wl: Path, out: Path, *extra: str, users: int = 4) -> int:
    args = ["run", "--workload", str(wl), "--users", str(users), "--duration", "2",
            "--warmup", "0", "--drain", "10", "--out", str(out), "--quiet",
            "--metrics-interval", "0.5", *extra]
    for url in urls:
        args += ["--target", url]
    return main(args)


def _exact(recs: list[RequestRecord], logs: list[Path]) -> list[TruthRecord]:
    """Every record is one request one named replica saw, and every request any replica
    saw is one record naming it; returns the truth entries.

    The race, stated: a request the run stopped (its drain over) before the replica's
    handler took it leaves a record and no truth entry; on a starved machine that
    happens. Such a record must say so (incomplete or cancelled); any other record
    must match the truth exactly."""
    truths = [_truth(log) for log in logs]
    seen = {(t.request_id, k) for k, ts in enumerate(truths) for t in ts}
    assert len(seen) == sum(len(ts) for ts in truths)  # no id twice on a server or across
    sent = {(r.id, r.replica) for r in recs}
    assert seen <= sent
    unseen = [r for r in recs if (r.id, r.replica) not in seen]
    assert all(r.status in ("incomplete", "cancelled") for r in unseen), \
        [(r.id, r.status, r.error_kind) for r in unseen]
    assert len({r.id for r in recs}) == len(recs)
    return [t for ts in truths for t in ts]


def _cache_exact(recs: list[RequestRecord], truth: list[TruthRecord], bs: int = 16) -> None:
    """The client's prefix cache model, one per replica, predicted each server's hits.

    The race, stated: a request sent while another carrying the same new shared blocks
    (the workload's system prompt) has no first token yet may find them computed or
    not, as the server happens to schedule the two; the client does not know which, so
    it records no expectation (None) for it. Either way the server hit whole blocks,
    never the prompt's last token, and only the first requests on a replica can race
    (once a shared block's owner began, every later one hits it). Every other
    expectation equals the server's count exactly."""
    by_id = {r.id: r for r in recs}
    admitted = [t for t in truth if t.scheduled_ns is not None]
    assert len(admitted) >= 10
    raced = [t for t in admitted if by_id[t.request_id].expected_cached_tokens is None]
    for t in admitted:
        expected = by_id[t.request_id].expected_cached_tokens
        if expected is None:  # the race: either outcome is the server's to choose
            assert t.cached_tokens % bs == 0 and t.cached_tokens <= t.prompt_tokens - 1
        else:
            assert expected == t.cached_tokens, t.request_id
    sessions = {(by_id[t.request_id].user, by_id[t.request_id].session_instance)
                for t in admitted}
    assert len(raced) < len(sessions), "only a session's first requests can race"
    assert len(admitted) - len(raced) >= 10
    assert sum(t.cached_tokens for t in admitted) > 0


def test_affinity_keeps_every_session_on_one_replica(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every turn of a session instance (its subagents too) lands on one server; the
    first sessions are spread evenly; records and truth logs match exactly; run.json
    names both replicas without the credentials their URLs carried; every replica's
    /metrics is scraped apart."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=4, turns=5, output=20, think_s=0.05,
                       subagent_every=2)
    out = tmp_path / "run"
    profile = _big_kv(tmp_path)
    with _fleet(tmp_path, (profile, "auto"), (profile, "auto")) as (urls, logs):
        code = _run([_with_user(u) for u in urls], wl, out)
    assert code in (0, 3)  # 3: a starved simulator on a busy machine (stamped invalid)
    printed = capsys.readouterr()
    assert f"fleet of 2 replicas (affinity): window requests {urls[0]} " in printed.out
    assert "s3cret" not in printed.out + printed.err
    recs = _records(out)
    truth = _exact(recs, logs)
    on: dict[tuple[int, int], set[int]] = {}
    for r in recs:
        on.setdefault((r.user, r.session_instance), set()).add(r.replica)
    assert all(len(replicas) == 1 for replicas in on.values()), on
    assert any(r.agent is not None for r in recs)  # subagents followed their session
    firsts = [next(iter(on[(u, 0)])) for u in range(4)]
    assert sorted(firsts) == [0, 0, 1, 1]  # least loaded at each session's start
    _cache_exact(recs, truth)
    manifest = RunManifest.model_validate(orjson.loads((out / "run.json").read_bytes()))
    assert [r.target for r in manifest.replicas] == urls
    assert manifest.target == urls[0] and manifest.routing == "affinity"
    assert all(r.server_info is not None for r in manifest.replicas)
    for f in out.iterdir():
        assert b"s3cret" not in f.read_bytes(), f.name
    samples = [MetricSample.model_validate(orjson.loads(line))
               for line in (out / "server_metrics.jsonl").read_bytes().splitlines()]
    assert {s.replica for s in samples} == {0, 1}
    for k in (0, 1):  # each replica's counters kept apart: its own hits, not the fleet's
        hits = max(s.values.get("vllm:prefix_cache_hits_total", 0.0) for s in samples
                   if s.replica == k)
        done = sum(t.hit_tokens for t in _truth(logs[k]) if t.status == "ok")
        assert 0 < done <= hits <= sum(t.hit_tokens for t in _truth(logs[k]))
    run = read_run(out)
    assert sorted(set(run.requests.replica.tolist())) == [0, 1]


def test_round_robin_alternates_replicas(tmp_path: Path) -> None:
    """Each request goes to the next replica in the order they were sent (request ids
    count sends), whatever its session; the per-replica cache model still holds."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=3, turns=5, output=20, think_s=0.05)
    out = tmp_path / "run"
    profile = _big_kv(tmp_path)
    with _fleet(tmp_path, (profile, "auto"), (profile, "auto")) as (urls, logs):
        code = _run(urls, wl, out, "--routing", "round-robin", users=3)
    assert code in (0, 3)
    recs = _records(out)
    truth = _exact(recs, logs)
    by_seq = sorted(recs, key=lambda r: int(r.id.rsplit("-", 1)[1]))
    assert [r.replica for r in by_seq] == [k % 2 for k in range(len(by_seq))]
    sessions_on_both = {(r.user, r.session_instance) for r in recs if r.replica == 0} & \
        {(r.user, r.session_instance) for r in recs if r.replica == 1}
    assert sessions_on_both
    _cache_exact(recs, truth)
    manifest = RunManifest.model_validate(orjson.loads((out / "run.json").read_bytes()))
    assert manifest.routing == "round-robin"


def test_replicas_that_differ_are_refused(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A fleet whose servers differ (here only in the decode backend) is not one target:
    refused in one line naming the replica and the field, before any load."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=2)
    out = tmp_path / "run"
    with _fleet(tmp_path, ("small", "auto"), ("small", "latency_specialized")) as (urls, logs):
        code = _run(urls, wl, out)
    err = capsys.readouterr().err
    assert code == 2
    assert "--target: replica 1" in err and "decode_backend" in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert not (out / "requests.jsonl").exists()
    assert _truth(logs[0]) == [] and _truth(logs[1]) == []


@pytest.fixture
def tiny_workload(tmp_path: Path) -> Path:
    return make_workload(tmp_path / "tiny.jsonl", sessions=4, turns=4, output=16,
                         think_s=0.05)


def test_compare_with_fleet_arms(tiny_workload: Path, tmp_path: Path) -> None:
    """``--arm auto=URL1,URL2``: each arm's runs load both its replicas (each session on
    one), run.json lists them, the comparison is fair (two GPUs' worth a side: a fleet
    against one server would differ in GPU count and be refused); every request of
    the comparison is one record naming the server that answered it."""
    out = tmp_path / "cmp"
    with _fleet(tmp_path, ("small", "auto"), ("small", "auto"),
                ("small", "latency_specialized"), ("small", "latency_specialized")) \
            as (urls, logs):
        code = main(["compare", "--arm", f"auto={urls[0]},{urls[1]}", "--arm",
                     f"latency_specialized={urls[2]},{urls[3]}", "--workload",
                     str(tiny_workload), "--users", "2", "--duration", "1.5", "--warmup",
                     "0.2", "--drain", "1", "--out", str(out), "--quiet"])
    assert code in (0, 3)
    state = orjson.loads((out / "comparison.json").read_bytes())
    assert state["preflight"]["fair"] is True
    assert state["preflight"]["gpu_counts"] == [2, 2]
    assert state["arms"] == {"auto": f"{urls[0]},{urls[1]}",
                             "latency_specialized": f"{urls[2]},{urls[3]}"}
    runs = sorted((out / "runs").iterdir())
    assert len(runs) == 2
    for run_dir in runs:
        arm = 0 if run_dir.name.startswith("auto-") else 2
        manifest = RunManifest.model_validate(orjson.loads((run_dir / "run.json").read_bytes()))
        assert [r.target for r in manifest.replicas] == urls[arm:arm + 2]
        assert manifest.gpu_count == 2
        recs = _records(run_dir)
        assert {r.replica for r in recs} == {0, 1}
        on: dict[tuple[int, int], set[int]] = {}
        for r in recs:
            on.setdefault((r.user, r.session_instance), set()).add(r.replica)
        assert all(len(v) == 1 for v in on.values())
        truth = [{t.request_id for t in _truth(log)} for log in logs[arm:arm + 2]]
        assert {(r.id, r.replica) for r in recs} == \
            {(i, k) for k, ids in enumerate(truth) for i in ids}
    assert (out / "report.html").stat().st_size > 0


def test_compare_refuses_a_fleet_arm_whose_replicas_differ(
        tiny_workload: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two replicas of one arm on different profiles: refused before any load, naming
    the replica and the differing field (``--allow-unfair`` does not lift it)."""
    variant = profile_variant(tmp_path, max_num_seqs=32)
    out = tmp_path / "cmp"
    with _fleet(tmp_path, ("small", "auto"), (variant, "auto"),
                ("small", "latency_specialized")) as (urls, _):
        code = main(["compare", "--arm", f"auto={urls[0]},{urls[1]}", "--arm",
                     f"latency_specialized={urls[2]}", "--workload", str(tiny_workload),
                     "--users", "1", "--duration", "1", "--out", str(out), "--quiet",
                     "--allow-unfair"])
    err = capsys.readouterr().err
    assert code == 2
    last = err.strip().splitlines()[-1]  # after the settings' warnings (warmup), if any
    assert "--arm auto: replica 1" in last and "max_num_seqs" in last
    assert "Traceback" not in err
    assert not (out / "runs").exists()
