"""The twin's estimate in a report: what ``plan --twin ... DIR`` stored beside the
results (``twin-plan.json``), as a section after the measured capacity.

The section is labelled modelled throughout and never replaces the measured brackets:
its table puts each tier's measured bracket, the twin's bracket and its prediction
interval (from the twin's held-out calibration error) side by side, with the caveat
where they cannot both hold; its chart draws the measured P90 interactivity of every
arm as points and the twin's as a line, the tier floors dashed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from analysis.metrics import axis_label
from analysis.report._chart_base import ArmLevels, color, figure, legend_outside, render, safe
from analysis.text import plural

__all__ = ["TWIN_PLAN_FILE", "twin_chart", "twin_section"]

TWIN_PLAN_FILE = "twin-plan.json"


_Figure = Annotated[float | None, Field(allow_inf_nan=False)]


class _Level(BaseModel):
    """One simulated level as ``plan --twin`` stores it (a hand-edited file is checked:
    the chart plots these numbers)."""

    model_config = ConfigDict(extra="allow")

    users: Annotated[int, Field(ge=1)]
    p90_interactivity: _Figure = None
    p90_ttft_due_s: _Figure = None
    output_tok_s: _Figure = None


_LEVELS = TypeAdapter(list[_Level])


def twin_section(data: Mapping[str, Any]) -> dict[str, Any]:
    """The report section (title, intro, table) of a stored twin plan; a damaged file
    raises ValueError (pydantic's names the field), and the report says it is not shown.
    A plan of one twin per arm (``twins``: the demo's) gets a row per tier and arm."""
    if "twins" in data:
        return _arms_section(data)
    levels = [lv.model_dump() for lv in _LEVELS.validate_python(data.get("levels", []))]
    band = data.get("error_band")
    pi = data.get("prediction_interval")
    if isinstance(pi, dict):
        check = (f"Its prediction interval (nominal {pi.get('nominal', 0.9):.0%}) comes from "
                 f"its held-out check at {pi.get('checked_users', '?')} users and widens with "
                 "the distance from it; answers beyond what was checked say extrapolated.")
    elif isinstance(band, dict):
        check = (f"Its held-out calibration miss (up to {band.get('interactivity', 1):.2f}x "
                 f"in P90 interactivity, {band.get('ttft', 1):.2f}x in P90 TTFT) widens each "
                 "tier both ways into the prediction interval.")
    else:
        check = ("The twin was never checked on a held-out level (calibrate --holdout), so "
                 "no prediction interval is given: its capacities are unchecked.")
    rows = []
    for t in data.get("tiers", []):
        measured = "; ".join(f"{m.get('arm')}: {m.get('text')}" for m in t.get("measured", []))
        caveat = "; ".join(f"outside {m.get('arm')}'s measured bracket"
                           for m in t.get("measured", []) if m.get("outside")) or "-"
        rows.append([t.get("tier", ""), measured or "not measured", t.get("text", ""),
                     t.get("interval") or "n/a (unchecked twin)", caveat])
    return {
        "title": "Twin estimate (modelled)",
        "intro": (f"MODELLED, not measured: the twin {data.get('profile', '?')} "
                  f"({data.get('backend', '?')} backend, "
                  f"{plural(int(data.get('replicas', 1)), 'replica')}) "
                  f"replayed the workload on simulated time at {len(data.get('levels', []))} "
                  f"levels of {data.get('duration_s', '?')} s (agentreplay plan --twin). "
                  f"{check} Where the twin and a measurement disagree, the measurement holds."),
        "table": {"columns": ["tier", "measured bracket", "twin (modelled)",
                              "twin prediction interval", "caveat"], "rows": rows},
        "raw": data,
        "levels": levels,
        "floors": sorted({float(t.get("floor", 0)) for t in data.get("tiers", [])}),
    }


def _arms_section(data: Mapping[str, Any]) -> dict[str, Any]:
    """One twin per arm, each fitted on that arm's runs: each tier's twin bracket and
    interval per arm (the decision above sets each beside its arm's measured bracket)."""
    twins = [t for t in data.get("twins", []) if isinstance(t, Mapping)]
    levels, rows = [], []
    for t in twins:
        arm = str(t.get("arm", "?"))
        levels += [lv.model_dump() | {"twin": arm}
                   for lv in _LEVELS.validate_python(t.get("levels", []))]
        rows += [[x.get("tier", ""), arm, x.get("text", ""),
                  x.get("interval") or "n/a (unchecked twin)"] for x in t.get("tiers", [])]
    order: dict[str, int] = {}
    for x in (x for t in twins for x in t.get("tiers", [])):
        order.setdefault(str(x.get("tier")), len(order))
    rows.sort(key=lambda r: order.get(str(r[0]), 0))  # tier by tier, in the plan's order
    first = twins[0] if twins else {}
    names = [str(t.get("arm")) for t in twins]
    pi = first.get("prediction_interval")
    check = (f"Each twin's prediction interval (nominal {pi.get('nominal', 0.9):.0%}) comes "
             f"from its held-out check at {pi.get('checked_users', '?')} users."
             if isinstance(pi, dict) else "No held-out check: the capacities are unchecked.")
    return {
        "title": "Twin estimate per arm (modelled)",
        "intro": (f"MODELLED, not measured: a twin per arm ({', '.join(names)}), "
                  f"each fitted on that arm's own runs (agentreplay calibrate), "
                  f"{plural(int(first.get('replicas', 1)), 'replica')} like the arm, "
                  f"replayed the workload "
                  f"on simulated time at {len(first.get('levels', []))} levels of "
                  f"{first.get('duration_s', '?')} s. {check} The decision at the top sets each "
                  "twin beside its arm's measured bracket and says whether both can hold; where "
                  "they disagree, the measurement holds."),
        "table": {"columns": ["tier", "arm (its twin)", "twin (modelled)",
                              "twin prediction interval"], "rows": rows},
        "raw": data,
        "levels": levels,
        "floors": sorted({float(x.get("floor", 0)) for t in twins for x in t.get("tiers", [])}),
    }


def twin_chart(arms: Sequence[ArmLevels], levels: Sequence[Mapping[str, Any]],
               floors: Sequence[float]) -> str:
    """Measured P90 interactivity per arm (points) and the twin's (line) against users."""
    fig, (ax,) = figure(height=3.6)
    for i, a in enumerate(arms):
        pts = [(load.value, s.interactivity.p90) for load, s in a.points()
               if load.kind == "users" and s.interactivity.p90 is not None]
        if pts:
            x, y = zip(*pts, strict=True)
            ax.plot(x, y, "o", color=color(i), label=safe(f"{a.arm} (measured)"))
    names = {a.arm: i for i, a in enumerate(arms)}
    for name in dict.fromkeys(lv.get("twin") for lv in levels):  # one twin, or one per arm
        twin = [(float(lv["users"]), float(lv["p90_interactivity"])) for lv in levels
                if lv.get("p90_interactivity") is not None and lv.get("twin") == name]
        if twin:
            x, y = zip(*sorted(twin), strict=True)
            ax.plot(x, y, "-", color=color(names[name]) if name in names else "0.2",
                    linewidth=1.4, label=safe(f"{name}'s twin (modelled)" if name
                                              else "twin (modelled)"))
    for f in floors:
        ax.axhline(f, color="0.4", linestyle="--", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ticks = sorted({float(lv["users"]) for lv in levels} |
                   {load.value for a in arms for load, _ in a.points() if load.kind == "users"})
    if ticks:
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{u:g}" for u in ticks])
        ax.minorticks_off()
    ax.set_xlabel("users (concurrent agent lanes)")
    ax.set_ylabel(axis_label("interactivity.p90"))
    ax.set_title("Measured points and the twin's curve (dashed: SLO floors)")
    legend_outside(ax, fontsize=8)
    return render(fig)
