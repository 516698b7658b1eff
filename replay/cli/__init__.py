"""The ``agentreplay`` command: a thin adapter from argv to library calls.

Each subcommand lives in a private module of this package that defines
``register(subparsers)``; the module's parser sets ``func`` to a callable
``(argparse.Namespace) -> int``. Modules are discovered, so adding a command
touches one file. User errors end with one line on stderr and exit code 2.
"""

from __future__ import annotations

# isort: off
# First, before any slower import: when this process is the agentreplay program, a
# Ctrl-C from here until the command starts exits 130 in one line (see _startup).
from replay.cli import _startup
# isort: on

import argparse
import errno
import importlib
import pkgutil
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from analysis import Validity

__all__ = [
    "EXIT_INTERRUPTED", "EXIT_INVALID", "EXIT_OK", "EXIT_TERMINATED", "EXIT_USAGE",
    "EXIT_WRITE", "build_parser", "main", "print_validity", "unknown_flag",
]

EXIT_OK = 0
"""Done; the result is valid or carries caveats."""
EXIT_USAGE = 2
"""Bad input, printed as one line naming the flag or file."""
EXIT_INVALID = 3
"""A run or comparison stamped invalid (its reasons are printed)."""
EXIT_WRITE = 4
"""The results could not be written (disk full, read-only, no permission)."""
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
"""Stopped by SIGTERM, in order (the run closed and marked interrupted)."""
_RESUME_HINT = {
    "compare": "; run the same command again to resume (complete runs are kept)",
}
"""What to do after an interrupt, for the commands that can pick up where they stopped."""
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG})


def build_parser() -> argparse.ArgumentParser:
    from replay._version import __version__

    parser = _Parser(
        prog="agentreplay",
        description="Replay coding-agent traffic against vLLM servers and compare them.",
    )
    parser.add_argument("--version", action="version", version=f"agentreplay {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")  # subparsers are _Parser
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") and not info.name.startswith("__"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            register = getattr(module, "register", None)
            if register is not None:
                register(sub)
    return parser


