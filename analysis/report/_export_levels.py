"""Exports for notebooks and dashboards: one CSV row per (level, arm), and summary.json's schema.

``levels.csv`` carries the decision numbers of the report's summary table
(with their interval bounds) and a few more, one row per level and arm;
text cells (arm, level, run ids) are neutralised as in requests.csv (a label
``@SUM(1+1)`` is never a formula); ``summary.schema.json`` is the JSON Schema of
``summary.json`` (a ``Comparison``), generated from the pydantic model so it cannot drift.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable

import orjson

from analysis.judge import Comparison, Level
from analysis.metrics import RunSummary
from analysis.report._export import neutralise

__all__ = ["LEVEL_COLUMNS", "levels_csv", "summary_schema"]


def _num(v: float | None) -> str:
    return "" if v is None else repr(float(v))


def _dist(name: str, stat: str) -> list[tuple[str, Callable[[RunSummary], str]]]:
    def value(s: RunSummary) -> str:
        return _num(getattr(s, name).value(stat))

    def bound(i: int) -> Callable[[RunSummary], str]:
        def get(s: RunSummary) -> str:
            ci = getattr(s, name).ci(stat)
            return "" if ci is None else _num(ci[i])
        return get

    return [(f"{name}_{stat}", value), (f"{name}_{stat}_lo", bound(0)),
            (f"{name}_{stat}_hi", bound(1))]


def _field(get: Callable[[RunSummary], object]) -> Callable[[RunSummary], str]:
    def cell(s: RunSummary) -> str:
        v = get(s)
        if v is None:
            return ""
        return _num(v) if isinstance(v, float) else str(v)
    return cell


_SUMMARY_COLUMNS: list[tuple[str, Callable[[RunSummary], str]]] = [
    ("runs", lambda s: neutralise(" ".join(s.runs))),
    ("gpu_count", _field(lambda s: s.gpu_count)),
    ("simulated", lambda s: "1" if s.simulated else "0"),
    ("window_s", _field(lambda s: s.window_s)),
    ("requests_sent", _field(lambda s: s.counts.in_window)),
    ("ok", _field(lambda s: s.counts.ok)),
    ("errors", _field(lambda s: s.counts.error)),
    ("timeouts", _field(lambda s: s.counts.timeout)),
    ("incomplete", _field(lambda s: getattr(s.counts, "incomplete", None))),
    ("failure_share", _field(lambda s: getattr(s.counts, "failure_share", None))),
    *_dist("interactivity", "p90"),
    *_dist("interactivity", "p50"),
    *_dist("ttft", "p90"),
    *_dist("ttft_due", "p90"),
    *_dist("tpot", "p90"),
    *_dist("e2e", "p90"),
    ("decode_tok_s", _field(lambda s: s.decode_tok_s)),
    ("decode_tok_s_per_gpu", _field(lambda s: s.decode_tok_s_per_gpu)),
    ("output_tok_s", _field(lambda s: s.output_tok_s)),
    ("prefill_tok_s", _field(lambda s: s.prefill_tok_s)),
    ("prefix_expected_share", _field(lambda s: s.prefix.expected_share)),
    ("prefix_measured_share", _field(lambda s: s.prefix.measured_share)),
    ("validity", _field(lambda s: getattr(getattr(s, "validity", None), "verdict", None))),
]

_RATIO_METRICS = ("interactivity.p90", "ttft.p90", "decode_tok_s_per_gpu")

LEVEL_COLUMNS: tuple[str, ...] = (
    "load_kind", "load", "level", "arm", "baseline",
    *(name for name, _ in _SUMMARY_COLUMNS),
    *(f"ratio_{m.replace('.', '_')}{suffix}" for m in _RATIO_METRICS
      for suffix in ("", "_lo", "_hi", "_established")),
)
"""Columns of levels.csv, in order (see the README's exports section)."""


def _ratio_cells(c: Comparison, lv: Level, arm: str) -> list[str]:
    by = {r.metric: r for r in lv.ratios.get(arm, [])}
    out = []
    for m in _RATIO_METRICS:
        r = by.get(m)
        if r is None or r.ratio is None:
            out += ["", "", "", ""]
            continue
        est = getattr(r, "established", r.sure)
        out += [_num(r.ratio), "" if r.ci is None else _num(r.ci[0]),
                "" if r.ci is None else _num(r.ci[1]), "1" if est else "0"]
    return out


def levels_csv(c: Comparison) -> str:
    """One row per (level, arm): the summary numbers with interval bounds, ratios to baseline."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(LEVEL_COLUMNS)
    for lv in c.levels:
        kind, value, label = lv.load.kind, f"{lv.load.value:g}", lv.label
        for arm in c.arms:
            s = lv.arms.get(arm)
            if s is None:
                continue
            w.writerow([kind, value, neutralise(label), neutralise(arm),
                        "1" if arm == c.baseline else "0",
                        *(get(s) for _, get in _SUMMARY_COLUMNS),
                        *_ratio_cells(c, lv, arm)])
    return buf.getvalue()


def summary_schema() -> str:
    """The JSON Schema of summary.json (a Comparison), indented."""
    return orjson.dumps(Comparison.model_json_schema(), option=orjson.OPT_INDENT_2).decode()
