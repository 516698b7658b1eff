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
