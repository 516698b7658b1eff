"""What the event loop was doing when it stalled: a watchdog thread with stack capture.

:class:`~replay.load._health.LoopProbe` measures *that* the loop woke late; this
says *why*, so a stall is a caveat a user can act on. The loop side stamps a
heartbeat at every probe wake (with the loop thread's CPU time and, on Linux, its
run delay from ``/proc/thread-self/schedstat``: time spent runnable but waiting
for a CPU). A daemon thread checks the heartbeat every ``TICK_S`` and, once it is
``THRESHOLD_S`` older than the probe's period, takes the loop thread's frames
(``sys._current_frames``) once for that stall. When the loop beats again the
stall is told apart by where its time went:

- ``busy``: the loop thread ran on a CPU for most of it: the client's own code
  (the frames say which: a parse, a render, a big encode); fixable in the client.
- ``gc``: as busy, and a garbage collection ran during it (``gc.callbacks``).
- ``starved``: the loop thread was runnable but waited for a CPU for most of it:
  another process (a server on the same core) or thread took the CPU; not the
  client's code (pin the server and the client to separate cores). Also a stall
  runnable for most of it (on a CPU and waiting for one together) whose wait was
  the larger part (a busy loop on a shared core; the rest is the GIL and ticks);
  with the CPU the larger part, ``busy``.
- ``blocked``: neither: the loop sat in a blocking call off the CPU (a file
  write, DNS, a lock); the frames name the call.

A stall with no frames is one the watchdog never saw: the whole process was
frozen (both threads off the CPU) until the loop beat again.

Blind spot: a stall shorter than ``THRESHOLD_S`` is never captured, and one that
holds the GIL in C code is captured only when it lets go (its frames are then
the code just after, still naming the caller). Without ``schedstat`` (not Linux)
a stall that is not busy is ``starved`` when the frames show the loop idle in its
selector, else ``blocked``.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from analysis.schema import LoopStall, StallKind

__all__ = ["THRESHOLD_S", "TICK_S", "StallWatch", "describe_frames", "loop_clocks"]

THRESHOLD_S = 0.1
"""How much later than its period the heartbeat must be before frames are taken."""
TICK_S = 0.02
_NS = 1_000_000_000
_KEEP = 5
"""Longest stalls kept with their frames (the rest only counted by kind)."""
_DEPTH = 6
_SELECT = frozenset({"select", "poll", "epoll", "_run_once", "run_forever", "run",
                     "run_until_complete"})
_ROOTS = tuple(sorted({p for p in sys.path if p} | {sys.prefix}, key=len, reverse=True))
_SCHEDSTAT = "/proc/thread-self/schedstat"


def _short(path: str) -> str:
    for root in _ROOTS:
        if path.startswith(root + os.sep):
            return path[len(root) + 1:]
    return path


def describe_frames(frame: FrameType | None, depth: int = _DEPTH) -> list[str]:
    """The innermost ``depth`` frames as ``file:line function``, innermost first."""
    out: list[str] = []
    while frame is not None and len(out) < depth:
        code = frame.f_code
        out.append(f"{_short(code.co_filename)}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return out


def _idle(frames: list[str]) -> bool:
    """True when the innermost frame is the loop waiting for events with nothing to
    run: the selector (asyncio's loop), or the call that runs a loop written in C
    (uvloop shows no Python frame below it)."""
    if not frames:
        return False
    where, func = frames[0].rsplit(" ", 1)
    return func in _SELECT and ("selectors.py" in where or where.startswith("asyncio"))


def loop_clocks() -> tuple[int, int | None]:
    """This thread's CPU time and run delay (runnable, waiting for a CPU), in ns; the
    delay is None where the kernel does not say (not Linux)."""
    cpu = time.thread_time_ns()
    try:
        with open(_SCHEDSTAT, "rb") as fh:
            return cpu, int(fh.read().split()[1])
    except (OSError, IndexError, ValueError):
        return cpu, None


def classify(wall_ns: int, cpu_ns: int, wait_ns: int | None, gc_ran: bool,
             frames: list[str]) -> StallKind:
    """Where a stall's time went (see the module docstring)."""
    if 2 * cpu_ns >= wall_ns:
        return "gc" if gc_ran else "busy"
    if wait_ns is not None:
        if 2 * (cpu_ns + wait_ns) < wall_ns:
            return "blocked"
        if wait_ns >= cpu_ns:
            return "starved"
        return "gc" if gc_ran else "busy"
    return "starved" if not frames or _idle(frames) else "blocked"


@dataclass
class _Open:
    since_ns: int
    frames: list[str] = field(default_factory=list)


class StallWatch:
    """Watches one event loop (``beat`` is called on it) from a daemon thread.

    ``period_s`` is how often the loop beats when healthy; ``start_ns``/``end_ns``
    bound the window whose stalls are kept (a stall counts where it began); ``t0_ns``
    is the run's origin its times are given from. ``clocks`` reads the loop thread's
    CPU time and run delay (tests replace it)."""

    def __init__(self, period_s: float, start_ns: int, end_ns: int, t0_ns: int = 0,
                 threshold_s: float = THRESHOLD_S, tick_s: float = TICK_S,
                 clocks: Callable[[], tuple[int, int | None]] = loop_clocks) -> None:
        self.t0_ns = t0_ns
        self.period_ns = int(period_s * _NS)
        self.threshold_ns = int(threshold_s * _NS)
        self.tick_s = tick_s
        self.start_ns, self.end_ns = start_ns, end_ns
        self.clocks = clocks
        self.loop_thread = threading.get_ident()
        self.heartbeat_ns = time.monotonic_ns()
        self._clocks = clocks()
        self.stalls: list[LoopStall] = []
        self.kinds: Counter[StallKind] = Counter()
        self._open: _Open | None = None
        self._gc_start_ns: int | None = None
        self._gc_ran = False
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stalled(self) -> bool:
        """A stall is in progress and its frames were taken."""
        return self._open is not None

    def beat(self) -> None:
        """The loop is alive now (called on the loop: closes a stall in progress)."""
        now = time.monotonic_ns()
        clocks = self.clocks()
        with self._lock:
            stall, self._open = self._open, None
            gc_ran, self._gc_ran = self._gc_ran, False
            last, self.heartbeat_ns = self.heartbeat_ns, now
            before, self._clocks = self._clocks, clocks
        if stall is None and now - last >= self.period_ns + self.threshold_ns:
            stall = _Open(since_ns=last)  # the watchdog never ran: the process was frozen
        if stall is None or not self.start_ns <= stall.since_ns < self.end_ns:
            return
        wall = now - stall.since_ns
        wait = None if clocks[1] is None or before[1] is None else clocks[1] - before[1]
        kind = classify(wall, clocks[0] - before[0], wait, gc_ran, stall.frames)
        self.kinds[kind] += 1
        self.stalls.append(LoopStall(at_s=round((stall.since_ns - self.t0_ns) / _NS, 3),
                                     lag_s=round((wall - self.period_ns) / _NS, 4), kind=kind,
                                     frames=stall.frames))
        self.stalls.sort(key=lambda s: -s.lag_s)
        del self.stalls[_KEEP:]

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start_ns = time.monotonic_ns()
        elif self._gc_start_ns is not None:
            if time.monotonic_ns() - self._gc_start_ns > self.threshold_ns // 2:
                self._gc_ran = True
            self._gc_start_ns = None

    def check(self, now_ns: int) -> None:
        """One watchdog tick: open a stall (with the loop's frames) if the heartbeat
        is late."""
        with self._lock:
            if self._open is not None or \
                    now_ns - self.heartbeat_ns < self.period_ns + self.threshold_ns:
                return
            stall = _Open(since_ns=self.heartbeat_ns)
        stall.frames = describe_frames(sys._current_frames().get(self.loop_thread))
        with self._lock:
            if self.heartbeat_ns == stall.since_ns:  # (the loop may have beaten meanwhile)
                self._open = stall

    def _watch(self) -> None:
        while not self._done.wait(self.tick_s):
            self.check(time.monotonic_ns())

    def start(self) -> StallWatch:
        gc.callbacks.append(self._on_gc)
        self._thread = threading.Thread(target=self._watch, name="agentreplay-stall-watch",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._thread is not None:
            self._thread.join(timeout=1.0)
