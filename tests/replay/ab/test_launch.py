"""compare --launch, sequential and side by side, with a stand-in for vLLM's python.

The stand-in takes the launcher's argv (``-m MODULE --model M --host H --port P
--additional-config JSON``) and starts a simulated server with the decode
backend from ``--additional-config``: the launch, verification, ordering and
stop logic under test are the real ones.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest

from replay.ab import (
    CompareOptions,
    LaunchOptions,
    compare_launched,
    is_run_complete,
    launch_groups,
    plan_runs,
)
from replay.servers.launch import LaunchSettings
from tests.support.vllm import free_port_run

pytestmark = pytest.mark.sim

FAKE = r'''#!{python}
import json, os, sys
argv = sys.argv[3:]
opt = {{argv[i]: argv[i + 1] for i in range(0, len(argv) - 1) if argv[i].startswith("--")}}
backend = json.loads(opt["--additional-config"])["decode_backend"]
os.execv(sys.executable, [sys.executable, "-m", "replay.cli", "serve-sim", "--profile",
         "small", "--backend", backend, "--port", opt["--port"], "--time-scale", "4"])
'''


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "fake-vllm-python"
    path.write_text(FAKE.format(python=sys.executable))
    path.chmod(0o755)
    return path


def _opts() -> CompareOptions:
    return CompareOptions(levels=(1, 2), duration_s=1.0, warmup_s=0.2, drain_s=0.5,
                          metrics_interval_s=None)


def _down(url: str) -> bool:
    try:
        urllib.request.urlopen(url + "/health", timeout=1)
    except (urllib.error.URLError, OSError):
        return True
    return False


@pytest.mark.parametrize("mode", ["sequential", "side-by-side"])
def test_launched_arms_run_in_order_and_are_stopped(
        mode: str, fake_python: Path, tiny_workload: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    arms = ["auto", "latency_specialized"]
    port = free_port_run(2 if mode == "side-by-side" else 1)
    servers = LaunchSettings(vllm_python=str(fake_python), mode=mode, port=port,  # type: ignore[arg-type]
                             gpus_per_arm=1 if mode == "side-by-side" else None)
    launch = LaunchOptions(str(tmp_path), servers=servers, startup_timeout_s=120)
    result = compare_launched(launch, arms, tiny_workload, out, _opts())
    plan = plan_runs(arms, [1, 2], 1)
    names = [r.name for r in plan]
    if mode == "sequential":  # A | B B | A: one server start per group
        assert len(list((out / "logs").iterdir())) == len(launch_groups(plan)) == 3
    state = orjson.loads((out / "comparison.json").read_bytes())
    assert [p["name"] for p in state["plan"]] == names
    starts = [orjson.loads((out / "runs" / n / "run.json").read_bytes())["started_at"]
              for n in names]
    assert starts == sorted(starts)
    assert all(is_run_complete(out / "runs" / n) for n in names)
    assert state["preflight"]["fair"] is True
    assert result.report.exists()
    assert _down(f"http://127.0.0.1:{port}") and _down(f"http://127.0.0.1:{port + 1}")
