"""The HTML report: one self-contained file (inline CSS and SVG, no network).

``render_report`` returns the HTML as a string; only the CLI writes files.
Every value from result files goes through Jinja2 autoescaping; charts are
matplotlib SVG with their external addresses stripped (see ``_charts``), and
any address left in user text is written with ``&#47;`` for its slashes so the
file holds no URL a browser could fetch or a reader could mistake for a link.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import orjson

from analysis._comparison import HEADLINE, Comparison, Ratio
from analysis._fairness import FairnessVerdict
from analysis._metrics import RunSummary
from analysis._read import RunData
from analysis._stats import Distribution

__all__ = ["METRIC_DEFINITIONS", "render_report"]

TEMPLATES = Path(__file__).parent / "templates"

METRIC_DEFINITIONS: tuple[tuple[str, str], ...] = (
    ("TTFT", "first output token received minus request sent"),
    ("TTFT from schedule", "first output token minus the time the request was due (includes "
     "client lag; guards against coordinated omission)"),
    ("E2E latency", "last token received minus request sent"),
    ("TPOT", "(E2E - TTFT) / (output tokens - 1), per request with at least 2 output tokens"),
    ("ITL", "gaps between consecutive streamed tokens (a chunk of k tokens counts k tokens)"),
    ("interactivity (request)", "1 / TPOT, tokens/s for one user"),
    ("P90 interactivity", "the rate that 90% meet or beat: 1 / P90(TPOT), i.e. the slow tail"),
    ("interactivity (user)", "per user lane: sum(output tokens - 1) / sum(decode time) over "
     "its requests; P90 across users = the 10th percentile of those"),
    ("decode throughput", "output tokens after each request's first token, summed over all "
     "requests, per second of the steady window; also per GPU"),
    ("prefill throughput", "uncached prompt tokens per second (cached count from the server "
     "where it reports one)"),
    ("output throughput", "all output tokens per second of the steady window"),
    ("session latency", "first request sent to last token of the session, pauses included"),
    ("schedule lag", "request sent minus request due"),
    ("goodput", "share of requests (and of users) meeting an SLO: interactivity floor and "
     "TTFT ceiling"),
    ("prefix reuse", "expected (blocks seen before, infinite cache) vs measured "
     "(prefix_cache_hits / prefix_cache_queries deltas over the window)"),
    ("acceptance length", "1 + accepted / drafts from the spec_decode_* counter deltas: "
     "measured, never assumed"),
)

METHOD_NOTES: tuple[str, ...] = (
    "Times come from one monotonic clock per run; wall time only labels runs.",
    "Only requests sent inside the steady window (warmup and drain excluded) count. Only "
    "requests with status ok enter latency statistics; failures are counted by kind.",
    "Throughputs count the tokens of ok requests that arrived inside the steady window, "
    "by chunk arrival time, divided by the window length (summed over pooled repeats).",
    "Percentiles use linear interpolation. 95% intervals are percentile bootstrap intervals "
    "(1000 replicates, seeded) that resample users, not requests: requests of one user are "
    "not independent. Repeats of an arm at a level are pooled; their users stay distinct.",
    "Ratios are other arm / baseline, each arm resampled independently; a ratio is 'sure' "
    "when its 95% interval excludes 1.",
    "For rates (interactivity) PXX is the value XX% meet or beat, so P90 is the slow tail. "
    "The older AgentX convention (P90 of per-request 1/TPOT, the fast tail) is not shown.",
    "SLO tiers use P90 interactivity and P90 TTFT from schedule. Capacity is the largest user "
    "count at which every measured level up to it meets the tier, linearly interpolated to "
    "the next (failing) level and labelled so.",
    "A session's latency counts when its first request was sent in the window, all its "
    "requests succeeded and its user went on to a later session.",
    "Empty samples are shown as n/a, never 0.",
)


def _fmt_s(v: float | None) -> str:
    if v is None or not np.isfinite(v):
        return "n/a"
    if abs(v) < 1.0:
        return f"{v * 1000.0:.1f} ms"
    return f"{v:.3g} s" if abs(v) < 100 else f"{v:.0f} s"


def _fmt_num(v: float | None, digits: int = 1) -> str:
    if v is None or not np.isfinite(v):
        return "n/a"
    return f"{v:,.{digits}f}"


def _fmt_share(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100.0:.1f}%"


def _fmt(v: float | None, unit: str) -> str:
    if unit == "s":
        return _fmt_s(v)
    if unit == "share":
        return _fmt_share(v)
    if unit == "count":
        return "n/a" if v is None else f"{int(v):,}"
    if unit == "x":
        return _fmt_num(v, 2)
    return _fmt_num(v, 1)


def _fmt_ci(ci: tuple[float, float] | None, unit: str) -> str:
    if ci is None:
        return ""
    return f"[{_fmt(ci[0], unit)} \u2013 {_fmt(ci[1], unit)}]"


def _dist_rows(key: str, label: str, stats: Sequence[str]) -> list[tuple[str, str, str]]:
    return [(f"{key}.{s}", f"{s.upper()} {label}", s) for s in stats]


_DIST_ROWS: tuple[tuple[str, str, Sequence[str]], ...] = (
    ("interactivity", "interactivity (1/TPOT, tok/s/user)", ("p50", "p90", "p99")),
    ("interactivity_user", "interactivity per user lane (tok/s)", ("p50", "p90")),
    ("ttft", "TTFT", ("p50", "p90", "p99")),
    ("ttft_due", "TTFT from schedule", ("p50", "p90", "p99")),
    ("tpot", "TPOT", ("p50", "p90", "p99")),
    ("itl", "ITL", ("p50", "p90", "p99")),
    ("e2e", "E2E latency", ("p50", "p90", "p99")),
    ("session_latency", "session latency", ("p50", "p90")),
    ("schedule_lag", "schedule lag", ("p50", "p99")),
)


def _cell(s: RunSummary, key: str) -> tuple[str, str]:
    """(value, interval) text of a summary field given as ``metric.stat`` or ``field``."""
    head, _, stat = key.partition(".")
    if stat:
        d: Distribution = getattr(s, head)
        return _fmt(d.value(stat), d.unit), _fmt_ci(d.ci(stat), d.unit)
    return _fmt(getattr(s, head), "tok/s"), ""


def _level_rows(level: Any, arms: list[str], others: list[str]) -> list[dict[str, Any]]:
    present = [a for a in arms if a in level.arms]
    ratios: dict[str, dict[str, Ratio]] = {
        o: {r.metric: r for r in level.ratios.get(o, [])} for o in others}
    rows: list[dict[str, Any]] = []

    def add(key: str, label: str, values: list[tuple[str, str]]) -> None:
        rcells = []
        for o in others:
            r = ratios.get(o, {}).get(key)
            if r is None or r.ratio is None:
                rcells.append({"value": "", "ci": "", "cls": ""})
                continue
            cls = ("better" if r.better else "worse") if r.sure else "unsure"
            rcells.append({"value": f"{r.ratio:.3f}x", "ci": _fmt_ci(r.ci, "x"), "cls": cls})
        rows.append({"label": label, "cells": values, "ratios": rcells})

    for head, label, stats in _DIST_ROWS:
        for key, text, _stat in _dist_rows(head, label, stats):
            add(key, text, [_cell(level.arms[a], key) for a in present])
    for key, label in (("decode_tok_s", "decode throughput (tok/s)"),
                       ("decode_tok_s_per_gpu", "decode throughput per GPU (tok/s/GPU)"),
                       ("output_tok_s", "output throughput (tok/s)"),
                       ("prefill_tok_s", "prefill throughput, uncached (tok/s)")):
        add(key, label, [_cell(level.arms[a], key) for a in present])
    first = level.arms[present[0]]
    for i, g in enumerate(first.goodput):
        add(f"goodput{i}.requests", f"goodput {g.tier.label}: requests",
            [(_fmt_share(level.arms[a].goodput[i].requests), "") for a in present])
        add(f"goodput{i}.users", f"goodput {g.tier.label}: users",
            [(_fmt_share(level.arms[a].goodput[i].users), "") for a in present])
    extra = (
        ("prefix reuse expected (infinite cache)", lambda s: _fmt_share(s.prefix.expected_share)),
        ("prefix reuse reported by server (usage)",
         lambda s: _fmt_share(s.prefix.reported_share)),
        ("prefix reuse measured (hits/queries)", lambda s: _fmt_share(s.prefix.measured_share)),
        ("speculative acceptance length (measured)",
         lambda s: _fmt_num(s.speculation.acceptance_length, 2)),
        ("requests sent in window", lambda s: f"{s.counts.in_window:,}"),
        ("ok", lambda s: f"{s.counts.ok:,}"),
        ("error rate", lambda s: _fmt_share(s.counts.error_rate)),
        ("timeout rate", lambda s: _fmt_share(s.counts.timeout_rate)),
        ("output length mismatches (ok requests)", lambda s: f"{s.counts.output_mismatch:,}"),
        ("steady window", lambda s: _fmt_s(s.window_s)),
        ("runs pooled", lambda s: str(len(s.runs))),
    )
    for label, fn in extra:
        add(label, label, [(fn(level.arms[a]), "") for a in present])
    return rows


def _failures(level: Any, runs: Sequence[RunData], arms: list[str]) -> list[dict[str, Any]]:
    """Failure counts by kind per arm at a level, each with one example message."""
    rows = []
    for a in arms:
        if a not in level.arms:
            continue
        examples: dict[str, str] = {}
        for run in runs:
            m = run.manifest
            if m.label != a or m.load.users != level.users:
                continue
            r = run.requests
            for i in np.flatnonzero(r.status != "ok"):
                kind = r.error_kind[i] if r.error_kind[i] is not None else str(r.status[i])
                if kind not in examples and r.error_message[i]:
                    examples[kind] = str(r.error_message[i])[:300]
        for kind, n in level.arms[a].counts.by_error_kind.items():
            rows.append({"arm": a, "kind": kind, "count": n, "example": examples.get(kind, "")})
    return rows


def _workload_stats(runs: Sequence[RunData]) -> list[tuple[str, str]]:
    n = sum(len(r.requests) for r in runs)
    if n == 0:
        return [("request records", "0")]
    prompt = np.concatenate([r.requests.prompt_tokens for r in runs])
    out = np.concatenate([r.requests.output_tokens_asked for r in runs])
    exp = np.concatenate([r.requests.expected_cached_tokens for r in runs])
    sessions = sum(len(set(zip(r.requests.user.tolist(), r.requests.session.tolist(),
                               r.requests.session_instance.tolist(), strict=True)))
                   for r in runs)
    has_exp = exp >= 0
    return [
        ("request records (all runs)", f"{n:,}"),
        ("sessions seen (all runs)", f"{sessions:,}"),
        ("prompt tokens: mean / P50 / P90 / max",
         f"{prompt.mean():,.0f} / {np.percentile(prompt, 50):,.0f} / "
         f"{np.percentile(prompt, 90):,.0f} / {prompt.max():,}"),
        ("output tokens asked: mean / P50 / P90 / max",
         f"{out.mean():,.0f} / {np.percentile(out, 50):,.0f} / "
         f"{np.percentile(out, 90):,.0f} / {out.max():,}"),
        ("expected prefix reuse (infinite cache)",
         _fmt_share(float(exp[has_exp].sum() / prompt[has_exp].sum()))
         if has_exp.any() and prompt[has_exp].sum() > 0 else "n/a"),
    ]


def _flat_config(cfg: object) -> list[tuple[str, str]]:
    from analysis._fairness import _flatten  # the same flattening as the diff

    out: dict[str, object] = {}
    _flatten(cfg, "", out)
    return [(k, orjson.dumps(v, default=str).decode()) for k, v in out.items()]


_URL = re.compile(r'(?<!xmlns=")(?<!xmlns:xlink=")(https?):/{2}')


def _defang(html: str) -> str:
    """Write the slashes of any address outside SVG namespaces as character references."""
    return _URL.sub(lambda m: m.group(1) + ":&#47;&#47;", html)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["s"] = _fmt_s
    env.filters["num"] = _fmt_num
    env.filters["share"] = _fmt_share
    return env


def render_report(
    comparison: Comparison, runs: Sequence[RunData], *, charts: bool = True,
    data_files: Sequence[str] = ("summary.json", "requests.csv"),
) -> str:
    """The whole report as one HTML string (works for a single run too)."""
    from analysis import _charts

    arms = comparison.arms
    others = arms[1:]
    by_arm = [
        _charts.ArmLevels(
            arm=a,
            summaries=[lv.arms[a] for lv in comparison.levels if a in lv.arms],
            runs=[r for r in runs if r.manifest.label == a],
        ) for a in arms
    ]
    chart_svgs: list[tuple[str, str]] = []
    if charts:
        chart_svgs = [
            ("Decode throughput per GPU vs P90 interactivity",
             _charts.curve_chart(by_arm, comparison.capacity)),
            ("CDFs of TPOT and TTFT", _charts.cdf_chart(by_arm)),
            ("TTFT vs prompt length", _charts.ttft_prompt_chart(by_arm)),
            ("Time series: throughput, KV cache usage, prefix hits",
             _charts.timeseries_chart(by_arm)),
            ("Latency by turn index", _charts.turn_chart(by_arm)),
        ]
    levels = [
        {"users": lv.users, "arms": [a for a in arms if a in lv.arms],
         "others": [o for o in others if o in lv.ratios],
         "rows": _level_rows(lv, arms, [o for o in others if o in lv.ratios]),
         "errors": _failures(lv, runs, arms)}
        for lv in comparison.levels
    ]
    base_run = next(r for r in runs if r.manifest.label == comparison.baseline)
    cfg = (base_run.manifest.server_info or {}).get("vllm_config")
    context = {
        "c": comparison,
        "fair": comparison.fairness,
        "warn": _warning(comparison.fairness),
        "levels": levels,
        "charts": chart_svgs,
        "runs": [r.manifest for r in runs],
        "run_state": {r.manifest.run_id: r for r in runs},
        "workload": base_run.manifest.workload,
        "load": base_run.manifest.load,
        "workload_stats": _workload_stats(runs),
        "baseline_config": _flat_config(cfg) if cfg is not None else [],
        "definitions": METRIC_DEFINITIONS,
        "notes": METHOD_NOTES,
        "headline": [(m.key, m.label) for m in HEADLINE],
        "data_files": list(data_files),
        "capacity": comparison.capacity,
        "single": len(arms) == 1,
    }
    html = _environment().get_template("report.html.j2").render(**context)
    return _defang(html)


def _warning(f: FairnessVerdict) -> str:
    if not f.overridden:
        return ""
    return ("UNFAIR COMPARISON, reported only because --allow-unfair was given: "
            + f.sentence)
