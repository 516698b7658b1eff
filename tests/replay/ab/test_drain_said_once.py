"""A comparison says how its default drain was decided once, before its first run: every
run of it replays the same workload, so the same line per run was noise."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.cli import main
from tests.support.servers import exit_for, sims


@pytest.mark.sim
def test_the_default_drain_is_said_once_per_comparison(
        tiny_workload: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    with sims(("small", "auto"), ("small", "latency_specialized")) as (a, b):
        code = main(["compare", "--arm", f"a={a}", "--arm", f"b={b}",
                     "--workload", str(tiny_workload), "--users", "1,2", "--duration", "1",
                     "--warmup", "0.2", "--out", str(out), "--quiet"])
    assert code == exit_for(out)
    err = capsys.readouterr().err
    assert len(list((out / "runs").iterdir())) == 4  # four runs, each with the default drain
    assert sum(line.startswith("drain: ") for line in err.splitlines()) == 1, err
