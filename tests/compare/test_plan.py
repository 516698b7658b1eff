from pathlib import Path

import orjson
import pytest

from replay.ab import PlannedRun, is_run_complete, plan_runs, plan_runs_by_arm


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


def test_launch_groups_alternate_by_repeat() -> None:
    groups = plan_runs_by_arm(["a", "b"], [1, 2], repeats=2)
    assert [arm for arm, _ in groups] == ["a", "b", "b", "a"]
    assert [r.users for r in groups[0][1]] == [1, 2]


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
