"""Helpers for the reliability tests: read run directories and truth logs, check counts."""

from __future__ import annotations

from tests.support.runs import REPO, cfg, check_counts, cli, manifest, records, truth_file  # noqa: F401 - kept importable here for tests written before tests.support













