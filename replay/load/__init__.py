"""One run: settings, user lanes, run phases, executors, records writer, live view.

``run_load`` (or ``run_load_sync``) runs one load test from a :class:`RunSettings`.
The run's lanes go through :func:`drive_lanes` in whichever :class:`Executor`
runs them: in process, in worker processes (``--workers``) or Ray actors
(``--ray``). Other packages import these names, never the private modules.
"""

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
from replay.load._names import label_problem
from replay.load._phases import (
    Target,
    connections_for,
    drive_lanes,
    first_too_long,
    make_context,
    open_plan,
)
from replay.load._remote import split_users
from replay.load._routing import FleetCache
from replay.load._run import (
    ServerWatchHook,
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
from replay.load._timeline import check_time_controls, retimed
from replay.load._workers import event_loop_factory
from replay.load._writer import (
    RESULT_FILES,
    RunWriter,
    check_writable_dir,
    claim_run_dir,
    close_manifest,
    iso_utc,
)

__all__ = [
    "DRAIN_MARGIN_S",
    "DRAIN_MIN_S",
    "DRAIN_RATE_TOK_S",
    "FLAGS",
    "FleetCache",
    "Interval",
    "LiveStats",
    "LiveView",
    "RESULT_FILES",
    "RunConfig",
    "RunSettings",
    "RunWriter",
    "SCENARIOS",
    "Seconds",
    "ServerWatchHook",
    "SharedSettings",
    "Target",
    "ThinkScale",
    "auto_drain",
    "check_fleet",
    "check_time_controls",
    "check_writable_dir",
    "claim_run_dir",
    "close_manifest",
    "connections_for",
    "describe_fleet",
    "drive_lanes",
    "entry_turn",
    "event_loop_factory",
    "first_too_long",
    "iso_utc",
    "judge_scenario",
    "label_problem",
    "make_context",
    "open_plan",
    "rejudge_scenarios",
    "render_lines",
    "resolve_drain",
    "retimed",
    "run_load",
    "run_load_sync",
    "scenario_defaults",
    "scenario_values",
    "split_targets",
    "split_users",
    "validated",
]
