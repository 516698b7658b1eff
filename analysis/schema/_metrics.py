"""The metric catalogue: each reported quantity's label, unit, direction and definition.

One entry per quantity, written once: the comparison's headline ratios, the
report's tables, chart axes and methodology, and the summaries' distributions
all read a metric's wording from here, so a metric reads the same wherever it
is shown and a new one is described in one place.

Keys are those of ``RunSummary``: a rate by its field (``decode_tok_s``), a
distribution by its field (``ttft``) and each of its percentiles as
``field.pNN`` (``ttft.p90``, labelled "P90 TTFT"). A percentile shares its
distribution's unit, direction and definition (the per-request quantity; the
label names the statistic). Units are those of the stored values (times in
seconds); a report picks its display unit per quantity.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "METRICS",
    "PERCENTILES",
    "QUANTITIES",
    "MetricInfo",
    "axis_label",
    "direction_text",
    "metric",
]


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """How a metric is named and read: what a table, axis or methodology row shows."""

    key: str
    label: str
    unit: str
    """Of the stored value: ``s``, ``tok/s``, ``tok/s/user``, ``tok/s/GPU``, ``share``."""
    higher_is_better: bool
    definition: str
    """One sentence: what is measured, as the methodology section states it."""

    @property
    def direction(self) -> str:
        """``higher is better`` or ``lower is better``."""
        return "higher is better" if self.higher_is_better else "lower is better"


PERCENTILES: tuple[str, ...] = ("p50", "p90", "p99")
"""The statistics a distribution's percentile keys take (as ``Distribution`` holds them)."""

_DISTRIBUTIONS: tuple[MetricInfo, ...] = (
    MetricInfo("ttft", "TTFT", "s", False,
               "first output token received minus request sent"),
    MetricInfo("ttft_due", "TTFT from schedule", "s", False,
               "first output token minus the time the request was due (includes client "
               "lag; guards against coordinated omission), as the SLO tiers and the "
               "headline chart use it"),
    MetricInfo("e2e", "E2E latency", "s", False, "last token received minus request sent"),
    MetricInfo("tpot", "TPOT", "s", False,
               "(E2E - TTFT) / (output tokens - 1), per request with at least 2 output "
               "tokens not all in one read (otherwise unmeasured: no interactivity)"),
    MetricInfo("itl", "ITL", "s", False,
               "gaps between consecutive streamed tokens (a chunk of k tokens counts k "
               "tokens)"),
    MetricInfo("interactivity", "interactivity", "tok/s/user", True,
               "1 / TPOT, the tokens per second one user sees; for this rate PXX is the "
               "value XX% of requests meet or beat, so P90 interactivity is 1 / P90(TPOT), "
               "the slow tail"),
    MetricInfo("interactivity_user", "interactivity per user lane", "tok/s/user", True,
               "per user lane: sum(output tokens - 1) / sum(decode time) over its "
               "requests; P90 across users = the 10th percentile of those"),
    MetricInfo("session_latency", "session latency", "s", False,
               "first request sent to last token of the session, pauses included"),
    MetricInfo("schedule_lag", "schedule lag", "s", False, "request sent minus request due"),
)

_SCALARS: tuple[MetricInfo, ...] = (
    MetricInfo("decode_tok_s", "decode throughput", "tok/s", True,
               "output tokens after each request's first token, summed over all "
               "requests, per second of the steady window"),
    MetricInfo("decode_tok_s_per_gpu", "decode throughput per GPU", "tok/s/GPU", True,
               "decode throughput divided by the GPU count of the arm's server (as its "
               "run manifest states it)"),
    MetricInfo("output_tok_s", "output throughput", "tok/s", True,
               "all output tokens per second of the steady window"),
    MetricInfo("prefill_tok_s", "uncached prefill throughput", "tok/s", True,
               "uncached prompt tokens per second (cached count from the server where it "
               "reports one)"),
    MetricInfo("failure_share", "failure share", "share", False,
               "(errors + timeouts + incomplete + lost) / (requests sent in the window - "
               "cancelled)"),
)


QUANTITIES: tuple[str, ...] = tuple(m.key for m in _DISTRIBUTIONS + _SCALARS)
"""The key of each quantity once (no percentile keys): what a methodology defines."""


def _percentile(d: MetricInfo, stat: str) -> MetricInfo:
    return replace(d, key=f"{d.key}.{stat}", label=f"{stat.upper()} {d.label}")


def _catalogue() -> dict[str, MetricInfo]:
    out: dict[str, MetricInfo] = {}
    for d in _DISTRIBUTIONS:
        out[d.key] = d
        out.update({f"{d.key}.{s}": _percentile(d, s) for s in PERCENTILES})
    out.update({m.key: m for m in _SCALARS})
    return out


METRICS: dict[str, MetricInfo] = _catalogue()
"""Every reported metric by key: each distribution, its percentiles, then the rates and
shares, in the order a methodology section lists them."""


def metric(key: str) -> MetricInfo:
    """The catalogue entry of ``key``; a KeyError naming the key for an unknown one
    (a typo in a table must fail loudly, not show a blank)."""
    try:
        return METRICS[key]
    except KeyError:
        raise KeyError(f"no metric {key!r} in the catalogue (analysis.schema.METRICS)") from None


def axis_label(key: str, unit: str | None = None) -> str:
    """``P90 interactivity (tok/s/user)``: the label with its unit (``unit`` overrides the
    stored one, e.g. ``ms`` where a chart shows seconds as milliseconds)."""
    info = metric(key)
    return f"{info.label} ({unit or info.unit})"


def direction_text(key: str) -> str:
    """``higher is better`` or ``lower is better``."""
    return metric(key).direction
