"""``agentreplay compare`` and ``agentreplay demo``: A/B comparisons end to end."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analysis import Validity
    from replay.ab import CompareOptions, CompareResult, Live, SearchLimits
    from replay.launch import LaunchSettings

__all__ = ["register"]


def _live_flags(p: argparse.ArgumentParser) -> None:
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quiet", action="store_true", help="no live view")
    mode.add_argument("--plain", action="store_true", help="periodic log lines (CI, non-TTY)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from replay.ab import CompareOptions, SearchLimits
    from replay.knobs import add_knob_flags
    from replay.launch import LaunchSettings
    from replay.load import SharedSettings

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
    _live_flags(p)
    add_knob_flags(p.add_argument_group("load settings (the same flags in run)"),
                   SharedSettings, required=False)
    add_knob_flags(p.add_argument_group("the comparison"), CompareOptions,
                   CompareOptions.model_fields.keys() - SharedSettings.model_fields.keys())
    p.set_defaults(func=_compare)
    p.set_defaults(compare_defaults={a.dest: a.default for a in p._actions})

    d = subparsers.add_parser(
        "demo", help="compare two simulated servers end to end (about a minute)",
        description="Start two simulated vLLM servers (decode backends auto and "
        "latency_specialized), run a short comparison and write report.html.")
    d.add_argument("--out", default="results/demo", help="output directory")
    d.add_argument("--quick", action="store_true", help="fewer levels, shorter runs")
    d.add_argument("--force", action="store_true",
                   help="replace a previous demo in --out (without it, one is refused)")
    _live_flags(d)
    d.set_defaults(func=_demo)


def _live(args: argparse.Namespace) -> Live:
    import sys

    if args.quiet:
        return "quiet"
    if args.plain or not sys.stderr.isatty():
        return "plain"
    return "rich"


def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from replay.ab import (
        CompareOptions,
        SearchLimits,
        check_search_start,
        parse_levels,
        parse_rates,
    )
    from replay.errors import ConfigError
    from replay.knobs import from_knobs, knob_values
    from replay.launch import LaunchSettings
    from replay.load import check_writable_dir, validated

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
    live = _live(args)
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
    return _print(result)


def _advise(workload: str, opts: CompareOptions) -> None:
    """The warmup and thin-window warnings of a closed-loop comparison, before its load."""
    from replay.cli._warmup import print_advice

    if opts.rates is None:
        print_advice(workload, warmup_s=opts.warmup_s, users=min(opts.levels),
                     duration_s=opts.duration_s, think_scale=opts.think_scale,
                     think_cap_s=opts.think_time_cap_s)


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
    from pathlib import Path

    from replay.ab import apply_experiment
    from replay.errors import ConfigError

    if args.config:
        apply_experiment(args, args.compare_defaults)
    missing = [f for f in ("arm", "workload", "duration", "out") if getattr(args, f) is None]
    if missing:
        raise ConfigError(f"--{missing[0]} is required (on the command line or in --config)")
    if args.save_config:
        from replay.cli._files import refuse_existing

        refuse_existing(args.save_config, "--save-config", args.force)
        _store_experiment(args, Path(args.save_config))
        print(f"wrote {args.save_config}; run it with: agentreplay compare --config "
              f"{args.save_config}")
        return 0
    return None


def _store_experiment(args: argparse.Namespace, target: object = None) -> None:
    """The experiment file, by default ``OUT/experiment.toml`` (once the settings are valid)."""
    from pathlib import Path

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

    from analysis import parse_tier
    from replay.ab import search_capacity, search_lines
    from replay.errors import ConfigError

    if args.launch or extra:
        raise ConfigError("--search runs against servers already running (LABEL=URL arms); "
                          "it does not take --launch yet")
    if args.rate is not None:
        raise ConfigError("--search finds user counts (closed loop); it does not take --rate")
    if any(":" not in t for t in args.search):
        raise ConfigError("--search takes FLOOR:TTFT, both parts, e.g. --search 100:15")
    result = search_capacity(_url_arms(args.arm), args.workload, args.out, opts,
                             [parse_tier(t) for t in args.search],
                             start_users=opts.levels[0], limits=limits, live=live)
    console = Console(stderr=False)
    for line in search_lines(result):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"report: {result.report}", markup=False, highlight=False, soft_wrap=True)
    # a search that stopped on an invalid probe has no answer for that tier: exit 3 says
    # so; one that ran out of probes answered with the bracket it reached (exit 0)
    from replay.cli import EXIT_INVALID, print_validity

    print_validity(result.validity, "search", simulated=result.simulated)  # the last word
    return EXIT_INVALID if any(a.ended == "invalid" for a in result.answers) else 0


def _print(result: CompareResult) -> int:
    """Verdict and report path on stdout (progress went to stderr), then the
    comparison's validity; exit 3 when it is invalid."""
    from rich.console import Console

    from replay.cli import print_validity

    console = Console(stderr=False)
    fairness = result.fairness_sentence
    if fairness.startswith("UNFAIR"):
        console.print(f"warning: {fairness}", style="bold red", markup=False, soft_wrap=True)
    sim = "[SIMULATED] " if _simulated(result.out / "summary.json") else ""
    console.print(sim + result.verdict, markup=False, highlight=False, soft_wrap=True)
    console.print(f"report: {result.report}", markup=False, highlight=False, soft_wrap=True)
    _print_scenario(result.out / "summary.json")
    _print_acceptance(result.out / "summary.json", console)
    return print_validity(result.validity, "comparison", simulated=bool(sim))


