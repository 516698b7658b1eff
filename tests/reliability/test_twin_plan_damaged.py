"""A damaged ``twin-plan.json`` (hand-edited: a level's users a string) never breaks
``report DIR``: the twin section says the file is unreadable, naming the field, and the
measured report is written as ever. Before: a ``ValueError`` traceback from the chart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replay.cli import main
from tests.analysis.builders import make_run, synth_records


def _plan_doc(**level: Any) -> dict[str, Any]:
    """A twin plan as ``plan --twin ... DIR`` stores it (``replay.cli._cmd_plan._store``)."""
    good = {"users": 2, "p90_interactivity": 30.0, "p90_ttft_due_s": 0.5, "output_tok_s": 90.0}
    return {"twin": "twin.json", "profile": "twin", "backend": "auto", "replicas": 1,
            "duration_s": 60.0, "error_band": None,
            "levels": [{"users": 1, "p90_interactivity": 40.0, "p90_ttft_due_s": 0.2,
                        "output_tok_s": 50.0}, dict(good, **level)],
            "tiers": [{"tier": "10:5", "floor": 10.0, "ttft": 5.0, "bracket": [2, None],
                       "text": "at least 2 users", "interval": None, "measured": []}]}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path / "run", synth_records(users=2, per_user=20, tpot=0.02, ttft=0.3),
                    label="a", load={"users": 2, "duration_s": 30, "warmup_s": 0,
                                     "drain_s": 5})


def _report(run: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["report", str(run)])  # with charts: the twin chart reads the levels
    err = capsys.readouterr().err
    assert code in (0, 3) and "Traceback" not in err, err
    return (run / "report.html").read_text(encoding="utf-8")


def test_a_sound_twin_plan_is_shown(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run_dir / "twin-plan.json").write_text(json.dumps(_plan_doc()))
    html = _report(run_dir, capsys)
    assert "MODELLED, not measured" in html and "unreadable" not in html


@pytest.mark.parametrize(("level", "field"), [
    ({"users": "many"}, "levels.1.users"),
    ({"users": {"n": 2}}, "levels.1.users"),
    ({"users": 0}, "levels.1.users"),
    ({"p90_interactivity": "fast"}, "levels.1.p90_interactivity"),
])
@pytest.mark.sim
def test_a_damaged_twin_plan_is_skipped_in_one_line(
    run_dir: Path, level: dict[str, Any], field: str, capsys: pytest.CaptureFixture[str],
) -> None:
    (run_dir / "twin-plan.json").write_text(json.dumps(_plan_doc(**level)))
    html = _report(run_dir, capsys)
    assert "twin-plan.json is unreadable" in html and field in html
    assert "MODELLED, not measured" not in html


def _damaged(edit: dict[str, Any]) -> dict[str, Any]:
    doc = _plan_doc()
    tier = edit.pop("tier", None)
    doc.update(edit)
    if tier is not None:
        doc["tiers"][0].update(tier)
    return doc


@pytest.mark.parametrize("edit", [
    {"tier": {"bracket": "x"}},  # was: TypeError: unsupported operand type(s) for /
    {"replicas": "two"},  # was: ValueError: invalid literal for int()
    {"gpus_per_replica": 0},
    {"tier": {"bracket": [-1, None]}},
    {"tier": {"bracket": [1]}},
    {"tiers": {"10:5": {}}},
    {"twins": [{"arm": "a", "replicas": "x", "tiers": []}]},
])
def test_a_damaged_twin_plan_is_left_out_of_the_decision(
    run_dir: Path, edit: dict[str, Any], capsys: pytest.CaptureFixture[str],
) -> None:
    """The decision (printed, and the top of report.html) does arithmetic on the stored
    brackets, replica and GPU counts: a hand-edited value there was a traceback of
    ``report DIR``; it is now left out, and the measured decision printed alone."""
    (run_dir / "twin-plan.json").write_text(json.dumps(_damaged(edit)))
    code = main(["report", str(run_dir), "--slo", "10:5"])  # the stored plan's tier
    out, err = capsys.readouterr()
    assert code in (0, 3) and "Traceback" not in err, err
    decision = [line for line in (out + err).splitlines() if "Capacity at" in line]
    assert decision and not any("twin (" in line for line in decision), out + err


def test_a_sound_twin_plan_stands_in_the_decision(
    run_dir: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    (run_dir / "twin-plan.json").write_text(json.dumps(_plan_doc()))
    assert main(["report", str(run_dir), "--slo", "10:5"]) in (0, 3)
    out, err = capsys.readouterr()
    assert any("twin (backend auto, 1 replica) modelled: at least 2 users" in line
               for line in (out + err).splitlines() if "Capacity at" in line), out + err
