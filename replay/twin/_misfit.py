"""Every misfit ``calibrate`` can see, named: a warning printed and stored in the twin
file's ``calibration.warnings``, so a twin that does not explain its own runs says so
(a prefill fitted 4x too fast once passed silently beside a table that showed it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from analysis.fit import PrefillCheck, StepFit

if TYPE_CHECKING:
    from replay.twin._level_facts import LevelFacts

__all__ = ["misfit_warnings"]

TTFT_TOLERANCE = 0.10
"""Idle TTFT measured vs fitted (means over a level) further apart than this is named."""
GAP_TOLERANCE = 0.10
"""A fitted level's mean inter-token gap off the fit's by more than this is named."""
HISTOGRAM_TOLERANCE = 0.15
"""The server's prefill-time histogram off the fitted prefill by more than this."""
MIN_IDLE_TTFTS = 20
"""Fewer idle TTFTs than this at a level cannot tell a 10% miss from heavy-tailed steps."""


def misfit_warnings(levels: Sequence[LevelFacts], fit: StepFit, fitted: Sequence[int],
                    checks: Sequence[tuple[str, PrefillCheck]]) -> list[str]:
    """The warnings, one line each (see the module docstring)."""
    out: list[str] = []
    for lv in levels:
        where = f"{lv.users} users" + ("" if lv.users in fitted else " (held out)")
        m, p = lv.mean_idle_ttft_s, lv.mean_pred_idle_ttft_s
        if m and p is not None and lv.idle_ttfts >= MIN_IDLE_TTFTS \
                and abs(p / m - 1) > TTFT_TOLERANCE:
            out.append(f"{where}: idle TTFT measured {m * 1e3:.1f} ms, fitted {p * 1e3:.1f} ms "
                       f"({p / m - 1:+.0%} over {lv.idle_ttfts} requests): the prefill rate "
                       "or the request overhead does not explain this level")
        if lv.users in fitted and lv.mean_gap_s and abs(lv.gap_error) > GAP_TOLERANCE:
            out.append(f"{where}: mean inter-token gap measured {lv.mean_gap_s * 1e3:.2f} ms, "
                       f"fitted {lv.mean_pred_gap_s * 1e3:.2f} ms ({lv.gap_error:+.0%}): the "
                       "step model does not explain this level's steps")
    for run, c in checks:
        if abs(c.error) > HISTOGRAM_TOLERANCE:
            implied = (f"; the histogram implies {c.rate_tokens_per_s:.4g} tok/s against "
                       f"the fitted {fit.prefill_tokens_per_s:.4g}"
                       if c.rate_tokens_per_s else "")
            out.append(f"{run}: the server's vllm:request_prefill_time_seconds sums "
                       f"{c.measured_s:.3g} s over {c.requests} requests, the fit "
                       f"{c.predicted_s:.3g} s ({c.error:+.0%}){implied}")
    return out
