"""``agentreplay report`` and ``agentreplay plan``: read result directories, write or print.

All computation is in ``analysis``; this module parses options, writes the
report, ``summary.json`` and ``requests.csv``, and prints with rich.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analysis import Comparison, RunData, SloTier

__all__ = ["register"]


def _tiers(values: list[str] | None) -> tuple[SloTier, ...]:
    from analysis import DEFAULT_TIERS, parse_tier

    return tuple(parse_tier(v) for v in values) if values else DEFAULT_TIERS


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="RUN_OR_COMPARISON_DIR",
                   help="run directories, or directories containing run directories")
    p.add_argument("--slo", action="append", metavar="FLOOR:TTFT",
                   help="SLO tier: P90 interactivity floor (tok/s/user) and P90 TTFT ceiling "
                        "(s), e.g. 100:10; repeatable (default 30:15, 100:15, 300:15)")
    p.add_argument("--allow-unfair", action="store_true",
                   help="report arms whose server configs differ beyond the decode backend "
                        "(every section then carries a warning)")
    p.add_argument("--baseline", metavar="LABEL",
                   help="arm label used as the baseline (default: 'auto' if present)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")


def register(subparsers: argparse._SubParsersAction) -> None:
    rep = subparsers.add_parser(
        "report", help="write a self-contained HTML report (plus summary.json, requests.csv)",
        description="Analyse runs and write one self-contained HTML report, with "
                    "summary.json and requests.csv next to it.")
    _common(rep)
    rep.add_argument("-o", "--output", metavar="report.html",
                     help="report file (default: report.html in the first directory given)")
    rep.add_argument("--no-charts", action="store_true", help="skip the charts (faster)")
    rep.set_defaults(func=run_report)
    plan = subparsers.add_parser(
        "plan", help="print the capacity table: users per arm meeting each SLO tier",
        description="Capacity planning from a sweep of concurrency levels.")
    _common(plan)
    plan.set_defaults(func=run_plan)


def _analyse(args: argparse.Namespace) -> tuple[list[RunData], Comparison]:
    from analysis import compare_runs, read_runs

    runs = read_runs(args.paths)
    comparison = compare_runs(runs, allow_unfair=args.allow_unfair, baseline=args.baseline,
                              tiers=_tiers(args.slo), seed=args.seed)
    return runs, comparison


def run_report(args: argparse.Namespace) -> int:
    from rich.console import Console

    from analysis import render_report, requests_csv

    console = Console(stderr=True)
    runs, comparison = _analyse(args)
    out = Path(args.output) if args.output else Path(args.paths[0]) / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = out.with_name("summary.json")
    csv_path = out.with_name("requests.csv")
    html = render_report(comparison, runs, charts=not args.no_charts,
                         data_files=(summary.name, csv_path.name))
    out.write_text(html, encoding="utf-8")
    summary.write_text(comparison.model_dump_json(indent=2), encoding="utf-8")
    csv_path.write_text(requests_csv(runs), encoding="utf-8")
    if comparison.fairness.overridden:
        console.print(f"[bold red]warning:[/] {comparison.fairness.sentence}")
    if comparison.incomplete:
        console.print("[yellow]warning:[/] some runs are incomplete: "
                      + "; ".join(comparison.reasons), markup=False)
    console.print(comparison.verdict, markup=False, highlight=False)
    console.print(f"wrote {out}, {summary.name}, {csv_path.name}", markup=False)
    return 0


def run_plan(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    _, comparison = _analyse(args)
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table to 80 columns
        console.width = 160
    if comparison.fairness.overridden:
        console.print(f"warning: {comparison.fairness.sentence}", style="bold red",
                      markup=False)
    if comparison.simulated:
        console.print("SIMULATED runs: numbers from a performance model, not GPUs",
                      style="yellow", markup=False)
    table = Table(title="Capacity: largest user count meeting each SLO tier")
    for col in ("tier", "arm", "users", "how", "GPUs", "users/GPU", "decode tok/s/GPU",
                "levels"):
        table.add_column(col, justify="right" if col not in ("tier", "arm", "how") else "left")

    def num(v: float | None, digits: int) -> str:
        return "n/a" if v is None else f"{v:,.{digits}f}"

    for r in comparison.capacity:
        table.add_row(Text(r.tier.label), Text(r.arm), num(r.users, 1), r.how,
                      "n/a" if r.gpu_count is None else str(r.gpu_count),
                      num(r.users_per_gpu, 2), num(r.decode_tok_s_per_gpu, 1),
                      Text(", ".join(str(u) for u in r.levels)))
    console.print(table)
    return 0
