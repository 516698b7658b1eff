"""The data alongside the report: one CSV row per request, derived times included.

Columns: the run and its load level, every scalar field of ``RequestRecord``
(in the model's order, so a new field appears here by itself), whether the
request was sent in the window, then the derived values of ``_derived``. Text
cells a spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@``, tab,
carriage return first) get a leading apostrophe.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import fields

import numpy as np

from analysis.metrics import Latencies, column_latencies
from analysis.read import RunData, steady_window
from analysis.schema import COLUMN_KIND, FIELDS, level_of

__all__ = ["CSV_COLUMNS", "neutralise", "requests_csv"]

_DERIVED = tuple(f.name for f in fields(Latencies))
CSV_COLUMNS: tuple[str, ...] = (
    ("run_id", "arm", "load_kind", "load", *FIELDS, "in_window")
    + tuple(f"{name}_s" for name in _DERIVED)
)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(text: str) -> str:
    """A cell a spreadsheet shows as text, never evaluates (OWASP CSV injection)."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def _num(a: np.ndarray) -> list[str]:
    return ["" if not np.isfinite(x) else repr(float(x)) for x in a]


def _count(a: np.ndarray) -> list[str]:
    return ["" if x < 0 else str(int(x)) for x in a]


def _text(a: np.ndarray) -> list[str]:
    return ["" if x is None else neutralise(str(x)) for x in a]


_BY_KIND: dict[str, Callable[[np.ndarray], list[str]]] = {
    "time": _num, "count": _count, "text": _text, "coded": _text,
}


def requests_csv(runs: Sequence[RunData]) -> str:
    """All records of all runs as CSV text (empty cells for missing values)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")  # RFC 4180: CR and LF in cells get quoted
    w.writerow(CSV_COLUMNS)
    for run in runs:
        r = run.requests
        n = len(r)
        if n == 0:
            continue
        win = steady_window(run)
        in_win = (r.sent_s >= win[0]) & (r.sent_s < win[1]) if win else np.zeros(n, bool)
        lat = column_latencies(r)
        m = run.manifest
        level = level_of(m)
        cols = [[neutralise(m.run_id)] * n, [neutralise(m.label)] * n, [level.kind] * n,
                [f"{level.value:g}"] * n]
        cols += [_BY_KIND[COLUMN_KIND[name]](getattr(r, name)) for name in FIELDS]
        cols.append(["1" if x else "0" for x in in_win])
        cols += [_num(getattr(lat, name)) for name in _DERIVED]
        w.writerows(zip(*cols, strict=True))
    return buf.getvalue()
