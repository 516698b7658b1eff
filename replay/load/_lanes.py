"""User lanes: who sends which request when, and what gets recorded.

Closed loop (the default): each user is a lane that replays one session at a
time; a request becomes due ``think_time`` (scaled, capped) after the previous
response ended, or after the blocking subagents it spawned ended. Subagents run
as extra lanes (``"U/subK"``); a background one (``Subagent.background``) runs on
unwaited, even into the user's next session. Sessions are recycled round robin
from a per-user offset, each session instance with its own salt.

Open loop: sessions arrive on a precomputed plan of absolute times (seeded
Poisson at a rate, or the workload's own ``arrival_s``); timestamp replay sends
every request at its ``arrival_s`` whatever happened before.

Every request's due time is fixed when it becomes due and recorded with its send
time, so latency can be measured from the schedule (no coordinated omission).
All times are ``time.monotonic_ns()``; records store seconds since the run's t0.

Session affinity through a router: every request carries its session instance's
id (``{run_tag}-{user}-{instance}``) in the ``--session-header`` headers, built
once per session (:meth:`LaneSettings.chain_headers`). A subagent sends its
*parent's* id, not one of its own: the routers that read one header (SGLang's
router and llm-d's session affinity hash ``X-Session-ID``; kv-cache-tester sends
it for consistent hashing; Dynamo and ATOM fall back to AIPerf's
``X-Correlation-ID``) would otherwise scatter a subagent away from the replica
that holds the session's shared head, and the client's prefix-cache prediction
(one tree per replica, as ``--routing affinity`` places it) assumes it stays.
AIPerf instead gives a forked agent its own id plus ``x-dynamo-parent-session-id``
(read by Dynamo's conversation-aware routing), which a one-header router ignores.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import numpy as np

from analysis import ErrorKind, RecordDict, RequestStatus
from analysis.schema import Phase
from replay.client import (
    CacheMark,
    ChainEncoder,
    StreamOutcome,
)
from replay.load._context import LaneContext
from replay.load._scenario import entry_turn
from traces import Request, Session, iter_block_ids

__all__ = ["closed_user", "open_arrivals", "salt_for", "timestamp_session"]


_NS = 1_000_000_000


def salt_for(seed: int, user: int, instance: int, nonce: int = 0) -> int:
    """A salt unique per (seed, user, session instance), never 0 (0 means shared).
    A ``nonce`` (a scenario's per-run cache bust) makes it unique per run too."""
    key = [seed & 0xFFFFFFFF, user, instance] + ([nonce] if nonce else [])
    mixed = np.random.SeedSequence(key).generate_state(1)
    return int(mixed[0]) | 1


@dataclass(slots=True)
class _Chain:
    """Identity of one agent chain: a session instance or one of its subagents."""

    user: int
    lane: str
    session: str
    instance: int
    salt: int
    scope: object
    headers: dict[str, str]
    """The run's headers plus the session-id headers (shared with its subagents)."""
    agent: str | None = None
    subagents: int = 0


def _rid(ctx: LaneContext) -> str:
    ctx.state.seq += 1
    fixed, seq = ctx.fixed, ctx.state.seq
    return f"{fixed.run_tag}-w{fixed.worker}-{seq}" if fixed.worker else f"{fixed.run_tag}-{seq}"


async def _send(
    ctx: LaneContext, chain: _Chain, turn: int, req: Request, prompt: np.ndarray,
    body: bytes, mark: CacheMark, due_ns: int, think_s: float, rid: str, out: StreamOutcome,
) -> StreamOutcome:
    fixed = ctx.fixed
    headers = dict(chain.headers)
    headers["X-Request-Id"] = rid
    in_window = time.monotonic_ns() < fixed.window_end_ns
    if in_window:
        ctx.state.measure_inflight += 1
        ctx.state.measure_idle.clear()
    ctx.state.busy += 1
    ctx.clock.request_started()
    try:
        await ctx.transport(ctx.session, fixed.urls[mark.replica], body, headers, fixed.timeouts,
                            out, max_line_bytes=fixed.max_line_bytes,
                            max_tokens=req.output_tokens, keep_output_ids=fixed.spec.carry_output)
    except asyncio.CancelledError:
        if out.status == "cancelled":  # not a complete answer cancelled while settling
            out.error_kind = f"cancelled_{ctx.state.cancel_reason}"
        ctx.on_record(_record(ctx, rid, chain, turn, req, prompt, mark, due_ns, think_s, out))
        raise
    finally:
        ctx.state.busy -= 1
        ctx.clock.request_ended()
        if in_window:
            ctx.state.measure_inflight -= 1
            if ctx.state.measure_inflight == 0:
                ctx.state.measure_idle.set()
    ctx.on_record(_record(ctx, rid, chain, turn, req, prompt, mark, due_ns, think_s, out))
    return out


def _record(
    ctx: LaneContext, rid: str, chain: _Chain, turn: int, req: Request, prompt: np.ndarray,
    mark: CacheMark, due_ns: int, think_s: float, out: StreamOutcome,
) -> RecordDict:
    """The request's record (``analysis.RequestRecord``'s fields, every one present).

    A request cut when the drain ended is ``incomplete`` (no error kind); one
    cut by the user's interrupt is ``cancelled`` / ``cancelled_interrupt``."""
    t0 = ctx.fixed.t0_ns
    end_ns = time.monotonic_ns()
    usage = out.usage or {}
    completion = usage.get("completion_tokens")
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    prompt_server = usage.get("prompt_tokens")
    sent_ns = out.sent_ns or end_ns
    status, kind = out.status, out.error_kind
    if status == "cancelled" and kind != ErrorKind.CANCELLED_INTERRUPT:
        status, kind = "incomplete", None
    return {
        "id": rid,
        "user": chain.user,
        "lane": chain.lane,
        "session": chain.session,
        "session_instance": chain.instance,
        "turn": turn,
        "agent": chain.agent,
        "kind": req.kind,
        "phase": cast(Phase, ctx.fixed.phase(sent_ns)),
        "worker": ctx.fixed.worker,
        "replica": mark.replica,
        "status": cast(RequestStatus, status),
        "error_kind": kind,
        "error_message": out.error_message if kind is not None else None,
        "http_status": out.http_status,
        "due_s": (due_ns - t0) / _NS,
        "sent_s": (sent_ns - t0) / _NS,
        "first_token_s": (out.first_ns - t0) / _NS if out.first_ns is not None else None,
        "last_token_s": (out.last_ns - t0) / _NS if out.last_ns is not None else None,
        "end_s": (end_ns - t0) / _NS,
        "chunk_times_s": [(t - t0) / _NS for t in out.chunk_ns],
        "chunk_tokens": out.chunk_tokens,
        "prompt_tokens": int(prompt.size),
        "prompt_tokens_server": int(prompt_server) if isinstance(prompt_server, int) else None,
        "output_tokens_asked": req.output_tokens,
        "output_tokens": int(completion) if isinstance(completion, int)
        else out.streamed_tokens,
        "cached_tokens": int(cached) if isinstance(cached, int) else None,
        "expected_cached_tokens": mark.expected,
        "think_applied_s": think_s,
    }


async def _run_chain(
    ctx: LaneContext, chain: _Chain, requests: Sequence[Request], start_turn: int,
    ready_ns: int, first_delay_ns: int | None = None, entry: int | None = None,
) -> bool:
    """Replay one agent chain closed loop; False once the run stops issuing.

    ``entry``: the turns from ``start_turn`` up to it prime the chain's history
    (a scenario's warmup requests): sent back to back, each as soon as the one
    before ended, and only while the warmup lasts (a priming turn not due by the
    window's start is skipped, so none is measured); the entry turn then waits
    for the window and then ``first_delay_ns`` (what is left of its gap when the
    entry point falls inside it)."""
    prev_prompt: np.ndarray | None = None
    prev_output: Sequence[int] = ()
    wbs = ctx.fixed.block_size
    encoder = ChainEncoder(ctx.fixed.spec, ctx.cache)
    for turn in range(start_turn, len(requests)):
        req = requests[turn]
        priming = entry is not None and turn < entry
        if priming and ready_ns >= ctx.fixed.warmup_end_ns:
            prev_prompt, prev_output = None, ()
            continue
        if prev_prompt is None and req.prefix_blocks:
            req = _standalone(requests, turn)
        if priming:
            wait = 0
        elif turn == (start_turn if entry is None else entry) and first_delay_ns is not None:
            wait = first_delay_ns
        else:
            wait = ctx.fixed.think_ns(req.think_time_s)
        # the entry turn waits for the window, then the rest of its gap (AIPerf: every
        # lane reaches its entry point at the warmup's end, then waits its recorded gap)
        due_ns = (max(ready_ns, ctx.fixed.warmup_end_ns) if turn == entry else ready_ns) + wait
        # under a system idle cap a wait past the drain may still be pulled forward
        # (``replay.load._dueclock``): it waits, and is judged by the due time that held
        if (due_ns >= ctx.fixed.issue_end_ns and not ctx.clock.capped) or ctx.state.stopped:
            return False
        prompt = ctx.build(req, chain.salt, prev_prompt, prev_output)
        body, hashed = encoder.prepare(prompt, req.output_tokens)
        rid = _rid(ctx)
        if ctx.on_plan is not None:
            ctx.on_plan(ctx, rid, chain, turn, req, prompt, due_ns, wait / _NS)
        held_ns = await ctx.clock.wait(due_ns)
        if held_ns >= ctx.fixed.issue_end_ns or ctx.state.stopped:
            return False
        wait -= due_ns - held_ns  # the think time applied: less what the cap took
        due_ns = held_ns
        out = StreamOutcome()
        mark = ctx.cache.observe(prompt, req.shared_blocks * wbs, chain.scope, hashed, out)
        await _send(ctx, chain, turn, req, prompt, body, mark, due_ns, wait / _NS, rid, out)
        ctx.cache.extend(mark, out.output_ids)
        prev_prompt = prompt
        prev_output = out.output_ids if out.status == "ok" else ()
        ready_ns = time.monotonic_ns()
        if req.subagents:
            ok = await _run_subagents(ctx, chain, req)
            ready_ns = time.monotonic_ns()
            if not ok:
                return False
    return True


def _standalone(requests: Sequence[Request], turn: int) -> Request:
    """A mid-session request (warmup start) with its whole block list spelled out."""
    full: list[int] = []
    for blocks in iter_block_ids(tuple(requests[: turn + 1])):
        full = blocks
    return requests[turn].model_copy(update={"prefix_blocks": 0, "new_block_ids": tuple(full)})


async def _run_subagents(ctx: LaneContext, parent: _Chain, req: Request) -> bool:
    """Start every subagent of ``req`` together; wait for the blocking ones only."""
    now = time.monotonic_ns()
    tasks = []
    for sub in req.subagents:
        chain = _Chain(user=parent.user, lane=f"{parent.lane}/sub{parent.subagents}",
                       session=parent.session, instance=parent.instance, salt=parent.salt,
                       scope=parent.scope, headers=parent.headers, agent=sub.id)
        parent.subagents += 1
        task = ctx.spawn(_lane(ctx, partial(_run_chain, ctx, chain, sub.requests, 0, now)))
        if sub.background:  # nobody waits for it; it holds the scope until it ends
            ctx.hold_scope(chain.scope)
            task.add_done_callback(partial(ctx.release_scope, chain.scope))
        else:
            tasks.append(task)
    results = await asyncio.gather(*tasks)
    return all(results)


async def _lane(ctx: LaneContext, chain: Callable[[], Coroutine[Any, Any, bool]]) -> bool:
    """Count a lane while it runs; ``chain`` makes its coroutine only then (a lane task
    cancelled before it started leaves no coroutine never awaited)."""
    ctx.state.lanes += 1
    try:
        return await chain()
    finally:
        ctx.state.lanes -= 1


async def closed_user(
    ctx: LaneContext, user: int, sessions: Sequence[Session], seed: int, midway: bool,
    warmup_s: float,
) -> None:
    """One closed-loop user: sessions back to back, recycled round robin (under a
    scenario, from the sampler all users share)."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 7, user])
    ctx.state.top_lanes += 1
    n = len(sessions)
    idx = user % n
    pinned = ctx.fixed.entries[user] if user < len(ctx.fixed.entries) else None
    if pinned is not None:
        idx = pinned[0]
    instance = 0
    ready_ns = ctx.fixed.t0_ns
    while True:
        sess = sessions[idx]
        start_turn = 0
        first_delay: int | None = None
        entry: int | None = None
        if instance == 0 and ctx.fixed.entry_ratio is not None:
            start_turn = entry_turn(rng, len(sess.requests), *ctx.fixed.entry_ratio)
            if pinned is not None:  # the same draws are made, so later users' stay put
                start_turn = pinned[1]
            think = ctx.fixed.think_ns(sess.requests[start_turn].think_time_s)
            share = rng.uniform(0.0, 1.0)
            first_delay = int(share * min(think, int(warmup_s * _NS)))
            if ctx.fixed.warmup_requests:  # prime the history before the entry turn
                entry = start_turn
                start_turn = max(0, entry - ctx.fixed.warmup_requests)
                first_delay = int(share * think)  # the rest of its gap after the entry point
        elif instance == 0 and midway:
            start_turn = int(rng.integers(0, len(sess.requests)))
            think = ctx.fixed.think_ns(sess.requests[start_turn].think_time_s)
            first_delay = int(rng.uniform(0.0, 1.0) * min(think, int(warmup_s * _NS)))
        chain = _Chain(user=user, lane=str(user), session=sess.id, instance=instance,
                       salt=salt_for(seed, user, instance, ctx.fixed.salt_nonce),
                       scope=(user, instance),
                       headers=ctx.fixed.chain_headers(f"{ctx.fixed.run_tag}-{user}-{instance}"))
        ctx.hold_scope(chain.scope)
        try:
            ok = await _lane(ctx, partial(_run_chain, ctx, chain, sess.requests, start_turn,
                                          ready_ns, first_delay, entry))
        finally:
            ctx.release_scope(chain.scope)
        if not ok:
            ctx.lane_ended(ctx.fixed.warmup_end_ns)
            return
        ready_ns = time.monotonic_ns()
        instance += 1
        if ctx.fixed.entry_ratio is not None:
            # a scenario's users share one sequential sampler, as AIPerf's AgentX lanes
            # do: whoever finishes a session next takes the next session in order
            idx = ctx.state.draws % n
            ctx.state.draws += 1
        else:
            idx = (idx + 1) % n


async def open_arrivals(
    ctx: LaneContext, sessions: Sequence[Session], arrivals_s: Sequence[float], seed: int,
) -> None:
    """Start session ``k % n`` at ``arrivals_s[k]`` as its own lane (user ``k``)."""
    ctx.state.top_lanes += 1
    n = len(sessions)
    for k, at in enumerate(arrivals_s):
        due_ns = ctx.fixed.t0_ns + int(at * _NS)
        if due_ns >= ctx.fixed.issue_end_ns:
            break
        due_ns = await ctx.clock.wait(due_ns)
        if ctx.state.stopped:
            return
        sess = sessions[k % n]
        chain = _Chain(user=k, lane=str(k), session=sess.id, instance=k // n,
                       salt=salt_for(seed, k, k // n), scope=("open", k),
                       headers=ctx.fixed.chain_headers(f"{ctx.fixed.run_tag}-o{k}"))
        ctx.spawn(_open_lane(ctx, chain, sess, due_ns))
    ctx.lane_ended(ctx.fixed.window_end_ns)


async def _open_lane(ctx: LaneContext, chain: _Chain, sess: Session, due_ns: int) -> None:
    ctx.hold_scope(chain.scope)
    try:
        await _lane(ctx, partial(_run_chain, ctx, chain, sess.requests, 0, due_ns, 0))
    finally:
        ctx.release_scope(chain.scope)


async def timestamp_session(
    ctx: LaneContext, user: int, sess: Session, seed: int, origin_s: float,
) -> None:
    """Send every request of ``sess`` at its own ``arrival_s`` (minus ``origin_s``)."""
    chain = _Chain(user=user, lane=str(user), session=sess.id, instance=0,
                   salt=salt_for(seed, user, 0), scope=("ts", user),
                   headers=ctx.fixed.chain_headers(f"{ctx.fixed.run_tag}-t{user}"))
    prev: np.ndarray | None = None
    wbs = ctx.fixed.block_size
    pending: list[asyncio.Task[Any]] = []
    encoder = ChainEncoder(ctx.fixed.spec, ctx.cache)
    ctx.state.top_lanes += 1
    try:
        for turn, req in enumerate(sess.requests):
            at = (req.arrival_s or 0.0) - origin_s
            due_ns = ctx.fixed.t0_ns + int(max(at, 0.0) * _NS)
            if due_ns >= ctx.fixed.issue_end_ns or ctx.state.stopped:
                break
            prompt = ctx.build(req, chain.salt, prev, ())
            body, hashed = encoder.prepare(prompt, req.output_tokens)
            prev = prompt
            due_ns = await ctx.clock.wait(due_ns)
            if ctx.state.stopped:
                break
            out = StreamOutcome()
            mark = ctx.cache.observe(prompt, req.shared_blocks * wbs, chain.scope, hashed, out)
            pending.append(ctx.spawn(_send(ctx, chain, turn, req, prompt, body, mark, due_ns, 0.0,
                                           _rid(ctx), out)))
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        ctx.lane_ended(ctx.fixed.window_end_ns)
    finally:
        ctx.cache.end_scope(chain.scope)
