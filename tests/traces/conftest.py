"""Shared fixtures: where the trace samples live (tests/fixtures/traces, in the repo)."""

from __future__ import annotations

from pathlib import Path

import pytest

SAMPLE_TRACES = Path(__file__).parents[1] / "fixtures" / "traces"


@pytest.fixture(scope="session")
def sample_traces() -> Path:
    if not SAMPLE_TRACES.is_dir():
        pytest.fail(f"trace samples missing at {SAMPLE_TRACES}")
    return SAMPLE_TRACES
