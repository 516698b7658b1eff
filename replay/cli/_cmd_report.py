"""``agentreplay report``: read result directories, write a report.

All computation is in ``analysis``; this module parses options, writes the
report and its data files (``analysis.report_bundle``), and prints with rich.
One directory gives a report (a comparison, or a run report for one run);
several give a history view side by side (same workload, or ``--allow-mixed``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.text import plural
from replay.cli._results import (
    EXIT_INVALID,
    analyse,
    common_flags,
    invalid,
    rejudged,
    stored_twin,
    verdict_lines,
)

__all__ = ["register"]


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
    common_flags(rep)
    rep.add_argument("-o", "--output", metavar="FILE.html",
                     help="report file (default: report.html in the directory given; for "
                          "several directories, history.html in the working directory)")
    rep.add_argument("--no-charts", action="store_true",
                     help="skip the charts (faster) (default: draw them)")
    rep.add_argument("--allow-mixed", action="store_true",
                     help="history view of directories that replayed different workloads, "
                          "labelled as mixed (default: refuse)")
    rep.set_defaults(func=run_report)


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
    from replay.cli._files import check_output_file

    args.paths = _distinct(list(args.paths))
    first = Path(args.paths[0])
    if args.output or first.is_dir():  # before the analysis: a bad path costs nothing
        name = "history.html" if len(args.paths) > 1 else "report.html"
        check_output_file(args.output or first / name, "-o", force=True)
    if len(args.paths) > 1:
        return _run_history(args)
    from rich.console import Console

    from analysis import read_extras, report_bundle

    console = Console(stderr=True)
    runs, comparison = analyse(args, args.paths)
    default = Path(args.paths[0]) / "report.html"
    out = Path(args.output) if args.output else default
    names = _bundle_names(out, default)
    extras = read_extras(args.paths[0])
    note = rejudged(args, args.paths[0])
    if note is not None:  # one directory, one set of tiers unless asked: say so
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
        extras = {"rejudged": {"title": "SLO tiers re-judged", "intro": note[0].upper()
                               + note[1:] + "."}, **extras}
    files = report_bundle(comparison, runs, charts=not args.no_charts,
                          extras=extras, names=names)
    _write(out.parent, files)
    if comparison.fairness.overridden:
        console.print(f"[bold red]warning:[/] {comparison.fairness.sentence}")
    if comparison.reasons:
        console.print("[yellow]warning:[/] some runs are incomplete: "
                      + "; ".join(comparison.reasons), markup=False)
    if comparison.missing:
        from rich.markup import escape

        console.print(f"[yellow]warning:[/] the comparison was interrupted: "
                      f"{plural(len(comparison.missing), 'planned run')} did not finish "
                      "(no capacity is claimed from them): "
                      + escape("; ".join(comparison.missing)),
                      soft_wrap=True)
    for line in verdict_lines(comparison, stored_twin(args.paths[0])):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {out} and {', '.join(n for n in files if n != out.name)}",
                  markup=False, highlight=False, soft_wrap=True)
    return EXIT_INVALID if invalid(comparison) else 0


def _run_history(args: argparse.Namespace) -> int:
    import orjson
    from rich.console import Console

    from analysis.report import HistoryEntry, check_history, entry_names, render_history

    console = Console(stderr=True)
    entries = []
    for name, path in zip(entry_names(args.paths), args.paths, strict=True):
        runs, comparison = analyse(args, [path])
        entries.append(HistoryEntry(name=name, path=str(path), comparison=comparison,
                                    runs=runs))
    mixed = check_history(entries, allow_mixed=args.allow_mixed)
    # several directories: none of them owns the view, so it goes where -o says or into
    # the working directory (never into the first directory, beside its own report)
    out = Path(args.output) if args.output else Path("history.html")
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
        for line in verdict_lines(e.comparison):
            console.print(f"{e.name}: {line}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {out} and {out.stem}.json", markup=False, highlight=False,
                  soft_wrap=True)
    return EXIT_INVALID if any(invalid(e.comparison) for e in entries) else 0
