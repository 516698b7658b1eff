"""The run summary, with every metric declared on the field it fills.

Each metric field carries its :class:`Metric` (label, unit, direction,
definition, how its samples are drawn and summarised): adding a metric is
adding one annotated field here. The catalogue (``_catalogue``), the samples
(``measure``), the summary (``summarize``) and the report's tables and
methodology are derived from these declarations, in this order.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from pydantic import Field, model_validator

from analysis.metrics._declare import PERCENTILES, Metric, Window, per_request
from analysis.metrics._energy import Energy
from analysis.metrics._parts import Goodput, PrefixReuse, RequestCounts, Speculation, _Model
from analysis.metrics._samplers import (
    interactivity_per_user,
    itl,
    session_latency,
    uncached_prompt,
)
from analysis.metrics._samples import Samples
from analysis.metrics._stats import Distribution
from analysis.schema import RESULT_FORMAT_VERSION, LoadLevel, Validity

__all__ = ["RunSummary", "window_rate"]

_P3 = PERCENTILES


def _ok(w: Window) -> np.ndarray:
    return w.good


def _decoding(w: Window) -> np.ndarray:
    return w.decoding


def _timed(w: Window) -> np.ndarray:
    return w.timed


def _cut_with_first(w: Window) -> np.ndarray:
    return w.cut_with_first


def _cut_without_first(w: Window) -> np.ndarray:
    return w.cut_without_first


def _cut(w: Window) -> np.ndarray:
    return w.cut


def _ran_since_sent(w: Window) -> np.ndarray:
    out: np.ndarray = w.ran_until - w.requests.sent_s
    return out


def _ran_since_due(w: Window) -> np.ndarray:
    out: np.ndarray = w.ran_until - w.requests.due_s
    return out


def _schedule_lag(w: Window) -> np.ndarray:
    out: np.ndarray = w.requests.sent_s - w.requests.due_s
    return out


def _prefill_rate(w: Window) -> np.ndarray:
    """Uncached prompt tokens over TTFT; NaN for a fully cached prompt (nothing to rate)."""
    r = w.requests
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = uncached_prompt(r, np.arange(len(r))) / w.lat.ttft
    out: np.ndarray = np.where(rate > 0, rate, np.nan)
    return out


def _rate(tokens: np.ndarray, window_s: float | None, n: int) -> float | None:
    """Tokens per second of window; None (not 0) when no request was sent in it."""
    if window_s is None or window_s <= 0 or n == 0:
        return None
    return float(tokens.sum() / window_s)


def window_rate(s: Samples, tokens: np.ndarray) -> float | None:
    """Tokens that arrived in the window per second of it (None: none sent in it)."""
    return _rate(tokens, s.window_s, len(s.req_status))


def _decode_per_gpu(s: Samples) -> float | None:
    decode = window_rate(s, s.user_decode_tokens)
    return (decode / s.gpu_count) if decode is not None and s.gpu_count else None


class RunSummary(_Model):
    """Everything computed about one run (or pooled repeats of one arm and level)."""

    format_version: int = RESULT_FORMAT_VERSION
    kind: str = "agentreplay-summary"
    label: str
    runs: list[str]
    model: str
    level: LoadLevel
    """What set the load (users, a session rate, a time scale). A summary written
    before it was recorded was a closed-loop run of its ``users``, the field it had."""
    gpu_count: int | None
    simulated: bool
    incomplete: bool
    reasons: list[str] = Field(default_factory=list)
    window_s: float | None
    counts: RequestCounts
    ttft: Annotated[Distribution, Metric(
        "TTFT", "s", False, "first output token received minus request sent",
        sample=per_request(lambda w: w.lat.ttft, _ok, also=_cut_with_first,
                           bound=_ran_since_sent, bound_of=_cut_without_first),
        shown=_P3, row=30, display="ms")]
    ttft_due: Annotated[Distribution, Metric(
        "TTFT from schedule", "s", False,
        "first output token minus the time the request was due (includes client lag; "
        "guards against coordinated omission), as the SLO tiers and the headline chart "
        "use it",
        sample=per_request(lambda w: w.lat.ttft_due, _ok, also=_cut_with_first,
                           bound=_ran_since_due, bound_of=_cut_without_first),
        shown=_P3, row=40, display="ms")]
    prefill_rate: Annotated[Distribution | None, Metric(
        "prefill rate per request", "tok/s", True,
        "uncached prompt tokens / TTFT, per ok request with uncached prompt tokens (the "
        "wait before its prefill included): the prompt-processing pace one request sees; "
        "P90 is the rate 90% of requests meet or beat",
        sample=per_request(_prefill_rate, _ok), shown=_P3, row=45)] = None
    e2e: Annotated[Distribution, Metric(
        "E2E latency", "s", False, "last token received minus request sent",
        sample=per_request(lambda w: w.lat.e2e, _ok, bound=_ran_since_sent, bound_of=_cut),
        shown=_P3, row=70, display="s")]
    tpot: Annotated[Distribution, Metric(
        "TPOT", "s", False,
        "(E2E - TTFT) / (output tokens - 1), per request with at least 2 output tokens "
        "not all in one read (otherwise unmeasured: no interactivity)",
        sample=per_request(lambda w: w.lat.tpot, _decoding), shown=_P3, row=50,
        display="ms")]
    itl: Annotated[Distribution, Metric(
        "ITL", "s", False,
        "gaps between consecutive streamed tokens (a chunk of k tokens counts k tokens)",
        sample=itl, shown=_P3, row=60, display="ms")]
    interactivity: Annotated[Distribution, Metric(
        "interactivity", "tok/s/user", True,
        "1 / TPOT, the tokens per second one user sees; for this rate PXX is the value "
        "XX% of requests meet or beat, so P90 interactivity is 1 / P90(TPOT), the slow "
        "tail",
        inverse_of="tpot", shown=_P3, row=10)]
    interactivity_user: Annotated[Distribution, Metric(
        "interactivity per user lane", "tok/s/user", True,
        "per user lane: sum(output tokens - 1) / sum(decode time) over its requests; "
        "P90 across users = the 10th percentile of those",
        sample=interactivity_per_user, shown=("p50", "p90"), row=20)]
    session_latency: Annotated[Distribution, Metric(
        "session latency", "s", False,
        "first request sent to last token of the session, pauses included",
        sample=session_latency, shown=("p50", "p90"), row=80, display="s")]
    schedule_lag: Annotated[Distribution, Metric(
        "schedule lag", "s", False, "request sent minus request due",
        sample=per_request(_schedule_lag, _timed), shown=("p50", "p99"), row=90,
        display="ms")]
    decode_tok_s: Annotated[float | None, Metric(
        "decode throughput", "tok/s", True,
        "output tokens after each request's first token, summed over all requests, per "
        "second of the steady window",
        value=lambda s: window_rate(s, s.user_decode_tokens), row=100)]
    decode_tok_s_per_gpu: Annotated[float | None, Metric(
        "decode throughput per GPU", "tok/s/GPU", True,
        "decode throughput divided by the GPU count of the arm's server (as its run "
        "manifest states it)",
        value=_decode_per_gpu, row=110)]
    output_tok_s: Annotated[float | None, Metric(
        "output throughput", "tok/s", True,
        "all output tokens per second of the steady window",
        value=lambda s: window_rate(s, s.user_output_tokens), row=120)]
    prefill_tok_s: Annotated[float | None, Metric(
        "uncached prefill throughput", "tok/s", True,
        "uncached prompt tokens per second (cached count from the server where it "
        "reports one)",
        value=lambda s: window_rate(s, s.user_prefill_tokens), row=130)]
    goodput: list[Goodput]
    prefix: PrefixReuse
    speculation: Speculation
    itl_reads: Distribution | None = None
    """ITL with the chunks of one socket read merged (no gaps of 0 from coalescing): a
    diagnostic of the client's reads beside ``chunks_same_read_share``, not a metric."""
    chunks_same_read_share: float | None = None
    """Share of chunks (after each request's first) that arrived in the same read as
    the one before: how much the client's reads coalesced the server's events."""
    sim_lateness: float | None = None
    """Simulated server only: delta(actual step seconds) / delta(modelled) - 1."""
    energy: Energy | None = None
    """GPU energy over the window (``run --gpu-metrics``); None: no telemetry (missing,
    never 0)."""
    validity: Validity | None = None

    @model_validator(mode="before")
    @classmethod
    def _level_of_old_summaries(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "users" not in data:
            return data
        data = dict(data)
        users = data.pop("users")
        if data.get("level") is None:
            data["level"] = {"kind": "users", "value": float(users)}
        return data
