"""A comparison whose arms' vLLM servers agentreplay starts itself (``compare --launch``).

Sequential: one server at a time on the same GPUs, restarted whenever the arm
changes (``launch_groups``), each arm checked against the first one launched before
its load. Side by side: every arm at once on disjoint GPUs. Either way every server
is watched during its runs (a run during which it died is stamped invalid) and
always stopped; the run-level A B B A order of ``plan_runs`` holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from analysis import judge_fairness
from analysis.text import plural
from replay.ab._driver import (
    CompareResult,
    Live,
    _check_arms,
    _execute,
    _finish,
    _interrupt_self,
    _say,
    _server_deaths,
    _settings,
)
from replay.ab._options import CompareOptions
from replay.ab._order import PlannedRun, is_run_reusable, launch_groups, plan_runs
from replay.ab._preflight import preflight, probe_facts, refuse_identical, stand_in
from replay.ab._state import State, check_resume
from replay.client import ServerFacts
from replay.load import ServerWatchHook
from replay.servers.launch import LaunchSettings

if TYPE_CHECKING:
    from replay.servers.launch import VllmArmSpec

__all__ = ["LaunchOptions", "compare_launched"]

T = TypeVar("T")


@dataclass(frozen=True)
class LaunchOptions:
    """How each arm's server is started: the model, the vLLM install and the GPUs."""

    model: str
    """The model directory every arm serves."""
    servers: LaunchSettings = field(default_factory=LaunchSettings)
    """The vLLM install, ports, mode and GPUs (the flags ``launch`` takes too)."""
    extra_args: Sequence[str] = ()
    """More vLLM arguments, the same for every arm."""
    startup_timeout_s: float | None = None
    """None: ``replay.servers.launch.DEFAULT_STARTUP_TIMEOUT_S``."""
    base_env: Mapping[str, str] | None = None
    """The servers' environment (None: this process's)."""


@dataclass
class _Launched:
    """One launched comparison as its two ways of running it need it."""

    path: str
    out: Path
    opts: CompareOptions
    launch: LaunchOptions
    plan: list[PlannedRun]
    state: State
    by_label: dict[str, VllmArmSpec]
    live: Live
    watching: list[ServerWatchHook] = field(default_factory=list)
    """Every server watched so far (``_server_deaths`` names the one that died)."""

    @property
    def logs(self) -> Path:
        return self.out / "logs"

    @property
    def timeout(self) -> float:
        from replay.servers.launch import DEFAULT_STARTUP_TIMEOUT_S

        return self.launch.startup_timeout_s or DEFAULT_STARTUP_TIMEOUT_S

    def url_of(self, arm: str) -> str:
        return self.by_label[arm].url


def compare_launched(launch: LaunchOptions, arms: Sequence[str],
                     workload: str | os.PathLike[str], out: str | os.PathLike[str],
                     opts: CompareOptions, *, live: Live = "quiet",
                     before_load: Callable[[], None] | None = None) -> CompareResult:
    """Start vLLM for each arm (``decode_backend`` = the label), compare, always stop them.

    ``before_load`` runs once the settings passed their checks, before any server
    starts (a start takes minutes)."""
    from replay.servers.launch import LaunchMode

    run = _prepare(launch, arms, os.fspath(workload), Path(out), opts, live)
    if before_load is not None:
        before_load()
    run.logs.mkdir(parents=True, exist_ok=True)
    if LaunchMode(launch.servers.mode) is LaunchMode.SIDE_BY_SIDE:
        _side_by_side(run)
    else:
        _sequential(run, arms)
    return _finish(run.out, run.state, run.opts, live)


def _prepare(launch: LaunchOptions, arms: Sequence[str], path: str, out: Path,
             opts: CompareOptions, live: Live) -> _Launched:
    """The arms' launch specs and the comparison's state, checked against a stored one
    before any server starts: model files, vLLM version, context length and
    vocabulary are stored so that a resume refuses a changed model, install or
    argument."""
    from replay.servers.launch import LaunchMode, launch_facts, plan_arms, resolve_vllm_launcher

    _check_arms(arms)
    servers = launch.servers
    launcher = resolve_vllm_launcher(servers.vllm_python)
    specs = plan_arms(launch.model, arms, launcher=launcher, port=servers.port,
                      mode=LaunchMode(servers.mode), gpus_per_arm=servers.gpus_per_arm,
                      extra_args=launch.extra_args, env=None)
    known = launch_facts(launch.model, launcher, launch.extra_args, path, opts.vocab_size)
    if opts.vocab_size is None and known.vocab_size is not None:
        opts = opts.model_copy(update={"vocab_size": known.vocab_size})
    settings = {**_settings(arms, path, opts), **known.settings(launch.extra_args),
                "launch_mode": servers.mode, "launch_gpus_per_arm": servers.gpus_per_arm}
    check_resume(out, settings)
    by_label = {s.label: s for s in specs}
    plan = plan_runs(arms, opts.levels, opts.repeats, rates=opts.rates)
    state = State(out, settings, plan, {a: by_label[a].url for a in arms}, servers.mode)
    return _Launched(path, out, opts, launch, plan, state, by_label, live)


