"""Shared fixtures: where the real traces live, small workloads to corrupt."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_TRACES = Path(__file__).parents[2].parent / "shared" / "traces"


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.fail(f"real traces missing at {SHARED_TRACES}: shared/ sits beside the checkout")
    return SHARED_TRACES
