"""The HTML report: one self-contained file (inline CSS and SVG, no network).

``render_report`` returns the HTML as a string; only the CLI writes files.
Every value from result files goes through Jinja2 autoescaping; charts are
matplotlib SVG with their external addresses stripped (see ``_charts``), and
any address left in user text is written with ``&#47;`` for its slashes so the
file holds no URL a browser could fetch or a reader could mistake for a link.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

from analysis.judge import HEADLINE, Comparison, FairnessVerdict
from analysis.metrics import QUANTITIES, metric
from analysis.read import RunData
from analysis.report._chart_base import ArmLevels
from analysis.report._chart_headline import Series, headline_chart
from analysis.report._chart_pareto import pareto_chart
from analysis.report._decide import decide
from analysis.report._decision import (
    capacity_view,
    level_label,
    report_title,
    summary_view,
    validity_view,
    verdict_text,
)
from analysis.report._detail import failures, flat_config, level_rows, workload_stats
from analysis.report._format import fmt_num, fmt_share, fmt_time
from analysis.report._method import method_rules
from analysis.report._plan_view import twin_chart
from analysis.schema import level_of
from analysis.text import plural

__all__ = ["METRIC_DEFINITIONS", "render_report"]

TEMPLATES = Path(__file__).parent / "templates"

_TERMS: tuple[tuple[str, str], ...] = (
    ("goodput", "share of requests (and of users) meeting an SLO: interactivity floor and "
     "TTFT ceiling"),
    ("prefix reuse", "expected (blocks seen before, infinite cache) vs measured "
     "(prefix_cache_hits / prefix_cache_queries deltas over the window)"),
    ("acceptance length", "1 + accepted / drafts from the spec_decode_* counter deltas: "
     "measured, never assumed; the length the server or simulator profile claims is shown "
     "beside it"),
)
"""Report terms that are not one catalogued metric."""


def metric_definitions() -> tuple[tuple[str, str], ...]:
    """The methodology's (name, definition) rows: every catalogued quantity (a percentile
    shares its distribution's definition, so it is not repeated), then the other terms."""
    return tuple((metric(k).label, metric(k).definition) for k in QUANTITIES) + _TERMS


METRIC_DEFINITIONS: tuple[tuple[str, str], ...] = metric_definitions()
"""The methodology table as the catalogue words it when this module loads."""

METHOD_NOTES: tuple[str, ...] = (
    "Times come from one monotonic clock per run; wall time only labels runs.",
    "Percentiles use linear interpolation. 95% intervals are percentile bootstrap intervals "
    "(1000 replicates, seeded) that resample users, not requests: requests of one user are "
    "not independent. Repeats of an arm at a level are pooled; their users stay distinct.",
    "For rates (interactivity) PXX is the value XX% meet or beat, so P90 is the slow tail. "
    "The older AgentX convention (P90 of per-request 1/TPOT, the fast tail) is not shown.",
    "A session's latency counts when its first request was sent in the window, all its "
    "requests succeeded and its user went on to a later session.",
    "Ratios are other arm / baseline, each arm resampled independently.",
    "Empty samples are shown as n/a, never 0.",
) + method_rules()


_URL = re.compile(r'(?<!xmlns=")(?<!xmlns:xlink=")(https?):/{2}')


def _defang(html: str) -> str:
    """Write the slashes of any address outside SVG namespaces as character references."""
    return _URL.sub(lambda m: m.group(1) + ":&#47;&#47;", html)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["s"] = fmt_time
    env.filters["num"] = fmt_num
    env.filters["share"] = fmt_share
    env.filters["counted"] = plural
    return env


def _detail_charts(by_arm: list[ArmLevels]) -> list[tuple[str, str]]:
    from analysis.report import _charts

    return [
        ("CDFs of TPOT and TTFT", _charts.cdf_chart(by_arm)),
        ("TTFT vs prompt length", _charts.ttft_prompt_chart(by_arm)),
        ("Time series: throughput, KV cache usage, prefix hits",
         _charts.timeseries_chart(by_arm)),
        ("Latency by turn index", _charts.turn_chart(by_arm)),
    ]


