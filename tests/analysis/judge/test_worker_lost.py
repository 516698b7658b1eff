"""A lost ``--ray`` worker: ``lost`` records count as failures, ``worker_lost`` judges the
run (invalid, or a caveat when the lost share is within ``worker_lost_caveat_share``), and
the report shows the run's warnings and its workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis import (
    assess_run,
    compare_runs,
    measure,
    read_run,
    read_runs,
    render_report,
    summarize,
)
from tests.analysis.builders import make_run, rec, synth_records


def _workers(users: tuple[int, ...], lost: int | None,
             lost_requests: int = 0) -> list[dict[str, Any]]:
    return [{"index": w, "users": n, "node_id": f"node{w}", "hostname": f"h{w}", "skew_s": 0.001,
             "round_trip_s": 0.0005, "lost": w == lost,
             "lost_detail": "died (ActorDiedError)" if w == lost else None,
             "lost_requests": lost_requests if w == lost else 0}
            for w, n in enumerate(users)]


def _lost(i: int, **kw: Any) -> dict[str, Any]:
    return rec(i, status="lost", error_kind="worker_lost", first_token_s=None,
               last_token_s=None, end_s=None, output_tokens=0, worker=1,
               error_message="worker 1 was lost", **kw)


def test_lost_records_are_failures(tmp_path: Path) -> None:
    records = [rec(i) for i in range(6)] + [_lost(i) for i in range(6, 8)]
    run = read_run(make_run(tmp_path, records, workers=2,
                            worker_info=_workers((1, 1), lost=1, lost_requests=2)))
    c = summarize(measure(run), bootstrap=False, tiers=()).counts
    assert (c.ok, c.lost, c.in_window) == (6, 2, 8)
    assert c.failure_share == 2 / 8
    assert c.by_error_kind == {"worker_lost": 2}


def test_a_lost_worker_invalidates_the_run(tmp_path: Path) -> None:
    records = [rec(i) for i in range(6)] + [_lost(6)]
    v = assess_run(read_run(make_run(tmp_path, records, workers=2,
                                     worker_info=_workers((1, 1), lost=1, lost_requests=1))))
    assert v.verdict == "invalid"
    (r,) = [r for r in v.reasons if r.code == "worker_lost"]
    assert r.severity == "invalid"
    assert r.message.startswith("1 worker lost mid-run")
    assert "1 of 2 users stopped early" in r.message
    assert "1 request in flight or due on them is recorded as lost" in r.message
    assert "ActorDiedError" in r.message


def test_the_lost_worker_reason_agrees_with_its_counts(tmp_path: Path) -> None:
    """Plural counts read as plurals: 2 lost requests 'are' recorded, of 3 users."""
    records = [rec(i) for i in range(6)] + [_lost(6), _lost(7)]
    v = assess_run(read_run(make_run(tmp_path, records, workers=2,
                                     worker_info=_workers((2, 1), lost=1, lost_requests=2))))
    (r,) = [r for r in v.reasons if r.code == "worker_lost"]
    assert "1 of 3 users stopped early" in r.message
    assert "2 requests in flight or due on them are recorded as lost" in r.message
    assert "(s)" not in r.message


def test_a_tiny_lost_share_is_a_caveat(tmp_path: Path) -> None:
    # 1 of 200 users (0.5 %), no request lost: within the 1 % threshold
    records = synth_records(users=4, per_user=30, tpot=0.01, ttft=0.2)
    v = assess_run(read_run(make_run(tmp_path, records, workers=2,
                                     load={"users": 200, "duration_s": 100, "warmup_s": 10,
                                           "drain_s": 5},
                                     worker_info=_workers((199, 1), lost=1))))
    (r,) = [r for r in v.reasons if r.code == "worker_lost"]
    assert r.severity == "caveat"


def test_no_lost_worker_no_reason(tmp_path: Path) -> None:
    v = assess_run(read_run(make_run(tmp_path, [rec(i) for i in range(6)], workers=2,
                                     worker_info=_workers((1, 1), lost=None))))
    assert "worker_lost" not in {r.code for r in v.reasons}


def test_report_shows_warnings_and_workers(tmp_path: Path) -> None:
    records = synth_records(users=2, per_user=10, tpot=0.01, ttft=0.2)
    make_run(tmp_path / "a", records, workers=2, warnings=["worker 1 <died> early"],
             worker_info=_workers((1, 1), lost=1, lost_requests=3))
    runs = read_runs([tmp_path / "a"])
    html = render_report(compare_runs(runs), runs, charts=False)
    assert 'id="run-warnings"' in html and "worker 1 &lt;died&gt; early" in html
    assert 'id="workers"' in html and "node1" in html and "LOST" in html
    assert "+1.000 ms" in html