def _print_acceptance(summary: Path, console: Any) -> None:
    """Per arm and level, the measured speculative acceptance length beside the claimed
    one (only where either is known)."""
    import orjson

    from replay.cli._run_summary import acceptance_line

    try:
        data = orjson.loads(summary.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return
    for lv in data.get("levels") or [] if isinstance(data, dict) else []:
        label = (lv.get("load") or {}).get("label", "?")
        for arm, s in (lv.get("arms") or {}).items():
            spec = s.get("speculation") or {}
            line = acceptance_line(spec.get("acceptance_length"),
                                   spec.get("claimed_acceptance_length"))
            if line:
                console.print(f"{arm} at {label}: {line}", markup=False, highlight=False,
                              soft_wrap=True)


def _simulated(summary: Path) -> bool:
    """Whether the comparison's runs were served by the simulator (summary.json says)."""
    import orjson

    try:
        data = orjson.loads(summary.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(data, dict) and bool(data.get("simulated"))


def _print_scenario(summary: Path) -> None:
    """One line on stderr when the comparison ran under ``--scenario``: whether every
    run satisfied it (the reasons are in summary.json and the report)."""
    import sys

    import orjson

    try:
        data = orjson.loads(summary.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return
    name = data.get("scenario") if isinstance(data, dict) else None
    if not name:
        return
    notes = data.get("scenario_notes") or []
    state = "satisfied" if data.get("scenario_satisfied") else \
        f"NOT satisfied ({len(notes)} reason(s) in {summary.name})"
    print(f"agentreplay: scenario {name}: {state}", file=sys.stderr)


def _demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from replay.ab import run_demo
    from replay.errors import ConfigError
    from replay.load import check_writable_dir

    out = Path(args.out)
    if not args.force and ((out / "comparison.json").exists() or (out / "runs").exists()):
        raise ConfigError(f"--out {out}: holds a previous demo; --force replaces it, "
                          "or give another --out")
    check_writable_dir(out)
    result = run_demo(args.out, quick=args.quick, live=_live(args))
    code = _print(result)
    hint = demo_flag_hint(result.validity)
    if hint:
        print(f"agentreplay: {hint}", file=sys.stderr)
    return code


def demo_flag_hint(validity: Validity | None) -> str | None:
    """The demo's settings are fixed: a fix named by a reason (``--warmup``, ...) is
    one the user can only apply with ``compare``; say so once, with the command."""
    import re

    flags = sorted({f for r in (validity.reasons if validity else [])
                    for f in re.findall(r"--[a-z][a-z-]+", r.message)})
    if not flags:
        return None
    return (f"the demo's settings are fixed, so the fixes named above ({', '.join(flags)}) "
            "apply to `agentreplay compare`: the README's 'Comparing two server "
            "configurations' runs the same comparison with your own settings")


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
