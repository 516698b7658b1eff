"""A launched server is watched during a run (fake server: seconds, not minutes)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from replay.servers.launch._launcher import launch_arm, plan_arms
from replay.servers.launch._watch import HEALTH_FAILURES, ServerWatcher
from tests.support.vllm import fake_launcher, free_port

pytestmark = pytest.mark.sim


def _spec():
    (spec,) = plan_arms("fake-model", ["auto"], launcher=fake_launcher(), port=free_port())
    return spec


def test_healthy_server_is_not_flagged(tmp_path: Path) -> None:
    with launch_arm(_spec(), tmp_path / "a.log", startup_timeout=120) as arm:
        watcher = ServerWatcher(arm.pid, arm.url, "auto", interval_s=0.05)
        with watcher:
            failures = 0
            for _ in range(3):
                failures = watcher.check(failures)
        assert not watcher.died and watcher.detail is None


def test_killed_server_is_seen_and_reported_once(tmp_path: Path) -> None:
    called = threading.Event()
    calls: list[int] = []

    def on_death() -> None:
        calls.append(1)
        called.set()

    with launch_arm(_spec(), tmp_path / "a.log", startup_timeout=120) as arm:
        with ServerWatcher(arm.pid, arm.url, "auto", interval_s=0.05,
                           on_death=on_death) as watcher:
            os.killpg(arm.pid, signal.SIGKILL)
            assert called.wait(10.0)
    assert watcher.died and calls == [1]
    assert watcher.detail is not None and str(arm.pid) in watcher.detail


def test_unanswered_health_counts_as_dead(tmp_path: Path) -> None:
    with launch_arm(_spec(), tmp_path / "a.log", startup_timeout=120) as arm:
        watcher = ServerWatcher(arm.pid, "http://127.0.0.1:9", "auto", health_timeout_s=0.5)
        failures = 0
        for _ in range(HEALTH_FAILURES):
            failures = watcher.check(failures)
        assert watcher.died and "/health failed" in (watcher.detail or "")
