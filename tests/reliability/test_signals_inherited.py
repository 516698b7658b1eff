"""Issue 25: a command started with SIGINT ignored (``cmd &`` in a script) still
stops in order on SIGTERM: the handlers are installed whatever the inherited
dispositions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from replay.servers.sim import SimServerProcess
from tests.reliability.chat_server import chat_server
from tests.support.runs import REPO
from tests.support.workloads import make_workload

pytestmark = pytest.mark.sim


def _ignoring_sigint(*args: str) -> subprocess.Popen[str]:
    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    # PYTHONFAULTHANDLER: a SIGABRT (:func:`_hung`) makes it print every thread's stack
    return subprocess.Popen([sys.executable, "-m", "replay.cli", *args], cwd=REPO,
                            env=dict(os.environ, PYTHONUNBUFFERED="1",
                                     PYTHONFAULTHANDLER="1"), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=ignore)


def _hung(proc: subprocess.Popen[str], what: str) -> AssertionError:
    """The failure for a command that did not stop: where each of its threads was."""
    proc.send_signal(signal.SIGABRT)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return AssertionError(f"{what}; its threads then:\n{err[-6000:]}")


def _wait_for(cond: object, limit_s: float) -> bool:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def _running(state: Path) -> bool:
    try:
        data = orjson.loads(state.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return any(r.get("status") == "running" for r in data.get("runs", {}).values())


def test_sigterm_stops_compare_when_sigint_was_ignored(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=20, output=8, think_s=0.0)
    out = tmp_path / "cmp"
    with SimServerProcess("small", time_scale=4.0) as srv:
        proc = _ignoring_sigint("compare", "--arm", f"a={srv.url}", "--arm", f"b={srv.url}",
                                "--allow-identical",
                                "--workload", str(wl), "--duration", "120", "--out", str(out),
                                "--quiet")
        try:
            assert _wait_for(lambda: _running(out / "comparison.json"), 60), \
                proc.stderr.read() if proc.poll() is not None else "no run started"
            proc.send_signal(signal.SIGTERM)
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                raise _hung(proc, "SIGTERM did not stop compare") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    state = orjson.loads((out / "comparison.json").read_bytes())
    assert "interrupted" in {r.get("status") for r in state["runs"].values()}


def test_sigterm_stops_run_during_the_chat_preflight(tmp_path: Path) -> None:
    """The run's own handler sets its stop event; the chat codec's scan of the
    vocabulary (one /detokenize after another) ends on it too, at once."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1)
    with chat_server("slow_empty") as srv:
        proc = _ignoring_sigint("run", "--target", srv.url, "--workload", str(wl), "--api",
                                "chat", "--vocab-size", "100000", "--duration", "5",
                                "--out", str(tmp_path / "run"), "--quiet")
        try:
            assert _wait_for(lambda: srv.asked["detokenize"] >= 2, 60), "no preflight"
            proc.send_signal(signal.SIGTERM)
            try:
                _, err = proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                raise _hung(proc, "SIGTERM did not stop the chat preflight") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err and "nothing was measured" in err