def _toc(single: bool, extra: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    toc = [("decision", "Decision: capacity, validity, verdict"),
           ("pareto", "Throughput per GPU vs interactivity (Pareto)"),
           ("summary", "Summary per load level"), ("capacity", "Capacity")]
    toc += list(extra)
    toc.append(("headline", "Interactivity and TTFT vs load"))
    if not single:
        toc.append(("fairness", "Fairness"))
    toc += [("metrics", "Metrics per level"), ("charts", "Charts"), ("setup", "Setup"),
            ("methodology", "Methodology"), ("data", "Data")]
    return toc


def report_context(
    comparison: Comparison, runs: Sequence[RunData], *, charts: bool = True,
    data_files: Sequence[str] = ("summary.json", "requests.csv"),
    extra_sections: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything the template shows, computed from the comparison (no numbers made here)."""
    arms = comparison.arms
    others = arms[1:]
    by_arm = [
        ArmLevels(arm=a, summaries=[lv.arms[a] for lv in comparison.levels if a in lv.arms],
                  runs=[r for r in runs if r.manifest.label == a])
        for a in arms
    ]
    single = len(arms) == 1
    headline = pareto = ""
    detail: list[tuple[str, str]] = []
    if charts:
        series = [Series(name=a.arm or "run", summaries=a.summaries, color_index=i,
                         capacity=tuple(r for r in comparison.capacity if r.arm == a.arm))
                  for i, a in enumerate(by_arm)]
        headline = headline_chart(series, comparison.tiers)
        pareto = pareto_chart(series, comparison.tiers)
        detail = _detail_charts(by_arm)
    levels = [
        {"label": level_label(lv), "arms": [a for a in arms if a in lv.arms],
         "others": [o for o in others if o in lv.ratios],
         "rows": level_rows(lv, arms, [o for o in others if o in lv.ratios]),
         "errors": failures(lv, runs, arms)}
        for lv in comparison.levels
    ]
    base_run = next(r for r in runs if r.manifest.label == comparison.baseline)
    cfg = (base_run.manifest.server_info or {}).get("vllm_config")
    extra = dict(extra_sections or {})
    twin_raw = extra.get("twin", {}).get("raw")
    if charts and "twin" in extra and extra["twin"].get("levels"):
        extra["twin"] = {**extra["twin"], "svg": twin_chart(by_arm, extra["twin"]["levels"],
                                                             extra["twin"].get("floors", []))}
    return {
        "c": comparison,
        "title": report_title(comparison, runs),
        "verdict_text": verdict_text(comparison),
        "decision": decide(comparison, twin_raw).lines(),
        "fair": comparison.fairness,
        "warn": _warning(comparison.fairness),
        "validity": validity_view(comparison, runs),
        "summary": summary_view(comparison),
        "cap": capacity_view(comparison),
        "headline_svg": headline,
        "pareto_svg": pareto,
        "toc": _toc(single, [(k, v["title"]) for k, v in extra.items()]),
        "extra": extra,
        "levels": levels,
        "charts": detail,
        "runs": [r.manifest for r in runs],
        "run_state": {r.manifest.run_id: r for r in runs},
        "run_level": {r.manifest.run_id: level_of(r.manifest).label for r in runs},
        "workload": base_run.manifest.workload,
        "load": base_run.manifest.load,
        "workload_stats": workload_stats(runs),
        "baseline_config": flat_config(cfg) if cfg is not None else [],
        "definitions": metric_definitions(),
        "notes": METHOD_NOTES,
        "headline": [(m.key, m.label) for m in HEADLINE],
        "data_files": list(data_files),
        "capacity": comparison.capacity,
        "single": single,
        "many_levels": len(comparison.levels) > 1,
        "sim_profiles": sim_profiles(runs),
    }


def sim_profiles(runs: Sequence[RunData]) -> list[tuple[str, str]]:
    """(name, what it is calibrated to) of each simulator profile that served a run,
    as its ``/server_info`` said: a simulated result names its model."""
    found: dict[str, str] = {}
    for r in runs:
        info = r.manifest.server_info or {}
        name = info.get("sim_profile")
        if isinstance(name, str) and name:
            desc = info.get("sim_profile_description")
            found.setdefault(name, desc if isinstance(desc, str) else "")
    return sorted(found.items())


def render_report(
    comparison: Comparison, runs: Sequence[RunData], *, charts: bool = True,
    data_files: Sequence[str] = ("summary.json", "requests.csv"),
    extra_sections: Mapping[str, Any] | None = None,
) -> str:
    """The whole report as one HTML string: decision first, then the detail.

    A single arm reads as a run report (no fairness box, no arms). ``extra_sections``
    (id -> {"title", "html"?, "rows"?}) adds reviewed blocks such as an experiment file
    or a capacity search after the decision block; their text is escaped.
    """
    context = report_context(comparison, runs, charts=charts, data_files=data_files,
                             extra_sections=extra_sections)
    html = _environment().get_template("report.html.j2").render(**context)
    return _defang(html)


def _warning(f: FairnessVerdict) -> str:
    if not f.overridden:
        return ""
    return ("UNFAIR COMPARISON, reported only because --allow-unfair was given: "
            + f.sentence)


