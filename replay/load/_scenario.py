"""Named scenarios: fixed replay rules that make results comparable with others'.

``--scenario agentx-v1`` replays by the agentx-harness 1.0.x rules (``analysis.judge``,
with where each was found); ``--scenario agentx-mvp`` (``agentx``, its former name,
still works) by the older MVP rules of InferenceX AgentX (AIPerf 0.13's
``inferencex-agentx-mvp`` scenario, with the flags InferenceX ran it with):
WEKA coding-agent sessions (subagents included), streaming requests with
``ignore_eos`` and server token counts (how agentreplay always sends and counts;
either API: prompts are exact token ids in both), prompts never truncated or rescaled,
each lane's first session entered at a random turn between 25% and 75% of it,
a per-run cache-busting salt on every lane's content after the shared head
(system prompt and tools stay shared, the rest is cold), think times as recorded
but the run never idle over 10 s (``replay.load._dueclock``), seed 42, a window of
at least 900 s and at most 5% failed requests.

The rules themselves, and the judgement of a finished run, are ``analysis.judge``'s
(``SCENARIOS``, ``judge_run_scenario``): pure data and a pure verdict. Here, what a
run does with them, in pure steps. :func:`apply_scenario` fills the rules into the run settings
before anything is sent and refuses a flag or workload that contradicts them
(one line naming the flag and the rule; ``--scenario-unsafe`` lets the run go
ahead instead). :func:`lane_options` hands the lanes the entry ratio and the
cache-busting nonce; :func:`pinned_entries` reads ``run --entry`` (each user's first
session and entry turn, pinned to replay another tool's lanes). Under a scenario the
users recycle sessions from one shared sequential sampler, as AIPerf's lanes do.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from analysis.judge import (
    SCENARIO_ALIAS_NOTE as ALIAS_NOTE,
)
from analysis.judge import (
    SCENARIO_ALIASES as ALIASES,
)
from analysis.judge import (
    SCENARIOS,
    ScenarioRules,
    judge_scenario,
    setting_notes,
)
from analysis.judge import workload_notes as header_notes
from analysis.schema import IdleCap
from replay.errors import ConfigError
from replay.load._dueclock import IdleShifts
from replay.load._settings import scenario_defaults
from traces import Session, WorkloadHeader

__all__ = [
    "ALIASES", "ALIAS_NOTE", "SCENARIOS", "apply_scenario", "entry_turn", "idle_cap_info",
    "judge_scenario", "lane_options", "pinned_entries", "scenario_rules", "scenario_values",
    "workload_notes",
]

_UNSAFE = "add --scenario-unsafe to run anyway, stamped not satisfied"


def scenario_rules(name: str) -> ScenarioRules:
    """The rules of a scenario by name; an unknown name is a one-line error."""
    try:
        return SCENARIOS[ALIASES.get(name, name)]
    except (KeyError, TypeError):  # TypeError: argparse hands `--scenario=--` over as []
        known = ", ".join(sorted(SCENARIOS))
        raise ConfigError(f"--scenario {name!r}: unknown scenario (known: {known})") from None


def workload_notes(rules: ScenarioRules, header: WorkloadHeader, path: str) -> list[str]:
    """What in a workload contradicts the rules (its source; truncated or rescaled
    prompts), each a line naming the file."""
    return header_notes(rules, header.source, header.params, header.max_context, path)


def apply_scenario(
    name: str, values: Mapping[str, Any], given: Collection[str], *, unsafe: bool,
    header: WorkloadHeader | None = None, workload: str = "",
) -> dict[str, Any]:
    """The run settings' values with the scenario's rules filled in and locked.

    ``values`` are :class:`~replay.load.RunSettings` fields; ``given`` names the
    ones the user typed. A contradicting flag or workload is a
    :class:`~replay.errors.ConfigError` naming it and the rule, unless
    ``unsafe``: then the user's value stays and the run is judged not satisfied.
    """
    rules = scenario_rules(name)
    notes = setting_notes(rules, values, given)
    if values.get("entries"):
        notes.append(f"--entry: scenario {rules.name} draws each lane's entry turn with "
                     f"seed {rules.seed}; pinned entries replay another tool's lanes")
    if header is not None:
        notes += workload_notes(rules, header, workload)
    if notes and not unsafe:
        raise ConfigError(f"{'; '.join(notes)}; {_UNSAFE}")
    out = dict(values)
    out["scenario"] = name  # a former name stays as typed; run.json notes what it means
    out["scenario_unsafe"] = bool(unsafe)
    fills: dict[str, Any] = {"think_scale": rules.think_scale,
                             "think_time_cap_s": rules.think_time_cap_s, "seed": rules.seed}
    if rules.default_warmup_s is not None:
        fills["warmup_s"] = rules.default_warmup_s
    if rules.api is not None:
        fills["api"] = rules.api
    for key, value in fills.items():
        if key not in given or out.get(key) is None:
            out[key] = value
    return out


def scenario_values(
    name: str | None, unsafe: bool, values: Mapping[str, Any],
    header: WorkloadHeader | None, workload: str,
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A command's settings values after ``--scenario`` (the CLI's one entry point).

    ``defaults`` are the defaults of the fields a scenario locks (by default the
    shared knobs', ``scenario_defaults``): a value that differs was typed by the user.
    """
    if defaults is None:
        defaults = scenario_defaults()
    if name is None:
        if unsafe:
            raise ConfigError("--scenario-unsafe: give the --scenario it overrides")
        if values.get("entries"):
            raise ConfigError("--entry: give the --scenario whose entry turns it pins")
        out = dict(values)
    else:
        given = {k for k, d in defaults.items() if values.get(k) != d}
        out = apply_scenario(name, values, given, unsafe=unsafe, header=header,
                             workload=workload)
    return out


