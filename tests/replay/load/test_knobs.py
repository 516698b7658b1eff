"""One declaration per knob: ``run`` and ``compare`` flags, experiment keys, the
flag an error names, scenario defaults and the resume check all come from the
field's ``Knob`` (issue 22, item 2)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated

import pytest

from replay.ab import EXPERIMENT_KEYS, CompareOptions, apply_experiment, experiment_toml
from replay.cli import build_parser, main
from replay.errors import ConfigError
from replay.knobs import Knob, add_knob_flags, experiment_types, knob_values, knobs, not_resumed
from replay.load import FLAGS, RunSettings, SharedSettings, scenario_defaults, validated


def _sub(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = action.choices[name]
    assert isinstance(sub, argparse.ArgumentParser)
    return sub


def _action(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return parser._option_string_actions[flag]


def test_every_shared_field_is_a_knob_with_one_flag() -> None:
    names = [name for name, _info, _knob in knobs(SharedSettings)]
    assert names == list(SharedSettings.model_fields)
    flags = [knob.flag for _n, _i, knob in knobs(SharedSettings)]
    assert len(set(flags)) == len(flags)


@pytest.mark.parametrize("name, info, knob", list(knobs(SharedSettings)),
                         ids=[n for n, _i, _k in knobs(SharedSettings)])
def test_run_and_compare_take_each_shared_knob_alike(name: str, info: object,
                                                     knob: Knob) -> None:
    run, compare = _action(_sub("run"), knob.flag), _action(_sub("compare"), knob.flag)
    assert run.dest == compare.dest == knob.dest
    assert (run.type, run.choices, run.nargs) == (compare.type, compare.choices, compare.nargs)
    assert knob.help in (run.help or "") and knob.help in (compare.help or "")
    if SharedSettings.model_fields[name].is_required():  # compare may take it from --config
        assert run.required and not compare.required
    else:
        assert run.default == compare.default == SharedSettings.model_fields[name].default
    assert FLAGS[name] == knob.flag


def test_every_compare_knob_is_an_experiment_key_of_its_type() -> None:
    for _name, _info, knob in knobs(CompareOptions):
        assert knob.dest in EXPERIMENT_KEYS
    assert EXPERIMENT_KEYS["ttft_timeout"] == (int, float)
    assert EXPERIMENT_KEYS["scenario_unsafe"] == (bool,)
    assert EXPERIMENT_KEYS["seed"] == (int,)


def test_a_config_file_sets_the_stall_and_scrape_knobs(tmp_path: Path) -> None:
    """Keys the hand-written table once missed: the file's values reach the options."""
    cfg = tmp_path / "exp.toml"
    cfg.write_text('arm = ["a=http://127.0.0.1:1"]\nworkload = "wl.jsonl"\nout = "o"\n'
                   "duration = 5\nttft_timeout = 7\nitl_timeout = 3\nmetrics_interval = 0\n")
    args = build_parser().parse_args(["compare", "--config", str(cfg)])
    apply_experiment(args, args.compare_defaults)
    opts = validated(CompareOptions, {**knob_values(args, CompareOptions), "levels": (1,)})
    assert (opts.first_token_timeout_s, opts.itl_timeout_s) == (7, 3)
    assert opts.metrics_interval_s is None  # 0 = off, as on the command line
    saved = experiment_toml(args, args.compare_defaults)
    assert "ttft_timeout = 7" in saved and "itl_timeout = 3" in saved


def test_a_config_key_of_the_wrong_type_names_file_and_key(tmp_path: Path) -> None:
    cfg = tmp_path / "exp.toml"
    cfg.write_text('ttft_timeout = "soon"\n')
    args = build_parser().parse_args(["compare", "--config", str(cfg)])
    with pytest.raises(ConfigError, match=r"exp\.toml: ttft_timeout = 'soon' must be"):
        apply_experiment(args, args.compare_defaults)


