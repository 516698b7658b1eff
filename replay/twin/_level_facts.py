"""One fitted (or held-out) level as ``calibrate`` reports it: kept apart from the fit so
that the misfit checks can read it without importing the calibration."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LevelFacts"]


@dataclass(frozen=True)
class LevelFacts:
    """One fitted (or held-out) level: what its runs showed and how the fit explains it."""

    users: int
    runs: list[str]
    gaps: int
    mean_batch: float
    mean_running_scraped: float | None
    mean_running_records: float | None
    mean_gap_s: float
    mean_pred_gap_s: float
    mean_idle_ttft_s: float | None
    mean_pred_idle_ttft_s: float | None
    cache_hit_share: float | None
    stall_factor: float | None = None
    """This level's mean single step over the fitted typical one (``level_stall_factor``);
    the twin plays back the fitted levels' (``calibration.fit.step_noise_mean``)."""
    idle_ttfts: int = 0
    """Requests of the level sent to an idle server (the idle TTFT means' sample)."""

    @property
    def gap_error(self) -> float:
        return self.mean_pred_gap_s / self.mean_gap_s - 1 if self.mean_gap_s else 0.0
