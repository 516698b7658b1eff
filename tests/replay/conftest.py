"""Shared helpers for the replay tests: tiny workloads written with the real writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.servers import serve_app  # noqa: F401 - kept importable here for tests written before tests.support
from tests.support.workloads import chain_requests, make_workload  # noqa: F401 - kept importable here for tests written before tests.support


@pytest.fixture
def workload(tmp_path: Path) -> Path:
    return make_workload(tmp_path / "wl.jsonl")


