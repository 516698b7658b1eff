"""Shared fixtures: a tiny workload for the ``small`` simulated profile, and sim servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.servers import TIME_SCALE, exit_for, profile_variant, sims  # noqa: F401 - kept importable here for tests written before tests.support
from traces import generate, write_workload


@pytest.fixture(scope="session")
def tiny_workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("workload") / "tiny.jsonl"
    header, sessions = generate("coding-agent", sessions=4, seed=1, block_size=16,
                                max_context=4096, prompt_scale=0.02, think_scale=0.01,
                                output_scale=0.2)
    write_workload(path, header, sessions)
    return path






