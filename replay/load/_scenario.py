"""Named scenarios: fixed replay rules that make results comparable with others'.

``--scenario agentx-v1`` replays by the agentx-harness 1.0.x rules (below, with
where each was found); ``--scenario agentx-mvp`` (``agentx``, its former name,
still works) by the older MVP rules of InferenceX AgentX (AIPerf 0.13's
``inferencex-agentx-mvp`` scenario, with the flags InferenceX ran it with):
WEKA coding-agent sessions (subagents included), streaming requests with
``ignore_eos`` and server token counts (how agentreplay always sends and counts;
either API: prompts are exact token ids in both), prompts never truncated or rescaled,
each lane's first session entered at a random turn between 25% and 75% of it,
a per-run cache-busting salt on every lane's content after the shared head
(system prompt and tools stay shared, the rest is cold), idle gaps capped at
10 s, seed 42, a window of at least 900 s and at most 5% failed requests.

Three pure steps. :func:`apply_scenario` fills the rules into the run settings
before anything is sent and refuses a flag or workload that contradicts them
(one line naming the flag and the rule; ``--scenario-unsafe`` lets the run go
ahead instead). :func:`lane_options` hands the lanes the entry ratio and the
cache-busting nonce. :func:`judge_scenario` says whether a finished run
satisfied the rules, with the reasons it did not (stamped in ``run.json``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Mapping
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from analysis import LoadSettings
from replay.errors import ConfigError
from replay.load._settings import scenario_defaults
from traces import WorkloadHeader

__all__ = [
    "ALIASES", "ALIAS_NOTE", "SCENARIOS", "ScenarioName", "ScenarioRules", "ScenarioVerdict",
    "apply_scenario",
    "entry_turn", "judge_scenario", "lane_options", "scenario_rules", "scenario_values",
    "workload_notes",
]

ScenarioName = Literal["agentx", "agentx-mvp", "agentx-v1"]


class ScenarioRules(BaseModel):
    """The rules a named scenario locks (what two runs must share to be compared)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    reference: str
    """Where the rules come from."""
    workload_sources: tuple[str, ...]
    """Workload header ``source`` values allowed (import formats)."""
    api: Literal["chat", "completions"] | None
    """The request API the rules require (None: either; token counts are exact in both)."""
    min_duration_s: float
    """Shortest measured window that satisfies the scenario."""
    entry_ratio: tuple[float, float]
    """Each lane's first session starts at a turn ``k`` with ``lo <= k / turns <= hi``."""
    think_time_cap_s: float
    """Every think time (the wait after a response, or after the subagents it
    spawned) is capped at this (AgentX's ``system_idle_gap_cap``); the run setting of
    the same name."""
    think_scale: float
    seed: int
    max_failure_share: float
    """Failed share of the window's requests (errors, timeouts, cut) allowed."""
    cache_bust: bool
    """Salt every lane's content after the shared head with a per-run nonce."""
    closed_loop: bool
    """Concurrent users replaying sessions (no ``--rate``)."""
    warmup_requests: int = 0
    """Priming: each lane's first session replays this many turns before its entry
    turn, back to back (no think time), as warmup; the entry turn waits for the
    window (``replay.load._lanes``). 0: a time-based warmup only."""
    default_warmup_s: float | None = None
    """``--warmup`` when the user gives none: the time the priming may take (priming
    turns not sent by then are skipped, so none spills into the window)."""
    fresh_server: bool = False
    """The rules expect each measured level on a freshly started server (stated in the
    report; agentreplay cannot see a server's age)."""


AGENTX = ScenarioRules(
    name="agentx-mvp",
    reference="InferenceX AgentX (AIPerf 0.13 inferencex-agentx-mvp, with "
              "--random-seed 42 --failed-request-threshold 0.05 "
              "--trajectory-start-min-ratio 0.25 --trajectory-start-max-ratio 0.75 "
              "--use-server-token-count)",
    workload_sources=("weka",),
    api=None,
    min_duration_s=900.0,
    entry_ratio=(0.25, 0.75),
    think_time_cap_s=10.0,
    think_scale=1.0,
    seed=42,
    max_failure_share=0.05,
    cache_bust=True,
    closed_loop=True,
)