class _HelpFormatter(argparse.HelpFormatter):
    """Shows an option's default in its help unless the help already speaks of it;
    flags (store_true) and options without a default stay as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings or action.nargs == 0
            or default is None or default is argparse.SUPPRESS
            or "default" in text.lower()
        ):
            return action.help
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """Every parser and subparser of the command shares the help formatter, and names
    a misspelt flag (with the nearest real one) before any other complaint: argparse
    alone says "--duration is required" when the user typed ``--duraton``."""

    argv: Sequence[str] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        """One line on stderr, exit 2: the command's name and what is wrong, no usage
        (``--help`` shows it); the root parser speaks for the subcommand typed."""
        unknown = unknown_flag(_Parser.argv, self._flags_for(_Parser.argv))
        if unknown is not None:
            message = unknown
        message = _plain(message)
        self.exit(EXIT_USAGE, f"{self._command_prog(_Parser.argv)}: error: {message}\n")

    def _command_prog(self, argv: Sequence[str]) -> str:
        """The prog of the deepest subcommand named in ``argv`` (``agentreplay compare``)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for token in argv:
                    chosen = action.choices.get(token)
                    if isinstance(chosen, _Parser):
                        return chosen._command_prog(argv)
        return self.prog

    def typed_dests(self, argv: Sequence[str]) -> frozenset[str]:
        """The destinations of the flags typed in ``argv``: these win over ``--config``
        even when typed at their default value (``--repeats 1`` over a file's 2)."""
        actions = self._actions_for(argv)
        dests = set()
        for token in argv:
            if token == "--":
                break
            action = actions.get(token.split("=", 1)[0]) if token.startswith("-") else None
            if action is not None:
                dests.add(action.dest)
        return frozenset(dests)

    def _actions_for(self, argv: Sequence[str]) -> dict[str, argparse.Action]:
        actions = dict(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for token in argv:
                    chosen = action.choices.get(token)
                    if isinstance(chosen, _Parser):
                        return actions | chosen._actions_for(argv)
        return actions

    def _flags_for(self, argv: Sequence[str]) -> list[str]:
        """This parser's flags and those of the subcommands named in ``argv`` (the root
        parser reports extras left over by a subcommand)."""
        flags = list(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for token in argv:
                    chosen = action.choices.get(token)
                    if isinstance(chosen, _Parser):
                        return flags + chosen._flags_for(argv)
        return flags


_BAD_VALUE = re.compile(r"argument (?P<flag>[^:]+): invalid (?P<kind>float|int|choice)(?: value)?: "
                        r"(?P<value>'.*?')(?: \(choose from (?P<choices>.*)\))?$")


def _plain(message: str) -> str:
    """argparse's "argument --duration: invalid float value: '10s'" as the flag, the value
    and what to give instead (``--duration '10s': give a number, e.g. 10``)."""
    m = _BAD_VALUE.match(message)
    if m is None:
        return message
    flag = m["flag"].split("/")[-1]
    want = {"float": "give a number, e.g. 10", "int": "give a whole number, e.g. 4"}.get(
        m["kind"], "choose one of " + (m["choices"] or "").replace("'", ""))
    return f"{flag} {m['value']}: {want}"


def unknown_flag(argv: Sequence[str], known: Sequence[str]) -> str | None:
    """The first flag in ``argv`` (before ``--``) that is not in ``known``, as a message
    with the closest known flag; None when every flag is known."""
    import difflib

    longs = [k for k in known if k.startswith("--")]
    for token in argv:
        if token == "--":
            break
        short = not token.startswith("--") and token[1:2].isalpha() and token[0] == "-"
        if not token.startswith("--") and not short:
            continue
        flag = token.split("=", 1)[0]
        if flag in known:
            continue
        if short and len(flag) == 2:  # -o where this command spells it --out
            close = [k for k in longs if k[2:3] == flag[1]][:1]
        else:
            close = difflib.get_close_matches("-" + flag if short else flag, longs, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return f"unrecognized argument {flag}{hint}"
    return None


def _user_error_types() -> tuple[type[BaseException], ...]:
    from replay.errors import UserError
    from traces import LocatedError  # TraceError and analysis.ResultError

    return (UserError, LocatedError)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code.

    Called with no ``argv``, this process is the program: Ctrl-C before the command
    runs, or after it has returned, exits quietly (``_startup``)."""
    program = argv is None
    if program:
        _startup.quiet_until_started()
    try:
        code = _parse_and_call(argv)
    except SystemExit as exc:  # argparse: --help, --version, a usage error
        if program:
            _startup.command_ended(exc.code if isinstance(exc.code, int) else EXIT_USAGE)
        raise
    except KeyboardInterrupt:  # between the hand-over and the command's own handling
        print("agentreplay: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    if program:
        _startup.command_ended(code)
    return code


def _parse_and_call(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    _Parser.argv = list(sys.argv[1:] if argv is None else argv)
    for token in _Parser.argv:
        if token == "--":
            break
        if token.startswith("--") and token.endswith("=--"):  # argparse would hand over []
            parser.error(f"{token[:-3]}: '--' is not a value; give one after the flag")
    args = parser.parse_args(argv)
    args.typed = parser.typed_dests(_Parser.argv) if isinstance(parser, _Parser) else frozenset()
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return EXIT_USAGE
    from replay.cli._signals import exit_code, stop_signals

    _startup.command_starts()  # Ctrl-C is KeyboardInterrupt again: the command stops in order
    with stop_signals() as received:  # SIGTERM/SIGHUP stop in order, as Ctrl-C does
        return exit_code(_call(func, args), received)


def _call(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """Run a subcommand; user errors, interrupts and write errors become exit codes."""
    try:
        return int(func(args) or 0)
    except _user_error_types() as exc:
        print(f"agentreplay: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("agentreplay: interrupted" + _RESUME_HINT.get(str(getattr(args, "command", "")), ""),
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        if exc.errno not in _WRITE_ERRNOS:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        print(f"agentreplay: error: cannot write{where}: {exc.strerror}", file=sys.stderr)
        return EXIT_WRITE


def print_validity(validity: Validity | None, what: str, *, simulated: bool = False) -> int:
    """Print a run's or comparison's verdict and reasons (stderr); the exit code."""
    if validity is None:
        return EXIT_OK
    sim = "[SIMULATED] " if simulated else ""
    print(f"agentreplay: {sim}{what} {validity.verdict}", file=sys.stderr)
    for reason in validity.reasons:
        print(f"  {reason.severity}: {reason.message} [{reason.code}]", file=sys.stderr)
    return EXIT_INVALID if validity.verdict == "invalid" else EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
