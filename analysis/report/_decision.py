"""The decision block at the top of a report: title, validity, summary and capacity tables.

Presentation only: every number comes from the ``Comparison`` (analysis owns
the numbers); this module picks the few a reviewer decides on and lays them
out per level and per tier, with intervals and the arms' ratios. Fields that
an older ``summary.json`` lacks are shown as n/a, never computed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from analysis.judge import Comparison, Level, Ratio, ratio_interval_text
from analysis.metrics import RunSummary, direction_text, metric
from analysis.read import RunData
from analysis.report._format import (
    display_unit,
    fmt,
    fmt_ci,
    fmt_num,
    fmt_share,
    per_gpu_text,
)

__all__ = [
    "SUMMARY_METRICS",
    "dist_text",
    "level_label",
    "measured_text",
    "capacity_view",
    "report_title",
    "summary_columns",
    "summary_view",
    "validity_view",
    "verdict_text",
]

SUMMARY_METRICS: tuple[str, ...] = (
    "interactivity.p90", "ttft_due.p90", "decode_tok_s_per_gpu", "failure_share",
)
"""Catalogue keys of the summary table's columns, the few numbers a reviewer decides on."""


def summary_columns() -> list[tuple[str, str, str]]:
    """(title, unit, hover note) per summary column, worded by the catalogue: the note
    is the metric's direction and definition."""
    return [(metric(k).label, display_unit(k),
             f"{direction_text(k)}; {metric(k).definition}") for k in SUMMARY_METRICS]


def _cell(value: str, ci: str = "", cls: str = "") -> dict[str, str]:
    return {"value": value, "ci": ci, "cls": cls}


def failure_share(s: RunSummary) -> float | None:
    """The summary's failure share; from the counts when the summary predates the field."""
    share = getattr(s.counts, "failure_share", None)
    if share is not None:
        return float(share)
    n = s.counts.in_window - getattr(s.counts, "cancelled", 0)
    return None if n <= 0 else (n - s.counts.ok) / n


def summary_cell(s: RunSummary, key: str) -> dict[str, str]:
    """One summary-table cell (value, interval) of ``metric.stat``, a rate or failure share."""
    if key == "failure_share":
        ci = getattr(s.counts, "failure_share_ci", None)
        return _cell(fmt_share(failure_share(s)), fmt_ci(ci, "share"))
    head, _, stat = key.partition(".")
    if stat:
        d = getattr(s, head)
        return _cell(dist_text(d, stat, head), fmt_ci(d.ci(stat), d.unit, head))
    value = getattr(s, head)
    if head == "decode_tok_s_per_gpu" and value is None and s.decode_tok_s is not None:
        return _cell(fmt_num(s.decode_tok_s, 1), "total: GPU count unknown")
    return _cell(fmt_num(value, 1), fmt_ci(getattr(s, f"{head}_ci", None), "tok/s"))


def dist_text(d: Any, stat: str, quantity: str) -> str:
    """A distribution's statistic, marked as a bound when censored requests (cut at the
    drain's end) can still move it: "≥" for a latency, "≤" for a rate (interactivity)."""
    text = fmt(d.value(stat), d.unit, quantity)
    if stat in (getattr(d, "bounds", None) or []) and text != "n/a":
        text = ("\u2264 " if d.higher_is_better else "\u2265 ") + text
    return text


def ratio_cell(r: Ratio | None) -> dict[str, str]:
    if r is None or r.ratio is None:
        return _cell("")
    established = getattr(r, "established", r.sure)
    cls = ("better" if r.better else "worse") if established else "unsure"
    ci = ratio_interval_text(r.ci) if r.ci is not None else ""
    if r.sure and not established:
        ci += " not established"
    return _cell(f"{r.ratio:.2f}x", ci, cls)


def level_label(lv: Level | RunSummary) -> str:
    """What set the load of a level (users, a session rate, a time scale), by its
    :class:`LoadLevel`."""
    return lv.label if isinstance(lv, Level) else lv.level.label


def summary_view(c: Comparison) -> dict[str, Any]:
    """Rows per level: one per arm, then one ratio row per other arm (other / baseline)."""
    rows: list[dict[str, Any]] = []
    for lv in c.levels:
        arms = [a for a in c.arms if a in lv.arms]
        others = [o for o in c.arms[1:] if o in lv.ratios]
        span = len(arms) + len(others)
        first = True
        for a in arms:
            rows.append({"level": level_label(lv), "span": span if first else 0, "arm": a,
                         "ratio": False,
                         "cells": [summary_cell(lv.arms[a], k) for k in SUMMARY_METRICS]})
            first = False
        for o in others:
            by = {r.metric: r for r in lv.ratios.get(o, [])}
            rows.append({"level": level_label(lv), "span": 0, "arm": f"{o} / {c.baseline}",
                         "ratio": True,
                         "cells": [ratio_cell(by.get(k)) for k in SUMMARY_METRICS]})
    return {"columns": summary_columns(), "rows": rows}


def _how(row: Any) -> str:
    """Which measured levels the bracket comes from."""
    b = row.bracket
    if b.kind == "unknown":
        return "no level could be told met or failed" + str(b.note())
    if b.kind == "at least":
        text = f"met at every level measured, up to {b.passed:g}"
    elif b.kind == "below":
        text = f"failed already at the smallest level, {b.failed:g}"
    else:
        below = " and every level below" if min(row.levels) < b.passed else ""
        text = f"met at {b.passed:g}{below}, failed at {b.failed:g}"
    return text + str(b.note())


