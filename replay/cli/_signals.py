"""SIGTERM and SIGHUP stop a command the way Ctrl-C does.

Every command already stops in order on Ctrl-C: runs close and are marked
interrupted, launched servers and their process groups are stopped, state files
are updated. A ``kill``, a closed terminal or a CI timeout sends SIGTERM or
SIGHUP instead, whose default action ends the process at once and leaves all of
that behind (a vLLM server still holding the port, a comparison "running").

:func:`stop_signals` turns those signals into SIGINT delivered to this process,
so whatever handles Ctrl-C at that moment handles them too: an event loop's
SIGINT handler (the run stops at the next phase boundary), ``asyncio.Runner``
(the main task is cancelled) or Python's default (``KeyboardInterrupt``). It
remembers which signal came, so the exit status can say so (128 + signal:
143 for SIGTERM, 129 for SIGHUP).

A process started with SIGINT ignored (``cmd &`` in a script: the shell ignores
it for background jobs) would drop that SIGINT, so SIGTERM would do nothing:
inside :func:`stop_signals`, SIGINT is Python's own handler whatever the
inherited disposition, and the inherited one is put back on the way out.
SIGTERM is handled whatever was inherited; an ignored SIGHUP stays ignored
(``nohup`` asks for that on purpose).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

__all__ = ["STOP_SIGNALS", "exit_code", "stop_signals"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def stop_signals() -> Iterator[list[int]]:
    """While inside, SIGTERM/SIGHUP act as Ctrl-C; yields the signals received."""
    received: list[int] = []

    def as_interrupt(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        signal.raise_signal(signal.SIGINT)

    previous = {}
    for sig in (signal.SIGINT,) if signal.getsignal(signal.SIGINT) == signal.SIG_IGN else ():
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            previous[sig] = signal.signal(sig, signal.default_int_handler)
    for sig in STOP_SIGNALS:
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue  # nohup asked for exactly that: a closed terminal does not stop it
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            previous[sig] = signal.signal(sig, as_interrupt)
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_code(code: int, received: list[int]) -> int:
    """The command's exit status, or 128 + the first stop signal when one came
    and the command ended as interrupted (130) or without an error (0)."""
    if received and code in (0, 130):
        return 128 + received[0]
    return code
