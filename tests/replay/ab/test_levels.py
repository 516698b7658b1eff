"""What sets a comparison's load: user counts, session rates, or the trace's own times;
settings validated before any connection."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from analysis import RunManifest
from replay.ab import CompareOptions, compare_arms, plan_runs
from replay.cli import main
from replay.errors import ConfigError
from tests.support.servers import sims
from tests.support.workloads import make_workload

DEAD = [("auto", "http://127.0.0.1:9"), ("latency_specialized", "http://127.0.0.1:9")]


@pytest.mark.parametrize(("flags", "named"), [
    (["--warmup", "-1"], "--warmup"),
    (["--users", "0,2"], "--users"),
    (["--repeats", "0"], "--repeats"),
    (["--rate", "1,x"], "--rate"),
    (["--users", "2", "--rate", "1"], "--users and --rate"),
])
def test_bad_settings_exit_2_before_any_connection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], named: str,
) -> None:
    out = tmp_path / "cmp"
    argv = ["compare", "--arm", f"auto={DEAD[0][1]}", "--arm", f"b={DEAD[1][1]}",
            "--workload", str(make_workload(tmp_path / "wl.jsonl")), "--duration", "1",
            "--out", str(out), "--quiet", *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert named in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "cannot reach" not in err and not out.exists()


def test_user_counts_are_refused_for_timestamp_workloads(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", arrival="timestamps")
    with pytest.raises(ConfigError, match="--users: .* replays its own arrival times"):
        compare_arms(DEAD, wl, tmp_path / "cmp", CompareOptions(levels=(1, 2), duration_s=1.0))
    assert not (tmp_path / "cmp").exists()


@pytest.mark.sim
def test_rates_are_open_loop_levels(tiny_workload: Path, tmp_path: Path) -> None:
    """``--rate 1,2``: each level is a session rate; its runs say so (load_kind rate)."""
    out = tmp_path / "cmp"
    opts = CompareOptions(rates=(1.0, 2.0), duration_s=1.0, warmup_s=0.0, drain_s=0.5,
                          metrics_interval_s=None)
    with sims(("small", "auto"), ("small", "latency_specialized")) as urls:
        compare_arms([("auto", urls[0]), ("latency_specialized", urls[1])], tiny_workload,
                     out, opts)
    plan = plan_runs(["auto", "latency_specialized"], [], 1, rates=[1.0, 2.0])
    for run in plan:
        m = RunManifest.model_validate_json((out / "runs" / run.name / "run.json").read_bytes())
        assert m.load_kind == "rate" and m.load.rate == run.rate and m.load.arrival == "open"
    state = orjson.loads((out / "comparison.json").read_bytes())
    assert state["settings"]["rates"] == [1.0, 2.0]
    assert [p["name"] for p in state["plan"]] == [r.name for r in plan]
