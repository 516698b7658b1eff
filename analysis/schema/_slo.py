"""Service-level tiers: a P90 interactivity floor plus a P90 TTFT ceiling."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from analysis.schema._errors import ResultError

__all__ = ["DEFAULT_MAX_FAILURE_SHARE", "DEFAULT_TIERS", "SloTier", "parse_tier"]

DEFAULT_MAX_FAILURE_SHARE = 0.05
"""A level with more failed or incomplete requests than this fails every tier."""


class SloTier(BaseModel):
    """Users are served at this tier when P90 interactivity >= ``floor_tok_s``
    (tokens/s for one user) and P90 TTFT (from the time the request was due)
    <= ``ttft_s``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    floor_tok_s: float = Field(gt=0)
    ttft_s: float = Field(gt=0)

    @property
    def name(self) -> str:
        return f"{self.floor_tok_s:g}:{self.ttft_s:g}"

    @property
    def label(self) -> str:
        return f"\u2265 {self.floor_tok_s:g} tok/s/user, TTFT \u2264 {self.ttft_s:g} s"


DEFAULT_TIERS: tuple[SloTier, ...] = (
    SloTier(floor_tok_s=30, ttft_s=15),
    SloTier(floor_tok_s=100, ttft_s=15),
    SloTier(floor_tok_s=300, ttft_s=15),
)


def parse_tier(text: str) -> SloTier:
    """``"FLOOR:TTFT"`` (e.g. ``100:10``) as a tier. Both halves are required: a
    ceiling filled in silently (``30`` meaning ``30:15``) would judge against a TTFT
    the user never chose."""
    floor, sep, ttft = text.strip().partition(":")
    if not sep:
        raise ResultError(
            f"SLO tier {text!r} has no TTFT ceiling: give FLOOR:TTFT, e.g. {floor or 30}:15 "
            "(tokens/s per user, seconds)", field="slo",
        )
    try:
        tier = SloTier(floor_tok_s=float(floor), ttft_s=float(ttft))
    except ValueError:
        raise ResultError(
            f"SLO tier {text!r} must be FLOOR:TTFT with positive numbers "
            "(tokens/s per user, seconds), e.g. 100:10", field="slo",
        ) from None
    return tier
