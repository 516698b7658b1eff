"""Splits the suite into a fast unit set and integration tests.

Integration tests start servers (the simulator, loopback stubs, real vLLM),
subprocesses or a browser; they are marked ``integration`` here by path so
that ``python -m pytest -m "not integration"`` runs the unit set in seconds.
CI runs everything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent

INTEGRATION = (
    "compare/",
    "reliability/",
    "vllm/",
    "scale/test_workers.py",
    "scale/test_ray_cluster.py",
    "bench/test_stub_server.py",
    "sim/test_server.py",
    "sim/test_process.py",
    "sim/test_timing.py",
    "sim/test_faults.py",
    "sim/test_fidelity.py",
    "replay/test_run_sim.py",
    "replay/test_cli_run.py",
    "replay/test_client.py",
    "replay/test_connector.py",
    "replay/test_probe.py",
    "analysis/report/test_report.py",
    "cli/test_live_terminal.py",
    "report/test_browser.py",
    "report/test_search_sim.py",
    "traces/test_cli.py",
    "load/",
    "calibrate/",
    "twin/test_vs_serve_sim.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        relative = Path(str(item.path)).resolve().relative_to(_HERE).as_posix()
        if relative.startswith(INTEGRATION):
            item.add_marker(pytest.mark.integration)
