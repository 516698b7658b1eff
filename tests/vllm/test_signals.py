"""SIGTERM and SIGHUP stop compare, run and serve-sim the way Ctrl-C does.

``compare --launch`` runs here against simulated servers started through the
launcher (``sim_vllm`` stands in for vLLM's server module), so every phase can
be hit in seconds: server starting, warmup, window, drain. After each signal:
exit 128 + signal, nothing listening on the port, no server process left, no
run left "running" in comparison.json, and rerunning the command resumes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from replay.servers.launch._vllm_process import port_is_free
from tests.support.procs import ours
from tests.support.vllm import free_port
from traces import Request, Session, WorkloadHeader, write_workload

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]
SIM_VLLM = Path(__file__).with_name("sim_vllm")
WARMUP_S, DURATION_S = 2.0, 2.0


def _workload(path: Path, output_tokens: int = 30) -> Path:
    sessions = [Session(id=f"s{k}", requests=tuple(
        Request(prompt_tokens=64 * (i + 1), output_tokens=output_tokens, prefix_blocks=4 * i,
                new_block_ids=tuple(range(1000 * k + 20 * i, 1000 * k + 20 * i + 4)),
                think_time_s=0.1) for i in range(4))) for k in range(2)]
    write_workload(path, WorkloadHeader(source="hand-built", seed=0, block_size=16), sessions)
    return path


def _model(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps({"vocab_size": 2048,
                                               "max_position_embeddings": 8192}))
    return d


def _env(startup_s: float = 0.0) -> dict[str, str]:
    path = os.pathsep.join([str(SIM_VLLM), str(REPO), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "AGENTREPLAY_FAKE_STARTUP_S": str(startup_s)}


def _compare_args(tmp_path: Path, port: int, workload: Path) -> list[str]:
    return [sys.executable, "-m", "replay.cli", "compare", "--launch",
            "--model", str(_model(tmp_path)), "--vllm-python", sys.executable,
            "--arm", "auto", "--arm", "latency_specialized", "--workload", str(workload),
            "--users", "1", "--duration", str(DURATION_S), "--warmup", str(WARMUP_S),
            "--drain", "10", "--port", str(port), "--out", str(tmp_path / "cmp"), "--plain"]


def _sim_servers() -> list[int]:
    """Processes serving the simulator for a launched arm (the stand-in's exec), and
    stand-ins still "loading" (not yet exec'd: ``serve-sim`` not in their command
    line yet, but they will bind the arm's port when their startup delay ends)."""
    left = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        launched = "serve-sim" in cmd or "vllm.entrypoints.openai.api_server" in cmd
        if proc.info["status"] != psutil.STATUS_ZOMBIE and launched \
                and proc.pid != os.getpid() \
                and any(str(SIM_VLLM) in e for e in _environ(proc)) and ours(proc):
            left.append(proc.pid)
    return left


def _environ(proc: psutil.Process) -> list[str]:
    try:
        return [v for k, v in proc.environ().items() if k == "PYTHONPATH"]
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return []


def _wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _first_run(out: Path) -> dict[str, object] | None:
    runs = sorted((out / "runs").glob("*/run.json")) if (out / "runs").exists() else []
    for path in runs:
        try:
            return dict(json.loads(path.read_text()))
        except ValueError:
            continue
    return None


def _runs(out: Path) -> list[dict[str, object]]:
    """Every run's manifest, in the order the runs started."""
    found = []
    for path in (out / "runs").glob("*/run.json") if (out / "runs").exists() else ():
        try:
            found.append(dict(json.loads(path.read_text())))
        except ValueError:
            continue
    return sorted(found, key=lambda m: m["clock"]["t0_monotonic_ns"])  # type: ignore[index]


def _in_phase(out: Path, phase: str) -> bool:
    """Whether the first run is in ``phase`` (by its manifest's clock)."""
    if phase == "starting":
        return any((out / "logs").glob("*.log")) if (out / "logs").exists() else False
    manifest = _first_run(out)
    if manifest is None or not manifest.get("started_at"):
        return False
    t0 = manifest["clock"]["t0_monotonic_ns"] / 1e9  # type: ignore[index]
    now = time.monotonic() - t0
    start = {"warmup": 0.3, "window": WARMUP_S + 0.5,
             "drain": WARMUP_S + DURATION_S + 0.3}[phase]
    return now >= start


@pytest.mark.parametrize(("phase", "signum"), [
    ("starting", signal.SIGTERM), ("warmup", signal.SIGHUP), ("window", signal.SIGTERM),
    ("drain", signal.SIGTERM),
])
def test_compare_launch_stops_cleanly_at_every_phase(tmp_path: Path, phase: str,
                                                     signum: int) -> None:
    port = free_port()
    workload = _workload(tmp_path / "w.jsonl", output_tokens=150 if phase == "drain" else 30)
    args = _compare_args(tmp_path, port, workload)
    out = tmp_path / "cmp"
    env = _env(startup_s=3.0 if phase == "starting" else 0.0)
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        _wait(lambda: _in_phase(out, phase) or proc.poll() is not None, 120, phase)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    _wait(lambda: port_is_free("127.0.0.1", port), 10, "the port to be free")
    assert not _sim_servers(), "a launched server outlived the signal"
    state = json.loads((out / "comparison.json").read_text())
    statuses = [r.get("status") for r in state.get("runs", {}).values()]
    assert "running" not in statuses, statuses
    if phase != "starting":
        # the run in progress when the signal came is marked interrupted. Usually the
        # first; on a busy machine this test's own poll may wake after the first run
        # ended, and the signal then lands in the second: either way exactly one run,
        # the last one started, is interrupted and none is left unmarked
        manifests = _runs(out)
        assert manifests and manifests[-1]["interrupted"] is True, manifests
        assert not any(m["interrupted"] for m in manifests[:-1])
    if phase == "starting":  # no load was sent: a corrected command is not refused
        fixed = subprocess.run(args + ["--", "--max-num-seqs", "2"], env=_env(),
                               capture_output=True, text=True, timeout=300)
        assert fixed.returncode in (0, 3), fixed.stderr[-3000:]
        assert not _sim_servers()
    if phase in ("window", "drain"):  # rerun the same command: resumes and completes
        again = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=300)
        # 3 = the comparison is stamped invalid (runs this short are thin): still finished
        assert again.returncode in (0, 3), again.stderr[-3000:]
        assert "Traceback" not in again.stderr
        state = json.loads((out / "comparison.json").read_text())
        assert all(r["status"] == "complete" for r in state["runs"].values()), state["runs"]
        assert not _sim_servers()


def test_compare_refuses_changed_vllm_args_before_launch(tmp_path: Path) -> None:
    port = free_port()
    workload = _workload(tmp_path / "w.jsonl")
    args = _compare_args(tmp_path, port, workload)
    first = subprocess.run(args + ["--", "--max-num-seqs", "4"], env=_env(),
                           capture_output=True, text=True, timeout=300)
    assert first.returncode in (0, 3), first.stderr[-3000:]
    logs = {p.name: p.read_bytes() for p in (tmp_path / "cmp" / "logs").iterdir()}
    again = subprocess.run(args + ["--", "--max-num-seqs", "8"], env=_env(startup_s=30),
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2, again.stderr[-3000:]
    assert "launch_vllm_args" in again.stderr and "--max-num-seqs" in again.stderr
    # refused before starting a server: a launch opens (or appends to) an arm's log
    # first, so the logs are the truth; no wall-clock bound (a busy machine is slow to
    # start Python, not to refuse)
    assert {p.name: p.read_bytes() for p in (tmp_path / "cmp" / "logs").iterdir()} == logs
    (tmp_path / "model" / "config.json").write_text(json.dumps({"vocab_size": 4096}))
    changed = subprocess.run(args + ["--", "--max-num-seqs", "4"], env=_env(startup_s=30),
                             capture_output=True, text=True, timeout=120)
    assert changed.returncode == 2 and "launch_model_fingerprint" in changed.stderr, \
        changed.stderr[-3000:]


def test_run_and_serve_sim_exit_143_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    sim = subprocess.Popen([sys.executable, "-m", "replay.cli", "serve-sim", "--port",
                            str(port)], stderr=subprocess.PIPE, text=True)
    run: subprocess.Popen[str] | None = None
    try:
        # a deadline for a hang, not a speed: a starved machine took over 30 s to start it
        _wait(lambda: not port_is_free("127.0.0.1", port), 120, "serve-sim to listen")
        workload = _workload(tmp_path / "w.jsonl")
        out = tmp_path / "run"
        run = subprocess.Popen([sys.executable, "-m", "replay.cli", "run", "--target",
                                f"http://127.0.0.1:{port}", "--workload", str(workload),
                                "--users", "2", "--duration", "30", "--out", str(out),
                                "--plain"], stderr=subprocess.PIPE, text=True)
        _wait(lambda: (out / "requests.jsonl").exists()
              and (out / "requests.jsonl").stat().st_size > 0, 120, "records")
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=60)
        assert run.returncode == 143, err[-3000:]
        manifest = json.loads((out / "run.json").read_text())
        assert manifest["interrupted"] is True
        sim.send_signal(signal.SIGTERM)
        _, err = sim.communicate(timeout=30)
        assert sim.returncode == 143, err[-2000:]
        assert port_is_free("127.0.0.1", port)
    finally:
        for p in (run, sim):
            if p is not None and p.poll() is None:
                p.kill()
            if p is not None:
                p.communicate()  # reaped, pipes closed: nothing left to warn the next test


def test_server_dying_mid_run_is_stamped_and_redone_on_resume(tmp_path: Path) -> None:
    port = free_port()
    workload = _workload(tmp_path / "w.jsonl")
    args = _compare_args(tmp_path, port, workload)
    out = tmp_path / "cmp"
    proc = subprocess.Popen(args, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        _wait(lambda: _in_phase(out, "window") or proc.poll() is not None, 120, "the window")
        servers = _sim_servers()
        assert len(servers) == 1
        os.killpg(os.getpgid(servers[0]), signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, stderr[-3000:]  # stopped at once, one clear line
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "exited during the run" in stderr and "rerun the same command" in stderr
    # the run in progress (the first, or the second where this test's poll woke late)
    died = _runs(out)
    assert died and died[-1]["server_watch"]["server_died"] is True, died  # type: ignore[index]
    again = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode in (0, 3), again.stderr[-3000:]
    redone = _runs(out)
    assert len(redone) >= len(died)
    assert not any((m.get("server_watch") or {}).get("server_died") for m in redone)  # type: ignore[union-attr]
    assert not _sim_servers()
