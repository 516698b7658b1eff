"""The digital twin: a simulator profile run on simulated time, for fast what-if sweeps.

``simulate_level`` replays a workload's closed-loop users through the unchanged
lanes (``replay.load``) against in-process ``replay.sim.Engine`` replicas on a
fast-forwarding event loop (``VirtualLoop``), and summarises the records with
``analysis`` (``RunSummary``). ``sweep`` runs a ladder of levels and reads each
SLO tier's modelled capacity off it; ``load_twin`` reads a twin file (a
simulator profile, as ``serve-sim --profile`` reads, plus an optional
``calibration`` key).
"""

from replay.twin._clock import Advancer, Deadlock, VirtualLoop, virtual_time
from replay.twin._engines import Routing, TwinEngines
from replay.twin._level import LevelResult, Workload, load_workload, simulate_level

__all__ = [
    "Advancer",
    "Deadlock",
    "LevelResult",
    "Routing",
    "TwinEngines",
    "VirtualLoop",
    "Workload",
    "load_workload",
    "simulate_level",
    "virtual_time",
]
