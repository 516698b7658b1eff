"""Crash safety: a run killed with SIGKILL leaves a readable, flagged-incomplete run
directory holding every request the server finished before the kill; SIGINT ends it in
order (complete manifest, interrupted=true)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replay.servers.sim import SimServerProcess
from tests.support.runs import REPO, cli, manifest, records, truth_file
from tests.support.workloads import make_workload

pytestmark = pytest.mark.sim

_MARGIN_NS = 50_000_000  # a request the server finished this long before the kill is on disk


def _start_run(wl: Path, url: str, out: Path) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "replay.cli", "run", "--target", url, "--workload", str(wl),
            "--users", "6", "--duration", "30", "--warmup", "0", "--out", str(out), "--quiet",
            "--metrics-interval", "0.3"]
    return subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _wait_for_records(out: Path, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"run exited early: {proc.stderr.read() if proc.stderr else ''}")
        p = out / "requests.jsonl"
        if p.exists() and p.stat().st_size > 0:
            return
        time.sleep(0.02)
    raise AssertionError("the run wrote no record in time")


@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_leaves_a_readable_incomplete_run(tmp_path: Path, seed: int) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=6, turns=6, output=30, think_s=0.01)
    truth = tmp_path / "truth.jsonl"
    out = tmp_path / "run"
    delay = random.Random(seed).uniform(0.2, 1.5)
    with SimServerProcess("small", time_scale=2.0, truth_path=str(truth)) as srv:
        proc = _start_run(wl, srv.url, out)
        try:
            _wait_for_records(out, proc)
            time.sleep(delay)
            kill_ns = time.monotonic_ns()
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()
    m = manifest(out)
    assert not m.complete and m.finished_at is None
    recorded = {r.id for r in records(out)}
    finished = [t for t in truth_file(truth) if t.finish_ns < kill_ns - _MARGIN_NS]
    assert len(finished) >= 5
    lost = [t.request_id for t in finished if t.request_id not in recorded]
    assert not lost, f"{len(lost)} requests finished before the kill are missing: {lost[:5]}"
    res = cli("report", str(out), "--no-charts")
    assert res.returncode in (0, 3), res.stderr  # 3: stamped invalid
    assert "Traceback" not in res.stderr and "incomplete" in res.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "INCOMPLETE" in html and "complete is false" in html


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stop_signal_leaves_a_complete_interrupted_manifest(
        tmp_path: Path, sig: signal.Signals, code: int) -> None:
    """Ctrl-C and SIGTERM (a scheduler stopping the job) are the same orderly stop."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=6, turns=6, output=30, think_s=0.01)
    truth = tmp_path / "truth.jsonl"
    out = tmp_path / "run"
    with SimServerProcess("small", time_scale=2.0, truth_path=str(truth)) as srv:
        proc = _start_run(wl, srv.url, out)
        try:
            _wait_for_records(out, proc)
            time.sleep(0.5)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        time.sleep(0.2)  # let the server log the requests the client cancelled
    assert proc.returncode == code, err
    assert b"Traceback" not in err and b"interrupted" in err
    m = manifest(out)
    assert m.complete and m.interrupted and m.finished_at is not None
    recs = records(out)
    ids = {r.id for r in recs}
    assert {t.request_id for t in truth_file(truth)} <= ids
    cancelled = [r for r in recs if r.status == "cancelled"]
    assert cancelled and all(r.error_kind == "cancelled_interrupt" for r in cancelled)
    res = cli("report", str(out), "--no-charts")
    assert res.returncode in (0, 3) and "Traceback" not in res.stderr
