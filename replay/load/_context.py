"""The lane context: what every lane of one run shares, in three parts.

:class:`LaneSettings` is fixed when the run starts (endpoints, request shape, the
run's clock marks, the think-time rule); :class:`LaneState` is what the lanes
change as the run goes (counters, tasks, stop flags); :class:`LaneContext` holds
both with the collaborators the lanes call (HTTP session, prompt builder, prefix
cache model, record sink, and the :class:`~replay.load._transport.Transport` that
sends each request).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import numpy as np

from analysis import RecordDict
from replay.client import BodySpec, PrefixCacheModel, Timeouts, stream_request
from replay.load._dueclock import DueClock
from replay.load._transport import Transport
from traces import Request

__all__ = ["LaneContext", "LaneSettings", "LaneState", "PromptBuilder"]

PromptBuilder = Callable[[Request, int, "np.ndarray | None", Sequence[int]], np.ndarray]
"""``(request, salt, prev_prompt, prev_output) -> int32 ids`` (vocab/block size bound)."""

_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class LaneSettings:
    """What every lane of one run reads and none changes: endpoints, request shape,
    the run's clock marks and the think-time rule."""

    urls: tuple[str, ...]  # the endpoint of each replica (``LaneContext.cache`` routes)
    headers: dict[str, str]
    spec: BodySpec
    timeouts: Timeouts
    block_size: int
    """The workload's block size (for the shared-prefix boundary)."""
    t0_ns: int
    warmup_end_ns: int
    window_end_ns: int
    issue_end_ns: int
    """No request becomes due at or after this (end of the drain)."""
    run_tag: str
    think_scale: float = 1.0
    think_time_cap_s: float | None = None
    max_line_bytes: int = 64 * 1024 * 1024
    worker: int = 0
    """Which worker process runs these lanes (``--workers``); part of request ids."""
    entry_ratio: tuple[float, float] | None = None
    """A scenario's entry rule: each user's first session starts at a random turn in
    this share of its turns (``replay.load._scenario.entry_turn``)."""
    salt_nonce: int = 0
    """A scenario's per-run cache bust, mixed into every lane's salt (0: none)."""
    session_headers: tuple[str, ...] = ()
    """The headers each request carries its session id in (``--session-header``)."""
    warmup_requests: int = 0
    """A scenario's priming: each closed-loop user's first session replays this many
    turns before its entry turn, without think time, as warmup (0: none)."""
    entries: tuple[tuple[int, int], ...] = ()
    """``--entry``: (session index, entry turn) of user ``i``'s first session, instead
    of the entry ratio's draw (users past the list draw)."""
    idle_cap_s: float | None = None
    """A scenario's system idle gap cap (``replay.load._dueclock``; None: none)."""

    def due_clock(self) -> DueClock:
        """The clock the lanes wait on: the idle cap counts from the run's origin, or
        from the window's start when lanes are primed before it."""
        if self.idle_cap_s is None:
            return DueClock()
        start = self.warmup_end_ns if self.warmup_requests else self.t0_ns
        return DueClock(cap_ns=int(self.idle_cap_s * _NS), idle_from_ns=start)

    def chain_headers(self, session_id: str) -> dict[str, str]:
        """The headers of every request of one session (its subagents' too), built once
        per session so a request only copies them and adds its own id."""
        if not self.session_headers:
            return self.headers
        return {**self.headers, **dict.fromkeys(self.session_headers, session_id)}

    def think_ns(self, think_s: float) -> int:
        t = think_s * self.think_scale
        if self.think_time_cap_s is not None and t > self.think_time_cap_s:
            t = self.think_time_cap_s
        return int(t * _NS)

    def phase(self, sent_ns: int) -> str:
        if sent_ns < self.warmup_end_ns:
            return "warmup"
        if sent_ns < self.window_end_ns:
            return "measure"
        return "drain"


@dataclass(eq=False)
class LaneState:
    """What the lanes of one run change as it goes: counters, tasks, the stop flags."""

    seq: int = 0
    busy: int = 0
    lanes: int = 0
    measure_inflight: int = 0
    measure_idle: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    stopped: bool = False
    cancel_reason: str = "drain"
    crash: BaseException | None = None
    """A lane died of a bug (not a request failure): the run stops and re-raises it."""
    crashed: asyncio.Event = field(default_factory=asyncio.Event)
    top_lanes: int = 0
    """Load sources started: closed-loop users, the open-loop arrival plan, timestamp
    sessions (subagent lanes are not counted)."""
    done_early: int = 0
    """Of those, how many ran out of work too early (see :meth:`LaneContext.lane_ended`)."""
    scope_holds: dict[object, int] = field(default_factory=dict)
    """Lanes using a cache scope (a session instance, its background subagents)."""
    draws: int = 0
    """Sessions drawn so far from the one sequential sampler a scenario's users share
    (``replay.load._lanes.closed_user``): the next user to finish a session takes the
    workload's session ``draws % n``."""


@dataclass(eq=False)
class LaneContext:
    """What every lane of one run shares (a plain object: lanes run on one loop): the
    fixed settings, the changing state, and the collaborators the lanes call."""

    fixed: LaneSettings
    session: aiohttp.ClientSession
    build: PromptBuilder
    cache: PrefixCacheModel
    on_record: Callable[[RecordDict], None]
    on_plan: Callable[..., None] | None = None
    """``--ray``: told ``(ctx, id, chain, turn, req, prompt, due_ns, think_s)`` of each due
    request before it is sent, so the driver knows what a lost worker had (``_remote``)."""
    transport: Transport = stream_request
    """What sends each request (``replay.load._transport``); set when the run's lanes
    are made (``make_context``), never swapped."""
    state: LaneState = field(default_factory=LaneState)
    clock: DueClock = field(default_factory=DueClock)
    """What the lanes wait on for due times (shifted by a scenario's idle cap)."""

    def hold_scope(self, scope: object) -> None:
        holds = self.state.scope_holds
        holds[scope] = holds.get(scope, 0) + 1

    def release_scope(self, scope: object, _task: object = None) -> None:
        """A holder is done; the scope's private blocks go when nobody uses it."""
        holds = self.state.scope_holds
        held = holds.pop(scope, 0) - 1
        if held > 0:
            holds[scope] = held
        else:
            self.cache.end_scope(scope)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Start a lane task the run will cancel and wait for at the end."""
        task = asyncio.get_running_loop().create_task(coro)
        self.state.tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        state = self.state
        state.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and state.crash is None:
            state.crash = task.exception()
            state.crashed.set()

    def end_window(self, at_ns: int) -> None:
        """Move the window's end to ``at_ns`` (a stop rule settled the run early): later
        requests count as drain, and the drain keeps its length from there."""
        f = self.fixed
        self.fixed = replace(f, window_end_ns=at_ns,
                             issue_end_ns=at_ns + (f.issue_end_ns - f.window_end_ns))

    def lane_ended(self, by_ns: int) -> None:
        """A load source stopped issuing before ``by_ns`` (not stopped by the run):
        window start for users (one thinking past the window's end is ordinary load),
        window end for an arrival plan or a trace."""
        if not self.state.stopped and time.monotonic_ns() < by_ns:
            self.state.done_early += 1
