"""``agentreplay compare`` against real vLLM CPU servers (issues 6 and 16).

Starting vLLM takes about 45 s here, so this file starts as few as it can: three
for ``compare --launch`` (the first arm, stopped by SIGTERM mid-run; then both
arms when the same command resumes; one user level, as more levels cost a
restart each in A B B A order) and one more for the environment refusal, which
pairs it with the session's shared server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from replay.servers.launch._launcher import (
    LaunchedArm,
    group_members,
    launch_arm,
    plan_arms,
    resolve_vllm_launcher,
)
from replay.servers.launch._vllm_process import port_is_free
from tests.support.vllm import CPU_ARGS, CPU_ENV, SERVED_NAME, STARTUP_TIMEOUT_S, free_port
from traces import Request, Session, WorkloadHeader, write_workload

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

BS = 128


def _workload(path: Path) -> Path:
    """Two closed-loop sessions of three turns, prompts of 2-8 blocks, fitting 4096."""
    sessions = []
    for k in range(2):
        first = 100 * (k + 1)
        reqs = (
            Request(prompt_tokens=300, output_tokens=40, new_block_ids=(1, 2, first),
                    shared_blocks=2),
            Request(prompt_tokens=600, output_tokens=40, prefix_blocks=2,
                    new_block_ids=tuple(range(first + 1, first + 4)), think_time_s=0.2),
            Request(prompt_tokens=1000, output_tokens=30, prefix_blocks=4,
                    new_block_ids=tuple(range(first + 4, first + 8)), think_time_s=0.2),
        )
        sessions.append(Session(id=f"s{k}", requests=reqs))
    write_workload(path, WorkloadHeader(source="hand-built", seed=0, block_size=BS,
                                        max_context=4096), sessions)
    return path


def _cli(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **CPU_ENV}
    return subprocess.run([sys.executable, "-m", "replay.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _servers_on(port: int) -> list[int]:
    """Live processes whose command line serves on ``port`` (the launched vLLMs)."""
    left = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if "--port" in cmd and cmd.index("--port") + 1 < len(cmd) and \
                cmd[cmd.index("--port") + 1] == str(port):
            left.append(proc.pid)
    return left


def _wait_for_window(out: Path, proc: subprocess.Popen[str], timeout: float) -> None:
    """Until the first run has records (its window is under way) or the process ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.stat().st_size > 0 for p in (out / "runs").glob("*/requests.jsonl")):
            return
        time.sleep(0.2)
    pytest.fail(f"no run window within {timeout:.0f} s (exit {proc.poll()})")


def test_readme_compare_launch_sigterm_refusal_and_resume(
    vllm_py: Path, tiny_model: Path, tmp_path: Path
) -> None:
    """The README's line (no --vocab-size); SIGTERM mid-run; a changed vLLM argument
    refused before any launch; the original command resumes and completes."""
    workload = _workload(tmp_path / "w.jsonl")
    out = tmp_path / "cmp"
    port = free_port()
    readme = [
        "compare", "--launch", "--model", str(tiny_model), "--vllm-python", str(vllm_py),
        "--arm", "auto", "--arm", "latency_specialized", "--workload", str(workload),
        "--users", "1", "--duration", "3", "--warmup", "1", "--out", str(out),
        "--port", str(port), "--", "--gpu-memory-utilization", "0.2",
    ]
    env = {**os.environ, **CPU_ENV}
    proc = subprocess.Popen([sys.executable, "-m", "replay.cli", *readme], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_window(out, proc, STARTUP_TIMEOUT_S + 60)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr[-4000:]
    assert "Traceback" not in stderr
    assert port_is_free("127.0.0.1", port), "something still listens on the arm's port"
    assert not _servers_on(port), "a launched vLLM server outlived SIGTERM"
    state = json.loads((out / "comparison.json").read_text())
    assert "running" not in [r["status"] for r in state["runs"].values()], state["runs"]

    logs = sorted((out / "logs").iterdir())
    changed = _cli([*readme, "--max-num-seqs", "8"], timeout=120)
    assert changed.returncode == 2, changed.stderr[-3000:]
    assert "launch_vllm_args" in changed.stderr, changed.stderr
    assert sorted((out / "logs").iterdir()) == logs, "refused only after a launch"

    done = _cli(readme, timeout=3 * STARTUP_TIMEOUT_S + 180)
    # 3: finished, but the comparison was stamped invalid (e.g. a client loaded unevenly
    # on a busy CI machine); the command itself worked
    assert done.returncode in (0, 3), done.stderr[-4000:]
    assert "Traceback" not in done.stderr
    assert not _servers_on(port), "a launched vLLM server outlived compare --launch"

    state = json.loads((out / "comparison.json").read_text())
    runs = state["runs"]
    assert len(runs) == 2 and all(r["status"] == "complete" for r in runs.values()), runs
    seen: dict[str, set[int]] = {}
    for run_dir in sorted((out / "runs").iterdir()):
        manifest = json.loads((run_dir / "run.json").read_text())
        backend = manifest["server_info"]["vllm_config"]["additional_config"]["decode_backend"]
        assert manifest["complete"] and not manifest["interrupted"]
        assert manifest["label"] == backend and manifest["vocab_size"] == 2048
        seen.setdefault(backend, set()).add(manifest["load"]["users"])
        records = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
        ok = [r for r in records if r["status"] == "ok"]
        assert ok and all(r["output_tokens"] == r["output_tokens_asked"] for r in ok)
    assert seen == {"auto": {1}, "latency_specialized": {1}}

    summary = json.loads((out / "summary.json").read_text())
    fairness = summary["fairness"]
    assert fairness["fair"] is True and fairness["verified"] is True
    counted = {d["field"] for d in fairness["differences"] if d["verdict"] != "ignored"}
    assert counted <= {"vllm_config.additional_config.decode_backend",
                       "command.--additional-config.decode_backend"}, counted
    html = (out / "report.html").read_text()
    assert "decode_backend" in html and "latency_specialized" in html


def test_compare_refuses_servers_differing_in_a_kernel_variable(
    vllm_server: LaunchedArm, vllm_py: Path, tiny_model: Path, tmp_path: Path
) -> None:
    """Two hand-started servers, identical but for VLLM_CPU_ATTN_SPLIT_KV: refused, named."""
    workload = _workload(tmp_path / "w.jsonl")
    (spec,) = plan_arms(
        str(tiny_model), ["latency_specialized"], launcher=resolve_vllm_launcher(str(vllm_py)),
        port=free_port(), served_model_name=SERVED_NAME, extra_args=CPU_ARGS,
        env={**CPU_ENV, "VLLM_CPU_ATTN_SPLIT_KV": "0"},
    )
    out = tmp_path / "cmp"
    with launch_arm(spec, tmp_path / "other.log", startup_timeout=STARTUP_TIMEOUT_S) as other:
        done = _cli([
            "compare", "--arm", f"auto={vllm_server.url}",
            "--arm", f"latency_specialized={other.url}", "--workload", str(workload),
            "--users", "1", "--duration", "2", "--out", str(out), "--quiet",
        ], timeout=120)
    assert not group_members(other.pid), "the second server outlived its launch_arm block"
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr[-3000:])
    assert "Traceback" not in done.stderr
    assert "vllm_env.VLLM_CPU_ATTN_SPLIT_KV" in done.stderr, done.stderr
    runs = out / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "no load may run after a refusal"
