"""Number formatting for reports: one unit per quantity, n/a for missing values, and
metric labels in those units (the wording is the catalogue's, ``analysis.metrics.METRICS``).

A quantity keeps its unit everywhere in a report (tables and charts alike), the
one its declaration names (``Metric.display``): E2E and session latency in
seconds (they run to minutes), TTFT, TPOT, ITL and schedule lag in milliseconds
(mostly sub-second), so that two cells of one quantity never need a unit
conversion to be compared.
"""

from __future__ import annotations

import math

from analysis.metrics import DECLARED, axis_label, metric

__all__ = [
    "per_gpu_text",
    "TIME_UNITS", "display_label", "display_unit", "fmt", "fmt_ci", "fmt_num", "fmt_share",
    "fmt_time", "row_label", "time_unit",
]

_FROM_SECONDS = {"ms": 1000.0, "s": 1.0}

TIME_UNITS: dict[str, tuple[str, float]] = {
    **{m.key: (m.display, _FROM_SECONDS[m.display]) for m in DECLARED if m.display},
    "window": ("s", 1.0),
}
"""Quantity -> (unit, multiplier from seconds)."""


def time_unit(quantity: str) -> tuple[str, float]:
    """The display unit of a time quantity (seconds for any quantity not listed)."""
    return TIME_UNITS.get(quantity, ("s", 1.0))


def display_unit(key: str) -> str:
    """The unit a report shows a catalogued metric in: a time in its quantity's fixed
    unit (``ms`` for TTFT), a share in %, anything else as stored."""
    unit = metric(key).unit
    if unit == "s":
        return time_unit(key.partition(".")[0])[0]
    return "%" if unit == "share" else unit


def display_label(key: str) -> str:
    """``P90 TTFT from schedule (ms)``: a chart axis, in the unit the report shows."""
    return axis_label(key, display_unit(key))


def row_label(key: str) -> str:
    """A table row's label: the catalogue's, with the unit where the cells show bare
    numbers (a time or share cell carries its own unit)."""
    if metric(key).unit in ("s", "share"):
        return metric(key).label
    return axis_label(key)


def _missing(v: float | None) -> bool:
    return v is None or not math.isfinite(v)


def fmt_time(v: float | None, quantity: str = "ttft") -> str:
    """Seconds shown in the quantity's fixed unit, three significant digits."""
    if v is None or _missing(v):
        return "n/a"
    unit, mult = time_unit(quantity)
    x = v * mult
    if abs(x) >= 100:
        return f"{x:,.0f} {unit}"
    return f"{x:.3g} {unit}"


def fmt_num(v: float | None, digits: int = 1) -> str:
    if v is None or _missing(v):
        return "n/a"
    return f"{v:,.{digits}f}"


def fmt_share(v: float | None) -> str:
    if v is None or _missing(v):
        return "n/a"
    return f"{v * 100.0:.1f}%"


def fmt(v: float | None, unit: str, quantity: str = "") -> str:
    """A value in a report cell; ``unit`` as a Distribution names it."""
    if unit == "s":
        return fmt_time(v, quantity)
    if unit == "share":
        return fmt_share(v)
    if unit == "count":
        return "n/a" if v is None else f"{int(v):,}"
    if unit == "x":
        return "n/a" if v is None or _missing(v) else f"{v:.2f}x"
    return fmt_num(v, 1)


def fmt_ci(ci: tuple[float, float] | None, unit: str, quantity: str = "") -> str:
    """``[lo – hi]`` in the value's unit; empty when there is no interval."""
    if ci is None:
        return ""
    return f"[{fmt(ci[0], unit, quantity)} \u2013 {fmt(ci[1], unit, quantity)}]"


_PER = {"users": "users", "rate": "sessions/s", "timestamps": "x time scale"}


def _n(v: float) -> str:
    return f"{v:.2f}"


def per_gpu_text(passed: float | None, failed: float | None, gpus: int | None,
                 kind: str = "users") -> str:
    """A capacity bracket per GPU: ``1.00 – 4.00 users per GPU``, ``≥ 4.00 ...``,
    ``< 0.25 ...``; ``per GPU unknown`` without a GPU count."""
    unit = f"{_PER.get(kind, kind)} per GPU"
    if not gpus:
        return f"{unit}: unknown (GPU count not recorded)"
    if passed is not None and failed is not None:
        return f"{_n(passed / gpus)} \u2013 {_n(failed / gpus)} {unit}"
    if passed is not None:
        return f"\u2265 {_n(passed / gpus)} {unit}"
    if failed is not None:
        return f"< {_n(failed / gpus)} {unit}"
    return f"{unit}: unknown"
