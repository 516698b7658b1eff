"""Ctrl-C before a command has started, or after it has ended: exit quietly.

Python turns a SIGINT into ``KeyboardInterrupt`` wherever it lands. While the
``agentreplay`` command imports its modules and builds its parser (about a second,
before :func:`replay.cli.main` has any handler in place), that printed a traceback of
whatever import was running, and an import cut half-way (numpy's) could crash the
interpreter at exit (SIGSEGV). Nothing has started then, so there is nothing to stop
in order: the process ends at once, exit 130, after one line (SIGTERM likewise, exit
143, where it would otherwise end the process without a word). Once the command has
returned and its results are written, a Ctrl-C during interpreter shutdown ends the
process with the command's own exit code, silently.

The first line of ``replay.cli`` installs this when the process *is* the program (the
console script or ``python -m replay.cli``); a test or a library that imports
``replay.cli`` keeps its SIGINT as it was. ``main`` hands Ctrl-C back to Python's own
handler just before the command runs, where the command's in-order stop takes it (runs
closed and marked interrupted, servers stopped). A SIGINT the process inherited as
ignored (``cmd &`` in a script) stays ignored here, and so does an ignored SIGTERM.

What no package can reach is Python's own start: the ``site`` module and the ``.pth``
files of the environment run before any line of agentreplay (10-50 ms on a busy
machine); a Ctrl-C there ends in Python's "Fatal Python error: init_import_site".
This module imports only ``os``, ``sys`` and ``signal`` (half a millisecond).
"""

from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False  # not typing's: ``typing`` is a slow import of its own
if TYPE_CHECKING:
    from typing import Any

__all__ = ["command_ended", "command_starts", "is_the_program", "quiet_until_started"]

_PROGRAM_NAMES = frozenset({"agentreplay", "agentreplay.exe", "agentreplay-script.py"})
_INTERRUPTED = 130
_state: dict[int, Any] = {}
"""The handler each signal had before it was taken over."""


def is_the_program() -> bool:
    """True when this process was started as ``agentreplay`` (the console script) or
    ``python -m replay.cli``; False inside a test runner or a library's process."""
    if os.path.basename(sys.argv[0] if sys.argv else "") in _PROGRAM_NAMES:
        return True
    orig = list(getattr(sys, "orig_argv", ()))
    for i, arg in enumerate(orig):
        if arg == "-mreplay.cli" or (arg == "-m" and orig[i + 1:i + 2] == ["replay.cli"]):
            return True
    return False


_EXITS = {signal.SIGINT: (_INTERRUPTED, b"agentreplay: interrupted\n"),
          signal.SIGTERM: (128 + signal.SIGTERM, b"agentreplay: interrupted (SIGTERM)\n")}
"""Each signal taken over before the command starts: its exit status and its line."""


def _exit_at_once(signum: int, frame: object) -> None:
    code, line = _EXITS[signal.Signals(signum)]
    os.write(2, line)
    os._exit(code)


def quiet_until_started() -> None:
    """From now until :func:`command_starts`, Ctrl-C (or SIGTERM) ends the process at
    once: one line, exit 130 (143). An ignored or a custom handler is left alone."""
    usual = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    for sig, handler in usual.items():
        if signal.getsignal(sig) != handler:
            continue
        try:
            signal.signal(sig, _exit_at_once)
        except ValueError:  # not the main thread: nothing to take over
            return
        _state[sig] = handler


def command_starts() -> None:
    """Each signal back to what it was (Ctrl-C to ``KeyboardInterrupt``): the command's
    in-order stop takes them from here."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = _state.pop(sig, None)
        if handler is not None and signal.getsignal(sig) is _exit_at_once:
            signal.signal(sig, handler)


def command_ended(code: int) -> None:
    """The command has returned ``code``: flush what it printed, and let a Ctrl-C during
    interpreter shutdown end the process with that code, with no traceback."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed, a broken pipe, None
            pass
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return

    def exit_with_code(signum: int, frame: object) -> None:
        os._exit(code)

    try:
        signal.signal(signal.SIGINT, exit_with_code)
    except ValueError:
        pass


if is_the_program():
    quiet_until_started()
