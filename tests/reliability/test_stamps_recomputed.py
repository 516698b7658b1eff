"""Issue 25: stamps that summarise a run (simulated, scenario satisfied, validity)
come from its evidence whenever it is read; a hand-edited run.json cannot drop the
[SIMULATED] label, claim a scenario a 2-s run did not meet, or get an invalid run
reused by a resumed comparison."""

from __future__ import annotations

from pathlib import Path

import orjson

from replay.ab._order import is_run_reusable, run_verdict
from tests.analysis.builders import make_run, rec
from tests.support.commands import call as _call


def _summary(run: Path) -> dict[str, object]:
    code, err = _call(["report", str(run), "--no-charts"])
    assert code in (0, 3), err
    data = orjson.loads((run / "summary.json").read_bytes())
    assert isinstance(data, dict)
    return data


def test_simulated_follows_the_server_not_the_stamp(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", [rec(i) for i in range(4)], model="sim/small",
                   simulated=False, server_info={"simulated": True, "sim_profile": "small"})
    assert _summary(run)["simulated"] is True
    code, err = _call(["report", str(run), "--no-charts"])
    assert "[SIMULATED]" in err + (run / "report.html").read_text()


def test_a_claimed_scenario_is_judged_again(tmp_path: Path) -> None:
    load = {"users": 2, "duration_s": 2, "warmup_s": 0, "drain_s": 1, "seed": 42}
    run = make_run(tmp_path / "run", [rec(i, sent_s=0.1 * i) for i in range(4)],
                   scenario="agentx", scenario_satisfied=True, scenario_notes=[], load=load,
                   window={"start_s": 0.0, "end_s": 2.0})
    summary = _summary(run)
    assert summary["scenario_satisfied"] is False, summary.get("scenario_notes")
    assert any("900" in n for n in summary["scenario_notes"])  # type: ignore[union-attr]


def test_a_stamped_valid_run_is_assessed_again_before_reuse(tmp_path: Path) -> None:
    # no request in the window: the run is invalid whatever run.json says
    late = [rec(i, sent_s=500.0 + i) for i in range(5)]
    run = make_run(tmp_path / "run", late, validity={"verdict": "valid", "reasons": []})
    assert run_verdict(run) == "invalid"
    assert not is_run_reusable(run)
