"""The digital twin: a simulator profile run on simulated time, for fast what-if sweeps.

``simulate_level`` replays a workload's closed-loop users through the unchanged
lanes (``replay.load``) against in-process ``replay.sim.Engine`` replicas on a
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
    widened_tiers,
)
from replay.twin._clock import Advancer, Deadlock, VirtualLoop, virtual_time
from replay.twin._engines import Routing, TwinEngines
from replay.twin._level import LevelResult, Workload, load_workload, simulate_level
from replay.twin._plan import PlanSettings
from replay.twin._sweep import (
    TierCapacity,
    capacities,
    level_ladder,
    load_twin,
    replicas_needed,
    run_ladder,
)

__all__ = [
    "Advancer",
    "Deadlock",
    "ErrorBand",
    "LevelResult",
    "PlanSettings",
    "Routing",
    "TierCapacity",
    "TwinEngines",
    "VirtualLoop",
    "Workload",
    "calibration_error",
    "capacities",
    "interval_text",
    "level_ladder",
    "load_twin",
    "load_workload",
    "outside_measured",
    "replicas_needed",
    "run_ladder",
    "simulate_level",
    "virtual_time",
    "widened_tiers",
]
