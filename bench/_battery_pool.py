"""Run the battery's cases in forked processes, one fresh process per case.

``multiprocessing.Pool`` keeps a worker for many cases (its memory grows: one held
11.7 GB after 20 cases) and, when the kernel kills a worker for memory, waits for its
case forever: seed 8181's case 33 (and likely seed 4711's case 35) was lost that way,
the run hung without a word. Here each case is a fork of the parent, its result comes
back through a pipe, and a process that exits without one is reported as that case's
failure (with its exit status), never waited on."""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

T = TypeVar("T")


def _child(fn: Callable[[int], Any], number: int, conn: Connection) -> None:
    conn.send(fn(number))
    conn.close()


def _why(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (killed: out of memory?)" if -exitcode == signal.SIGKILL else ""
        return f"the case's process died of {name}{hint}"
    return f"the case's process exited with status {exitcode} without a result"


def run_forked(fn: Callable[[int], T], numbers: Sequence[int], jobs: int,
               failed: Callable[[int, str], T]) -> Iterator[T]:
    """``fn(n)`` for each of ``numbers`` in its own forked process, ``jobs`` at a time,
    yielded as they finish; a process that dies yields ``failed(n, why)``."""
    ctx = multiprocessing.get_context("fork")
    todo = list(numbers)
    running: dict[Connection, tuple[int, Any]] = {}
    while todo or running:
        while todo and len(running) < max(1, jobs):
            n = todo.pop(0)
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(fn, n, send), daemon=True)
            proc.start()
            send.close()  # the child's end: EOF here once the child is gone
            running[recv] = (n, proc)
        # the pipe, not the process: a result larger than the pipe's buffer is read
        # while the child sends it; a child that dies leaves EOF
        for recv in wait(list(running)):
            n, proc = running.pop(recv)  # type: ignore[index]
            try:
                result = recv.recv()  # type: ignore[union-attr]
            except EOFError:
                result = None
            recv.close()  # type: ignore[union-attr]
            proc.join()
            yield failed(n, _why(proc.exitcode)) if result is None else result


__all__ = ["run_forked"]
