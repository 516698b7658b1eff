"""Watch a launched server during a run: is its process alive, does it answer /health?

A server that dies mid-run turns every later request into a connection error:
the run's numbers then describe a crash, not the configuration. The watcher
notices (the process group is gone, or ``/health`` failed several times in a
row), remembers why, and calls ``on_death`` once, from its own thread, so the
caller can stop the run early (compare delivers SIGINT to itself: the run closes
as interrupted, exactly as on Ctrl-C) and mark it invalid so resume redoes it.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from types import TracebackType

from replay.servers.launch._vllm_process import group_members

__all__ = ["HEALTH_FAILURES", "ServerWatcher"]

HEALTH_FAILURES = 3
"""Consecutive failed ``/health`` probes that count as a dead server."""


class ServerWatcher:
    """A thread that polls one server until stopped; ``died`` and ``detail`` say what it saw."""

    def __init__(self, pid: int, url: str, label: str, *, interval_s: float = 1.0,
                 health_timeout_s: float = 10.0,
                 on_death: Callable[[], None] | None = None) -> None:
        self.pid = pid
        self.url = url
        self.label = label
        self.interval_s = interval_s
        self.health_timeout_s = health_timeout_s
        self.on_death = on_death
        self.died = False
        self.detail: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"watch-{label}", daemon=True)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health",
                                        timeout=self.health_timeout_s) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError, TimeoutError):
            return False

    def check(self, failures: int) -> int:
        """One probe; returns the count of consecutive health failures so far."""
        if not group_members(self.pid):
            self._dead(f"arm {self.label}: server process {self.pid} exited during the run")
            return failures
        failures = 0 if self._healthy() else failures + 1
        if failures >= HEALTH_FAILURES:
            self._dead(f"arm {self.label}: {self.url}/health failed {failures} times in a row")
        return failures

    def _dead(self, detail: str) -> None:
        if self.died:
            return
        self.died, self.detail = True, detail
        if self.on_death is not None:
            self.on_death()

    def _loop(self) -> None:
        failures = 0
        while not self._stop.wait(self.interval_s) and not self.died:
            failures = self.check(failures)

    def start(self) -> ServerWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.health_timeout_s + self.interval_s + 1.0)

    def __enter__(self) -> ServerWatcher:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if not self.died and group_members(self.pid) == []:
            self.died = True  # seen at the very end: still a run against a dead server
            self.detail = f"arm {self.label}: server process {self.pid} exited during the run"
