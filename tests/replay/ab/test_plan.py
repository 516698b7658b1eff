from pathlib import Path

import orjson
import pytest

from replay.ab import (
    PlannedRun,
    is_run_complete,
    is_run_reusable,
    launch_groups,
    plan_runs,
    run_verdict,
)


def test_abba_alternation_across_levels_and_repeats() -> None:
    plan = plan_runs(["a", "b"], [1, 2], repeats=2)
    assert [(r.arm, r.users, r.repeat) for r in plan] == [
        ("a", 1, 0), ("b", 1, 0),
        ("b", 2, 0), ("a", 2, 0),
        ("a", 1, 1), ("b", 1, 1),
        ("b", 2, 1), ("a", 2, 1),
    ]


def test_each_arm_goes_first_equally_often() -> None:
    plan = plan_runs(["x", "y"], [1, 2, 4, 8], repeats=3)
    firsts = [plan[i].arm for i in range(0, len(plan), 2)]
    assert firsts.count("x") == firsts.count("y")
    names = [r.name for r in plan]
    assert len(set(names)) == len(names)


def test_launch_groups_keep_the_run_level_order() -> None:
    """Servers launched one at a time still run A B B A at the run level; consecutive
    runs of one arm share a server start."""
    plan = plan_runs(["a", "b"], [1, 2], repeats=2)
    groups = launch_groups(plan)
    assert [r for _, runs in groups for r in runs] == plan
    assert [(arm, [r.users for r in runs]) for arm, runs in groups] == [
        ("a", [1]), ("b", [1, 2]), ("a", [2, 1]), ("b", [1, 2]), ("a", [2])]


def test_rates_are_levels_with_their_own_names() -> None:
    plan = plan_runs(["a", "b"], [4], repeats=1, rates=[0.5, 2.0])
    assert [(r.arm, r.rate, r.users) for r in plan] == [
        ("a", 0.5, 0), ("b", 0.5, 0), ("b", 2.0, 0), ("a", 2.0, 0)]
    assert plan[0].name == "a-rate0.5-r0" and plan[0].level == "0.5 sessions/s"
    assert PlannedRun("a", 1, 0).level == "1 user"


def test_empty_plan_is_rejected() -> None:
    with pytest.raises(ValueError):
        plan_runs([], [1], 1)


def test_run_completion_reads_the_manifest(tmp_path: Path) -> None:
    run = tmp_path / PlannedRun("latency/specialized", 4, 0).name
    assert "/" not in run.name
    run.mkdir()
    assert not is_run_complete(run)
    (run / "run.json").write_bytes(orjson.dumps({"complete": False}))
    assert not is_run_complete(run)
    (run / "run.json").write_bytes(orjson.dumps({"complete": True, "interrupted": True}))
    assert not is_run_complete(run)
    (run / "run.json").write_bytes(orjson.dumps({"complete": True, "interrupted": False}))
    assert is_run_complete(run)
    (run / "run.json").write_bytes(b"{trunc")
    assert not is_run_complete(run)


def test_runs_stamped_invalid_are_not_reused(tmp_path: Path) -> None:
    """The verdict is assessed again from the run (issue 25); the stamp in run.json
    can only make it worse, and a run that cannot be read is invalid."""
    from tests.analysis.builders import make_run, rec

    run = make_run(tmp_path / "r", [rec(i) for i in range(20)])  # assessed valid
    assert is_run_reusable(run) and run_verdict(run) == "valid"
    manifest = orjson.loads((run / "run.json").read_bytes())
    for verdict, reusable in (("valid", True), ("caveats", True), ("invalid", False)):
        (run / "run.json").write_bytes(orjson.dumps({**manifest, "validity": {
            "verdict": verdict, "reasons": []}}))
        assert is_run_complete(run) and run_verdict(run) == verdict
        assert is_run_reusable(run) is reusable
    (run / "run.json").write_bytes(orjson.dumps({"complete": True, "interrupted": False}))
    assert is_run_complete(run) and run_verdict(run) == "invalid"
    assert not is_run_reusable(run)
