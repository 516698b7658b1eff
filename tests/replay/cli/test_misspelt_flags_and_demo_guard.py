"""A newcomer's first hour (issue 26): a misspelt flag is named with the fix, a
previous demo is never replaced silently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replay.cli import main


@pytest.mark.parametrize(("argv", "typo", "fix"), [
    (["run", "--target", "http://127.0.0.1:9", "--duraton", "5", "--workload", "w"],
     "--duraton", "--duration"),
    (["traces", "generate", "--sesions", "3", "-o", "x.jsonl"], "--sesions", "--sessions"),
    (["compare", "--arm", "a=http://127.0.0.1:9", "--users", "1", "--reapets", "2"],
     "--reapets", "--repeats"),
])
def test_misspelt_flag_is_named_before_missing_ones(
    argv: list[str], typo: str, fix: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"unrecognized argument {typo}" in err and f"did you mean {fix}?" in err
    assert "required" not in err


def test_unknown_flag_after_valid_ones_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--target", "http://127.0.0.1:9", "--duration", "5", "--workload", "w",
              "--out", "o", "--zzz"])
    assert "unrecognized argument --zzz" in capsys.readouterr().err


def test_flags_after_double_dash_are_not_checked() -> None:
    from replay.cli import unknown_flag

    assert unknown_flag(["--duration", "1", "--", "--tensor-parallel-size", "2"],
                        ["--duration"]) is None


@pytest.mark.parametrize("leftover", ["comparison.json", "runs"])
def test_demo_refuses_a_previous_demo_without_force(
    tmp_path: Path, leftover: str, capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    target = out / leftover
    if leftover == "runs":
        target.mkdir()
    else:
        target.write_text("{}")
    assert main(["demo", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "previous demo" in err and "--force" in err
    assert target.exists()


def _compare_args(argv: list[str]) -> Any:
    from replay.ab import apply_experiment
    from replay.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(argv)
    args.typed = parser.typed_dests(argv)
    apply_experiment(args, args.compare_defaults)
    return args


def test_a_flag_typed_at_its_default_wins_over_the_config(tmp_path: Path) -> None:
    from replay.ab import experiment_toml

    config = tmp_path / "exp.toml"
    config.write_text('format_version = 1\nrepeats = 2\nthink_scale = 0.5\nwarmup = 7.0\n')
    args = _compare_args(["compare", "--config", str(config), "--repeats", "1",
                          "--think-scale=1.0"])
    assert args.repeats == 1 and args.think_scale == 1.0  # typed, though at the defaults
    assert args.warmup == 7.0  # not typed: the file's value
    stored = experiment_toml(args, args.compare_defaults)
    assert "repeats" not in stored and "think_scale" not in stored  # what ran: the defaults
    assert "warmup = 7.0" in stored


def test_missing_runs_names_every_planned_run_not_finished(tmp_path: Path) -> None:
    import orjson

    from replay.ab import missing_runs
    from tests.analysis.builders import make_run, synth_records

    def recs(users: int) -> list[dict[str, Any]]:
        return synth_records(users=users, per_user=3, tpot=0.01, ttft=0.2)

    make_run(tmp_path / "runs" / "a-u1-r1", recs(1))
    make_run(tmp_path / "runs" / "a-u2-r1", recs(2), complete=False)
    plan = [{"name": n, "arm": "a", "users": u, "repeat": 1}
            for n, u in (("a-u1-r1", 1), ("a-u2-r1", 2), ("a-u4-r1", 4))]
    runs = {"a-u1-r1": {"status": "complete"}, "a-u2-r1": {"status": "interrupted"}}
    (tmp_path / "comparison.json").write_bytes(orjson.dumps({"plan": plan, "runs": runs}))
    assert missing_runs(tmp_path) == ["a-u2-r1 (interrupted)", "a-u4-r1 (not run)"]
    (tmp_path / "comparison.json").write_text("[1, 2]")  # unreadable: no plan, no claim
    assert missing_runs(tmp_path) == []


def test_an_interrupted_comparison_claims_no_capacity_from_a_cut_level(tmp_path: Path) -> None:
    from analysis import compare_runs, read_runs
    from tests.analysis.builders import config, make_run, synth_records

    for arm in ("auto", "latency_specialized"):
        for users in (2, 4):
            recs = synth_records(users=users, per_user=8, tpot=0.01 * users, ttft=0.2)
            load = {"users": users, "duration_s": 100, "warmup_s": 10, "drain_s": 5}
            make_run(tmp_path / f"{arm}-{users}", recs, label=arm, run_id=f"{arm}-{users}",
                     load=load,
                     server_info={"vllm_config": config(arm)},
                     complete=not (arm == "auto" and users == 4))
    runs = read_runs([tmp_path])
    cut = compare_runs(runs, missing=["auto-8 (not run)"])
    assert cut.incomplete and cut.missing == ["auto-8 (not run)"]
    whole = [r for r in runs if r.manifest.run_id != "auto-4"]
    assert [r.model_dump() for r in cut.capacity if r.arm == "auto"] == \
        [r.model_dump() for r in compare_runs(whole).capacity if r.arm == "auto"]


def test_an_open_loop_run_records_no_user_count() -> None:
    from replay.load import RunSettings

    s = RunSettings(target="http://127.0.0.1:9", duration_s=10.0, rate=2.0, drain_s=5.0)
    assert s.load_settings("open").users is None and s.load_settings("open").rate == 2.0
    closed = RunSettings(target="http://127.0.0.1:9", duration_s=10.0, users=3, drain_s=5.0)
    assert closed.load_settings("closed").users == 3


def test_the_demo_says_where_a_named_fix_applies() -> None:
    from analysis import Validity, ValidityReason
    from replay.cli._cmd_demo import demo_flag_hint

    cold = ValidityReason(code="cache_cold", severity="caveat",
                          message="the cache was cold (a longer --warmup warms it)")
    hint = demo_flag_hint(Validity(verdict="caveats", reasons=[cold]))
    assert hint is not None and "(--warmup)" in hint and "agentreplay compare" in hint
    assert demo_flag_hint(Validity()) is None and demo_flag_hint(None) is None
