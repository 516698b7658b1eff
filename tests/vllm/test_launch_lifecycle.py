"""The launcher always stops what it starts, and only accepts a verified server.

These use a fake server (``fake_vllm_server.py``) so they take seconds; the
real-server equivalents are in ``test_real_server.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import urllib.request
from pathlib import Path

import pytest

from replay.errors import TargetError
from replay.servers.launch._launcher import (
    LaunchMode,
    fetch_server_info,
    group_members,
    launch_arm,
    launch_arms,
    plan_arms,
)
from tests.support.procs import ours
from tests.support.vllm import fake_launcher, free_port, free_port_run

pytestmark = pytest.mark.sim


def _spec(*extra: str, backend: str = "auto"):
    (spec,) = plan_arms("fake-model", [backend], launcher=fake_launcher(), port=free_port(),
                        extra_args=extra)
    return spec


def _gone(pgid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not group_members(pgid)


def test_launch_yields_verified_server_and_stops_whole_group(tmp_path: Path) -> None:
    spec = _spec("--fake-child")
    with launch_arm(spec, tmp_path / "a.log", startup_timeout=120) as arm:
        assert arm.url == spec.url
        assert len(group_members(arm.pid)) == 2  # server and its helper child
        info = fetch_server_info(arm.url)
        assert info["vllm_config"]["additional_config"] == {"decode_backend": "auto"}
        assert info["vllm_env"]["VLLM_SERVER_DEV_MODE"] == "1"
        with urllib.request.urlopen(f"{arm.url}/health", timeout=5) as resp:
            assert resp.status == 200
    assert _gone(arm.pid, within=0.5)
    assert "fake vllm: model fake-model" in (tmp_path / "a.log").read_text()


def test_server_reporting_another_backend_is_rejected_and_stopped(tmp_path: Path) -> None:
    spec = _spec("--fake-report-backend", "auto", backend="latency_specialized")
    with pytest.raises(TargetError, match="decode_backend='auto', asked for 'latency_spec"):
        with launch_arm(spec, tmp_path / "a.log", startup_timeout=120):
            pytest.fail("must not yield")
    assert _free(spec.port)
    assert not _leftover_fakes()


def test_dying_server_fails_with_log_tail(tmp_path: Path) -> None:
    spec = _spec("--fake-exit-early")
    started = time.monotonic()
    with pytest.raises(TargetError) as info:
        with launch_arm(spec, tmp_path / "a.log", startup_timeout=60):
            pytest.fail("must not yield")
    assert time.monotonic() - started < 30  # failed on exit, not on the timeout
    msg = str(info.value)
    assert "exited with code 3" in msg
    assert "no config.json in model directory" in msg


def test_startup_timeout_fails_and_stops(tmp_path: Path) -> None:
    spec = _spec("--fake-startup-s", "60", "--fake-child")
    with pytest.raises(TargetError, match="did not answer within 1 s"):
        with launch_arm(spec, tmp_path / "a.log", startup_timeout=1.0, stop_grace=5):
            pytest.fail("must not yield")
    assert not _leftover_fakes()


def test_sigterm_ignoring_server_is_killed_after_grace(tmp_path: Path) -> None:
    spec = _spec("--fake-ignore-sigterm")
    with launch_arm(spec, tmp_path / "a.log", startup_timeout=120, stop_grace=0.5) as arm:
        pid = arm.pid
    assert _gone(pid, within=0.5)


def test_error_inside_block_still_stops(tmp_path: Path) -> None:
    spec = _spec()
    with pytest.raises(KeyboardInterrupt):
        with launch_arm(spec, tmp_path / "a.log", startup_timeout=120) as arm:
            pid = arm.pid
            raise KeyboardInterrupt
    assert _gone(pid, within=0.5)


def test_ctrl_c_while_the_server_process_is_being_created_still_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The interrupt lands at the worst moment on purpose (the child forked, ``Popen``
    not returned): the launcher still holds the child and stops its group. Before,
    the KeyboardInterrupt left Popen with the pid unrecorded; the server came up on
    its port seconds later, and the rerun's own server could not bind."""
    import subprocess

    spec = _spec("--fake-startup-s", "60")
    forked: list[int] = []
    real = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def interrupted(self: subprocess.Popen[bytes], *args: object, **kwargs: object) -> None:
        real(self, *args, **kwargs)
        forked.append(self.pid)
        signal.raise_signal(signal.SIGINT)  # as a SIGTERM under stop_signals() would

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        monkeypatch.setattr(subprocess.Popen, "_execute_child", interrupted)
        with pytest.raises(KeyboardInterrupt):
            with launch_arm(spec, tmp_path / "a.log", startup_timeout=120, stop_grace=5):
                pytest.fail("must not yield")
    finally:
        monkeypatch.undo()
        signal.signal(signal.SIGINT, previous)
    assert len(forked) == 1
    assert _gone(forked[0], within=10), "the launched server outlived the interrupt"
    assert _free(spec.port)


