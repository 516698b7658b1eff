"""``agentreplay calibrate``: a simulator twin fitted to the user's own runs.

The fitting is pure (``analysis.fit``); this package reads run directories, turns
the fit and the server's reported facts into a ``serve-sim --profile`` file, and
predicts held-out levels through ``predict_level`` (the one interface a
simulated-clock twin can replace).
"""

from replay.calibrate._calibrate import Calibration, Holdout, LevelFacts, calibrate
from replay.calibrate._predict import LevelMetrics, LoadShape, measured_metrics, predict_level
from replay.calibrate._twin import clock_scale, decode_backend, step_budget, twin_profile

__all__ = [
    "Calibration",
    "Holdout",
    "LevelFacts",
    "LevelMetrics",
    "LoadShape",
    "calibrate",
    "clock_scale",
    "decode_backend",
    "measured_metrics",
    "predict_level",
    "step_budget",
    "twin_profile",
]
