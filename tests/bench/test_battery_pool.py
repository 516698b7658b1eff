"""The battery's per-case forked processes: results come back whatever their size, and
a case whose process is killed (as the kernel kills one for memory) is reported as
that case's failure instead of hanging the run."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _battery_pool import run_forked  # noqa: E402

pytestmark = pytest.mark.integration


def _case(n: int) -> tuple[int, str]:
    if n == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    if n == 3:
        raise SystemExit(3)
    return n, "x" * (200_000 if n == 1 else 10)  # larger than a pipe's buffer


def _failed(n: int, why: str) -> tuple[int, str]:
    return n, f"failed: {why}"


def test_a_killed_case_is_a_failure_and_the_rest_come_back() -> None:
    got = dict(run_forked(_case, [0, 1, 2, 3, 4], 2, _failed))
    assert sorted(got) == [0, 1, 2, 3, 4]
    assert got[0] == "x" * 10 and got[4] == "x" * 10
    assert got[1] == "x" * 200_000
    assert got[2] == "failed: the case's process died of SIGKILL (killed: out of memory?)"
    assert got[3] == "failed: the case's process exited with status 3 without a result"
