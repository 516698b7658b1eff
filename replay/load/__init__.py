"""One run: settings, user lanes, run phases, executors, records writer, live view.

``run_load`` (or ``run_load_sync``) runs one load test from a :class:`RunSettings`.
The run's lanes run in whichever executor fits: in process, in worker processes
(``--workers``) or Ray actors (``--ray``), and reach the server only through a
:class:`Transport`. ``drive_run`` is the core every run shares (the twin's levels
run through it with their own transport, store and clock). Other packages import
these names, never the private modules.
"""

from replay.load._close import (
    Analysis,
    ClosedRun,
    ServerWatchHook,
)
from replay.load._drain import (
    DRAIN_MARGIN_S,
    DRAIN_MIN_S,
    DRAIN_RATE_TOK_S,
    auto_drain,
    resolve_drain,
)
from replay.load._fleet import (
    check_fleet,
    describe_fleet,
    split_targets,
)
from replay.load._live import (
    LiveStats,
    LiveView,
    render_lines,
)
from replay.load._manifest import check_fits, new_manifest
from replay.load._names import label_problem
from replay.load._phases import (
    Target,
    connections_for,
    first_too_long,
    open_plan,
)
from replay.load._prepare import Prepared, Workload, load_workload, prepare_run
from replay.load._remote import split_users
from replay.load._routing import FleetCache
from replay.load._run import (
    Lanes,
    Poller,
    drive_run,
    run_closed,
    run_load,
    run_load_sync,
)
from replay.load._scenario import (
    SCENARIOS,
    entry_turn,
    judge_scenario,
    scenario_values,
)
from replay.load._settings import (
    FLAGS,
    Interval,
    RunConfig,
    RunSettings,
    Seconds,
    SharedSettings,
    ThinkScale,
    scenario_defaults,
    validated,
)
from replay.load._stamps import rejudge_scenarios
from replay.load._store import MemoryStore, RecordStore
from replay.load._timeline import check_time_controls
from replay.load._transport import Transport
from replay.load._window_stop import WindowEnd, WindowStop
from replay.load._workers import event_loop_factory
from replay.load._writer import (
    RESULT_FILES,
    RunWriter,
    check_writable_dir,
    claim_run_dir,
)

__all__ = [
    "DRAIN_MARGIN_S",
    "DRAIN_MIN_S",
    "DRAIN_RATE_TOK_S",
    "FLAGS",
    "RESULT_FILES",
    "SCENARIOS",
    "Analysis",
    "ClosedRun",
    "FleetCache",
    "Interval",
    "Lanes",
    "LiveStats",
    "LiveView",
    "MemoryStore",
    "Poller",
    "Prepared",
    "RecordStore",
    "RunConfig",
    "RunSettings",
    "RunWriter",
    "Seconds",
    "ServerWatchHook",
    "SharedSettings",
    "Target",
    "ThinkScale",
    "Transport",
    "WindowEnd",
    "WindowStop",
    "Workload",
    "auto_drain",
    "check_fits",
    "check_fleet",
    "check_time_controls",
    "check_writable_dir",
    "claim_run_dir",
    "connections_for",
    "describe_fleet",
    "drive_run",
    "entry_turn",
    "event_loop_factory",
    "first_too_long",
    "judge_scenario",
    "label_problem",
    "load_workload",
    "new_manifest",
    "open_plan",
    "prepare_run",
    "rejudge_scenarios",
    "render_lines",
    "resolve_drain",
    "run_closed",
    "run_load",
    "run_load_sync",
    "scenario_defaults",
    "scenario_values",
    "split_targets",
    "split_users",
    "validated",
]
