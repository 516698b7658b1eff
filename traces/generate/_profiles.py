"""Generator profiles as data: distributions calibrated to published traces.

``coding-agent`` follows the full WEKA/AgentX dataset table in
``shared/traces/SOURCES.md`` (710 real Claude Code sessions). Turns, first
prompt, completion tokens and think time are drawn from that table's
percentiles directly (``Quantiles``: log-linear between the published p10,
p50, p90 and p99, with ends chosen to give the published means). The new input
a turn appends (tool result or user text) is tuned so that, added to the
previous output, it gives the table's "new prompt tokens per turn"; prompt
sizes and the 96% prefix reuse then follow from the history growing turn by
turn. Agents compact their own history near their model's context window
(200K for most sessions, 700K-1M for the long ones), as Claude Code does. Token
sizes are before any scaling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["PROFILES", "AgentType", "Distribution", "LogNormal", "Profile", "Quantiles"]


@dataclass(frozen=True)
class LogNormal:
    """A lognormal given by its median and log-space sigma, clipped to [low, high]."""

    median: float
    sigma: float
    low: float = 1.0
    high: float = 1e12

    def draw(self, rng: np.random.Generator, size: int, scale: float = 1.0) -> np.ndarray:
        x = rng.lognormal(math.log(self.median), self.sigma, size) * scale
        return np.clip(x, self.low * min(scale, 1.0), self.high * max(scale, 1.0))


@dataclass(frozen=True)
class Quantiles:
    """An empirical distribution: ``(cumulative probability, value)`` knots.

    Values are interpolated log-linearly between knots; the first knot has
    probability 0 and the last 1. Drawing maps one uniform number through it,
    so a caller can tie two draws together by reusing the number.
    """

    knots: tuple[tuple[float, float], ...]

    def at(self, u: np.ndarray) -> np.ndarray:
        probs = np.array([p for p, _ in self.knots])
        logs = np.log(np.array([v for _, v in self.knots]))
        return np.asarray(np.exp(np.interp(u, probs, logs)))

    def draw(self, rng: np.random.Generator, size: int, scale: float = 1.0) -> np.ndarray:
        return self.at(rng.random(size)) * scale


Distribution = LogNormal | Quantiles


@dataclass(frozen=True)
class AgentType:
    """An agent flavour: its shared prefix (system prompt + tool definitions)."""

    name: str
    weight: float
    shared_tokens: int


@dataclass(frozen=True)
class Profile:
    """Everything the generator draws from; one instance per named profile."""

    name: str
    agent_types: tuple[AgentType, ...]
    subagent_types: tuple[AgentType, ...]
    turns: Quantiles
    first_prompt: Quantiles
    """The whole first prompt (shared prefix included)."""
    output: Distribution
    new_input: Distribution
    """Tokens a turn appends besides the previous output (tool result, user text)."""
    think: Quantiles
    user_text_share: float
    """The longest pauses (this share of them) come before user text."""
    turns_first_correlation: float
    """Gaussian-copula correlation of a session's turns with its first prompt
    (negative: sessions resumed with a huge context are short)."""
    context_windows: tuple[tuple[int, float], ...]
    """(agent's context window, weight); a session whose first prompt needs a
    larger window gets the smallest one that holds it."""
    compact_at: float
    """The agent compacts when the next prompt and its output would pass this
    share of its window."""
    subagent_session_share: float
    subagents_extra_mean: float
    """Subagents per spawning session = 1 + Poisson(this)."""
    subagent_turns: Distribution
    subagent_task: Distribution
    subagent_tool_result: Distribution
    subagent_think: Distribution
    subagent_final_output: Distribution
    return_think: Distribution
    """Pause between the last subagent finishing and the parent's next request."""
    compact_target: float = 0.5
    """After a compaction the history fills this share of the window."""
    summary_share: float = 0.02
    """Tokens of the compaction summary, as a share of the window."""


# The full-dataset percentiles of SOURCES.md (p10, p50, p90, p99), with ends.
CODING_AGENT = Profile(
    name="coding-agent",
    agent_types=(
        AgentType("coder", 0.5, 11_000),
        AgentType("coder-mcp", 0.3, 13_000),
        AgentType("coder-lite", 0.2, 8_000),
        AgentType("coder-custom", 0.1, 10_000),
    ),
    subagent_types=(
        AgentType("explore", 0.7, 8_400),
        AgentType("plan", 0.3, 8_500),
    ),
    turns=Quantiles(((0.0, 1.0), (0.1, 7.0), (0.5, 45.0), (0.9, 155.0), (0.99, 329.0),
                     (1.0, 700.0))),
    first_prompt=Quantiles(((0.0, 9_000.0), (0.1, 15_458.0), (0.5, 24_454.0),
                            (0.9, 258_903.0), (0.99, 708_057.0), (1.0, 780_000.0))),
    output=Quantiles(((0.0, 1.0), (0.1, 105.0), (0.5, 216.0), (0.9, 898.0),
                      (0.99, 3_686.0), (1.0, 16_000.0))),
    # Fitted so previous output + this gives "new prompt tokens per turn".
    new_input=Quantiles(((0.0, 1.0), (0.1, 53.0), (0.5, 177.0), (0.9, 2_258.0),
                         (0.99, 64_629.0), (1.0, 120_000.0))),
    # 19.1% of gaps over 60 s and 7.0% over 300 s are knots too.
    think=Quantiles(((0.0, 0.5), (0.1, 4.0), (0.5, 10.0), (0.809, 60.0), (0.9, 170.0),
                     (0.93, 300.0), (0.99, 3_039.0), (1.0, 14_400.0))),
    user_text_share=0.15,
    turns_first_correlation=-0.7,
    # 85% of sessions on 200K models; the long ones on larger windows.
    context_windows=((200_000, 0.85), (700_000, 0.15), (1_000_000, 0.0)),
    compact_at=0.8,
    subagent_session_share=0.024,
    subagents_extra_mean=2.7,
    subagent_turns=LogNormal(11, 0.45, 2, 60),
    subagent_task=LogNormal(3_000, 0.8, 50, 1e9),
    subagent_tool_result=LogNormal(2_500, 1.2, 1, 1e9),
    subagent_think=LogNormal(3, 0.6, 0.0, 600),
    subagent_final_output=LogNormal(3_500, 0.4, 1, 32_000),
    return_think=LogNormal(2, 0.5, 0.0, 120),
)

PROFILES: dict[str, Profile] = {CODING_AGENT.name: CODING_AGENT}
