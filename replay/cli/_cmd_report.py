"""``agentreplay report`` and ``agentreplay plan``: read result directories, write or print.

All computation is in ``analysis``; this module parses options, writes the
report and its data files (``analysis.report_bundle``), and prints with rich.
One directory gives a report (a comparison, or a run report for one run);
several give a history view side by side (same workload, or ``--allow-mixed``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analysis import Comparison, Rules, RunData, SloTier

__all__ = ["register"]

EXIT_INVALID = 3


def _tiers(values: list[str] | None) -> tuple[SloTier, ...]:
    from analysis import DEFAULT_TIERS, parse_tier

    if not values:
        return DEFAULT_TIERS
    return tuple(parse_tier(v) for v in values)


def _common(p: argparse.ArgumentParser) -> None:
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


def _rules(args: argparse.Namespace, directory: str) -> Rules:
    """The analysis thresholds: ``--max-failure-share``, or when left at its default
    the experiment file's value stored with the results."""
    from analysis import DEFAULT_MAX_FAILURE_SHARE, Rules
    from replay.errors import ConfigError

    share = args.max_failure_share
    if share == DEFAULT_MAX_FAILURE_SHARE:
        share = _experiment_value(directory, "max_failure_share", share)
    if not 0 <= share <= 1:
        raise ConfigError(f"--max-failure-share: must be between 0 and 1, got {share}")
    return Rules(max_failure_share=share)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rep = subparsers.add_parser(
        "report", help="write a self-contained HTML report (plus summary.json, levels.csv, "
                       "requests.csv); several directories: a history view",
        description="Analyse runs and write one self-contained HTML report, decision first, "
                    "with summary.json, levels.csv, requests.csv and summary.schema.json next "
                    "to it. Given several comparison or run directories, write a history "
                    "view (history.html, history.json) that puts them side by side; they "
                    "must have replayed the same workload unless --allow-mixed.")
    rep.add_argument("paths", nargs="+", metavar="DIR",
                     help="a run or comparison directory; several for a history view")
    _common(rep)
    rep.add_argument("-o", "--output", metavar="FILE.html",
                     help="report file (default: report.html, or history.html for several "
                          "directories, in the first directory given)")
    rep.add_argument("--no-charts", action="store_true",
                     help="skip the charts (faster) (default: draw them)")
    rep.add_argument("--allow-mixed", action="store_true",
                     help="history view of directories that replayed different workloads, "
                          "labelled as mixed (default: refuse)")
    rep.set_defaults(func=run_report)
    plan = subparsers.add_parser(
        "plan", help="print the capacity table: load per arm meeting each SLO tier",
        description="Capacity planning from a sweep of load levels: per arm and SLO tier, the "
                    "measured levels its capacity lies between (the largest level up to which "
                    "every level met the tier, the first that failed), and the arms' capacity "
                    "ratio as far as those brackets bound it. With --twin FILE the levels are "
                    "simulated on the twin (modelled, no server), each tier's capacity with "
                    "the twin's held-out error as a prediction interval, beside the "
                    "measured brackets of any DIR given.")
    plan.add_argument("paths", nargs="*", metavar="DIR",
                      help="run directories, or directories containing run directories")
    _common(plan)
    from replay.cli._twin_plan import add_twin_flags

    add_twin_flags(plan)
    plan.set_defaults(func=run_plan)


def _analyse(args: argparse.Namespace, paths: list[str]) -> tuple[list[RunData], Comparison]:
    from analysis import compare_runs, read_runs
    from replay.ab import missing_runs
    from replay.load import rejudge_scenarios

    runs = read_runs(paths)
    rejudge_scenarios(runs)  # stamps that summarise a run: from its evidence
    missing = missing_runs(Path(paths[0])) if len(paths) == 1 else []
    comparison = compare_runs(runs, allow_unfair=args.allow_unfair, baseline=args.baseline,
                              tiers=_tiers(args.slo or _experiment_slo(paths[0])),
                              seed=args.seed, rules=_rules(args, paths[0]), missing=missing)
    return runs, comparison


def _experiment_slo(directory: str) -> list[str] | None:
    """The SLO tiers of the experiment file stored with the results, if any."""
    slo = _experiment_value(directory, "slo", None)
    return list(slo) if slo else None


