"""``--workers`` and ``--ray`` replay the same request set as one process.

A closed-loop run whose work ends by construction has a deterministic request set:
each user sends five turns 0.15 s apart (instant server), then its sixth is due
100 s later, past the window (no drain), so the lane stops. Each user sends the same
sessions, turns and token counts however the users are spread over processes.

The window (``WINDOW_S``) is eight times the 0.6 s the five turns take: with 1.5 s, a
loaded machine (load average 5 on 2 cores, the full suite beside a CPU-bound job)
left two users' last turns unsent when the window closed, and the request sets
differed by who was starved, not by how users were spread.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest

from analysis import RequestRecord, RunManifest
from analysis.schema import Coverage
from replay.errors import ConfigError
from replay.load import RunSettings, run_load_sync, split_users
from replay.servers.sim import SimServerProcess, load_profile
from tests.support.workloads import chain_requests
from traces import Session, WorkloadHeader, write_workload

USERS = 5
WINDOW_S = 5.0


def _records(run: Path) -> list[RequestRecord]:
    return [RequestRecord.model_validate(orjson.loads(line))
            for line in (run / "requests.jsonl").read_bytes().splitlines()]


def _key(r: RequestRecord) -> tuple[object, ...]:
    return (r.user, r.lane, r.session, r.session_instance, r.turn, r.prompt_tokens,
            r.output_tokens_asked, r.output_tokens, r.status)


@pytest.fixture(scope="module")
def sim(uses_sim: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    tmp = tmp_path_factory.mktemp("scale")
    wl = tmp / "wl.jsonl"
    sessions = []
    for s in range(3):
        reqs = list(chain_requests(turns=6, new_blocks=4, block_size=16, output=8,
                                   think_s=0.15, first_id=10_000 * (s + 1)))
        reqs[5] = reqs[5].model_copy(update={"think_time_s": 100.0})
        sessions.append(Session(id=f"s{s}", requests=tuple(reqs)))
    write_workload(wl, WorkloadHeader(source="test", block_size=16), sessions)
    prof = tmp / "instant.json"
    prof.write_text(load_profile("instant").model_dump_json())
    with SimServerProcess(str(prof), startup_timeout_s=60) as srv:
        yield srv.url, wl


def _run(url: str, wl: Path, out: Path, **kw: object) -> Path:
    cfg = RunSettings(target=url, users=USERS, duration_s=WINDOW_S, warmup_s=0.0, drain_s=0.0,
                    warmup_start="start", metrics_interval_s=None, **kw)  # type: ignore[arg-type]
    return run_load_sync(cfg, wl, out)


@pytest.fixture(scope="module")
def single(sim: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Counter:
    url, wl = sim
    recs = _records(_run(url, wl, tmp_path_factory.mktemp("one") / "run"))
    # 5 requests per user: turns 0-4 of its first session; turn 5 is due 100 s later.
    assert len(recs) == USERS * 5
    return Counter(_key(r) for r in recs)


def test_split_users_round_robin() -> None:
    assert split_users(5, 2) == [(0, 2, 4), (1, 3)]
    assert split_users(1, 3) == [(0,), (), ()]
    shares = split_users(1000, 7)
    assert sorted(u for s in shares for u in s) == list(range(1000))


@pytest.mark.ray
def test_workers_replay_the_same_requests(sim: tuple[str, Path], single: Counter,
                                          tmp_path: Path) -> None:
    url, wl = sim
    run = _run(url, wl, tmp_path / "run", workers=2)
    recs = _records(run)
    assert Counter(_key(r) for r in recs) == single
    assert {r.worker for r in recs} == {0, 1}
    assert all(r.worker == r.user % 2 for r in recs)
    assert len({r.id for r in recs}) == len(recs)
    # one clock: process start-up (imports and the workload, 1-3 s on these machines)
    # happens before the origin, or every worker's first turn would be sent that late; a
    # starved machine delays a send by a fraction of that
    assert max(r.sent_s - r.due_s for r in recs) < 1.0
    man = RunManifest.model_validate_json((run / "run.json").read_bytes())
    assert man.workers == 2 and man.complete and not man.warnings
    # every user worked inside the window; health measured per worker, the worst kept
    assert man.coverage == Coverage(lanes=USERS, lanes_done_before_window_end=0)
    assert man.client_health is not None and man.client_health.cpu_share is not None


def test_workers_need_closed_loop(sim: tuple[str, Path]) -> None:
    url, _ = sim
    with pytest.raises(ValueError, match="closed-loop"):
        RunSettings(target=url, rate=2.0, duration_s=1.0, workers=2)


@pytest.mark.ray
@pytest.mark.ray
def test_ray_replays_the_same_requests(sim: tuple[str, Path], single: Counter,
                                       tmp_path: Path) -> None:
    import ray  # installed by the ray extra, which CI installs

    url, wl = sim
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run = _run(url, wl, tmp_path / "run", workers=2, ray="auto")
    finally:
        ray.shutdown()
    recs = _records(run)
    assert Counter(_key(r) for r in recs) == single
    assert {r.worker for r in recs} == {0, 1}
    man = RunManifest.model_validate_json((run / "run.json").read_bytes())
    assert man.workers == 2 and man.complete
    assert any("skew" in w for w in man.warnings)


def test_ray_missing_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from replay.load import _ray

    real = builtins.__import__

    def no_ray(name: str, *args: object, **kw: object) -> object:
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(ConfigError, match=r"agentreplay\[ray\]"):
        _ray._ray()


def test_a_dead_worker_is_reported(sim: tuple[str, Path], single: Counter,
                                   tmp_path: Path) -> None:
    """Kill worker 1 once its first record is on disk: worker 0's users are all there,
    and the loss is in the manifest with the users it carried."""
    import multiprocessing
    import threading
    import time

    out = tmp_path / "run"

    def kill_after_first_record() -> None:
        deadline = time.monotonic() + 120  # worker start-up (imports) may take seconds
        while time.monotonic() < deadline:
            path = out / "requests.jsonl"
            if path.exists() and b'"worker":1' in path.read_bytes():
                break
            time.sleep(0.01)
        for proc in multiprocessing.active_children():
            if proc.name == "agentreplay-worker-1":
                proc.kill()

    url, wl = sim
    killer = threading.Thread(target=kill_after_first_record, daemon=True)
    killer.start()
    run = _run(url, wl, out, workers=2)
    killer.join()
    recs = _records(run)
    mine = Counter(k for k in single.elements() if k[0] % 2 == 0)
    assert Counter(_key(r) for r in recs if r.worker == 0) == mine
    theirs = [r for r in recs if r.worker == 1]
    assert theirs and all(r.user % 2 == 1 for r in theirs)
    assert len(theirs) < sum(1 for k in single.elements() if k[0] % 2 == 1)
    man = RunManifest.model_validate_json((run / "run.json").read_bytes())
    assert any(w.startswith("worker 1 died") and "2 of 5 users" in w for w in man.warnings), \
        man.warnings
    # typed: which worker, how many users; its requests due when it died are "lost"
    assert [(w.index, w.users, w.lost) for w in man.worker_info] == [(0, 3, False), (1, 2, True)]
    lost = [r for r in theirs if r.status == "lost"]
    assert man.worker_info[1].lost_requests == len(lost)
    assert all(r.error_kind == "worker_lost" and r.end_s is None for r in lost)
    assert man.validity is not None and man.validity.verdict == "invalid"
    assert "worker_lost" in {r.code for r in man.validity.reasons}