def capacity_view(c: Comparison) -> dict[str, Any]:
    """One row per tier: each arm's capacity bracket (the measured levels it lies
    between), then the arms' capacity ratio as far as the brackets bound it."""
    tiers: dict[str, dict[str, Any]] = {}
    unit = "users"
    for r in c.capacity:
        unit = {"rate": "sessions/s", "timestamps": "time scale"}.get(r.load_kind, "users")
        t = tiers.setdefault(r.tier.label, {"tier": r.tier.label, "arms": {}})
        t["arms"][r.arm] = {
            "users": r.bracket.text(r.load_kind), "how": _how(r),
            "per_gpu": per_gpu_text(r.bracket.passed, r.bracket.failed, r.gpu_count,
                                    r.load_kind),
            "decode": fmt_num(r.decode_tok_s_per_gpu, 1), "row": r, **_energy_cells(r),
        }
    rows = []
    for label, t in tiers.items():
        cells = [_capacity_ratio(t["arms"].get(c.baseline), t["arms"].get(o))
                 for o in c.arms[1:]]
        rows.append({"tier": label, "arms": [t["arms"].get(a) for a in c.arms],
                     "ratios": cells})
    return {"arms": c.arms, "others": c.arms[1:], "rows": rows, "unit": unit}


_NO_TELEMETRY = "missing (no --gpu-metrics)"


def _energy_cells(r: Any) -> dict[str, str]:
    """Agents per kW, tokens per joule and joules per token at the passing level; a
    level without GPU telemetry says missing, never 0."""
    if r.power_w is None:
        miss = _NO_TELEMETRY if r.bracket.passed is not None else ""
        return {"per_kw": miss, "tok_per_j": miss, "j_per_tok": miss}
    return {"per_kw": _sig(r.users_per_kw), "tok_per_j": _sig(r.output_tok_per_j),
            "j_per_tok": _sig(r.j_per_output_tok)}


def _sig(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3g}"


def _capacity_ratio(base: Any, other: Any) -> dict[str, str]:
    """The ratio bracket analysis computed from the two arms' brackets."""
    if base is None or other is None:
        return _cell("")
    ratio = other["row"].ratio
    if ratio is None:
        return _cell("n/a")
    return _cell(ratio.text(), ratio.meaning())


def validity_view(c: Comparison, runs: Sequence[RunData]) -> dict[str, Any]:
    """The comparison's validity (or, where it has none, its runs' stamps merged)."""
    v = getattr(c, "validity", None)
    reasons: list[dict[str, str]] = []
    if v is not None:
        verdict = v.verdict
        reasons = [{"severity": r.severity, "code": r.code, "message": r.message, "run": ""}
                   for r in v.reasons]
    else:
        stamps = [(r.manifest.run_id, getattr(r.manifest, "validity", None)) for r in runs]
        known = [(rid, s) for rid, s in stamps if s is not None]
        if not known:
            return {"verdict": "not assessed", "cls": "unknown", "reasons": [],
                    "note": "these runs carry no validity stamp (written by an older version)"}
        order = {"valid": 0, "caveats": 1, "invalid": 2}
        verdict = max((s.verdict for _, s in known), key=lambda x: order.get(x, 0))
        reasons = [{"severity": r.severity, "code": r.code, "message": r.message, "run": rid}
                   for rid, s in known for r in s.reasons]
    cls = {"valid": "valid", "caveats": "caveats", "invalid": "invalid"}.get(verdict, "unknown")
    return {"verdict": verdict, "cls": cls, "reasons": reasons, "note": "",
            "groups": _groups(reasons)}


def _groups(reasons: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Reasons grouped by check (invalid first): one line each on the first screen."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for r in reasons:
        g = groups.setdefault((r["severity"], r["code"]), {
            "severity": r["severity"], "code": r["code"], "count": 0, "example": r["message"]})
        g["count"] += 1
    return sorted(groups.values(), key=lambda g: (g["severity"] != "invalid", -g["count"]))


def _host(target: str) -> str:
    try:
        parts = urlsplit(target)
    except ValueError:
        return target
    return parts.netloc.rpartition("@")[2] or target


def report_title(c: Comparison, runs: Sequence[RunData]) -> str:
    """A title that is never empty: the arms, else the run's label, target or workload."""
    if len(c.arms) > 1:
        return f"{' vs '.join(c.arms[1:])} vs {c.baseline} (baseline)"
    m = runs[0].manifest
    hosts = list(dict.fromkeys(_host(r.target) for r in m.replicas)) or [_host(m.target)]
    where = (f"fleet of {len(hosts)} ({', '.join(hosts)})" if len(hosts) > 1 else hosts[0])
    name = c.arms[0] or where or m.workload.source or m.run_id
    if not c.arms[0] and m.workload.source:
        name = f"{where} \u2013 {m.workload.source}"
    elif len(hosts) > 1:
        name = f"{name}, {where}"
    return f"run report: {name}"


def measured_text(label: str, s: RunSummary) -> str:
    """``4 users: P90 interactivity 83.2 tok/s/user, P90 TTFT 210 ms, failure share 0.0%``."""
    inter, ttft = metric("interactivity.p90"), metric("ttft.p90")
    value = dist_text(s.interactivity, "p90", "interactivity")
    return (f"{label}: {inter.label} {value + ' ' + inter.unit if value != 'n/a' else 'n/a'}, "
            f"{ttft.label} {dist_text(s.ttft, 'p90', 'ttft')}, "
            f"{metric('failure_share').label} {fmt_share(failure_share(s))}")


def verdict_text(c: Comparison) -> str:
    """The comparison's verdict; for one arm, what the run measured at each level."""
    if len(c.arms) > 1:
        return c.verdict
    parts = [measured_text(level_label(lv), lv.arms[c.arms[0]]) for lv in c.levels]
    met = [f"{r.tier.label}: {r.bracket.text(r.load_kind)}" for r in c.capacity]
    text = "; ".join(parts) + "."
    if met:
        text += " Capacity: " + "; ".join(met) + "."
    return text