AGENTX_V1 = AGENTX.model_copy(update=dict(
    # Each rule as found with the search tool (docs and code corpora), 2026-12-04:
    # - 3,600 s, seed 42, entry 0.25-0.75, failure threshold 0.10, 10 warmup requests
    #   per lane, idle gaps capped at 300 s, server token counts: the argv that
    #   TensorRT-LLM's tests/integration/defs/perf/agentx_client.py builds for the
    #   pinned agentx-harness build (SemiAnalysisAI/agentx-harness@754356e9), and the
    #   same defaults in ROCm ATOM's single-node AIPerf agentic recipe ("mirrors
    #   InferenceX's benchmarks/single_node/agentic recipe"; 0.10 there, 0.50 in its
    #   PD copy). Both still name the scenario ``inferencex-agentx-mvp`` and add the
    #   1.0.x rules as flags; AIPerf's own docs (v0.13 and dev) document neither
    #   ``--scenario agentx`` nor ``--warmup-requests-per-lane``: not confirmed there.
    # - "priming each lane's history before its entry point": AIPerf 0.13.0 itself
    #   (installed by bench/peers.py; ``aiperf profile --help`` and
    #   aiperf/timing/trajectory_source.py) primes each stream active at the entry
    #   point t* with ONE request, its last turn before t* carrying the whole prefix,
    #   aligns every lane to reach t* at the warmup's end, and then lets each lane's
    #   first profiling request wait its recorded gap; it has no
    #   ``--warmup-requests-per-lane``. How 1.0.x places its 10 requests is not
    #   stated in what was found (ATOM: the warmup "primes every lane's prefix
    #   cache", reported apart as ``warmup_metrics``; one replica of the harness
    #   replays them *after* t*). agentreplay sends the 10 turns before the entry
    #   turn (the first with its whole history), so the entry turn finds its history
    #   cached as AIPerf's does, then waits for the window and its own gap.
    # - fresh server per concurrency point: from the survey of InferenceX;
    #   not confirmed by a document found here.
    name="agentx-v1",
    reference="agentx-harness 1.0.x (AIPerf --scenario inferencex-agentx-mvp with "
              "--benchmark-duration 3600 --warmup-requests-per-lane 10 --random-seed 42 "
              "--failed-request-threshold 0.10 --trajectory-start-min-ratio 0.25 "
              "--trajectory-start-max-ratio 0.75 --trace-idle-gap-cap-seconds 300 "
              "--use-server-token-count), each level on a fresh server",
    # the MVP preset's workload, entry range, seed and loop, with the 1.0.x flags
    min_duration_s=3600.0,
    think_time_cap_s=300.0,
    max_failure_share=0.10,
    warmup_requests=10,
    default_warmup_s=600.0,
    fresh_server=True,
))

SCENARIOS: dict[str, ScenarioRules] = {"agentx-mvp": AGENTX, "agentx-v1": AGENTX_V1,
                                       "agentx": AGENTX}
"""Scenario name -> rules (the names ``--scenario`` takes, with :data:`ALIASES`)."""
ALIASES = {"agentx": "agentx-mvp"}
"""Former names: ``agentx`` was the MVP preset's name before ``agentx-v1`` came."""
ALIAS_NOTE = ("--scenario agentx now means agentx-mvp (the older InferenceX AgentX rules); "
              "--scenario agentx-v1 runs the agentx-harness 1.0.x rules")

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
    notes: list[str] = []
    if header.source not in rules.workload_sources:
        want = " or ".join(repr(s) for s in rules.workload_sources)
        notes.append(f"--workload {path}: its source is {header.source!r}; scenario "
                     f"{rules.name} replays {want} sessions (traces import weka DIR)")
    p = header.params
    cut = _count(p.get("compactions")) + _count(p.get("truncated_requests"))
    scale = p.get("token_scale")
    if cut:
        notes.append(f"--workload {path}: the import's {header.max_context}-token cap "
                     f"compacted or truncated {cut} prompt(s); scenario {rules.name} forbids "
                     "input truncation (import without --max-context)")
    if isinstance(scale, int | float) and not isinstance(scale, bool) and scale != 1:
        notes.append(f"--workload {path}: token sizes were scaled by {scale}; scenario "
                     f"{rules.name} replays the sessions' own sizes")
    return notes


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _setting_notes(rules: ScenarioRules, values: Mapping[str, Any],
                   given: Collection[str]) -> list[str]:
    """Each setting the user gave that contradicts the rules, as one line."""
    n = rules.name
    notes: list[str] = []
    duration = values.get("duration_s")
    if isinstance(duration, int | float) and duration < rules.min_duration_s:
        notes.append(f"--duration {duration:g}: scenario {n} measures at least "
                     f"{rules.min_duration_s:g} s")
    api = values.get("api")
    if rules.api is not None and api is not None and api != rules.api:
        notes.append(f"--api {api}: scenario {n} sends {rules.api} requests")
    if rules.closed_loop and values.get("rate") is not None:
        notes.append(f"--rate: scenario {n} replays sessions with concurrent users "
                     "(closed loop), not arrivals at a rate")
    scale = values.get("think_scale")
    if "think_scale" in given and scale is not None and scale != rules.think_scale:
        notes.append(f"--think-scale {scale:g}: scenario {n} replays think times as "
                     "recorded (scale 1)")
    cap = values.get("think_time_cap_s")
    if "think_time_cap_s" in given and cap is not None and cap != rules.think_time_cap_s:
        notes.append(f"--think-time-cap {cap:g}: scenario {n} caps idle gaps at "
                     f"{rules.think_time_cap_s:g} s")
    seed = values.get("seed")
    if "seed" in given and seed is not None and seed != rules.seed:
        notes.append(f"--seed {seed}: scenario {n} uses seed {rules.seed}")
    return notes


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
    notes = _setting_notes(rules, values, given)
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


