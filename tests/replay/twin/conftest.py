"""Fixtures for the twin tests: the workload the twin plan tests replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.workloads import make_workload


@pytest.fixture
def wl(tmp_path: Path) -> Path:
    return make_workload(tmp_path / "wl.jsonl", sessions=6, turns=6, new_blocks=8,
                         output=40, think_s=2.0, shared_blocks=2)
