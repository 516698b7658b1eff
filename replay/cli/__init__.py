"""The ``agentreplay`` command: a thin adapter from argv to library calls.

Each subcommand lives in a private module of this package that defines
``register(subparsers)``; the module's parser sets ``func`` to a callable
``(argparse.Namespace) -> int``. Modules are discovered, so adding a command
touches one file. User errors end with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    from replay._version import __version__

    parser = argparse.ArgumentParser(
        prog="agentreplay",
        description="Replay coding-agent traffic against vLLM servers and compare them.",
    )
    parser.add_argument("--version", action="version", version=f"agentreplay {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") and not info.name.startswith("__"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            register = getattr(module, "register", None)
            if register is not None:
                register(sub)
    return parser


def _user_error_types() -> tuple[type[BaseException], ...]:
    from analysis._errors import ResultError
    from replay.errors import UserError
    from traces._errors import TraceError

    return (UserError, TraceError, ResultError)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(func(args) or 0)
    except _user_error_types() as exc:
        print(f"agentreplay: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("agentreplay: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