def lane_options(scenario: str | None, run_tag: str) -> dict[str, Any]:
    """What the lanes of a run need of its scenario (``LaneContext`` fields): the
    entry ratio and the cache-busting nonce, derived from the run's tag so every
    worker of one run agrees and no two runs share a lane's content."""
    if scenario is None:
        return {}
    rules = scenario_rules(scenario)
    opts: dict[str, Any] = {"entry_ratio": rules.entry_ratio,
                            "warmup_requests": rules.warmup_requests}
    if rules.cache_bust:
        digest = hashlib.sha256(f"{rules.name}:{run_tag}".encode()).digest()
        opts["salt_nonce"] = int.from_bytes(digest[:4], "little") | 1
    return opts


class ScenarioVerdict(BaseModel):
    """Whether a finished run satisfied its scenario, and why not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scenario: str
    satisfied: bool
    notes: list[str]


def judge_scenario(
    name: str, load: LoadSettings, *, source: str, header_params: Mapping[str, object],
    max_context: int | None, window_s: float | None, failure_share: float | None,
    interrupted: bool = False, workload: str = "workload", uncounted: int = 0,
) -> ScenarioVerdict:
    """Judge a finished run against its scenario from what it recorded: the load
    settings it ran with, its workload, its window, its failure share and how many
    of the window's completed requests came back without the server's token counts
    (``uncounted``)."""
    rules = scenario_rules(name)
    values = {"duration_s": load.duration_s, "api": load.api, "rate": load.rate,
              "think_scale": load.think_scale, "think_time_cap_s": load.think_time_cap_s,
              "seed": load.seed}
    every = set(values)
    notes = [_judged(x) for x in _setting_notes(rules, values, every)]
    if load.think_time_cap_s is None:
        notes.append(f"idle gaps were not capped (scenario {name} caps them at "
                     f"{rules.think_time_cap_s:g} s)")
    if load.arrival != "closed":
        notes.append(f"arrival was {load.arrival!r}; scenario {name} replays closed loop")
    header = WorkloadHeader(source=source, block_size=1, max_context=max_context,
                            params=dict(header_params))
    notes += [_judged(x) for x in workload_notes(rules, header, workload)]
    if rules.warmup_requests and load.warmup_s <= 0:
        notes.append(f"no warmup: scenario {name} primes each lane with "
                     f"{rules.warmup_requests} requests before its entry turn, sent during "
                     "the warmup")
    if interrupted:
        notes.append("the run was interrupted before its window ended")
    if window_s is not None and window_s < rules.min_duration_s and not any(
            x.startswith("window") for x in notes):
        notes.append(f"window {window_s:g} s is below the {rules.min_duration_s:g} s minimum")
    if failure_share is None:
        notes.append("no request was measured in the window (failure share unknown)")
    elif failure_share > rules.max_failure_share:
        notes.append(f"{failure_share:.1%} of the window's requests failed; scenario {name} "
                     f"allows {rules.max_failure_share:.0%}")
    if uncounted:
        notes.append(f"{uncounted} completed request(s) in the window came back without the "
                     f"server's token counts (usage); scenario {name} counts tokens as the "
                     "server reports them")
    return ScenarioVerdict(scenario=name, satisfied=not notes, notes=notes)


def _judged(note: str) -> str:
    """A refusal line restated as a finding about a finished run."""
    if note.startswith("--duration "):
        head, _, tail = note.partition(": ")
        return f"window {head.removeprefix('--duration ')} s is below the minimum ({tail})"
    return note.removeprefix("--")
