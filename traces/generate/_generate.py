"""Synthetic agent sessions drawn from a profile (pure: no clock, no I/O).

Each session is a growing history: the first prompt is the agent type's shared
prefix (system prompt + tool definitions, identical block ids across sessions
of that type) plus task context; every later turn appends the previous output
and a tool result or user text (``traces._gen_chain``). Deterministic for a
seed: each session draws from its own ``numpy`` Generator seeded with
``(seed, index)``; block ids come from one counter in session order.

Any context size: unless ``prompt_scale``/``output_scale`` are given, every
token size is multiplied by ``token_scale = min(1, max_context /
REFERENCE_CONTEXT)``, so a 2K-context test model gets the same session *shape*
(turns, think times, prefix reuse) as a 200K production model, only smaller.
What the cap still had to change (compactions, truncated inputs, capped
outputs) is counted in the header of ``generate_trace``.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterator
from dataclasses import KW_ONLY, dataclass
from statistics import NormalDist
from typing import ParamSpec, TypeVar

import numpy as np

from traces._errors import TraceError
from traces._import_common import Counters, ImportedTrace
from traces._models import Request, RequestKind, Session, Subagent, WorkloadHeader
from traces.generate._chain import Chain, Ids
from traces.generate._decode import DECODE, decode_sessions
from traces.generate._profiles import PROFILES, AgentType, Profile

__all__ = ["DEFAULT_MAX_CONTEXT", "REFERENCE_CONTEXT", "GenerateParams", "generate",
           "generate_trace", "token_scale_for"]

DEFAULT_MAX_CONTEXT = 131_072
REFERENCE_CONTEXT = 200_000
"""The context the calibrated sessions are shaped for (most real sessions ran
on 200K-context models); smaller ``max_context`` scales token sizes down."""

_MAX_SESSIONS = 10_000_000
_COUNTED = ("truncated_requests", "compactions", "sessions_compacted", "outputs_capped")


def token_scale_for(max_context: int) -> float:
    """The token-size scale that fits the calibrated shape into ``max_context``."""
    return min(1.0, max_context / REFERENCE_CONTEXT)


def _tokens(x: float) -> int:
    return max(1, int(round(x)))


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


def _positive(name: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise TraceError(f"must be a positive number, got {value}", field=name)


def _check_common(sessions: int, block_size: int, max_context: int, seed: int = 0) -> None:
    if not 0 <= seed < 2**63:  # numpy seeds are non-negative; one line, not its traceback
        raise TraceError(f"must be a whole number from 0 to 2^63-1, got {seed}", field="seed")
    if sessions < 0:
        raise TraceError("must be >= 0", field="sessions")
    if sessions > _MAX_SESSIONS:  # a typo such as 2**80 would write until the disk is full
        raise TraceError(f"must be <= {_MAX_SESSIONS:,}", field="sessions")
    if block_size < 1:
        raise TraceError("must be >= 1", field="block_size")
    if max_context < 16:
        raise TraceError("must be >= 16 tokens", field="max_context")


def _check_knobs(knobs: _Knobs) -> None:
    for name in ("prompt_scale", "think_scale", "output_scale"):
        _positive(name, getattr(knobs, name))
    largest = max(
        _shared_blocks(a, knobs) * knobs.block_size
        for a in (*knobs.agent_types, *knobs.profile.subagent_types)
    )
    if largest > knobs.max_context // 4:
        raise TraceError(
            f"the shared prefix ({largest} tokens at prompt_scale {knobs.prompt_scale:g}) "
            f"needs max_context >= {4 * largest}; lower prompt_scale (or leave it out to "
            "scale to the context) or raise max_context", field="max_context",
        )


@dataclass(frozen=True)
class GenerateParams:
    """What a synthetic workload is drawn from, declared once for :func:`generate` and
    :func:`generate_trace` (and ``traces generate``'s options).

    ``prompt_scale`` multiplies every prompt size and ``output_scale`` every output
    (both default to the token scale for ``max_context``); ``think_scale``
    multiplies every pause; ``agent_types`` keeps the first N types. The ``decode``
    profile takes ``input_tokens``, ``output_tokens`` and ``requests_per_session``
    instead (fixed sizes, no think time, no reuse).
    """

    profile: str = "coding-agent"
    _: KW_ONLY
    sessions: int
    seed: int = 0
    max_context: int = DEFAULT_MAX_CONTEXT
    block_size: int = 64
    prompt_scale: float | None = None
    think_scale: float = 1.0
    output_scale: float | None = None
    agent_types: int | None = None
    input_tokens: int = 1
    output_tokens: int = 1000
    requests_per_session: int = 1


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _taking(
    params: Callable[_P, GenerateParams],
) -> Callable[[Callable[[GenerateParams], _R]], Callable[_P, _R]]:
    """A function of :class:`GenerateParams` called with the params' own arguments
    (``generate(profile, sessions=..., ...)``): both entry points share one declaration."""

    def wrap(fn: Callable[[GenerateParams], _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            return fn(params(*args, **kwargs))

        # help() and inspect show the params' arguments, not the wrapped function's
        call.__signature__ = inspect.signature(params).replace(  # type: ignore[attr-defined]
            return_annotation=inspect.signature(fn).return_annotation)
        return call

    return wrap


@_taking(GenerateParams)
def generate(params: GenerateParams) -> tuple[WorkloadHeader, Iterator[Session]]:
    """A header and a lazy iterator of ``sessions`` synthetic sessions.

    The header is written before the sessions are drawn, so it holds no counts
    of what the cap changed: ``generate_trace`` gives a header with them.
    """
    trace = _trace(params)
    return trace.base_header, trace.sessions


@_taking(GenerateParams)
def generate_trace(params: GenerateParams) -> ImportedTrace:
    """Sessions and a header that counts, once they are drawn, what the cap changed."""
    return _trace(params)


def _trace(given: GenerateParams) -> ImportedTrace:
    profile, sessions, seed = given.profile, given.sessions, given.seed
    max_context, block_size = given.max_context, given.block_size
    prompt_scale, think_scale = given.prompt_scale, given.think_scale
    output_scale, agent_types = given.output_scale, given.agent_types
    input_tokens, output_tokens = given.input_tokens, given.output_tokens
    requests_per_session = given.requests_per_session
    _check_common(sessions, block_size, max_context, seed)
    if profile == DECODE:
        return decode_sessions(sessions=sessions, max_context=max_context,
                               block_size=block_size, input_tokens=input_tokens,
                               output_tokens=output_tokens,
                               requests_per_session=requests_per_session)
    if profile not in PROFILES:
        known = ", ".join(sorted([*PROFILES, DECODE]))
        raise TraceError(f"unknown profile {profile!r} (known: {known})", field="profile")
    prof = PROFILES[profile]
    n_types = len(prof.agent_types) if agent_types is None else agent_types
    if not 1 <= n_types <= len(prof.agent_types):
        raise TraceError(f"must be between 1 and {len(prof.agent_types)}", field="agent_types")
    auto = token_scale_for(max_context)
    knobs = _Knobs(
        prof, sessions, seed, max_context, block_size,
        auto if prompt_scale is None else prompt_scale, think_scale,
        (auto if prompt_scale is None else 1.0) if output_scale is None else output_scale,
        prof.agent_types[:n_types],
    )
    _check_knobs(knobs)
    params: dict[str, object] = {
        "profile": profile, "sessions": sessions, "prompt_scale": knobs.prompt_scale,
        "think_scale": think_scale, "output_scale": knobs.output_scale,
        "agent_types": [a.name for a in knobs.agent_types],
    }
    if prompt_scale is None and output_scale is None:
        params["token_scale"] = auto
    header = WorkloadHeader(source=profile, seed=seed, block_size=block_size,
                            sessions=sessions, arrival="closed", max_context=max_context,
                            params=params)
    return ImportedTrace(header, lambda counters: _sessions(knobs, counters), _COUNTED)


_WEYL_STEPS = (0.6180339887498949, 0.4142135623730951, 0.7320508075688772)
_NORMAL = NormalDist()


class _Spread:
    """Session-level uniform numbers that cover [0, 1) evenly for any session count.

    Additive recurrences (frac(offset + index * irrational)) instead of
    independent draws: 300 sessions then hit the turns and first-prompt
    percentiles as closely as thousands of random ones would.
    """

    def __init__(self, seed: int) -> None:
        self.offsets = np.random.default_rng([seed, 0x5EED]).random(len(_WEYL_STEPS))

    def at(self, index: int) -> tuple[float, float, float]:
        u = [(o + index * s) % 1.0 for o, s in zip(self.offsets, _WEYL_STEPS, strict=True)]
        return u[0], u[1], u[2]


def _coupled(u_first: float, u_other: float, rho: float) -> float:
    """A uniform number correlated with ``u_first`` (Gaussian copula, correlation rho)."""
    a, b = (min(max(x, 1e-12), 1 - 1e-12) for x in (u_first, u_other))
    z = rho * _NORMAL.inv_cdf(a) + math.sqrt(1 - rho * rho) * _NORMAL.inv_cdf(b)
    return _NORMAL.cdf(z)


def _sessions(knobs: _Knobs, counters: Counters) -> Iterator[Session]:
    ids = Ids(0)
    spread = _Spread(knobs.seed)
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
        before = counters.compactions
        yield _session(knobs, rng, spread.at(index), ids, shared, weights, sub_weights,
                       f"s{index:0{width}d}", counters)
        counters.sessions_compacted += counters.compactions > before


def _window(p: Profile, first: float, u: float) -> int:
    """The agent's context window: chosen by weight, grown to hold the first prompt."""
    sizes = [w for w, _ in p.context_windows]
    weights = np.array([x for _, x in p.context_windows])
    k = min(int(np.searchsorted(np.cumsum(weights / weights.sum()), u, side="right")),
            len(sizes) - 1)
    while k + 1 < len(sizes) and first > p.compact_at * sizes[k]:
        k += 1
    return sizes[k]


def _outputs(knobs: _Knobs, rng: np.random.Generator, n: int, counters: Counters
             ) -> np.ndarray:
    cap = max(1, knobs.max_context // 4)
    drawn = np.maximum(1, np.round(knobs.profile.output.draw(rng, n, knobs.output_scale)))
    counters.outputs_capped += int((drawn > cap).sum())
    return np.minimum(drawn, cap)


def _chain(knobs: _Knobs, shared_ids: tuple[int, ...], window: int, ids: Ids,
           counters: Counters) -> Chain:
    p = knobs.profile
    own = int(p.compact_at * window * knobs.prompt_scale)
    return Chain(shared_ids, knobs.block_size, own, knobs.max_context, p.compact_target,
                 p.summary_share, ids, counters)


def _session(
    knobs: _Knobs, rng: np.random.Generator, spread: tuple[float, float, float], ids: Ids,
    shared: dict[str, tuple[int, ...]],
    weights: np.ndarray, sub_weights: np.ndarray, session_id: str, counters: Counters,
) -> Session:
    p = knobs.profile
    ps, ts = knobs.prompt_scale, knobs.think_scale
    agent = knobs.agent_types[int(rng.choice(len(weights), p=weights))]
    u_first, u_turns, u_window = spread
    u_turns = _coupled(u_first, u_turns, p.turns_first_correlation)
    n = max(1, int(round(float(p.turns.at(np.array([u_turns]))[0]))))
    first = float(p.first_prompt.at(np.array([u_first]))[0])
    window = _window(p, first, u_window)
    outputs = _outputs(knobs, rng, n, counters)
    u = rng.random(n)
    thinks = p.think.at(u) * ts
    is_user = u >= 1.0 - p.user_text_share
    appends = p.new_input.draw(rng, n, ps)

    # Subagents: which parent requests spawn them (never the last one).
    spawns: dict[int, list[AgentType]] = {}
    if n >= 2 and rng.random() < p.subagent_session_share:
        count = 1 + int(rng.poisson(p.subagents_extra_mean))
        points = rng.choice(n - 1, size=min(3, n - 1), replace=False)
        for _ in range(count):
            at = int(points[int(rng.integers(len(points)))])
            sub_type = p.subagent_types[int(rng.choice(len(sub_weights), p=sub_weights))]
            spawns.setdefault(at, []).append(sub_type)

    chain = _chain(knobs, shared[agent.name], window, ids, counters)
    requests: list[Request] = []
    compactions = 0
    returned = 0  # tokens this request's subagents hand back to the next one
    for i in range(n):
        output = int(outputs[i])
        incoming, returned = returned, 0
        subs: list[Subagent] = []
        for j, sub_type in enumerate(spawns.get(i, ())):
            sub, sub_compactions, final = _subagent(
                knobs, rng, ids, shared[sub_type.name], sub_type, f"{session_id}.{i}.{j}",
                counters,
            )
            subs.append(sub)
            compactions += sub_compactions
            returned += final
        if i == 0:
            head = chain.shared_tokens
            req = chain.next(max(1, _tokens(first * ps) - head), output, 0.0, "user_text", subs)
        else:
            prev_out = requests[-1].output_tokens
            if incoming:
                kind: RequestKind = "subagent_return"
                append = incoming + 16
                think = float(p.return_think.draw(rng, 1, ts)[0])
            else:
                kind = "user_text" if is_user[i] else "tool_result"
                append, think = _tokens(appends[i]), float(thinks[i])
            req = chain.next(prev_out + append, output, round(think, 3), kind, subs)
        requests.append(req)
    return Session(
        id=session_id, agent_type=agent.name, requests=tuple(requests),
        compactions=compactions + chain.compactions,
    )


def _subagent(
    knobs: _Knobs, rng: np.random.Generator, ids: Ids, shared_ids: tuple[int, ...],
    sub_type: AgentType, sub_id: str, counters: Counters,
) -> tuple[Subagent, int, int]:
    """A subagent chain; returns it, its compactions and its final output size."""
    p = knobs.profile
    ps, ts = knobs.prompt_scale, knobs.think_scale
    n = max(2, int(round(float(p.subagent_turns.draw(rng, 1)[0]))))
    outputs = _outputs(knobs, rng, n, counters)
    final = float(p.subagent_final_output.draw(rng, 1, knobs.output_scale)[0])
    outputs[-1] = min(max(1, round(final)), max(1, knobs.max_context // 4))
    tool_in = p.subagent_tool_result.draw(rng, n, ps)
    thinks = p.subagent_think.draw(rng, n, ts)
    task = _tokens(float(p.subagent_task.draw(rng, 1, ps)[0]))
    chain = _chain(knobs, shared_ids, min(w for w, _ in p.context_windows), ids, counters)
    requests: list[Request] = []
    for i in range(n):
        output = int(outputs[i])
        if i == 0:
            requests.append(chain.next(task, output, 0.0, "user_text"))
        else:
            append = requests[-1].output_tokens + _tokens(tool_in[i])
            requests.append(
                chain.next(append, output, round(float(thinks[i]), 3), "tool_result")
            )
    sub = Subagent(id=sub_id, type=sub_type.name, requests=tuple(requests))
    return sub, chain.compactions, requests[-1].output_tokens
