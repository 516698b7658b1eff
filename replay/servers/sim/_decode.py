"""The decode benchmark on the pure engine model: what a profile says a batch decodes.

The published Kimi K3 tables (DESIGN.md "Published context") were measured with a
fixed batch of requests, input 1 token, output 1,000 tokens, ``ignore_eos``, prefill
excluded. ``modelled_decode`` replays exactly that on ``Engine`` (no clock): every
request's decode time runs from its first token to its last, and the aggregate rate
is the sum over the batch of (output tokens - 1) / decode time, i.e. tokens/s of the
whole TP group. Profiles are calibrated against it (``tests/sim/test_profiles.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from replay.servers.sim._engine import Engine
from replay.servers.sim._profile import Backend, SimProfile

__all__ = ["DecodePoint", "modelled_decode"]


@dataclass(frozen=True)
class DecodePoint:
    """One batch size of the decode benchmark, as the model runs it."""

    batch: int
    decode_tok_s: float
    """Aggregate: sum over the batch of (output - 1) / decode time."""
    per_request_tok_s: float
    """Mean over the batch of (output - 1) / decode time (interactivity)."""
    acceptance_length: float | None
    """1 + accepted / drafts, where the profile speculates."""


def modelled_decode(profile: SimProfile, backend: Backend, batch: int, *,
                    prompt_tokens: int = 1, output_tokens: int = 1000) -> DecodePoint:
    """Run ``batch`` identical requests to completion on the model and time their decode."""
    if batch < 1 or output_tokens < 2 or prompt_tokens < 1:
        raise ValueError("batch >= 1, prompt_tokens >= 1 and output_tokens >= 2 required")
    engine = Engine(profile, backend)
    reqs = [engine.add(f"decode-{i}", [100 + i] * prompt_tokens, output_tokens)
            for i in range(batch)]
    ends: list[float] = []  # model time at the end of each step
    t = 0.0
    while engine.has_work():
        t += engine.step().duration_s
        ends.append(t)
    rates = [(output_tokens - 1) / (ends[r.step_ids[-1]] - ends[r.step_ids[0]]) for r in reqs]
    c = engine.counters
    accept = 1 + c.spec_accepted_tokens / c.spec_drafts if c.spec_drafts else None
    return DecodePoint(batch, sum(rates), sum(rates) / batch, accept)
