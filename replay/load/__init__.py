"""One run: settings, user lanes, run phases, executors, records writer, live view.

``run_load`` (or ``run_load_sync``) runs one load test from a :class:`RunSettings`.
The run's lanes go through :func:`drive_lanes` in whichever :class:`Executor`
runs them: in process, in worker processes (``--workers``) or Ray actors
(``--ray``). Other packages import these names, never the private modules.
"""

from replay.load._context import LaneContext, LaneSettings, LaneState, PromptBuilder
from replay.load._drain import (
    DRAIN_MARGIN_S,
    DRAIN_MIN_S,
    DRAIN_RATE_TOK_S,
    auto_drain,
    longest_output,
    resolve_drain,
)
from replay.load._executor import ExecOutcome, Executor, Job, RecordSink, raise_crash
from replay.load._fleet import check_fleet, describe_fleet, split_targets
from replay.load._inprocess import InProcessExecutor
from replay.load._lanes import salt_for, sleep_until
from replay.load._live import LiveStats, LiveView, render_lines
from replay.load._phases import (
    Arrival,
    LaneOutcome,
    Target,
    connections_for,
    default_builder,
    drive_lanes,
    first_too_long,
    make_context,
    open_plan,
    walk,
)
from replay.load._ray import RayExecutor
from replay.load._remote import WorkerExecutor, WorkerPlan, run_plan, split_users
from replay.load._routing import FleetCache
from replay.load._run import ServerWatchHook, load_kind, run_load, run_load_sync
from replay.load._scenario import (
    SCENARIOS,
    ScenarioRules,
    ScenarioVerdict,
    apply_scenario,
    entry_turn,
    judge_scenario,
    scenario_rules,
    scenario_values,
)
from replay.load._settings import (
    FLAGS,
    Interval,
    RunConfig,
    RunSettings,
    Seconds,
    Seed,
    SharedSettings,
    ThinkScale,
    TimeScale,
    TraceSlice,
    TraceStart,
    VocabSize,
    flag_of,
    scenario_defaults,
    settings_error,
    validated,
)
from replay.load._stamps import rejudge_scenarios
from replay.load._timeline import check_time_controls, retimed
from replay.load._workers import ProcessExecutor, event_loop_factory
from replay.load._writer import (
    RESULT_FILES,
    RunWriteError,
    RunWriter,
    check_writable_dir,
    claim_run_dir,
    close_manifest,
    iso_utc,
)

__all__ = [
    "Arrival",
    "DRAIN_MARGIN_S",
    "DRAIN_MIN_S",
    "DRAIN_RATE_TOK_S",
    "ExecOutcome",
    "Executor",
    "FLAGS",
    "FleetCache",
    "InProcessExecutor",
    "Interval",
    "Job",
    "LaneContext",
    "LaneOutcome",
    "LaneSettings",
    "LaneState",
    "LiveStats",
    "LiveView",
    "ProcessExecutor",
    "PromptBuilder",
    "RESULT_FILES",
    "RayExecutor",
    "RecordSink",
    "RunConfig",
    "RunSettings",
    "RunWriteError",
    "RunWriter",
    "SCENARIOS",
    "ScenarioRules",
    "ScenarioVerdict",
    "Seconds",
    "Seed",
    "ServerWatchHook",
    "SharedSettings",
    "Target",
    "ThinkScale",
    "TimeScale",
    "TraceSlice",
    "TraceStart",
    "VocabSize",
    "WorkerExecutor",
    "WorkerPlan",
    "apply_scenario",
    "auto_drain",
    "check_fleet",
    "check_time_controls",
    "check_writable_dir",
    "claim_run_dir",
    "close_manifest",
    "connections_for",
    "default_builder",
    "describe_fleet",
    "drive_lanes",
    "entry_turn",
    "event_loop_factory",
    "first_too_long",
    "flag_of",
    "iso_utc",
    "judge_scenario",
    "load_kind",
    "longest_output",
    "make_context",
    "open_plan",
    "raise_crash",
    "rejudge_scenarios",
    "render_lines",
    "resolve_drain",
    "retimed",
    "run_load",
    "run_load_sync",
    "run_plan",
    "salt_for",
    "scenario_defaults",
    "scenario_rules",
    "scenario_values",
    "settings_error",
    "sleep_until",
    "split_targets",
    "split_users",
    "validated",
    "walk",
]
