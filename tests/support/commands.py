"""Running ``agentreplay`` in-process, as the fuzz and refusal tests do."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import signal

from replay.cli import build_parser, main

HANG_S = 30
USER_EXITS = (0, 2, 3)  # 3: the results read were stamped invalid
ERROR_LINE = re.compile(r"^agentreplay(?: [a-z][a-z-]*)*: error: ")
"""One refusal line: ``agentreplay: error: ...`` from a command, ``agentreplay run:
error: ...`` from its flag parser (which names the command)."""


class Hung(BaseException):
    """Raised by the alarm: the command neither finished nor refused."""


def call(argv: list[str]) -> tuple[int, str]:
    """``main(argv)`` in-process with output captured; argparse's exit becomes a code."""
    out, err = io.StringIO(), io.StringIO()

    def alarm(signum: int, frame: object) -> None:
        raise Hung(f"still running after {HANG_S} s: {argv}")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(HANG_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return code, err.getvalue()


def check_clean(code: int, err: str, argv: list[str]) -> None:
    """Exit 0, 2 or 3; a refusal is argparse's usage or exactly one line of ours."""
    assert code in USER_EXITS, (code, argv, err)
    assert "Traceback" not in err, (argv, err)
    if code == 2 and "usage:" not in err:
        lines = [ln for ln in err.splitlines() if ERROR_LINE.match(ln)]
        assert len(lines) == 1, (argv, err)


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every leaf subcommand by its words (``"traces inspect"``), read off the parser, so
    a command added later is covered by the tests that walk them."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, words: str) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and words:
            found[words] = parser
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, f"{words} {name}".strip())

    walk(build_parser(), "")
    return found
