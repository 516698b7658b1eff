"""The metric catalogue, derived from the declarations on the summary's fields.

Keys are those of ``RunSummary``: a rate by its field (``decode_tok_s``), a
distribution by its field (``ttft``) and each of its percentiles as
``field.pNN`` (``ttft.p90``, labelled "P90 TTFT"). A percentile shares its
distribution's unit, direction and definition (the per-request quantity; the
label names the statistic). Units are those of the stored values (times in
seconds); a report picks its display unit per quantity (``Metric.display``).
The comparison's headline ratios, the report's tables, chart axes and
methodology all read a metric's wording from here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from pydantic import BaseModel

from analysis.metrics._declare import PERCENTILES, Metric
from analysis.metrics._parts import RequestCounts
from analysis.metrics._run_summary import RunSummary

__all__ = [
    "DECLARED", "METRICS", "QUANTITIES", "axis_label", "direction_text", "metric",
    "report_rows",
]


def _declared(model: type[BaseModel]) -> Iterator[Metric]:
    for name, field in model.model_fields.items():
        for meta in field.metadata:
            if isinstance(meta, Metric):
                yield replace(meta, key=name)


DECLARED: tuple[Metric, ...] = (*_declared(RunSummary), *_declared(RequestCounts))
"""Every declared metric, keyed by its field: the summary's, then the counts'."""

QUANTITIES: tuple[str, ...] = tuple(m.key for m in DECLARED)
"""The key of each quantity once (no percentile keys): what a methodology defines."""


def _percentile(d: Metric, stat: str) -> Metric:
    return replace(d, key=f"{d.key}.{stat}", label=f"{stat.upper()} {d.label}")


def _catalogue() -> dict[str, Metric]:
    out: dict[str, Metric] = {}
    for d in DECLARED:
        out[d.key] = d
        if d.is_distribution:
            out.update({f"{d.key}.{s}": _percentile(d, s) for s in PERCENTILES})
    return out


METRICS: dict[str, Metric] = _catalogue()
"""Every reported metric by key: each distribution and its percentiles, the rates and
shares, in the order a methodology section lists them."""


def metric(key: str) -> Metric:
    """The catalogue entry of ``key``; a KeyError naming the key for an unknown one
    (a typo in a table must fail loudly, not show a blank)."""
    try:
        return METRICS[key]
    except KeyError:
        raise KeyError(f"no metric {key!r} in the catalogue (analysis.metrics.METRICS)") from None


def axis_label(key: str, unit: str | None = None) -> str:
    """``P90 interactivity (tok/s/user)``: the label with its unit (``unit`` overrides the
    stored one, e.g. ``ms`` where a chart shows seconds as milliseconds)."""
    info = metric(key)
    return f"{info.label} ({unit or info.unit})"


def direction_text(key: str) -> str:
    """``higher is better`` or ``lower is better``."""
    return metric(key).direction


def report_rows() -> tuple[str, ...]:
    """The keys of the report's detail table in its order: each listed distribution's
    shown statistics (``ttft.p90``), then each listed scalar."""
    listed = sorted((m for m in DECLARED if m.row is not None), key=lambda m: m.row or 0)
    return tuple(k for m in listed
                 for k in ([f"{m.key}.{s}" for s in m.shown] if m.is_distribution else [m.key]))