def _experiment_value(directory: str, key: str, default: Any) -> Any:
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


def _bundle_names(out: Path, default: Path) -> dict[str, str]:
    """The report's file names. Beside its results they are the plain names; anywhere
    else every companion carries the report's stem (``x.summary.json``), so a report
    written into another directory never replaces that directory's own files."""
    if out.name != "report.html":
        _not_a_result_name(out, out.name)
    names = {"report": out.name}
    if out.name != default.name or out.parent.resolve() != default.parent.resolve():
        stem = out.stem
        names.update(summary=f"{stem}.summary.json", levels=f"{stem}.levels.csv",
                     requests=f"{stem}.requests.csv", schema=f"{stem}.summary.schema.json")
    return names


def _not_a_result_name(out: Path, *names: str) -> None:
    """``-o`` never makes the report (or a companion) replace a run's own files."""
    from replay.errors import ConfigError
    from replay.load import RESULT_FILES

    for name in names:
        if name in RESULT_FILES or name == "comparison.json":
            raise ConfigError(f"-o {out}: would write {name}, a result file's name; name "
                              "the report something else, e.g. history.html")


def _write(out_dir: Path, files: dict[str, str]) -> None:
    import errno

    from replay.errors import UserError

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out_dir / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
            raise  # the disk failed, not the user: one line and exit 4 (replay.cli.main)
        raise UserError(f"cannot write the report into {out_dir}: {exc.strerror or exc}") \
            from None


def _verdict_lines(c: Comparison) -> list[str]:
    from analysis.report import validity_view, verdict_text

    v = validity_view(c, [])
    sim = "[SIMULATED] " if c.simulated else ""
    lines = [sim + verdict_text(c), f"{sim}validity: {v['verdict']}"]
    for g in v.get("groups", []):
        more = f" (and {g['count'] - 1} more like it)" if g["count"] > 1 else ""
        lines.append(f"  {g['severity']} [{g['code']}]: {g['example']}{more}")
    return lines


def _invalid(c: Comparison) -> bool:
    v = getattr(c, "validity", None)
    return v is not None and v.verdict == "invalid"


def _distinct(paths: list[str]) -> list[str]:
    """The paths without repeats (the same directory however spelled), said once."""
    import sys
    from collections import Counter

    seen: dict[Path, str] = {}
    for p in paths:
        seen.setdefault(Path(p).resolve(), p)
    counts = Counter(Path(p).resolve() for p in paths)
    again = [seen[r] for r, n in counts.items() if n > 1]
    if again:
        print(f"agentreplay: note: {', '.join(again)} given more than once; each is shown "
              "once", file=sys.stderr)
    return list(seen.values())


def run_report(args: argparse.Namespace) -> int:
    args.paths = _distinct(list(args.paths))
    if len(args.paths) > 1:
        return _run_history(args)
    from rich.console import Console

    from analysis import read_extras, report_bundle

    console = Console(stderr=True)
    runs, comparison = _analyse(args, args.paths)
    default = Path(args.paths[0]) / "report.html"
    out = Path(args.output) if args.output else default
    names = _bundle_names(out, default)
    files = report_bundle(comparison, runs, charts=not args.no_charts,
                          extras=read_extras(args.paths[0]), names=names)
    _write(out.parent, files)
    if comparison.fairness.overridden:
        console.print(f"[bold red]warning:[/] {comparison.fairness.sentence}")
    if comparison.reasons:
        console.print("[yellow]warning:[/] some runs are incomplete: "
                      + "; ".join(comparison.reasons), markup=False)
    if comparison.missing:
        from rich.markup import escape

        console.print(f"[yellow]warning:[/] the comparison was interrupted: "
                      f"{len(comparison.missing)} planned run(s) did not finish (no capacity "
                      "is claimed from them): " + escape("; ".join(comparison.missing)),
                      soft_wrap=True)
    for line in _verdict_lines(comparison):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {out} and {', '.join(n for n in files if n != out.name)}",
                  markup=False, highlight=False, soft_wrap=True)
    return EXIT_INVALID if _invalid(comparison) else 0


