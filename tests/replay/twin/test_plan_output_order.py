"""``plan --twin``'s output, read as a user reads it through a pipe (stdout and stderr on
one stream, as ``2>&1 | tee`` shows it): the header first, then one progress line per
level, then the level table, then the tiers (issue 36: the header came after the progress
lines when stdout was a pipe, block-buffered while stderr was not)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.twin import plan_argv, twin_file

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_twin_plan_prints_header_progress_table_tiers_in_order(
        tmp_path: Path, wl: Path, jobs: str, uses_cli: None) -> None:
    argv = plan_argv("--twin", str(twin_file(tmp_path)), "--workload", str(wl),
                     "--users", "1:6", "--levels", "3", "--slo", "10:5")
    argv[argv.index("--jobs") + 1] = jobs  # 2: levels in forked workers, finishing in any order
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    env.pop("PYTHONUNBUFFERED", None)  # a user's pipe: stdout block-buffered, stderr not
    proc = subprocess.run([sys.executable, "-m", "replay.cli", *argv], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert proc.returncode == 0, proc.stdout

    def kind(line: str) -> str:
        if line.startswith("[SIMULATED] modelled (twin): profile"):
            return "header"
        if line.startswith("  level "):
            return "progress"
        if line.split()[:2] == ["users", "P90"]:
            return "table"
        if line.startswith("tier "):
            return "tier"
        return "other"

    kinds = [kind(ln) for ln in lines]
    assert kinds.count("header") == 1 and kinds.count("table") == 1, lines
    assert kinds.count("progress") == 3, lines  # one per level of the ladder
    first = {k: kinds.index(k) for k in ("header", "progress", "table", "tier")}
    last = {k: len(kinds) - 1 - kinds[::-1].index(k) for k in ("progress", "tier")}
    assert first["header"] == 0, lines
    assert first["header"] < first["progress"] <= last["progress"] < first["table"], lines
    assert first["table"] < first["tier"], lines
    assert last["tier"] == max(i for i, k in enumerate(kinds) if k != "other"), lines
    rows = [ln.split()[0] for ln in lines[first["table"] + 1:first["tier"]]
            if ln.strip()[:1].isdigit()]
    assert rows == ["1", "2", "6"], lines  # the table in ladder order, whatever order ran