def entry_turn(rng: np.random.Generator, turns: int, lo: float, hi: float) -> int:
    """A random turn ``k`` of a ``turns``-long session with ``lo <= k / turns <= hi``
    (uniform over those turns); turn 0 when the session is too short to have one."""
    first = max(0, math.ceil(lo * turns))
    last = min(turns - 1, math.floor(hi * turns))
    if last < first:
        return 0
    return int(rng.integers(first, last + 1))


def pinned_entries(entries: Sequence[str], sessions: Sequence[Session]
                   ) -> tuple[tuple[int, int], ...]:
    """``--entry SESSION:TURN`` values as (session index, entry turn) per user, checked
    against the workload: an unknown session or a turn it does not have is a
    :class:`~replay.errors.ConfigError` naming the value."""
    index = {s.id: i for i, s in enumerate(sessions)}
    out = []
    for value in entries:
        sid, _, turn_text = value.rpartition(":")
        if sid not in index:
            raise ConfigError(f"--entry {value}: no session {sid!r} in the workload")
        turn, n = int(turn_text), len(sessions[index[sid]].requests)
        if turn >= n:
            raise ConfigError(f"--entry {value}: session {sid!r} has turns 0-{n - 1}")
        out.append((index[sid], turn))
    return tuple(out)


def lane_options(scenario: str | None, run_tag: str) -> dict[str, Any]:
    """What the lanes of a run need of its scenario (``LaneContext`` fields): the
    entry ratio, the priming, the system idle cap and the cache-busting nonce (derived
    from the run's tag so every worker of one run agrees and no two runs share a
    lane's content). ``--entry``'s pinned entries are filled in when the lanes start,
    from the workload."""
    if scenario is None:
        return {}
    rules = scenario_rules(scenario)
    opts: dict[str, Any] = {"entry_ratio": rules.entry_ratio,
                            "warmup_requests": rules.warmup_requests,
                            "idle_cap_s": rules.system_idle_cap_s}
    if rules.cache_bust:
        digest = hashlib.sha256(f"{rules.name}:{run_tag}".encode()).digest()
        opts["salt_nonce"] = int.from_bytes(digest[:4], "little") | 1
    return opts


def idle_cap_info(scenario: str | None, split: bool, shifts: IdleShifts) -> IdleCap | None:
    """``run.json``'s ``idle_cap`` for a run under ``scenario`` (None: no cap):
    ``split`` runs (worker processes, Ray actors) cap each worker's idle time."""
    if scenario is None:
        return None
    rules = scenario_rules(scenario)
    if rules.system_idle_cap_s is None:
        return None
    return IdleCap(cap_s=rules.system_idle_cap_s, scope="worker" if split else "run",
                   counts_from="window" if rules.warmup_requests else "origin",
                   shifts=shifts.count, shifted_s=round(shifts.seconds, 6))
