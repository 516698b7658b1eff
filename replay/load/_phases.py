"""The phases of one set of lanes: start, warmup, window, bounded drain, stop.

Every executor runs its lanes through :func:`drive_lanes`: the in-process
executor on the driver's loop, each worker process or Ray actor on its own.
Lanes start at the run's origin; after ``warmup + duration`` the load stays on
while the requests sent in the window finish (at most ``drain_s``); then every
lane left is cancelled and its request recorded. Setting ``stop`` ends the
lanes early the same orderly way. A lane that dies of a bug (not a request
failure) ends the lanes too and is reported as the outcome's ``crash``.

Also here, so every executor sizes and builds its lanes one way:
:func:`connections_for` (walking nested subagents) and :func:`make_context`.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import aiohttp
import numpy as np

from analysis import RecordDict
from replay.client import BodySpec, ChatCodec, PrefixCacheModel, Timeouts, stream_request
from replay.load._context import LaneContext, LaneSettings, PromptBuilder
from replay.load._dueclock import IdleShifts
from replay.load._health import LoopHealth, LoopProbe
from replay.load._lanes import (
    closed_user,
    open_arrivals,
    timestamp_session,
)
from replay.load._routing import FleetCache
from replay.load._scenario import lane_options, pinned_entries
from replay.load._settings import RunSettings
from replay.load._transport import Transport
from replay.load._window_stop import WindowEnd, WindowStop
from traces import Request, Session

__all__ = [
    "Arrival", "LaneOutcome", "Target", "connections_for", "default_builder", "drive_lanes",
    "make_context", "open_plan", "walk",
]

Arrival = Literal["closed", "open", "timestamps"]
_NS = 1_000_000_000
_SPARE_CONNECTIONS = 8


@dataclass(frozen=True)
class Target:
    """What lanes need to know about the server and the run (plain data: it pickles
    to worker processes and Ray actors)."""

    root: str
    headers: dict[str, str]
    model: str
    vocab_size: int
    block_size: int
    """The workload's block size."""
    server_block_size: int
    run_tag: str
    chat: ChatCodec | None = None
    """Chat mode: how workload ids become text the server tokenizes exactly."""
    roots: tuple[str, ...] = ()
    """A fleet: every replica's base URL, ``root`` first (empty: ``root`` alone)."""


@dataclass
class LaneOutcome:
    """How a set of lanes ended, and what they saw of the client and the window."""

    interrupted: bool = False
    crash: BaseException | None = None
    health: LoopHealth = field(default_factory=LoopHealth)
    lanes: int = 0
    """Load sources: users (closed loop), the arrival plan (open loop), the trace
    (timestamps: one source, done early when every session ended early)."""
    done_early: int = 0
    """Load sources that ran out of work: users that stopped before the window began
    (their next turn due past the drain), a plan or trace that ended before the
    window did (``LaneContext.lane_ended``)."""
    window_end: WindowEnd | None = None
    """Where a stop rule ended the window early (None: it ran its planned length)."""
    idle_shifts: IdleShifts = field(default_factory=IdleShifts)
    """What a scenario's system idle cap did on this loop (``replay.load._dueclock``)."""


def walk(requests: Sequence[Request]) -> list[tuple[int, Request]]:
    """``(turn, request)`` for a chain and, depth first, every nested subagent's."""
    out: list[tuple[int, Request]] = []
    for turn, req in enumerate(requests):
        out.append((turn, req))
        for sub in req.subagents:
            out.extend(walk(sub.requests))
    return out


def first_too_long(sessions: Sequence[Session],
                   limit: int) -> tuple[Session, int, Request] | None:
    """The first (session, turn, request) whose prompt plus output exceed ``limit``
    tokens (a server's or a twin's max_model_len), nested subagents included."""
    for sess in sessions:
        for turn, req in walk(sess.requests):
            if req.prompt_tokens + req.output_tokens > limit:
                return sess, turn, req
    return None


def connections_for(users: int, sessions: Sequence[Session]) -> int:
    """Connections a share of ``users`` closed-loop users can hold at once: one per
    user, one per blocking subagent that may run beside it (nested ones included),
    and one per background subagent of two sessions (a session's background
    subagents may all still run when the user's next session spawns its own)."""
    widest = max((sum(not sub.background for sub in req.subagents)
                  for s in sessions for _, req in walk(s.requests)), default=0)
    background = max((sum(sub.background for _, req in walk(s.requests)
                          for sub in req.subagents) for s in sessions), default=0)
    return users * (1 + widest + 2 * background) + _SPARE_CONNECTIONS


