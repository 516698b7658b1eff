"""A launched server confined to CPUs: every process of its group on them, its
OpenMP threads bound inside them, and a thread that strayed pinned back.

Fake server (``fake_vllm_server.py``, with its helper child), so seconds; the
affinity read back from the kernel is the truth.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from replay.servers.launch import (
    fetch_server_info,
    format_command,
    group_members,
    launch_arm,
    pin_group,
    plan_arms,
)
from tests.support.vllm import fake_launcher, free_port

pytestmark = pytest.mark.sim

CORES = sorted(os.sched_getaffinity(0))


def test_launched_server_and_its_child_run_only_on_the_given_cpus(tmp_path: Path) -> None:
    cpus = (CORES[-1],)
    (spec,) = plan_arms("fake-model", ["auto"], launcher=fake_launcher(), port=free_port(),
                        extra_args=("--fake-child",), cpus=cpus)
    assert "taskset -c" in format_command(spec)
    with launch_arm(spec, tmp_path / "a.log", startup_timeout=120) as arm:
        members = group_members(arm.pid)
        assert len(members) == 2  # the server and the helper it started after the pin
        for pid in members:
            assert os.sched_getaffinity(pid) == set(cpus), pid
        env = fetch_server_info(arm.url)["vllm_env"]
        assert env["VLLM_CPU_OMP_THREADS_BIND"] == str(cpus[0])
    assert os.sched_getaffinity(0) == set(CORES)  # the client itself is not touched


def test_unpinned_server_gets_no_binding(tmp_path: Path) -> None:
    (spec,) = plan_arms("fake-model", ["auto"], launcher=fake_launcher(), port=free_port())
    with launch_arm(spec, tmp_path / "a.log", startup_timeout=120) as arm:
        assert os.sched_getaffinity(arm.pid) == set(CORES)
        assert fetch_server_info(arm.url)["vllm_env"]["VLLM_CPU_OMP_THREADS_BIND"] is None


@pytest.mark.skipif(len(CORES) < 2, reason="needs two CPUs to tell a pin from none")
def test_pin_group_moves_a_stray_process_and_keeps_one_already_inside() -> None:
    first, last = CORES[0], CORES[-1]
    code = "import time; time.sleep(60)"
    stray = subprocess.Popen([sys.executable, "-c", code])
    inside = subprocess.Popen([sys.executable, "-c", code])
    try:
        os.sched_setaffinity(inside.pid, {first})
        moved = pin_group([stray.pid, inside.pid], (first, last))
        assert os.sched_getaffinity(inside.pid) == {first}  # bound inside the set: kept
        assert os.sched_getaffinity(stray.pid) == set(CORES) & {first, last}
        moved = pin_group([stray.pid], (last,))
        assert moved == 1 and os.sched_getaffinity(stray.pid) == {last}
    finally:
        for proc in (stray, inside):
            proc.kill()
            proc.wait()
