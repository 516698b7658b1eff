"""The digital twin, all of it: fitted from runs, run on simulated time, planned on.

``calibrate`` fits a twin to run directories (the fitting itself is pure:
``analysis.fit``) and writes it as a ``serve-sim --profile`` file; ``predict_level``
checks it on a held-out level.

``simulate_level`` replays a workload's closed-loop users through the unchanged
lanes (``replay.load``) against in-process ``replay.servers.sim.Engine`` replicas on a
fast-forwarding event loop (``VirtualLoop``), and summarises the records with
``analysis`` (``RunSummary``). ``level_ladder`` and ``capacities`` read each SLO
tier's modelled capacity off a ladder of levels; ``load_twin`` reads a twin file (a
simulator profile, as ``serve-sim --profile`` reads, plus an optional
``calibration`` key); ``PlanSettings`` holds what ``plan --twin`` asks for.
"""

from replay.twin._band import (
    ErrorBand,
    calibration_error,
    interval_text,
    outside_measured,
    widened_meets,
    widened_tiers,
)
from replay.twin._calibrate import Calibration, Holdout, LevelFacts, calibrate
from replay.twin._clock import Advancer, Deadlock, VirtualLoop, virtual_time
from replay.twin._engines import Routing, TwinEngines
from replay.twin._fitted_profile import clock_scale, decode_backend, step_budget, twin_profile
from replay.twin._interval import PredictionInterval, interval_of
from replay.twin._level import LevelResult, Workload, load_workload, simulate_level
from replay.twin._per_arm import TWIN_FILE, arm_twins, twin_ladder
from replay.twin._plan import MAX_PLAN_USERS, MAX_PLAN_WORK, PlanSettings, check_bounded
from replay.twin._plan_interval import TierInterval, extrapolation, is_what_if, tier_interval
from replay.twin._predict import LevelMetrics, LoadShape, measured_metrics, predict_level
from replay.twin._sweep import (
    TierCapacity,
    capacities,
    level_ladder,
    level_record,
    load_twin,
    replicas_needed,
    run_ladder,
    tier_record,
)

__all__ = [
    "Advancer",
    "Calibration",
    "Deadlock",
    "ErrorBand",
    "Holdout",
    "LevelFacts",
    "LevelMetrics",
    "LevelResult",
    "LoadShape",
    "MAX_PLAN_USERS",
    "MAX_PLAN_WORK",
    "PlanSettings",
    "PredictionInterval",
    "Routing",
    "TierCapacity",
    "TierInterval",
    "TWIN_FILE",
    "TwinEngines",
    "VirtualLoop",
    "Workload",
    "arm_twins",
    "calibrate",
    "calibration_error",
    "capacities",
    "check_bounded",
    "clock_scale",
    "decode_backend",
    "extrapolation",
    "interval_of",
    "is_what_if",
    "interval_text",
    "level_ladder",
    "level_record",
    "load_twin",
    "load_workload",
    "measured_metrics",
    "outside_measured",
    "predict_level",
    "replicas_needed",
    "run_ladder",
    "simulate_level",
    "step_budget",
    "tier_interval",
    "tier_record",
    "twin_ladder",
    "twin_profile",
    "virtual_time",
    "widened_meets",
    "widened_tiers",
]
