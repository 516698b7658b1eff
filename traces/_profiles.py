"""Generator profiles as data: distributions calibrated to published traces.

``coding-agent`` follows the WEKA/AgentX coding-agent statistics in
``shared/traces/SOURCES.md`` (710 real Claude Code sessions): turns p50 45 /
p90 155; completion tokens p50 216 / mean 439; think time p50 10 s, p90 171 s,
17.6% of gaps over 60 s and 5.1% over 300 s (fitted as a mixture: short gaps
after tool results, long human gaps before user text); 85% of turns carry a
tool result; first prompt p50 ~24K (system prompt + tool definitions, shared
across users of one agent type, plus the task context); ~2.4% of sessions spawn
subagents whose prompts reach ~45K. Token sizes are before ``prompt_scale``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROFILES", "AgentType", "LogNormal", "Profile"]


@dataclass(frozen=True)
class LogNormal:
    """A lognormal given by its median and log-space sigma, clipped to [low, high]."""

    median: float
    sigma: float
    low: float = 1.0
    high: float = 1e12


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
    turns: LogNormal
    first_context: LogNormal
    output: LogNormal
    tool_result: LogNormal
    user_text: LogNormal
    user_text_share: float
    think_tool: LogNormal
    think_user: LogNormal
    subagent_session_share: float
    subagents_extra_mean: float
    """Subagents per spawning session = 1 + Poisson(this)."""
    subagent_turns: LogNormal
    subagent_task: LogNormal
    subagent_tool_result: LogNormal
    subagent_think: LogNormal
    subagent_final_output: LogNormal
    return_think: LogNormal
    """Pause between the last subagent finishing and the parent's next request."""
    compact_target: float = 0.5
    """After a compaction the history fills this share of max_context."""
    summary_share: float = 0.02
    """Tokens of the compaction summary, as a share of max_context."""


CODING_AGENT = Profile(
    name="coding-agent",
    agent_types=(
        AgentType("coder", 0.5, 15_000),
        AgentType("coder-mcp", 0.3, 22_000),
        AgentType("coder-lite", 0.2, 9_000),
        AgentType("coder-custom", 0.1, 12_000),
    ),
    subagent_types=(
        AgentType("explore", 0.7, 8_400),
        AgentType("plan", 0.3, 8_500),
    ),
    turns=LogNormal(45, 0.965, 1, 2_000),
    first_context=LogNormal(9_000, 1.5, 50, 1e9),
    output=LogNormal(216, 1.19, 1, 32_000),
    tool_result=LogNormal(900, 1.4, 1, 1e9),
    user_text=LogNormal(250, 1.3, 1, 1e9),
    user_text_share=0.16,
    think_tool=LogNormal(7.74, 1.063, 0.0, 7_200),
    think_user=LogNormal(212, 0.731, 0.0, 86_400),
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
