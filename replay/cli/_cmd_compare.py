"""``agentreplay compare``: an A/B comparison of server configurations end to end."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replay.ab import CompareOptions, Live, SearchLimits
    from replay.servers.launch import LaunchSettings

from replay.cli._compare_out import live_flags, live_mode, print_result, stored_decision

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from replay.ab import CompareOptions, SearchLimits
    from replay.knobs import add_knob_flags
    from replay.load import SharedSettings
    from replay.servers.launch import LaunchSettings

    p = subparsers.add_parser(
        "compare", help="A/B compare server configurations (fairness-checked, resumable)",
        description="Check that the arms differ only in the decode backend, replay the same "
        "workload against each in A B B A order at every user count, and write report.html, "
        "summary.json, requests.csv and comparison.json. Rerun the same command to resume.",
    )
    p.add_argument("--arm", action="append", metavar="LABEL[=URL[,URL...]]",
                   help="an arm: LABEL=URL of a running server (LABEL=URL1,URL2: a fleet "
                        "of replicas measured as one, routed by session affinity), or just "
                        "the decode_backend with --launch; repeat for each arm (required, "
                        "here or in --config)")
    p.add_argument("--workload", help="workload file (.jsonl) (required, here or in "
                   "--config)")
    p.add_argument("--users", default=None,
                   help="comma-separated user counts, e.g. 1,2,4,8 (closed loop; default 1)")
    p.add_argument("--rate", default=None, metavar="RATES",
                   help="comma-separated session arrival rates per second, e.g. 0.5,1,2: "
                        "open-loop levels instead of user counts")
    p.add_argument("--out", help="comparison directory (required, here or in --config)")
    launch = p.add_argument_group("with --launch (the same flags in launch)")
    launch.add_argument("--launch", action="store_true", help="start a vLLM server per arm")
    add_knob_flags(launch, LaunchSettings)
    p.add_argument("--search", action="append", metavar="FLOOR:TTFT",
                   help="SLO search instead of a fixed sweep: per arm, the measured user "
                        "counts this tier's capacity lies between (P90 interactivity floor "
                        "tok/s/user : P90 TTFT ceiling s), by doubling from the first --users "
                        "count then bisection over short runs; repeatable (default: no "
                        "search)")
    add_knob_flags(p, SearchLimits)
    p.add_argument("--slo", action="append", metavar="FLOOR:TTFT",
                   help="SLO tier the report, summary.json and search judge by: P90 "
                        "interactivity floor (tok/s/user) and P90 TTFT ceiling (s), e.g. "
                        "100:10; repeatable; stored with the results, so `report DIR` judges "
                        "the same (default: 30:15, 100:15 and 300:15)")
    p.add_argument("--config", metavar="FILE.toml",
                   help="experiment file: the flags of a comparison (arms, workload, levels, "
                        "durations, SLO tiers, search, launch settings); a flag given here "
                        "overrides it; stored as experiment.toml with the results")
    p.add_argument("--save-config", metavar="FILE.toml",
                   help="write this command's settings as an experiment file and exit "
                        "without running")
    p.add_argument("--force", action="store_true",
                   help="with --save-config: replace the file if it exists")
    p.add_argument("vllm_args", nargs=argparse.REMAINDER,
                   help="after --: extra vLLM arguments for launched arms")
    live_flags(p)
    add_knob_flags(p.add_argument_group("load settings (the same flags in run)"),
                   SharedSettings, required=False)
    add_knob_flags(p.add_argument_group("the comparison"), CompareOptions,
                   CompareOptions.model_fields.keys() - SharedSettings.model_fields.keys())
    p.set_defaults(func=_compare)
    p.set_defaults(compare_defaults={a.dest: a.default for a in p._actions})


def _compare(args: argparse.Namespace) -> int:

    from replay.ab import (
        CompareOptions,
        SearchLimits,
        check_search_start,
        parse_levels,
        parse_rates,
        parse_slo,
    )
    from replay.errors import ConfigError
    from replay.knobs import from_knobs, knob_values
    from replay.load import check_writable_dir, validated
    from replay.servers.launch import LaunchSettings

    done = _experiment(args)
    if done is not None:
        return done
    if args.rate is not None and args.users is not None:
        raise ConfigError("--users and --rate: give one (user counts for closed-loop levels, "
                          "or session rates for open-loop levels)")
    opts = validated(CompareOptions, _scenario(args, dict(
        knob_values(args, CompareOptions),
        levels=parse_levels(args.users or "1"),
        rates=None if args.rate is None else parse_rates(args.rate),
        model=None if args.launch else args.model,
        slo=tuple(parse_slo(t) for t in args.slo or ()),
    ), args.rate))
    launch = from_knobs(LaunchSettings, knob_values(args, LaunchSettings))
    limits = from_knobs(SearchLimits, knob_values(args, SearchLimits))
    if args.search:
        check_search_start(opts.levels[0], limits)
    for rate in opts.rates or (None,):  # every planned run's settings, before any is sent
        opts.config("http://127.0.0.1", max(opts.levels), "", rate=rate)
    from analysis import EXPERIMENT_FILE
    from replay.cli._files import kept_unless_refused

    # a refused comparison (other settings than the stored ones, unfair arms, a server
    # not there) leaves OUT/experiment.toml as it was, and no folder made for it
    with kept_unless_refused(Path(args.out) / EXPERIMENT_FILE):
        check_writable_dir(Path(args.out))  # settings first, then before any server is asked
        _store_experiment(args)
        return _run_compare(args, opts, launch, limits)


def _run_compare(args: argparse.Namespace, opts: CompareOptions, launch: LaunchSettings,
                 limits: SearchLimits) -> int:
    """The comparison itself, once its settings are valid and its experiment stored."""
    from replay.ab import LaunchOptions, compare_arms, compare_launched
    from replay.errors import ConfigError

    extra = list(args.vllm_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    live = live_mode(args)
    if args.search:
        return _search(args, opts, extra, live, limits)
    if args.launch:
        if not args.model:
            raise ConfigError("--launch needs --model DIR (the model to serve)")
        bad = [a for a in args.arm if "=" in a]
        if bad:
            raise ConfigError(f"--launch takes arm labels without URLs, got {bad[0]!r}")
        how = LaunchOptions(args.model, servers=launch, extra_args=tuple(extra))
        result = compare_launched(how, args.arm, args.workload, args.out, opts, live=live,
                                  before_load=lambda: _advise(args.workload, opts))
    else:
        if extra:
            raise ConfigError("extra vLLM arguments after -- need --launch")
        result = compare_arms(_url_arms(args.arm, "(or use --launch)"), args.workload,
                              args.out, opts, live=live,
                             before_load=lambda: _advise(args.workload, opts))
    return print_result(result)


def _advise(workload: str, opts: CompareOptions) -> None:
    """The warmup and thin-window warnings of a closed-loop comparison, before its load."""
    from replay.cli._warmup import print_advice

    if opts.rates is None:
        print_advice(workload, warmup_s=opts.warmup_s, users=min(opts.levels),
                     duration_s=opts.duration_s, think_scale=opts.think_scale,
                     think_time_cap_s=opts.think_time_cap_s,
                     scenario=opts.scenario)


def _scenario(args: argparse.Namespace, values: dict[str, object],
              rate: str | None) -> dict[str, object]:
    """The options with ``--scenario``'s rules filled in (as ``run`` does); refused
    before any server is probed when a flag or the workload contradicts them."""
    from replay.load import scenario_values
    from traces import read_header

    header = read_header(args.workload) if args.scenario else None
    out = scenario_values(args.scenario, args.scenario_unsafe, {**values, "rate": rate},
                          header, args.workload)
    out.pop("rate")
    return out


def _experiment(args: argparse.Namespace) -> int | None:
    """--config fills the flags, --save-config writes them (and ends the command);
    a comparison that runs stores its experiment file with its results."""

    from replay.ab import apply_experiment
    from replay.errors import ConfigError

    if args.config:
        apply_experiment(args, args.compare_defaults)
    missing = [f for f in ("arm", "workload", "duration", "out") if getattr(args, f) is None]
    if missing:
        raise ConfigError(f"--{missing[0]} is required (on the command line or in --config)")
    if args.save_config:
        from replay.cli._files import check_output_file

        check_output_file(args.save_config, "--save-config", args.force)
        _store_experiment(args, Path(args.save_config))
        print(f"wrote {args.save_config}; run it with: agentreplay compare --config "
              f"{args.save_config}")
        return 0
    return None


def _store_experiment(args: argparse.Namespace, target: object = None) -> None:
    """The experiment file, by default ``OUT/experiment.toml`` (once the settings are valid)."""

    from analysis import EXPERIMENT_FILE
    from replay.ab import experiment_toml
    from replay.errors import ConfigError

    path = Path(str(target)) if target is not None else Path(args.out) / EXPERIMENT_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(experiment_toml(args, args.compare_defaults), encoding="utf-8")
    except OSError as exc:
        from replay.cli import _WRITE_ERRNOS

        if exc.errno in _WRITE_ERRNOS:  # disk full, read-only: exit 4, as every write error
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None


def _search(args: argparse.Namespace, opts: CompareOptions, extra: list[str],
            live: Live, limits: SearchLimits) -> int:
    """``compare --search``: per arm and tier, the measured bracket around its capacity."""
    from rich.console import Console

    from replay.ab import parse_slo, search_capacity, search_lines
    from replay.errors import ConfigError

    if args.launch or extra:
        raise ConfigError("--search runs against servers already running (LABEL=URL arms); "
                          "it does not take --launch yet")
    if args.rate is not None:
        raise ConfigError("--search finds user counts (closed loop); it does not take --rate")
    searched = [parse_slo(t, "--search") for t in args.search]
    result = search_capacity(_url_arms(args.arm), args.workload, args.out, opts, searched,
                             start_users=opts.levels[0], limits=limits, live=live)
    console = Console(stderr=False)
    for line in search_lines(result):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for line in stored_decision(result.out) or []:  # the report's decision, ratio included
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"report: {result.report}", markup=False, highlight=False, soft_wrap=True)
    # a search that stopped on an invalid probe has no answer for that tier: exit 3 says
    # so; one that ran out of probes answered with the bracket it reached (exit 0)
    from replay.cli import EXIT_INVALID, print_validity

    print_validity(result.validity, "search", simulated=result.simulated)  # the last word
    return EXIT_INVALID if any(a.ended == "invalid" for a in result.answers) else 0


def _url_arms(texts: list[str], hint: str = "") -> list[tuple[str, str]]:
    """``LABEL=URL`` arms as (label, url) pairs; one line naming the bad one."""
    from replay.errors import ConfigError
    from replay.load import split_targets

    arms = []
    for text in texts:
        label, sep, url = text.partition("=")
        if not sep or not label or not url:
            raise ConfigError(f"--arm {text!r}: give LABEL=URL {hint}".rstrip())
        split_targets(url, f"--arm {label}")  # LABEL=URL1,URL2: a fleet, checked here
        arms.append((label, url))
    return arms
