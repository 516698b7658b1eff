"""``--workers N``: a run's users split across local worker processes.

Workers are spawned (not forked: the driver's loop and sockets stay behind).
Each has a data pipe to the driver, read by one thread per worker (blocking
reads of whole messages), and a control pipe from it. A worker says ``READY``
once imported and its workload parsed, waits for ``go T0 T0_WALL`` (the run's origin), runs
:func:`~replay.load._remote.run_plan` and ends with ``DONE {result}``; the driver
handles Ctrl-C and sends ``stop``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import threading
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

import orjson

from replay.load._executor import Job
from replay.load._remote import WorkerExecutor, WorkerPlan, parse_workload, run_plan

__all__ = ["ProcessExecutor", "event_loop_factory"]

_START_S = 120.0
"""How long workers may take to start (imports)."""


def event_loop_factory() -> Any:
    """uvloop's loop factory when uvloop is installed, else None (asyncio's default)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return None
    return uvloop.new_event_loop


def _process_main(plan: WorkerPlan, conn: Connection, control: Connection) -> None:
    """Entry point of a worker process (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sessions = parse_workload(plan.workload)  # before READY: the origin waits for it
    conn.send_bytes(b"READY")
    try:
        go = control.recv_bytes()
    except EOFError:
        return
    if not go.startswith(b"go "):
        return
    t0_ns, t0_wall_ns = (int(x) for x in go[3:].split())
    plan = replace(plan, t0_ns=t0_ns, t0_wall_ns=t0_wall_ns)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def on_driver() -> None:
            try:
                while control.poll():
                    if control.recv_bytes() == b"stop":
                        stop.set()
            except (EOFError, OSError):  # the driver is gone: end in order
                loop.remove_reader(control.fileno())
                stop.set()

        # The loop makes the control pipe non-blocking (its messages are a few bytes,
        # written atomically); the data pipe stays blocking for the worker's writes.
        loop.add_reader(control.fileno(), on_driver)

        def emit(lines: list[bytes], busy: int, lanes: int, planned: list[bytes]) -> None:
            conn.send_bytes(b"%d %d %d\n" % (busy, lanes, len(planned))
                            + b"\n".join(planned + lines))

        result = await run_plan(plan, emit, stop, sessions)
        loop.remove_reader(control.fileno())
        conn.send_bytes(b"DONE " + orjson.dumps(result))

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(main())
    conn.close()


class ProcessExecutor(WorkerExecutor):
    """:class:`~replay.load._executor.Executor` over local worker processes."""

    def __init__(self, job: Job) -> None:
        super().__init__(job)
        self.controls: list[Connection] = []
        self.procs: list[Any] = []
        self.readers: list[threading.Thread] = []
        self.ended = [asyncio.Event() for _ in self.plans]
        self.ready = [asyncio.Event() for _ in self.plans]
        self.ended_ns = [0] * len(self.plans)

    async def prepare(self) -> None:
        """Spawn the workers; wait until each has imported (or ended, or time is up)."""
        self.loop = asyncio.get_running_loop()
        mp = multiprocessing.get_context("spawn")
        for plan in self.plans:
            data_in, data_out = mp.Pipe(duplex=False)
            control_in, control_out = mp.Pipe(duplex=False)
            proc = mp.Process(target=_process_main, args=(plan, data_out, control_in),
                              daemon=True, name=f"agentreplay-worker-{plan.index}")
            proc.start()
            data_out.close()
            control_in.close()
            self.controls.append(control_out)
            self.procs.append(proc)
            reader = threading.Thread(target=self._read, args=(plan.index, data_in),
                                      daemon=True, name=f"agentreplay-reader-{plan.index}")
            reader.start()
            self.readers.append(reader)
        waits = [asyncio.create_task(_either(r, e))
                 for r, e in zip(self.ready, self.ended, strict=True)]
        _, pending = await asyncio.wait(waits, timeout=_START_S)
        for task in pending:
            task.cancel()

    def _read(self, w: int, conn: Connection) -> None:
        """Reader thread: hand every message to the loop; tell it when the pipe ends."""
        call = self.loop.call_soon_threadsafe
        try:
            while True:
                call(self._message, w, conn.recv_bytes())
        except (EOFError, OSError):
            pass
        finally:
            conn.close()
            try:
                call(self._ended, w)
            except RuntimeError:  # the loop is closed: the run is over anyway
                pass

    def _ended(self, w: int) -> None:
        self.ended_ns[w] = time.monotonic_ns()
        self.ended[w].set()

    def _message(self, w: int, msg: bytes) -> None:
        if msg == b"READY":
            self.ready[w].set()
        elif msg.startswith(b"DONE "):
            self.tally.results[w] = orjson.loads(msg[5:])
        else:
            head, _, body = msg.partition(b"\n")
            busy, lanes, ahead = (int(x) for x in head.split())
            lines = body.split(b"\n") if body else []
            self.tally.batch(w, lines[ahead:], busy, lanes, lines[:ahead])

    def _send(self, msg: bytes) -> None:
        for w, conn in enumerate(self.controls):
            if not self.ended[w].is_set():
                try:
                    conn.send_bytes(msg)
                except OSError:
                    pass

    def _go(self, t0_ns: int, t0_wall_ns: int) -> None:
        self._send(b"go %d %d" % (t0_ns, t0_wall_ns))

    def _halt(self) -> None:
        self._send(b"stop")

    async def _wait(self, deadline_s: float) -> None:
        waits = [asyncio.create_task(e.wait()) for e in self.ended]
        _, pending = await asyncio.wait(waits, timeout=max(deadline_s, 0.1))
        for task in pending:
            task.cancel()
        for w, proc in enumerate(self.procs):
            if not self.ended[w].is_set():
                proc.kill()
                self.lose(w, "did not finish in time and was killed")
            await asyncio.to_thread(proc.join, 5.0)
            await asyncio.to_thread(self.readers[w].join, 5.0)
            await asyncio.sleep(0)  # run the messages the reader handed over last
            if w not in self.tally.results:
                self.lose(w, f"died (exit code {proc.exitcode})", self.ended_ns[w] or None)
            self.controls[w].close()


async def _either(a: asyncio.Event, b: asyncio.Event) -> None:
    ta, tb = asyncio.create_task(a.wait()), asyncio.create_task(b.wait())
    try:
        await asyncio.wait({ta, tb}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ta.cancel()
        tb.cancel()
