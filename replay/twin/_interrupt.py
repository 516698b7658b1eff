"""Ctrl-C during a simulated level: a request to stop, acted on in order, never lost.

Python's own SIGINT handler raises ``KeyboardInterrupt`` wherever the main thread is
when the signal comes: inside a lane, an engine step, the event loop's bookkeeping,
or Python code that C calls back (a heap's ``__lt__``, a validator). Raised out of
the twin's loop, it left the level's tasks pending when the loop closed ("Task was
destroyed but it is pending!" three times, and "Exception ignored ... Event loop is
closed" as their coroutines were finalised); raised where C code clears errors, it
was lost and the plan carried on to its end.

:func:`run_to_end` runs a level's coroutine the way ``asyncio.Runner`` runs a real
run, and more strictly: while it lasts, SIGINT (and SIGTERM/SIGHUP, which
``replay.cli`` turns into SIGINT) raises nothing; it is recorded and the loop is
asked to cancel the main task, so the run stops in order (lanes cancelled, requests
recorded as interrupted, a kept run directory sealed as interrupted). Every task left
is cancelled and awaited before the loop closes, and only then is
``KeyboardInterrupt`` raised, from one place. An interrupt that came after the level
was done is raised all the same: none is lost.

Handled only in the main thread and when SIGINT is Python's own handler, as
``asyncio.Runner`` does: a forked pool worker (SIGINT ignored) or a caller with its
own handler keeps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["run_to_end"]

_T = TypeVar("_T")


def run_to_end(loop: asyncio.AbstractEventLoop,
               main: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """``main()`` run on ``loop`` to its end, then every other task ended and the loop
    closed; ``KeyboardInterrupt`` when Ctrl-C came while it ran (see the module)."""
    interrupted: list[int] = []
    with _ctrl_c_cancels(loop, interrupted) as on_task:
        try:
            task = loop.create_task(main())  # made here: a Ctrl-C before is not lost
            on_task(task)
            if interrupted:  # Ctrl-C before the task was there to cancel
                task.cancel()
            loop.run_until_complete(task)
        except asyncio.CancelledError:
            if not interrupted:
                raise
        finally:
            _close(loop)
    if interrupted:
        raise KeyboardInterrupt
    return task.result()


@contextlib.contextmanager
def _ctrl_c_cancels(loop: asyncio.AbstractEventLoop,
                    interrupted: list[int]) -> Iterator[Callable[[asyncio.Task[Any]], None]]:
    """While inside, SIGINT appends to ``interrupted`` and cancels the main task (handed
    to the yielded function) at the loop's next turn; Python's handler is put back on
    the way out."""
    main: list[asyncio.Task[Any]] = []

    def cancel_main() -> None:
        for task in main:
            task.cancel()

    def on_sigint(signum: int, frame: object) -> None:
        interrupted.append(signum)
        if main and not loop.is_closed():  # the loop's thread (this one): it stays open
            loop.call_soon_threadsafe(cancel_main)

    ours = (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    if ours:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        yield main.append
    finally:
        if ours and signal.getsignal(signal.SIGINT) is on_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel and await every task still pending (as ``asyncio.Runner`` does), so none
    is destroyed pending and no coroutine is finalised on a closed loop; then close."""
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
