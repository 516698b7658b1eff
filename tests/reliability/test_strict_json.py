"""Every number the tool writes is strict JSON: no ``Infinity``, no ``NaN`` (jq, orjson
and most JSON readers refuse them). A run, a comparison, a calibration and a plan
(serve-sim, tiny) are made and every JSON / JSONL file they wrote is loaded with a
parser that refuses non-finite constants; and a twin fitted to runs whose server
reported an absurd running count (a mean that overflows to +inf) is strict JSON too.

Before: ``calibrate`` wrote its twin with Python's ``json.dumps``, which writes
``Infinity`` for the overflowing mean of ``num_requests_running``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replay.cli import main
from replay.servers.sim import SimServerProcess, load_profile, server_info
from tests.analysis.builders import make_run
from tests.reliability.conftest import cli
from tests.replay.conftest import make_workload
from tests.support.fit import PROFILE, engine_records


def _refuse(name: str) -> Any:
    raise ValueError(f"non-finite JSON constant {name}")


def strict_load(text: str) -> Any:
    return json.loads(text, parse_constant=_refuse)


def _check_tree(root: Path) -> list[Path]:
    """Load every .json and .jsonl file under ``root`` strictly; the files checked."""
    seen = []
    for path in sorted(root.rglob("*")):
        if path.suffix == ".json":
            strict_load(path.read_text(encoding="utf-8"))
        elif path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    strict_load(line)
        else:
            continue
        seen.append(path)
    return seen


def test_strict_parser_refuses_what_python_json_writes() -> None:
    with pytest.raises(ValueError, match="Infinity"):
        strict_load(json.dumps({"x": float("inf")}))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # numpy's mean
def test_twin_of_an_absurd_running_count_is_strict_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    info = server_info(PROFILE, "auto", 1.0)
    metrics = [{"t_s": t, "values": {"num_requests_running": 1e308}} for t in (0.0, 5.0, 10.0)]
    dirs = [str(make_run(tmp_path / f"u{u}", engine_records(PROFILE, u, seed=u), label="auto",
                         model=PROFILE.model, simulated=True, server_info=info,
                         metrics=metrics,
                         load={"users": u, "duration_s": 10, "warmup_s": 0, "drain_s": 5}))
            for u in (1, 2, 4)]
    twin = tmp_path / "twin.json"
    assert main(["calibrate", *dirs, "-o", str(twin)]) == 0, capsys.readouterr().err
    doc = strict_load(twin.read_text())
    levels = doc["calibration"]["levels"]
    assert [lv["mean_running_scraped"] for lv in levels] == [None, None, None]
    assert load_profile(str(twin)).model == PROFILE.model  # still a profile serve-sim loads


@pytest.mark.sim
@pytest.mark.slow
def test_every_file_a_run_comparison_calibration_and_plan_write_is_strict(
    tmp_path: Path,
) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=4, turns=4, new_blocks=4, output=16,
                       think_s=0.05)
    common = ["--workload", str(wl), "--duration", "2", "--warmup", "0.3", "--drain", "2"]
    with SimServerProcess("small", "auto", time_scale=4.0) as a, \
            SimServerProcess("small", "latency_specialized", time_scale=4.0) as b:
        for users in (1, 2, 4):
            res = cli("run", "--target", a.url, "--out", str(tmp_path / "runs" / f"u{users}"),
                      "--users", str(users), "--label", "auto", *common, timeout=120)
            assert res.returncode in (0, 3), res.stderr
        res = cli("compare", "--arm", f"auto={a.url}", "--arm", f"lat={b.url}",
                  "--out", str(tmp_path / "cmp"), "--users", "2", *common, timeout=180)
        assert res.returncode in (0, 3), res.stderr
    twin = tmp_path / "twin.json"
    res = cli("calibrate", str(tmp_path / "runs"), "-o", str(twin), "--holdout", "2",
              "--keep-predictions", str(tmp_path / "pred"), timeout=180)
    assert res.returncode == 0, res.stderr
    res = cli("plan", "--twin", str(twin), "--workload", str(wl), "--users", "1:4",
              "--levels", "2", "--duration", "5", "--warmup", "1", "--drain", "1",
              "--jobs", "1", "--keep-runs", str(tmp_path / "kept"), str(tmp_path / "cmp"),
              timeout=180)
    assert res.returncode in (0, 3), res.stderr
    res = cli("report", str(tmp_path / "cmp"), "--no-charts", timeout=120)
    assert res.returncode in (0, 3), res.stderr
    seen = {p.relative_to(tmp_path).as_posix() for p in _check_tree(tmp_path)}
    for must in ("twin.json", "cmp/twin-plan.json", "cmp/summary.json",
                 "runs/u1/run.json", "runs/u1/requests.jsonl", "runs/u1/server_metrics.jsonl",
                 "kept/users-0001/run.json"):
        assert must in seen, sorted(seen)
