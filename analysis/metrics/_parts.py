"""The parts of a run summary besides its metrics: counts, goodput per tier, prefix
reuse, speculation."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from analysis.metrics._declare import Metric
from analysis.metrics._tiers import TierOutcome
from analysis.schema import SloTier

__all__ = ["Goodput", "PrefixReuse", "RequestCounts", "Speculation"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestCounts(_Model):
    """Requests sent inside the steady window, each in exactly one outcome."""

    total_records: int
    in_window: int
    ok: int
    error: int
    timeout: int
    incomplete: int
    """Still running when the drain ended (SLO misses)."""
    cancelled: int
    """Interrupted by the user (left out of the failure share)."""
    lost: int = 0
    """On a worker that was lost (``--ray``): a failure, its outcome unknown."""
    by_error_kind: dict[str, int] = Field(default_factory=dict)
    error_rate: float | None = None
    timeout_rate: float | None = None
    incomplete_rate: float | None = None
    failure_share: Annotated[float | None, Metric(
        "failure share", "share", False,
        "(errors + timeouts + incomplete + lost) / (requests sent in the window - cancelled)",
    )] = None
    output_mismatch: int = 0
    """ok requests whose output token count differs from the one asked for (the
    client sends ``ignore_eos``: every answer should be exactly that long), or whose
    streamed tokens outnumber the usage count."""
    cut_received: int = 0
    """Output tokens the incomplete requests had received when the drain ended..."""
    cut_asked: int = 0
    """...of the tokens they asked for (how far they got)."""
    no_interactivity: int = 0
    """ok requests whose interactivity was not measured (fewer than 2 output tokens,
    or every token in one read): left out of the interactivity shares and floors."""
    prompt_mismatch: int = 0
    """ok requests whose server-reported prompt tokens differ from the workload's
    (chat mode: the template's tokens are counted in; a prompt shorter than them
    cannot be exact)."""


class Goodput(_Model):
    """How a level fares against one SLO tier, over every request sent in the window
    (failed and incomplete requests count as misses)."""

    tier: SloTier
    requests: float | None
    """Share of requests that met both limits (of those with an interactivity)."""
    users: float | None
    """Share of users whose interactivity met the floor and of whose requests at
    least 90% met the TTFT ceiling."""
    ttft_share: float | None = None
    """Share of requests whose TTFT from schedule met the ceiling."""
    fast_share: float | None = None
    """Share of requests whose interactivity (1/TPOT) met the floor, over the requests
    with an interactivity to judge (``unrated`` left out)."""
    censored: int = 0
    """Requests cut by the drain while on pace for this tier (first token within the
    ceiling, tokens so far at >= the floor): left out of its shares, not misses."""
    unrated: int = 0
    """Requests left out of ``fast_share`` and ``requests``: ok but with no measured
    interactivity (< 2 output tokens, or every token in one read)."""
    failure_share: float | None = None
    meets: bool = False
    """Met, as far as the sample can tell: failure share <= the maximum, and at least
    90% of requests met each limit (i.e. P90 interactivity >= floor and P90 TTFT from
    schedule <= ceiling over all requests sent), each share's 95% interval at or above
    90% (``outcome``)."""
    outcome: TierOutcome | None = None
    """``meets``, ``fails`` or ``indeterminate`` (a share's interval holds 90%: too few
    requests to tell); None in summaries written before it (``meets`` then says)."""
    why: str = ""
    """Why the level is indeterminate (the counts, the interval, the minimum)."""

    def judged(self) -> TierOutcome:
        """The outcome, also for a summary written before outcomes existed."""
        if self.outcome is not None:
            return self.outcome
        return "meets" if self.meets else "fails"


class PrefixReuse(_Model):
    prompt_tokens: int
    expected_cached_tokens: int | None
    expected_share: float | None
    """What an infinite cache could reuse, as the client predicted it."""
    reported_cached_tokens: int | None
    reported_share: float | None
    """What the server said it reused (usage.prompt_tokens_details)."""
    measured_hits: float | None
    measured_queries: float | None
    measured_share: float | None
    """``prefix_cache_hits`` / ``prefix_cache_queries`` counter deltas over the window."""
    measured_share_halves: tuple[float | None, float | None] = (None, None)
    """The measured share in the first and the second half of the window."""


class Speculation(_Model):
    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None
    acceptance_length: float | None
    """1 + accepted / drafts over the window, measured; None without counters."""
    claimed_acceptance_length: float | None = None
    """What the server or simulator profile claims (``/server_info``), for comparison."""
