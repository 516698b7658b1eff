"""Which processes on the machine this test process started (directly or not).

Tests that check "no launched server outlived the signal" scan every process on the
machine; under pytest-xdist (and on any shared machine) other workers' servers are
there too. Each test process stamps its environment with its own id at start-up
(``claim``, called by tests/conftest.py); every server it launches inherits it, even
after being orphaned, so a scan can keep to its own.
"""

from __future__ import annotations

import os
import time

import psutil

OWNER_VAR = "AGENTREPLAY_TEST_OWNER"


def claim() -> None:
    """Stamps this process's environment (an xdist worker overrides its controller's)."""
    os.environ[OWNER_VAR] = f"{os.getpid()}"


def ours(proc: psutil.Process) -> bool:
    """Whether ``proc`` was started from this test process (by its inherited stamp)."""
    try:
        return proc.environ().get(OWNER_VAR) == os.environ.get(OWNER_VAR)
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return False


def group_gone(pgid: int, within_s: float = 10.0) -> bool:
    """Whether every process of group ``pgid`` has ended within ``within_s``."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False
