"""What ``report`` and ``plan`` share: the flags that choose how results are judged, and
reading result directories into one comparison (``analysis``) with those rules."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analysis import Comparison, Rules, RunData, SloTier

__all__ = [
    "EXIT_INVALID", "add_failure_share_flag", "analyse", "check_seed", "common_flags",
    "experiment_slo", "experiment_value", "invalid", "rejudged", "rules", "stored_twin",
    "tiers", "verdict_lines",
]

EXIT_INVALID = 3


def tiers(values: list[str] | None, flag: str = "--slo") -> tuple[SloTier, ...]:
    """The tiers given (``FLOOR:TTFT`` each), else the default three; a bad one is a
    one-line error naming ``flag`` and the form to write."""
    from analysis import DEFAULT_TIERS
    from replay.ab import parse_slo

    if not values:
        return DEFAULT_TIERS
    return tuple(parse_slo(v, flag) for v in values)


def common_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--slo", action="append", metavar="FLOOR:TTFT",
                   help="SLO tier: P90 interactivity floor (tok/s/user) and P90 TTFT ceiling "
                        "(s), e.g. 100:10; repeatable (default: 30:15, 100:15 and 300:15)")
    p.add_argument("--allow-unfair", action="store_true",
                   help="report arms whose server configs differ beyond the decode backend "
                        "(every section then carries a warning) (default: refuse)")
    p.add_argument("--baseline", metavar="LABEL",
                   help="arm label used as the baseline (default: 'auto' if present, "
                        "else the first label)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    add_failure_share_flag(p)


def add_failure_share_flag(p: argparse.ArgumentParser) -> None:
    """``--max-failure-share`` (``report``, ``plan``), as ``compare`` declares it."""
    from replay.ab import CompareOptions
    from replay.knobs import add_knob_flags

    add_knob_flags(p, CompareOptions, ("max_failure_share",))


def rules(args: argparse.Namespace, directory: str) -> Rules:
    """The analysis thresholds: ``--max-failure-share``, or when left at its default
    the experiment file's value stored with the results."""
    from analysis import DEFAULT_MAX_FAILURE_SHARE, Rules
    from replay.errors import ConfigError

    share = args.max_failure_share
    if share == DEFAULT_MAX_FAILURE_SHARE:
        share = experiment_value(directory, "max_failure_share", share)
    if not 0 <= share <= 1:
        raise ConfigError(f"--max-failure-share: must be between 0 and 1, got {share}")
    return Rules(max_failure_share=share)


def check_seed(seed: int) -> None:
    """``--seed`` within what the bootstrap's generator takes: one line, not numpy's
    traceback after the runs were read."""
    if not 0 <= seed <= 2**63 - 1:
        from replay.errors import ConfigError

        raise ConfigError(f"--seed: must be between 0 and 2**63-1, got {seed}")


def analyse(args: argparse.Namespace, paths: list[str]) -> tuple[list[RunData], Comparison]:
    from analysis import compare_runs, read_runs
    from replay.ab import missing_runs
    from replay.load import rejudge_scenarios

    check_seed(args.seed)
    runs = read_runs(paths)
    rejudge_scenarios(runs)  # stamps that summarise a run: from its evidence
    missing = missing_runs(Path(paths[0])) if len(paths) == 1 else []
    comparison = compare_runs(runs, allow_unfair=args.allow_unfair, baseline=args.baseline,
                              tiers=tiers(args.slo or experiment_slo(paths[0])),
                              seed=args.seed, rules=rules(args, paths[0]), missing=missing)
    return runs, comparison


def experiment_slo(directory: str) -> list[str] | None:
    """The SLO tiers of the experiment file stored with the results, if any."""
    slo = experiment_value(directory, "slo", None)
    return list(slo) if slo else None


def rejudged(args: argparse.Namespace, directory: str) -> str | None:
    """When ``--slo`` judges other tiers than the comparison was run with (its stored
    experiment's ``slo``, else the defaults): one sentence saying so, else None."""
    if not args.slo:
        return None
    given, stored = tiers(args.slo), tiers(experiment_slo(directory), "slo in experiment.toml")
    if set(given) == set(stored):
        return None
    return ("re-judged: --slo " + ", ".join(t.name for t in given) + " instead of the SLO "
            "tiers the comparison was run with (" + ", ".join(t.name for t in stored) + ")")


def experiment_value(directory: str, key: str, default: Any) -> Any:
    """One setting of the experiment file stored with the results, else ``default``."""
    import sys

    from analysis import EXPERIMENT_FILE
    from replay.ab import load_experiment
    from replay.errors import ConfigError

    path = Path(directory) / EXPERIMENT_FILE
    if not path.is_file():
        return default
    try:
        return load_experiment(path, "stored experiment file").get(key, default)
    except ConfigError as exc:  # the results are still reportable: say so (once), go on
        if str(path) not in _NOTED:
            _NOTED.add(str(path))
            print(f"agentreplay: note: {exc}; its settings are not used for this report",
                  file=sys.stderr)
        return default


_NOTED: set[str] = set()


def verdict_lines(c: Comparison, twin: dict[str, Any] | None = None) -> list[str]:
    """The decision (``analysis.report.decide``: the lines report.html opens with),
    then each validity check that found something."""
    from analysis.report import decide, validity_view

    v = validity_view(c, [])
    lines = list(decide(c, twin).lines())
    for g in v.get("groups", []):
        more = f" (and {g['count'] - 1} more like it)" if g["count"] > 1 else ""
        lines.append(f"  {g['severity']} [{g['code']}]: {g['example']}{more}")
    return lines


def stored_twin(directory: str) -> dict[str, Any] | None:
    """The twin plan ``plan --twin ... DIR`` stored in ``directory`` (None: none, or
    unreadable; the report says which)."""
    import orjson

    from analysis.report import TWIN_PLAN_FILE

    try:
        data = orjson.loads((Path(directory) / TWIN_PLAN_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def invalid(c: Comparison) -> bool:
    v = getattr(c, "validity", None)
    return v is not None and v.verdict == "invalid"
