"""The data alongside the report: one CSV row per request, derived times included."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import numpy as np

from analysis._metrics import steady_window
from analysis._read import RunData

__all__ = ["CSV_COLUMNS", "requests_csv"]

CSV_COLUMNS = (
    "run_id", "arm", "level_users", "id", "user", "lane", "session", "session_instance",
    "turn", "agent", "kind", "phase", "in_window", "status", "error_kind", "http_status",
    "due_s", "sent_s", "first_token_s", "last_token_s", "ttft_s", "ttft_due_s", "e2e_s",
    "tpot_s", "prompt_tokens", "prompt_tokens_server", "cached_tokens",
    "expected_cached_tokens", "output_tokens_asked", "output_tokens", "error_message",
)


def _num(a: np.ndarray) -> list[str]:
    return ["" if not np.isfinite(x) else repr(float(x)) for x in a]


def _count(a: np.ndarray) -> list[str]:
    return ["" if x < 0 else str(int(x)) for x in a]


def _obj(a: np.ndarray) -> list[str]:
    return ["" if x is None else str(x) for x in a]


def requests_csv(runs: Sequence[RunData]) -> str:
    """All records of all runs as CSV text (empty cells for missing values)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for run in runs:
        r = run.requests
        n = len(r)
        if n == 0:
            continue
        win = steady_window(run)
        in_win = (r.sent_s >= win[0]) & (r.sent_s < win[1]) if win else np.zeros(n, bool)
        with np.errstate(divide="ignore", invalid="ignore"):
            tpot = np.where(r.output_tokens >= 2,
                            (r.last_token_s - r.first_token_s) / (r.output_tokens - 1), np.nan)
        m = run.manifest
        cols = [
            [m.run_id] * n, [m.label] * n, [str(m.load.users)] * n, _obj(r.id),
            [str(int(x)) for x in r.user], _obj(r.lane), _obj(r.session),
            [str(int(x)) for x in r.session_instance], [str(int(x)) for x in r.turn],
            _obj(r.agent), _obj(r.kind), [str(x) for x in r.phase],
            ["1" if x else "0" for x in in_win], [str(x) for x in r.status],
            _obj(r.error_kind), _count(r.http_status), _num(r.due_s), _num(r.sent_s),
            _num(r.first_token_s), _num(r.last_token_s), _num(r.first_token_s - r.sent_s),
            _num(r.first_token_s - r.due_s), _num(r.last_token_s - r.sent_s), _num(tpot),
            [str(int(x)) for x in r.prompt_tokens], _count(r.prompt_tokens_server),
            _count(r.cached_tokens), _count(r.expected_cached_tokens),
            [str(int(x)) for x in r.output_tokens_asked],
            [str(int(x)) for x in r.output_tokens], _obj(r.error_message),
        ]
        w.writerows(zip(*cols, strict=True))
    return buf.getvalue()
