"""``agentreplay demo``: two simulated servers compared end to end, on fixed settings."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from replay.cli._compare_out import live_flags, live_mode, print_result

if TYPE_CHECKING:
    from analysis import Validity

__all__ = ["demo_flag_hint", "register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    d = subparsers.add_parser(
        "demo", help="compare two simulated servers end to end (about two minutes)",
        description="Start two simulated vLLM servers (decode backends auto and "
        "latency_specialized), compare them at 4, 16 and 40 users and write report.html; "
        "it fits a twin per arm on that arm's runs and prints the decision the report opens "
        "with: per SLO tier each arm's measured capacity and users per GPU with its twin's "
        "modelled capacity beside it, their ratio, the validity and the interactivity "
        "verdict.")
    d.add_argument("--out", default="results/demo", help="output directory")
    d.add_argument("--quick", action="store_true",
                   help="4 and 16 users only (about a minute)")
    d.add_argument("--force", action="store_true",
                   help="replace a previous demo in --out (without it, one is refused)")
    live_flags(d)
    d.set_defaults(func=_demo)


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
    result = run_demo(args.out, quick=args.quick, live=live_mode(args))
    code = print_result(result)
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