def _run_history(args: argparse.Namespace) -> int:
    import orjson
    from rich.console import Console

    from analysis.report import HistoryEntry, check_history, entry_names, render_history

    console = Console(stderr=True)
    entries = []
    for name, path in zip(entry_names(args.paths), args.paths, strict=True):
        runs, comparison = _analyse(args, [path])
        entries.append(HistoryEntry(name=name, path=str(path), comparison=comparison,
                                    runs=runs))
    mixed = check_history(entries, allow_mixed=args.allow_mixed)
    out = Path(args.output) if args.output else Path(args.paths[0]) / "history.html"
    _not_a_result_name(out, f"{out.stem}.json")
    payload = orjson.dumps(
        {"kind": "agentreplay-history", "mixed": mixed,
         "entries": [{"name": e.name, "path": e.path,
                      "comparison": e.comparison.model_dump(mode="json")} for e in entries]},
        option=orjson.OPT_INDENT_2).decode()
    _write(out.parent, {out.name: render_history(entries, mixed=mixed,
                                                 charts=not args.no_charts),
                        f"{out.stem}.json": payload})
    if mixed:
        console.print("warning: the entries replayed different workloads (--allow-mixed)",
                      style="bold red", markup=False)
    for e in entries:
        for line in _verdict_lines(e.comparison):
            console.print(f"{e.name}: {line}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {out} and {out.stem}.json", markup=False, highlight=False,
                  soft_wrap=True)
    return EXIT_INVALID if any(_invalid(e.comparison) for e in entries) else 0


def run_plan(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from analysis import capacity_view

    if args.twin is not None:
        return _twin_plan(args)
    if not args.paths:
        from replay.errors import ConfigError

        raise ConfigError("plan: give result directories (DIR ...), or --twin FILE with "
                          "--workload FILE to plan on a twin")
    _, comparison = _analyse(args, args.paths)
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table to 80 columns
        console.width = 160
    if comparison.fairness.overridden:
        console.print(f"warning: {comparison.fairness.sentence}", style="bold red",
                      markup=False)
    if comparison.simulated:
        console.print("[SIMULATED] runs served by a performance model, not GPUs",
                      style="yellow", markup=False)
    view = capacity_view(comparison)
    table = Table(caption="per GPU and decode tok/s/GPU: measured at the passing level",
                  title=f"Capacity: measured load ({view['unit']}) bracketing each SLO tier "
                        "(met at the lower level, failed at the upper; nothing interpolated)")
    table.add_column("tier")
    for a in view["arms"]:
        table.add_column(Text(f"{a or 'run'}: {view['unit']}"), justify="right")
        table.add_column("per GPU", justify="right")
        table.add_column("tok/s/GPU", justify="right")
    for o in view["others"]:
        head = f"{o} / {view['arms'][0]}"
        table.add_column(Text(head), justify="right", min_width=len(head))
    for row in view["rows"]:
        cells: list[Text | str] = [Text(row["tier"])]
        for x in row["arms"]:
            if x is None:
                cells += ["not measured", "", ""]
                continue
            cells += [Text(x["users"]), x["per_gpu"], x["decode"]]
        cells += [Text(r["value"]) for r in row["ratios"]]
        table.add_row(*cells)
    console.print(table)
    if view["others"]:
        console.print("ratio: capacity over the baseline's as bounded by the two brackets "
                      "(A in [a1, a2), B in [b1, b2): B/A between b1/a2 and b2/a1); unknown "
                      "when that range holds 1x (either arm may serve more)",
                      markup=False, highlight=False, soft_wrap=True)
    for line in _verdict_lines(comparison)[1:]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return EXIT_INVALID if _invalid(comparison) else 0


def _twin_plan(args: argparse.Namespace) -> int:
    from replay.cli._twin_plan import plan_settings, run_twin_plan
    from replay.errors import ConfigError

    if not 0 <= args.max_failure_share <= 1:
        raise ConfigError(f"--max-failure-share: must be between 0 and 1, got "
                          f"{args.max_failure_share}")
    plan = plan_settings(args)
    if not args.paths:
        return run_twin_plan(args, plan, _tiers(args.slo), args.max_failure_share)
    # measured runs given too: the twin is judged on their tiers, its capacities printed
    # beside their brackets (never instead of them)
    _, comparison = _analyse(args, args.paths)
    return run_twin_plan(args, plan, tuple(comparison.tiers), args.max_failure_share,
                         measured=comparison.capacity)
