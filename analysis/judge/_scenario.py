"""Named scenarios' rules, and whether a finished run satisfied its scenario.

The rules of each ``--scenario`` (``agentx-mvp``, ``agentx-v1``; ``replay.load``
applies them to a run's settings and lanes) are data, so they live here with the
judgement that reads them: :func:`judge_run_scenario` says, from a run's evidence
(its settings, window, workload header, failure share and token counts), whether it
satisfied its scenario. Pure: the caller reads the run and its workload header;
nothing here touches a file. A run's close and every report judge it this way, so a
hand-edited ``scenario_satisfied`` is never repeated.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from analysis.metrics import RunSummary
from analysis.read import RunData
from analysis.schema import LoadSettings, RunManifest
from analysis.text import plural

__all__ = [
    "ALIASES", "ALIAS_NOTE", "SCENARIOS", "ScenarioName", "ScenarioRules", "ScenarioVerdict",
    "judge_run_scenario", "judge_scenario", "setting_notes", "stamp_scenario",
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
    think_time_cap_s: float | None
    """Every think time (the wait after a response, or after the subagents it
    spawned) is capped at this; the run setting of the same name. None: each lane's
    gaps are replayed as recorded and a cap is refused (AgentX's
    ``forbid_inter_turn_delay_cap``)."""
    system_idle_cap_s: float | None = None
    """The run is never idle (no request in flight) longer than this: every pending
    due time moves earlier by one amount (AgentX's ``system_idle_gap_cap_seconds``;
    ``replay.load._dueclock``). None: no cap."""
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
    # Both AgentX presets (SemiAnalysisAI/agentx-harness@6f666ba,
    # src/aiperf/common/scenario/inferencex_agentx_mvp.py) set
    # system_idle_gap_cap_seconds=10.0 ("Hard ceiling in seconds for globally idle
    # replay time. Pending request timers shift uniformly only when no request is
    # active", aiperf/common/scenario/base.py) and forbid_inter_turn_delay_cap=True
    # ("preserves each trace's original inter-turn timing"): the 10 s is a cap on
    # the whole run's idle time, not on each gap (which an earlier reading took it for).
    think_time_cap_s=None,
    system_idle_cap_s=10.0,
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
    #   1.0.x rules as flags. Confirmed in AIPerf's own docs (search, 2026-12-05): the
    #   v0.14.0 page "InferenceX AgentX MVP Benchmark"
    #   (docs.nvidia.com/aiperf/v0.14.0/tutorials/datasets-inputs/
    #   inference-x-agent-x-mvp-benchmark) says ``--scenario agentx`` supplies
    #   streaming chat, a 3,600-second profiling duration, seed 42, trajectory start
    #   ratios 0.25-0.75, 10 warmup requests per lane, a 0.10 live failure threshold,
    #   a 300-second trace idle cap and server token counts (the v0.13 and dev pages
    #   document neither ``--scenario agentx`` nor ``--warmup-requests-per-lane``).
    # - how lanes pick sessions (AIPerf's AgentX FAQ,
    #   ai-dynamo/aiperf docs/benchmark-modes/semianalysis-agentx-faq.md, section 6):
    #   each lane starts at its own seeded t* in one trace drawn from the dataset
    #   sampler (sequential for WEKA traces), and a lane that drains draws the next
    #   trace from that one sampler and replays it from turn 0; agentreplay's lanes
    #   under a scenario share one sequential sampler the same way
    #   (``replay.load._lanes.closed_user``). Its t* is a wall-clock instant in the
    #   trace (agentreplay draws a turn in the same 25-75% range by turn count);
    #   ``run --entry`` pins the sessions and turns another tool chose.
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


def workload_notes(rules: ScenarioRules, source: str, params: Mapping[str, object],
                   max_context: int | None, path: str) -> list[str]:
    """What in a workload contradicts the rules (its header's ``source``; truncated or
    rescaled prompts, from its ``params`` and ``max_context``), each a line naming the
    file."""
    notes: list[str] = []
    if source not in rules.workload_sources:
        want = " or ".join(repr(s) for s in rules.workload_sources)
        notes.append(f"--workload {path}: its source is {source!r}; scenario "
                     f"{rules.name} replays {want} sessions (traces import weka DIR)")
    p = params
    cut = _count(p.get("compactions")) + _count(p.get("truncated_requests"))
    scale = p.get("token_scale")
    if cut:
        notes.append(f"--workload {path}: the import's {max_context}-token cap "
                     f"compacted or truncated {plural(cut, 'prompt')}; scenario {rules.name} "
                     "forbids "
                     "input truncation (import without --max-context)")
    if isinstance(scale, int | float) and not isinstance(scale, bool) and scale != 1:
        notes.append(f"--workload {path}: token sizes were scaled by {scale}; scenario "
                     f"{rules.name} replays the sessions' own sizes")
    return notes


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def setting_notes(rules: ScenarioRules, values: Mapping[str, Any],
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
        if rules.think_time_cap_s is None:
            notes.append(f"--think-time-cap {cap:g}: scenario {n} replays each lane's gaps "
                         "as recorded (it caps only the whole run's idle time)")
        else:
            notes.append(f"--think-time-cap {cap:g}: scenario {n} caps idle gaps at "
                         f"{rules.think_time_cap_s:g} s")
    seed = values.get("seed")
    if "seed" in given and seed is not None and seed != rules.seed:
        notes.append(f"--seed {seed}: scenario {n} uses seed {rules.seed}")
    return notes


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
    rules = SCENARIOS[ALIASES.get(name, name)]
    values = {"duration_s": load.duration_s, "api": load.api, "rate": load.rate,
              "think_scale": load.think_scale, "think_time_cap_s": load.think_time_cap_s,
              "seed": load.seed}
    every = set(values)
    notes = [_judged(x) for x in setting_notes(rules, values, every)]
    if load.think_time_cap_s is None and rules.think_time_cap_s is not None:
        notes.append(f"idle gaps were not capped (scenario {name} caps them at "
                     f"{rules.think_time_cap_s:g} s)")
    if load.arrival != "closed":
        notes.append(f"arrival was {load.arrival!r}; scenario {name} replays closed loop")
    notes += [_judged(x) for x in workload_notes(rules, source, header_params, max_context,
                                                 workload)]
    if load.entries:
        notes.append(f"entry turns pinned for {len(load.entries)} lane(s) (--entry); "
                     f"scenario {name} draws each lane's entry turn with seed {rules.seed}")
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
        notes.append(f"{plural(uncounted, 'completed request')} in the window came back "
                     "without the "
                     f"server's token counts (usage); scenario {name} counts tokens as the "
                     "server reports them")
    return ScenarioVerdict(scenario=name, satisfied=not notes, notes=notes)


def _judged(note: str) -> str:
    """A refusal line restated as a finding about a finished run."""
    if note.startswith("--duration "):
        head, _, tail = note.partition(": ")
        return f"window {head.removeprefix('--duration ')} s is below the minimum ({tail})"
    return note.removeprefix("--")


def judge_run_scenario(manifest: RunManifest, run: RunData | None,
                       summary: RunSummary | None, *,
                       header_params: Mapping[str, object] | None = None,
                       max_context: int | None = None) -> ScenarioVerdict | None:
    """Whether a finished run satisfied its ``--scenario`` (None without one), from its
    manifest, its records (``run``; None when they could not be read) and their summary
    (the failure share), and its workload header's ``params`` and ``max_context`` (None
    when the workload is gone: judged without it)."""
    if manifest.scenario is None:
        return None
    share: float | None = None
    uncounted = 0
    if run is not None and summary is not None:
        share = summary.counts.failure_share
        r = run.requests
        done = (r.phase == "measure") & (r.status == "ok")
        uncounted = int((done & (r.prompt_tokens_server < 0)).sum())
    window = manifest.window
    verdict = judge_scenario(
        manifest.scenario, manifest.load, source=manifest.workload.source,
        header_params=header_params or {}, max_context=max_context,
        window_s=(window.end_s - window.start_s) if window is not None else None,
        failure_share=share, interrupted=manifest.interrupted,
        workload=manifest.workload.path or "workload", uncounted=uncounted)
    note = _idle_cap_note(manifest)
    if note is None:
        return verdict
    return ScenarioVerdict(scenario=verdict.scenario, satisfied=False,
                           notes=[*verdict.notes, note])


def _idle_cap_note(manifest: RunManifest) -> str | None:
    """Why the run's system idle cap (``run.json`` ``idle_cap``) was not the rules'."""
    name = manifest.scenario or ""
    want = SCENARIOS[ALIASES.get(name, name)].system_idle_cap_s
    got = manifest.idle_cap
    if want is None or (got is not None and got.cap_s == want):
        return None
    if got is None:
        return (f"the run's idle time was not capped (scenario {name} pulls every pending "
                f"request forward once nothing has been in flight for {want:g} s)")
    return (f"the run's idle time was capped at {got.cap_s:g} s; scenario {name} caps it "
            f"at {want:g} s")


def stamp_scenario(manifest: RunManifest, verdict: ScenarioVerdict | None) -> None:
    """Stamp a verdict in the manifest (``scenario_satisfied``, ``scenario_notes``)."""
    if verdict is not None:
        manifest.scenario_satisfied = verdict.satisfied
        manifest.scenario_notes = list(verdict.notes)
