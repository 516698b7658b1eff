"""What a report writes next to itself, as texts: the HTML, summary.json, levels.csv,
requests.csv and summary.schema.json; and the reviewed extras read from a
comparison directory (the experiment file it was run from, an SLO search).

Nothing here writes a file: callers (the CLI, the comparison driver) write the
returned texts, so every writer produces the same set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from analysis.judge import Comparison
from analysis.read import RunData
from analysis.report._export import requests_csv
from analysis.report._export_levels import levels_csv, summary_schema
from analysis.report._plan_view import TWIN_PLAN_FILE, twin_section
from analysis.report._report import render_report
from analysis.schema import scrub_secrets

__all__ = ["EXPERIMENT_FILE", "SEARCH_FILE", "read_extras", "report_bundle"]

EXPERIMENT_FILE = "experiment.toml"
"""The experiment a comparison was run from, stored in its directory."""
SEARCH_FILE = "search.json"
"""An SLO search's brackets and evidence, stored in its directory."""


def _bracket(lo: object, hi: object) -> str:
    """[largest met, first failed] as text (``met at 3 – failed at 4``, never ``3.0``);
    an open side says so."""
    lo, hi = (f"{v:g}" if isinstance(v, float) else v for v in (lo, hi))
    if lo is None and hi is None:
        return "n/a"
    if hi is None:
        return f"met up to {lo} – (none failed)"
    if lo is None:
        return f"(none met) – failed at {hi}"
    return f"met at {lo} – failed at {hi}"


def _stopped(e: Any) -> str:
    """A probe whose window a stop rule ended early: the window it covered."""
    w = e.get("window_s")
    if not e.get("stopped_early") or not isinstance(w, (int, float)):
        return ""
    return f" (stopped early at {w:.0f} s)"


def _search_section(data: Any) -> dict[str, Any]:
    rows = []
    for r in data.get("results", []):
        lo, hi = r.get("bracket") or (None, None)
        runs = r.get("evidence", [])
        rows.append([r.get("arm", ""), r.get("tier", ""), r.get("answer", ""),
                     _bracket(lo, hi),
                     r.get("how", ""),
                     "; ".join(f"{e.get('users')}: {e.get('verdict')}{_stopped(e)}"
                               for e in runs)])
    return {
        "title": "SLO search",
        "intro": data.get("summary", "Per arm, the measured user counts each tier's capacity "
                          "lies between, found by doubling and bisection over short runs."),
        "table": {"columns": ["arm", "tier", "capacity (measured bracket)", "probes",
                              "how the search ended", "evidence (load: verdict)"],
                  "rows": rows},
    }


def read_extras(directory: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Sections for the report from files in a comparison directory (empty when none)."""
    root = Path(directory)
    extras: dict[str, dict[str, Any]] = {}
    search = root / SEARCH_FILE
    if search.is_file():
        try:
            extras["search"] = _search_section(orjson.loads(search.read_bytes()))
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
            extras["search"] = {"title": "SLO search",
                                "intro": f"{SEARCH_FILE} is unreadable; not shown."}
    twin = root / TWIN_PLAN_FILE
    if twin.is_file():
        try:
            extras["twin"] = twin_section(orjson.loads(twin.read_bytes()))
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError, KeyError) as exc:
            why = ""
            if isinstance(exc, ValidationError):
                err = exc.errors()[0]
                why = f" (levels.{'.'.join(str(p) for p in err['loc'])}: {err['msg']})"
            extras["twin"] = {"title": "Twin estimate (modelled)",
                              "intro": f"{TWIN_PLAN_FILE} is unreadable{why}; not shown."}
    exp = root / EXPERIMENT_FILE
    if exp.is_file():
        extras["experiment"] = {
            "title": "Experiment file",
            "intro": f"This comparison ran from {EXPERIMENT_FILE} (stored with the results); "
                     f"rerun it with: agentreplay compare --config {EXPERIMENT_FILE}",
            "pre": scrub_secrets(exp.read_text(encoding="utf-8", errors="replace")[:20000]),
        }
    return extras


def report_bundle(
    comparison: Comparison, runs: Sequence[RunData], *, charts: bool = True,
    extras: Mapping[str, Any] | None = None, names: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """File name -> text for the report and its data files (names overridable by kind:
    ``report``, ``summary``, ``levels``, ``requests``, ``schema``)."""
    n = {"report": "report.html", "summary": "summary.json", "levels": "levels.csv",
         "requests": "requests.csv", "schema": "summary.schema.json", **(names or {})}
    data = [n["summary"], n["levels"], n["requests"], n["schema"]]
    return {
        n["report"]: render_report(comparison, runs, charts=charts, data_files=data,
                                   extra_sections=extras),
        n["summary"]: comparison.model_dump_json(indent=2),
        n["levels"]: levels_csv(comparison),
        n["requests"]: requests_csv(runs),
        n["schema"]: summary_schema(),
    }
