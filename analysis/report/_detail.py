"""The report's detail tables: every metric per level, failures by kind, workload, config.

Presentation only: values come from the level summaries and ratios of a
``Comparison``; each quantity keeps one unit (``_format``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson

from analysis.judge import Level, Ratio, flatten_config
from analysis.metrics import RunSummary, metric, report_rows
from analysis.read import RunData
from analysis.report._decision import dist_text, failure_share, ratio_cell
from analysis.report._format import fmt_ci, fmt_num, fmt_share, fmt_time, row_label

__all__ = ["failures", "flat_config", "level_rows", "workload_stats"]

def _cell(s: RunSummary, key: str) -> tuple[str, str]:
    """(value, interval) text of a summary field given as ``metric.stat`` or ``field``."""
    head, _, stat = key.partition(".")
    if stat:
        d = getattr(s, head, None)
        if d is None:  # a summary written before the metric was declared
            return "n/a", ""
        return dist_text(d, stat, head), fmt_ci(d.ci(stat), d.unit, head)
    return fmt_num(getattr(s, head, None), 1), ""


def _count(attr: str) -> Callable[[RunSummary], str]:
    def get(s: RunSummary) -> str:
        v = getattr(s.counts, attr, None)
        return "n/a" if v is None else f"{v:,}"
    return get


def _cut(s: RunSummary) -> str:
    """How far the requests cut by the drain got: tokens received of those asked."""
    c = s.counts
    if not c.incomplete:
        return "n/a"
    return f"{c.cut_received:,} / {c.cut_asked:,}" + (
        f" ({c.cut_received / c.cut_asked:.0%})" if c.cut_asked else "")


_EXTRA: tuple[tuple[str, Callable[[RunSummary], str]], ...] = (
    ("prefix reuse expected (infinite cache)", lambda s: fmt_share(s.prefix.expected_share)),
    ("prefix reuse reported by server (usage)", lambda s: fmt_share(s.prefix.reported_share)),
    ("prefix reuse measured (hits/queries)", lambda s: fmt_share(s.prefix.measured_share)),
    ("speculative acceptance length (measured)",
     lambda s: fmt_num(s.speculation.acceptance_length, 2)),
    ("speculative acceptance length (claimed by server/profile)",
     lambda s: fmt_num(s.speculation.claimed_acceptance_length, 2)),
    ("requests sent in window", _count("in_window")),
    ("ok", _count("ok")),
    ("errors", _count("error")),
    ("timeouts", _count("timeout")),
    ("incomplete (still running when the drain ended)", _count("incomplete")),
    ("lost (on a lost --ray worker)", _count("lost")),
    ("tokens the incomplete requests received / asked", lambda s: _cut(s)),
    (metric("failure_share").label + " (errors + timeouts + incomplete)",
     lambda s: fmt_share(failure_share(s))),
    ("output length mismatches (ok requests)", _count("output_mismatch")),
    ("no interactivity (ok, < 2 tokens or one read; out of interactivity shares)",
     _count("no_interactivity")),
    ("prompt length mismatches (ok requests, server's count)", _count("prompt_mismatch")),
    ("steady window", lambda s: fmt_time(s.window_s, "window")),
    ("runs pooled", lambda s: str(len(s.runs))),
)


def level_rows(level: Level, arms: list[str], others: list[str]) -> list[dict[str, Any]]:
    """The per-level metric table: label, a (value, interval) per arm, a ratio cell per other."""
    present = [a for a in arms if a in level.arms]
    ratios: dict[str, dict[str, Ratio]] = {
        o: {r.metric: r for r in level.ratios.get(o, [])} for o in others}
    rows: list[dict[str, Any]] = []

    def add(key: str, label: str, values: list[tuple[str, str]]) -> None:
        rows.append({"label": label, "cells": values,
                     "ratios": [ratio_cell(ratios.get(o, {}).get(key)) for o in others]})

    for key in report_rows():  # each declared metric the table lists, in its order
        add(key, row_label(key), [_cell(level.arms[a], key) for a in present])
    first = level.arms[present[0]]
    for i, g in enumerate(first.goodput):
        add(f"goodput{i}.requests", f"goodput {g.tier.label}: requests",
            [(fmt_share(level.arms[a].goodput[i].requests), "") for a in present])
        add(f"goodput{i}.users", f"goodput {g.tier.label}: users",
            [(fmt_share(level.arms[a].goodput[i].users), "") for a in present])
        add(f"goodput{i}.left_out", f"goodput {g.tier.label}: left out (no interactivity; "
            "cut by the drain on pace)",
            [(f"{level.arms[a].goodput[i].unrated:,}; {level.arms[a].goodput[i].censored:,}",
              "") for a in present])
    for label, fn in _EXTRA:
        add(label, label, [(fn(level.arms[a]), "") for a in present])
    return rows


def failures(level: Level, runs: Sequence[RunData], arms: list[str]) -> list[dict[str, Any]]:
    """Failure counts by kind per arm at a level, each with one example message."""
    rows = []
    for a in arms:
        if a not in level.arms:
            continue
        run_ids = set(level.arms[a].runs)
        examples: dict[str, str] = {}
        for run in runs:
            if run.manifest.run_id not in run_ids:
                continue
            r = run.requests
            for i in np.flatnonzero(r.status != "ok"):
                kind = r.error_kind[i] if r.error_kind[i] is not None else str(r.status[i])
                if kind not in examples and r.error_message[i]:
                    examples[kind] = str(r.error_message[i])[:300]
        for kind, n in level.arms[a].counts.by_error_kind.items():
            rows.append({"arm": a, "kind": kind, "count": n, "example": examples.get(kind, "")})
    return rows


def workload_stats(runs: Sequence[RunData]) -> list[tuple[str, str]]:
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
         fmt_share(float(exp[has_exp].sum() / prompt[has_exp].sum()))
         if has_exp.any() and prompt[has_exp].sum() > 0 else "n/a"),
    ]


def flat_config(cfg: object) -> list[tuple[str, str]]:
    """A server config as (dotted field, JSON value) rows, flattened as the fairness diff does."""
    out: dict[str, object] = {}
    flatten_config(cfg, "", out)
    return [(k, orjson.dumps(v, default=str).decode()) for k, v in out.items()]