def test_compare_hands_every_shared_knob_to_its_runs() -> None:
    opts = CompareOptions(duration_s=5, warmup_s=1, itl_timeout_s=9, metrics_interval_s=3,
                          routing="round-robin", time_scale=2, think_scale=0.5, seed=4)
    run = opts.config("http://127.0.0.1:1", 2, "a")
    assert run.shared() == opts.shared()
    assert isinstance(run, RunSettings) and run.users == 2


def test_metrics_interval_zero_is_off_in_both_commands() -> None:
    assert RunSettings(target="http://127.0.0.1:1", duration_s=1,
                       metrics_interval_s=0).metrics_interval_s is None
    assert CompareOptions(duration_s=1, metrics_interval_s=0).metrics_interval_s is None


def test_scenario_defaults_are_the_knobs_defaults() -> None:
    fields = SharedSettings.model_fields
    assert scenario_defaults() == {"think_scale": fields["think_scale"].default,
                                   "think_time_cap_s": fields["think_time_cap_s"].default,
                                   "seed": fields["seed"].default, "rate": None,
                                   # a scenario with a warmup of its own fills that in too
                                   "warmup_s": fields["warmup_s"].default}


def test_not_resumed_is_read_off_the_knobs() -> None:
    assert not_resumed(CompareOptions) == {"api_key_env", "allow_unfair", "allow_identical",
                                           "max_failure_share", "gpu_metrics"}


class _WithBurst(SharedSettings):
    burst: Annotated[float, Knob("--burst", "sessions per arrival", metavar="X",
                                 resumed=False)] = 1.0


def test_a_new_knob_is_one_annotated_field() -> None:
    """Everything a command needs of a knob follows from its declaration alone."""
    parser = argparse.ArgumentParser()
    add_knob_flags(parser, _WithBurst)
    args = parser.parse_args(["--duration", "5", "--burst", "3"])
    values = knob_values(args, _WithBurst)
    assert values["burst"] == 3.0 and values["duration_s"] == 5.0
    assert _WithBurst(**values).burst == 3.0
    assert experiment_types(_WithBurst)["burst"] == (int, float)
    assert not_resumed(_WithBurst) == {"api_key_env", "gpu_metrics", "burst"}
    with pytest.raises(SystemExit):
        parser.parse_args(["--burst", "3"])  # --duration has no default: required


def test_compare_refuses_an_out_of_range_shared_knob_naming_its_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["compare", "--arm", "a=http://127.0.0.1:1", "--arm", "b=http://127.0.0.1:2",
                 "--workload", str(tmp_path / "wl.jsonl"), "--out", str(tmp_path / "o"),
                 "--duration", "5", "--metrics-interval", "-1"])
    assert code == 2
    assert "--metrics-interval" in capsys.readouterr().err


def test_launch_and_search_flags_are_declared_once(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``launch`` and ``compare --launch`` take the launch flags from one declaration
    (the same bound, the same one-line error), and the experiment file's keys for the
    launch and search flags are read off the same knobs."""
    from replay.ab import SearchLimits
    from replay.servers.launch import LaunchSettings

    out = tmp_path / "c"
    for argv in (["launch", "--model", "m", "--arm", "auto", "--dry-run"],
                 ["compare", "--launch", "--model", "m", "--arm", "auto", "--workload",
                  str(tmp_path / "w.jsonl"), "--out", str(out), "--duration", "5"]):
        assert main([*argv, "--gpus-per-arm", "5000"]) == 2
        assert capsys.readouterr().err.strip() == \
            "agentreplay: error: --gpus-per-arm: must be <= 4096 (got 5000)"
    assert not out.exists()
    for model in (LaunchSettings, SearchLimits):
        for name, _info, knob in knobs(model):
            assert knob.dest in EXPERIMENT_KEYS, name
            assert getattr(_sub("compare").parse_args([]), knob.dest) == \
                model.model_fields[name].get_default()
