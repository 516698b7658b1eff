"""What ``compare`` and ``demo`` share on the terminal: the live-view flags and the
verdict, report path and validity printed when a comparison ends."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.text import plural

if TYPE_CHECKING:
    from replay.ab import CompareResult, Live

__all__ = ["live_flags", "live_mode", "print_result", "stored_decision"]


def live_flags(p: argparse.ArgumentParser) -> None:
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quiet", action="store_true", help="no live view")
    mode.add_argument("--plain", action="store_true", help="periodic log lines (CI, non-TTY)")


def live_mode(args: argparse.Namespace) -> Live:

    if args.quiet:
        return "quiet"
    if args.plain or not sys.stderr.isatty():
        return "plain"
    return "rich"


def print_result(result: CompareResult) -> int:
    """Verdict and report path on stdout (progress went to stderr), then the
    comparison's validity; exit 3 when it is invalid."""
    from rich.console import Console

    from replay.cli import print_validity

    console = Console(stderr=False)
    fairness = result.fairness_sentence
    if fairness.startswith("UNFAIR"):
        console.print(f"warning: {fairness}", style="bold red", markup=False, soft_wrap=True)
    sim = "[SIMULATED] " if _simulated(result.out / "summary.json") else ""
    for line in stored_decision(result.out) or [sim + result.verdict]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"report: {result.report}", markup=False, highlight=False, soft_wrap=True)
    _print_scenario(result.out / "summary.json")
    _print_acceptance(result.out / "summary.json", console)
    return print_validity(result.validity, "comparison", simulated=bool(sim))


def stored_decision(out: Path) -> list[str] | None:
    """The decision lines (``analysis.report.decide``) of the comparison stored in
    ``out/summary.json``, with a stored twin plan beside it; the very lines the report
    opens with. None when the file is missing or unreadable."""
    import orjson
    from pydantic import ValidationError

    from analysis import Comparison
    from analysis.report import TWIN_PLAN_FILE, decide

    try:
        comparison = Comparison.model_validate_json((out / "summary.json").read_bytes())
    except (OSError, ValidationError):
        return None
    twin = None
    try:
        twin = orjson.loads((out / TWIN_PLAN_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        pass
    return decide(comparison, twin if isinstance(twin, dict) else None).lines()


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
        f"NOT satisfied ({plural(len(notes), 'reason')} in {summary.name})"
    print(f"agentreplay: scenario {name}: {state}", file=sys.stderr)