def default_builder(block_size: int, vocab_size: int) -> PromptBuilder:
    """Prompts materialised from the workload's block ids (see ``traces.build_prompt``)."""
    from traces import Vocab, build_prompt

    vocab = Vocab(size=vocab_size)

    def build(req: Request, salt: int, prev: np.ndarray | None,
              prev_out: Sequence[int]) -> np.ndarray:
        return build_prompt(req, block_size, vocab, salt, prev, prev_out)

    return build


def make_context(
    settings: RunSettings, target: Target, session: aiohttp.ClientSession, t0_ns: int,
    on_record: Callable[[RecordDict], None], *, worker: int = 0,
    build: PromptBuilder | None = None, transport: Transport = stream_request,
    cache: PrefixCacheModel | None = None,
) -> LaneContext:
    """The lanes' shared state for one process (the whole run, or one worker's share):
    ``transport`` sends each request, ``cache`` is the client's prefix model (None: one
    per replica of the target)."""
    warmup_end_ns = t0_ns + int(settings.warmup_s * _NS)
    window_end_ns = warmup_end_ns + int(settings.duration_s * _NS)
    path = "/v1/chat/completions" if settings.api == "chat" else "/v1/completions"
    roots = target.roots or (target.root,)
    if cache is None:
        cache = PrefixCacheModel(target.server_block_size) if len(roots) == 1 else \
            FleetCache(target.server_block_size, len(roots), settings.routing)
    fixed = LaneSettings(
        urls=tuple(f"{root}{path}" for root in roots), headers=target.headers,
        spec=BodySpec(model=target.model, api=settings.api, carry_output=settings.carry_output,
                      chat=target.chat),
        timeouts=Timeouts(connect_s=settings.connect_timeout_s,
                          first_token_s=settings.first_token_timeout_s,
                          itl_s=settings.itl_timeout_s, total_s=settings.total_timeout_s),
        block_size=target.block_size,
        t0_ns=t0_ns, warmup_end_ns=warmup_end_ns, window_end_ns=window_end_ns,
        issue_end_ns=window_end_ns + int(settings.drain * _NS),
        run_tag=target.run_tag, think_scale=settings.think_scale,
        think_time_cap_s=settings.think_time_cap_s, max_line_bytes=settings.max_line_bytes,
        worker=worker, session_headers=settings.session_headers,
        **lane_options(settings.scenario, target.run_tag),
    )
    return LaneContext(
        fixed=fixed, session=session, cache=cache, on_record=on_record, transport=transport,
        build=build or default_builder(target.block_size, target.vocab_size),
        clock=fixed.due_clock(),
    )


async def drive_lanes(
    ctx: LaneContext, settings: RunSettings, arrival: Arrival, sessions: Sequence[Session],
    stop: asyncio.Event, users: Sequence[int] | None = None, *, probe_loop: bool = True,
    window_stop: WindowStop | None = None,
) -> LaneOutcome:
    """Start the lanes, wait out warmup, window and drain (or ``stop``), stop them all.

    Cancelling the caller stops the lanes the same way (their requests are recorded
    as interrupted) before the cancellation propagates. ``probe_loop=False`` skips the
    event-loop lag probe (simulated time, ``replay.twin``: there is no lag to see).
    ``window_stop`` may end the window early (``replay.load._window_stop``).
    """
    probe = LoopProbe(ctx.fixed.warmup_end_ns, ctx.fixed.window_end_ns, t0_ns=ctx.fixed.t0_ns)
    prober = asyncio.create_task(probe.run() if probe_loop else asyncio.sleep(0))
    gc.freeze()  # the workload, modules and settings: no collection walks them again
    _start(ctx, settings, arrival, sessions, users)
    outcome = LaneOutcome()
    try:
        outcome.interrupted = await _wait_phases(ctx, stop, window_stop, outcome, probe)
    except asyncio.CancelledError:
        ctx.state.cancel_reason = "interrupt"
        raise
    finally:
        await _stop_all(ctx)
        gc.unfreeze()
        prober.cancel()
        await asyncio.gather(prober, return_exceptions=True)
    outcome.crash = ctx.state.crash
    outcome.health = probe.result()
    if arrival == "timestamps":
        outcome.lanes = 1
        state = ctx.state
        outcome.done_early = int(state.top_lanes > 0 and state.done_early == state.top_lanes)
    else:
        outcome.lanes, outcome.done_early = ctx.state.top_lanes, ctx.state.done_early
    outcome.idle_shifts = ctx.clock.shifts
    return outcome


