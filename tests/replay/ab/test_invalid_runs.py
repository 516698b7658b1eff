"""A comparison whose runs are stamped invalid says so, exits 3, and a resume redoes them."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from replay.ab import plan_runs, run_verdict
from replay.cli import main
from tests.support.servers import sims
from tests.support.workloads import chain_requests
from traces import Session, WorkloadHeader, write_workload

pytestmark = pytest.mark.sim


def _slow_workload(path: Path) -> Path:
    """Every turn is due 100 s after the previous one ended: nothing in any window."""
    sessions = [Session(id=f"s{s}", requests=tuple(
        r.model_copy(update={"think_time_s": 100.0})
        for r in chain_requests(turns=2, new_blocks=4, block_size=16, output=8, think_s=100.0,
                                first_id=10_000 * (s + 1))))
        for s in range(2)]
    write_workload(path, WorkloadHeader(source="test", block_size=16), sessions)
    return path


def test_invalid_runs_exit_3_and_are_redone_on_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "cmp"
    wl = _slow_workload(tmp_path / "wl.jsonl")
    names = [r.name for r in plan_runs(["auto", "latency_specialized"], [1], 1)]
    with sims(("small", "auto"), ("small", "latency_specialized")) as urls:
        argv = ["compare", "--arm", f"auto={urls[0]}", "--arm",
                f"latency_specialized={urls[1]}", "--workload", str(wl), "--duration", "0.6",
                "--warmup", "0.4", "--drain", "0.2", "--out", str(out), "--plain"]
        assert main(argv) == 3
        first = capsys.readouterr()
        ids = {n: orjson.loads((out / "runs" / n / "run.json").read_bytes())["run_id"]
               for n in names}
        assert all(run_verdict(out / "runs" / n) == "invalid" for n in names)
        assert "comparison invalid" in first.err and "window_empty" in first.err
        summary = orjson.loads((out / "summary.json").read_bytes())
        assert summary["validity"]["verdict"] == "invalid"
        assert main(argv) == 3  # the same command: the invalid runs are run again
        again = capsys.readouterr().err
    assert again.count("stamped invalid before, redone") == len(names)
    for n in names:
        assert orjson.loads((out / "runs" / n / "run.json").read_bytes())["run_id"] != ids[n]