def test_busy_port_is_refused_before_starting(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        (spec,) = plan_arms("m", ["auto"], launcher=fake_launcher(),
                            port=sock.getsockname()[1])
        with pytest.raises(TargetError, match="in use"):
            with launch_arm(spec, tmp_path / "a.log", startup_timeout=5):
                pytest.fail("must not yield")
    assert not (tmp_path / "a.log").exists()


def test_side_by_side_arms_start_together_on_their_gpu_sets(tmp_path: Path) -> None:
    specs = plan_arms("m", ["auto", "latency_specialized"], launcher=fake_launcher(),
                      port=free_port_run(2), mode=LaunchMode.SIDE_BY_SIDE, gpus_per_arm=2)
    with launch_arms(specs, tmp_path, startup_timeout=120) as arms:
        infos = [fetch_server_info(a.url) for a in arms]
        pids = [a.pid for a in arms]
    got = [(i["vllm_config"]["additional_config"]["decode_backend"],
            i["system_env"]["CUDA_VISIBLE_DEVICES"]) for i in infos]
    assert got == [("auto", "0,1"), ("latency_specialized", "2,3")]
    assert all(_gone(p, within=0.5) for p in pids)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "arm0-auto.log", "arm1-latency_specialized.log",
    ]


def _free(port: int) -> bool:
    """Nothing accepts connections on the port (TIME_WAIT leftovers do not count)."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _leftover_fakes() -> list[int]:
    import psutil

    left = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        if any("fake_vllm_server.py" in c for c in cmd) and proc.info["status"] != "zombie" \
                and ours(proc):
            left.append(proc.pid)
    return left


def test_cli_launch_serves_until_ctrl_c_then_stops(tmp_path: Path, monkeypatch, capsys) -> None:
    import replay.cli._cmd_launch as cli_launch
    import replay.servers.launch
    from replay.cli import main

    monkeypatch.setattr(
        replay.servers.launch, "resolve_vllm_launcher", lambda py: fake_launcher()
    )  # the command imports the package's public name
    seen: list[dict] = []

    def ctrl_c() -> None:  # the serve loop's first tick: look, then "press" ^C
        for line in capsys.readouterr().out.splitlines():
            url = line.split()[2]
            seen.append(fetch_server_info(url)["vllm_config"]["additional_config"])
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_launch, "_tick", ctrl_c)
    port = free_port_run(2)
    code = main([
        "launch", "--model", "fake-model", "--arm", "auto", "--arm", "latency_specialized",
        "--mode", "side-by-side", "--gpus-per-arm", "1", "--port", str(port),
        "--log-dir", str(tmp_path),
    ])
    assert code == 0
    assert seen == [{"decode_backend": "auto"}, {"decode_backend": "latency_specialized"}]
    assert _free(port) and _free(port + 1)
    assert not _leftover_fakes()


def test_second_ctrl_c_while_stopping_kills_at_once(tmp_path: Path, monkeypatch) -> None:
    from replay.servers.launch._vllm_process import ServerProcess

    real_stop = ServerProcess.stop
    graces: list[float] = []

    def impatient_stop(self: ServerProcess, grace: float = 30.0) -> None:
        graces.append(grace)
        if len(graces) == 1:
            raise KeyboardInterrupt  # user presses Ctrl-C again during the grace period
        real_stop(self, grace)

    monkeypatch.setattr(ServerProcess, "stop", impatient_stop)
    spec = _spec("--fake-ignore-sigterm")
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with launch_arm(spec, tmp_path / "a.log", startup_timeout=120, stop_grace=600) as arm:
            pid = arm.pid
    assert graces == [600, 0.0]
    assert time.monotonic() - started < 30
    assert _gone(pid, within=0.5)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_cli_launch_stops_servers_on_sigterm_and_sighup(tmp_path: Path, monkeypatch,
                                                        signum: int) -> None:
    import replay.cli._cmd_launch as cli_launch
    import replay.servers.launch
    from replay.cli import main

    monkeypatch.setattr(
        replay.servers.launch, "resolve_vllm_launcher", lambda py: fake_launcher()
    )  # the command imports the package's public name
    monkeypatch.setattr(cli_launch, "_tick", lambda: os.kill(os.getpid(), signum))
    before = signal.getsignal(signum)
    port = free_port()
    code = main(["launch", "--model", "fake-model", "--arm", "auto", "--port", str(port),
                 "--log-dir", str(tmp_path)])
    assert code == 128 + signum
    assert _free(port)
    assert not _leftover_fakes()
    assert signal.getsignal(signum) == before