def _start(ctx: LaneContext, settings: RunSettings, arrival: Arrival,
           sessions: Sequence[Session], users: Sequence[int] | None) -> None:
    horizon = (ctx.fixed.issue_end_ns - ctx.fixed.t0_ns) / _NS
    if arrival == "closed":
        midway = settings.warmup_start == "midway" and settings.warmup_s > 0
        if settings.entries and ctx.fixed.entry_ratio is not None:
            ctx.fixed = replace(ctx.fixed, entries=pinned_entries(settings.entries, sessions))
        ctx.state.draws = settings.users  # the users' first sessions were the first draws
        for user in range(settings.users) if users is None else users:
            ctx.spawn(closed_user(ctx, user, sessions, settings.seed, midway,
                                  settings.warmup_s))
    elif arrival == "open":
        if settings.rate is not None:
            plan = open_plan(settings.rate, settings.seed, horizon)
        else:
            plan = sorted((s.requests[0].arrival_s or 0.0) for s in sessions)
            base = plan[0] if plan and settings.start_s is None else 0.0  # --start: kept
            plan = [a - base for a in plan]
            sessions = sorted(sessions, key=lambda s: s.requests[0].arrival_s or 0.0)
        ctx.spawn(open_arrivals(ctx, sessions, plan, settings.seed))
    else:
        origin = 0.0 if settings.start_s is not None else \
            min((r.arrival_s or 0.0) for s in sessions for r in s.requests)
        for user, sess in enumerate(sessions):
            ctx.spawn(timestamp_session(ctx, user, sess, settings.seed, origin))


async def _wait_phases(ctx: LaneContext, stop: asyncio.Event, window_stop: WindowStop | None,
                       outcome: LaneOutcome, probe: LoopProbe) -> bool:
    """Wait out warmup, window and drain; True if ``stop`` cut the run short. A stop
    rule that ends the window early moves its end (and the drain's) and says where in
    ``outcome.window_end``."""
    stopper = asyncio.create_task(_first(stop, ctx.state.crashed))
    try:
        if await _wait_until(stopper, ctx.fixed.warmup_end_ns, ctx):
            ctx.state.cancel_reason = "interrupt"
            return True
        start_ns, end_ns = ctx.fixed.warmup_end_ns, ctx.fixed.window_end_ns
        step_ns = int(window_stop.step_s * _NS) if window_stop is not None else end_ns
        look_ns = start_ns + step_ns
        while True:
            if await _wait_until(stopper, min(look_ns, end_ns), ctx):
                ctx.state.cancel_reason = "interrupt"
                return True
            now_ns = time.monotonic_ns()
            if window_stop is None or now_ns >= end_ns or not ctx.state.tasks:
                break
            why = window_stop.check((now_ns - start_ns) / _NS, ctx.state.measure_inflight)
            if why is not None:
                ctx.end_window(now_ns)
                probe.end_ns = min(probe.end_ns, now_ns)
                outcome.window_end = WindowEnd((now_ns - start_ns) / _NS, why, window_stop.rule)
                break
            look_ns += step_ns
        if ctx.state.measure_inflight > 0:
            idle = asyncio.create_task(ctx.state.measure_idle.wait())
            deadline = max(0.0, (ctx.fixed.issue_end_ns - time.monotonic_ns()) / _NS)
            done, _ = await asyncio.wait({idle, stopper}, timeout=deadline,
                                         return_when=asyncio.FIRST_COMPLETED)
            idle.cancel()
            if stopper in done:
                ctx.state.cancel_reason = "interrupt"
                return True
        return False
    finally:
        stopper.cancel()


async def _first(*events: asyncio.Event) -> None:
    """Return once any of ``events`` is set. The waits are made here, not by the caller: a
    task cancelled before its first step never runs its body, and wait coroutines made
    for it beforehand would be dropped unawaited (a RuntimeWarning seen when a short
    run's phases ended before the stopper task was first scheduled, on a busy machine)."""
    tasks = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()


async def _wait_until(stopper: asyncio.Task[Any], end_ns: int, ctx: LaneContext) -> bool:
    """Sleep until ``end_ns``; returns early (True) if stopped. Ends early when every
    lane is gone (a finite open-loop or timestamp plan)."""
    while True:
        rem = (end_ns - time.monotonic_ns()) / _NS
        if rem <= 0 or not ctx.state.tasks:
            return False
        done, _ = await asyncio.wait({stopper}, timeout=min(rem, 0.25))
        if done:
            return True


async def _stop_all(ctx: LaneContext) -> None:
    ctx.state.stopped = True
    while ctx.state.tasks:
        pending = list(ctx.state.tasks)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    ctx.clock.close()


def open_plan(rate: float, seed: int, horizon_s: float) -> list[float]:
    """Session arrival offsets (s) of a seeded Poisson process up to ``horizon_s``."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 11])
    out: list[float] = []
    t = 0.0
    while True:
        t += float(rng.exponential(1.0 / rate))
        if t >= horizon_s:
            return out
        out.append(t)
