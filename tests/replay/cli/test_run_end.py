"""What ``agentreplay run`` ends with, against the simulator: the window's summary
(checked against analysis reading the run it wrote), the warmup warning for a
prefix-heavy workload (before the load), the verdict marked SIMULATED and the report hint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from replay.cli import main
from replay.servers.sim import SimServerProcess

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServerProcess]:
    with SimServerProcess("instant", time_scale=10.0) as srv:
        yield srv


def test_run_ends_with_summary_warning_verdict_and_hint(
    sim: SimServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    from analysis import measure, read_run, summarize
    from replay.cli._run_summary import run_summary_lines
    from replay.cli._warmup import warmup_advice

    wl = tmp_path / "w.jsonl"
    assert main(["traces", "generate", "--sessions", "4", "--max-context", "32768",
                 "--think-scale", "0.05", "-o", str(wl)]) == 0
    out = tmp_path / "run"
    capsys.readouterr()
    code = main(["run", "--target", sim.url, "--workload", str(wl), "--users", "2",
                 "--duration", "3", "--drain", "5", "--out", str(out), "--quiet"])
    got = capsys.readouterr()
    assert code in (0, 3)
    s = summarize(measure(read_run(out)), bootstrap=False)
    lines = got.out.splitlines()
    assert lines == run_summary_lines(out)
    assert lines[0].startswith(f"[SIMULATED] window: {s.counts.in_window} request")
    assert f"({s.counts.ok} ok" in lines[0]
    assert lines[1] == f"full report: agentreplay report {out}"
    advice = warmup_advice(wl, 0.0, think_scale=1.0)
    assert advice is not None and f"agentreplay: {advice}" in got.err
    assert "agentreplay: [SIMULATED] run " in got.err  # the verdict
    err = got.err.splitlines()
    # given before the load, not 200 s later after it (issue 26)
    assert err.index(f"agentreplay: {advice}") < err.index(f"agentreplay: run written to {out}")