def _side_by_side(run: _Launched) -> None:
    """Every arm up at once; one fairness preflight over all of them, then the plan."""
    from replay.servers.launch import ServerWatcher, build_command, launch_arms

    with _server_deaths(run.watching), \
            launch_arms(list(run.by_label.values()), run.logs, startup_timeout=run.timeout,
                        base_env=run.launch.base_env) as up, \
            contextlib.ExitStack() as stack:
        watches = {a.spec.label: stack.enter_context(
            ServerWatcher(a.pid, a.url, a.spec.label, on_death=_interrupt_self)) for a in up}
        run.watching += watches.values()
        verdict = preflight([(a.spec.label, a.url) for a in up], run.opts,
                            launch_commands=[build_command(a.spec) for a in up])
        run.state.data["preflight"] = verdict.model_dump(mode="json")
        run.state.save()
        _execute(run.plan, run.url_of, run.path, run.out, run.opts, run.state, run.live,
                 len(run.plan), 0, watches.__getitem__)


def _sequential(run: _Launched, arms: Sequence[str]) -> None:
    """One server at a time, started for each group of consecutive runs of one arm."""
    from replay.servers.launch import ServerWatcher, arm_log_path, launch_arm

    groups = launch_groups(run.plan)
    _say(run.live, f"plan: {len(run.plan)} runs in A B B A order; launched one at a time "
                   f"that is {len(groups)} server starts "
                   f"({plural(len(groups) - len(arms), 'restart')} "
                   "beyond one per arm, the price of keeping drift between runs off the "
                   "arms' difference)")
    first: tuple[str, str, ServerFacts] | None = None
    seen = 0
    for index, (arm, runs) in enumerate(groups):
        if all(is_run_reusable(run.out / "runs" / r.name) for r in runs):
            seen = _execute(runs, run.url_of, run.path, run.out, run.opts, run.state,
                            run.live, len(run.plan), seen)
            continue
        spec = run.by_label[arm]
        log = arm_log_path(run.logs, index, spec)
        _say(run.live, f"starting vLLM for arm {arm} (log {log})")
        with _server_deaths(run.watching), \
                launch_arm(spec, log, startup_timeout=run.timeout,
                           base_env=run.launch.base_env) as one, \
                ServerWatcher(one.pid, one.url, arm, on_death=_interrupt_self) as watch:
            run.watching.append(watch)
            facts = asyncio.run(probe_facts([one.url], run.opts))[0]
            if first is None:
                first = (arm, one.url, facts)
            elif first[0] != arm:
                _judge_against_first(run, first, arm, one.url, facts)
            seen = _execute(runs, _always(one.url), run.path, run.out, run.opts, run.state,
                            run.live, len(run.plan), seen, _always(watch))


def _always(value: T) -> Callable[[str], T]:
    """The arm -> value map of a group of runs that all go to one launched server."""
    return lambda _arm: value


def _judge_against_first(run: _Launched, first: tuple[str, str, ServerFacts], arm: str,
                         url: str, facts: ServerFacts) -> None:
    """The fairness preflight of a sequential launch: this arm against the first one."""
    from replay.servers.launch import build_command

    verdict = judge_fairness(
        [stand_in(first[0], first[1], [first[2]], run.opts),
         stand_in(arm, url, [facts], run.opts)],
        allow_unfair=run.opts.allow_unfair,
        launch_commands=[build_command(run.by_label[first[0]]),
                         build_command(run.by_label[arm])])
    refuse_identical(verdict, [(first[0], first[1]), (arm, url)], run.opts)
    run.state.data["preflight"] = verdict.model_dump(mode="json")
    run.state.save()
