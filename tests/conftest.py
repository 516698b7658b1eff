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
    "replay/ab/",
    "reliability/",
    "vllm/",
    "scale/test_workers.py",
    "scale/test_ray_cluster.py",
    "bench/test_stub_server.py",
    "replay/servers/sim/test_server.py",
    "replay/servers/sim/test_process.py",
    "replay/servers/sim/test_timing.py",
    "replay/servers/sim/test_faults.py",
    "replay/servers/sim/test_fidelity.py",
    "replay/load/test_run_sim.py",
    "replay/cli/test_cmd_run.py",
    "replay/client/test_client.py",
    "replay/client/test_connector.py",
    "replay/client/test_probe.py",
    "analysis/report/test_report.py",
    "replay/cli/test_live_terminal.py",
    "analysis/report/test_browser.py",
    "analysis/report/test_search_sim.py",
    "traces/test_cli.py",
    "replay/load/test_answer_traps.py",
    "replay/load/test_knobs.py",
    "replay/load/test_replicas.py",
    "replay/load/test_scenario.py",
    "replay/load/test_slow_simulator.py",
    "replay/load/test_timestamps_and_background.py",
    "replay/load/test_validity.py",
    "replay/twin/test_calibrate_sim.py",
    "replay/twin/test_holdout_mean.py",
    "replay/twin/test_stall_notes.py",
    "replay/twin/test_vs_serve_sim.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        relative = Path(str(item.path)).resolve().relative_to(_HERE).as_posix()
        if relative.startswith(INTEGRATION):
            item.add_marker(pytest.mark.integration)
