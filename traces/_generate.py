"""Synthetic agent sessions drawn from a profile (pure: no clock, no I/O).

Each session is a growing history: the first prompt is the agent type's shared
prefix (system prompt + tool definitions, identical block ids across sessions
of that type) plus task context; every later turn appends the previous output
and a tool result or user text. When the next prompt plus its output would not
fit ``max_context``, the history is compacted: the shared prefix stays, a
summary replaces the oldest turns, and the most recent turns are kept (counted
in ``Session.compactions``). Deterministic for a seed: each session draws from
its own ``numpy`` Generator seeded with ``(seed, index)``; block ids come from
one counter in session order.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from traces._errors import TraceError
from traces._models import Request, RequestKind, Session, Subagent, WorkloadHeader
from traces._profiles import PROFILES, AgentType, LogNormal, Profile

__all__ = ["DEFAULT_MAX_CONTEXT", "generate"]

DEFAULT_MAX_CONTEXT = 131_072


def _draw(rng: np.random.Generator, dist: LogNormal, size: int, scale: float = 1.0) -> np.ndarray:
    x = rng.lognormal(math.log(dist.median), dist.sigma, size) * scale
    return np.clip(x, dist.low * min(scale, 1.0), dist.high * max(scale, 1.0))


def _tokens(x: float) -> int:
    return max(1, int(round(x)))


@dataclass
class _Ids:
    """Fresh global block ids, one counter for the whole workload."""

    next_id: int

    def take(self, n: int) -> tuple[int, ...]:
        start = self.next_id
        self.next_id += n
        return tuple(range(start, start + n))


@dataclass
class _Chain:
    """One agent's growing prompt: token count, history segments, compactions.

    Appending keeps every full block of the previous prompt (its partial last
    block changes content, so it gets a new id); only new ids are stored.
    """

    shared_ids: tuple[int, ...]
    block_size: int
    max_context: int
    profile: Profile
    ids: _Ids
    tokens: int = 0
    segments: list[int] = field(default_factory=list)
    compactions: int = 0

    @property
    def shared_tokens(self) -> int:
        return len(self.shared_ids) * self.block_size

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def next(
        self, append: int, output: int, think: float, kind: RequestKind,
        subagents: Sequence[Subagent] = (),
    ) -> Request:
        bs, shared = self.block_size, len(self.shared_ids)
        room = self.max_context - output
        if not self.tokens:
            append = max(1, min(append, room - self.shared_tokens))
            tokens = self.shared_tokens + append
            prefix = 0
            new = self.shared_ids + self.ids.take(self._blocks(tokens) - shared)
            self.segments = [append]
        elif self.tokens + append <= room:
            tokens = self.tokens + append
            prefix = self.tokens // bs
            new = self.ids.take(self._blocks(tokens) - prefix)
            self.segments.append(append)
        else:
            tokens = self._compact(append, room)
            prefix = shared
            new = self.ids.take(self._blocks(tokens) - shared)
        self.tokens = tokens
        return Request(
            prompt_tokens=tokens,
            output_tokens=output,
            prefix_blocks=prefix,
            new_block_ids=new,
            shared_blocks=shared,
            think_time_s=think,
            kind=kind,
            subagents=tuple(subagents),
        )

    def _compact(self, append: int, room: int) -> int:
        """Keep the shared prefix, a summary and the newest turns that fit."""
        summary = max(1, int(self.profile.summary_share * self.max_context))
        target = int(self.profile.compact_target * self.max_context)
        budget = max(1, min(target, room) - self.shared_tokens - summary)
        kept: list[int] = []
        total = 0
        for seg in reversed([*self.segments, append]):
            if total + seg > budget:
                break
            kept.append(seg)
            total += seg
        if not kept:  # the new input alone is too big: keep its tail
            kept = [budget]
            total = budget
        kept.reverse()
        self.segments = [summary, *kept]
        self.compactions += 1
        return self.shared_tokens + summary + total


@dataclass(frozen=True)
class _Knobs:
    profile: Profile
    sessions: int
    seed: int
    max_context: int
    block_size: int
    prompt_scale: float
    think_scale: float
    output_scale: float
    agent_types: tuple[AgentType, ...]


def _shared_blocks(agent: AgentType, knobs: _Knobs) -> int:
    return max(1, round(agent.shared_tokens * knobs.prompt_scale / knobs.block_size))


def _check_knobs(knobs: _Knobs) -> None:
    def bad(name: str, message: str) -> TraceError:
        return TraceError(message, field=name)

    if knobs.sessions < 0:
        raise bad("sessions", "must be >= 0")
    if knobs.block_size < 1:
        raise bad("block_size", "must be >= 1")
    for name in ("prompt_scale", "think_scale", "output_scale"):
        value = getattr(knobs, name)
        if not (value > 0 and math.isfinite(value)):
            raise bad(name, f"must be a positive number, got {value}")
    if knobs.max_context < 16:
        raise bad("max_context", "must be >= 16 tokens")
    largest = max(
        _shared_blocks(a, knobs) * knobs.block_size
        for a in (*knobs.agent_types, *knobs.profile.subagent_types)
    )
    if largest > knobs.max_context // 4:
        raise bad(
            "max_context",
            f"the shared prefix ({largest} tokens at prompt_scale {knobs.prompt_scale}) "
            f"needs max_context >= {4 * largest}; lower prompt_scale or raise max_context",
        )


def generate(
    profile: str = "coding-agent",
    *,
    sessions: int,
    seed: int = 0,
    max_context: int = DEFAULT_MAX_CONTEXT,
    block_size: int = 64,
    prompt_scale: float = 1.0,
    think_scale: float = 1.0,
    output_scale: float = 1.0,
    agent_types: int | None = None,
) -> tuple[WorkloadHeader, Iterator[Session]]:
    """A header and a lazy iterator of ``sessions`` synthetic sessions.

    ``prompt_scale`` multiplies every prompt size (shared prefix, context, tool
    results) and ``think_scale`` every pause, so one shape fits a 4K-context test
    model or a 256K production model; ``agent_types`` keeps the first N types.
    """
    if profile not in PROFILES:
        raise TraceError(
            f"unknown profile {profile!r} (known: {', '.join(sorted(PROFILES))})",
            field="profile",
        )
    prof = PROFILES[profile]
    n_types = len(prof.agent_types) if agent_types is None else agent_types
    if not 1 <= n_types <= len(prof.agent_types):
        raise TraceError(
            f"must be between 1 and {len(prof.agent_types)}", field="agent_types"
        )
    knobs = _Knobs(
        prof, sessions, seed, max_context, block_size, prompt_scale, think_scale,
        output_scale, prof.agent_types[:n_types],
    )
    _check_knobs(knobs)
    header = WorkloadHeader(
        source=profile,
        seed=seed,
        block_size=block_size,
        sessions=sessions,
        arrival="closed",
        max_context=max_context,
        params={
            "profile": profile,
            "sessions": sessions,
            "prompt_scale": prompt_scale,
            "think_scale": think_scale,
            "output_scale": output_scale,
            "agent_types": [a.name for a in knobs.agent_types],
        },
    )
    return header, _sessions(knobs)


def _sessions(knobs: _Knobs) -> Iterator[Session]:
    ids = _Ids(0)
    shared: dict[str, tuple[int, ...]] = {}
    for agent in (*knobs.agent_types, *knobs.profile.subagent_types):
        shared[agent.name] = ids.take(_shared_blocks(agent, knobs))
    weights = np.array([a.weight for a in knobs.agent_types])
    weights = weights / weights.sum()
    sub_weights = np.array([a.weight for a in knobs.profile.subagent_types])
    sub_weights = sub_weights / sub_weights.sum()
    width = len(str(max(knobs.sessions - 1, 0)))
    for index in range(knobs.sessions):
        rng = np.random.default_rng([knobs.seed, index])
        yield _session(knobs, rng, ids, shared, weights, sub_weights, f"s{index:0{width}d}")


def _session(
    knobs: _Knobs, rng: np.random.Generator, ids: _Ids, shared: dict[str, tuple[int, ...]],
    weights: np.ndarray, sub_weights: np.ndarray, session_id: str,
) -> Session:
    p = knobs.profile
    ps, ts = knobs.prompt_scale, knobs.think_scale
    agent = knobs.agent_types[int(rng.choice(len(weights), p=weights))]
    n = int(round(float(_draw(rng, p.turns, 1)[0])))
    out_cap = max(1, knobs.max_context // 4)
    outputs = np.minimum(_draw(rng, p.output, n, knobs.output_scale), out_cap)
    is_user = rng.random(n) < p.user_text_share
    tool_in = _draw(rng, p.tool_result, n, ps)
    user_in = _draw(rng, p.user_text, n, ps)
    think_tool = _draw(rng, p.think_tool, n, ts)
    think_user = _draw(rng, p.think_user, n, ts)
    first = float(_draw(rng, p.first_context, 1, ps)[0])

    # Subagents: which parent requests spawn them (never the last one).
    spawns: dict[int, list[AgentType]] = {}
    if n >= 2 and rng.random() < p.subagent_session_share:
        count = 1 + int(rng.poisson(p.subagents_extra_mean))
        points = rng.choice(n - 1, size=min(3, n - 1), replace=False)
        for _ in range(count):
            at = int(points[int(rng.integers(len(points)))])
            sub_type = p.subagent_types[int(rng.choice(len(sub_weights), p=sub_weights))]
            spawns.setdefault(at, []).append(sub_type)

    chain = _Chain(shared[agent.name], knobs.block_size, knobs.max_context, p, ids)
    requests: list[Request] = []
    compactions = 0
    returned = 0  # tokens this request's subagents hand back to the next one
    for i in range(n):
        output = _tokens(outputs[i])
        incoming, returned = returned, 0
        subs: list[Subagent] = []
        for j, sub_type in enumerate(spawns.get(i, ())):
            sub, sub_compactions, final = _subagent(
                knobs, rng, ids, shared[sub_type.name], sub_type, f"{session_id}.{i}.{j}"
            )
            subs.append(sub)
            compactions += sub_compactions
            returned += final
        if i == 0:
            req = chain.next(_tokens(first), output, 0.0, "user_text", subs)
        else:
            prev_out = requests[-1].output_tokens
            if incoming:
                kind: RequestKind = "subagent_return"
                append, think = incoming + 16, float(_draw(rng, p.return_think, 1, ts)[0])
            elif is_user[i]:
                kind, append, think = "user_text", _tokens(user_in[i]), float(think_user[i])
            else:
                kind, append, think = "tool_result", _tokens(tool_in[i]), float(think_tool[i])
            req = chain.next(prev_out + append, output, round(think, 3), kind, subs)
        requests.append(req)
    return Session(
        id=session_id, agent_type=agent.name, requests=tuple(requests),
        compactions=compactions + chain.compactions,
    )


def _subagent(
    knobs: _Knobs, rng: np.random.Generator, ids: _Ids, shared_ids: tuple[int, ...],
    sub_type: AgentType, sub_id: str,
) -> tuple[Subagent, int, int]:
    """A subagent chain; returns it, its compactions and its final output size."""
    p = knobs.profile
    ps, ts = knobs.prompt_scale, knobs.think_scale
    n = int(round(float(_draw(rng, p.subagent_turns, 1)[0])))
    out_cap = max(1, knobs.max_context // 4)
    outputs = np.minimum(_draw(rng, p.output, n, knobs.output_scale), out_cap)
    outputs[-1] = min(float(_draw(rng, p.subagent_final_output, 1, knobs.output_scale)[0]),
                      out_cap)
    tool_in = _draw(rng, p.subagent_tool_result, n, ps)
    thinks = _draw(rng, p.subagent_think, n, ts)
    task = _tokens(float(_draw(rng, p.subagent_task, 1, ps)[0]))
    chain = _Chain(shared_ids, knobs.block_size, knobs.max_context, p, ids)
    requests: list[Request] = []
    for i in range(n):
        output = _tokens(outputs[i])
        if i == 0:
            requests.append(chain.next(task, output, 0.0, "user_text"))
        else:
            append = requests[-1].output_tokens + _tokens(tool_in[i])
            requests.append(
                chain.next(append, output, round(float(thinks[i]), 3), "tool_result")
            )
    sub = Subagent(id=sub_id, type=sub_type.name, requests=tuple(requests))
    return sub, chain.compactions, requests[-1].output_tokens
