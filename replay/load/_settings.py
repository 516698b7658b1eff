"""The run settings: one validated model that the CLI and compare/demo fill in.

Every knob has one name from flag to settings to manifest (``--think-scale`` is
``think_scale``). :data:`FLAGS` maps each settings field to the flag a user
types, and :func:`validated` turns a pydantic error into one line naming that
flag (a :class:`~replay.errors.ConfigError`, exit 2), so no settings model
ever surfaces as a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from analysis import LoadSettings, duplicate_replica
from replay.errors import ConfigError
from replay.knobs import Knob, from_knobs, knob_error, knob_flags
from replay.load._names import checked_url, label_problem, split_arm

__all__ = [
    "DRAIN_MARGIN_S",
    "DRAIN_MIN_S",
    "DRAIN_RATE_TOK_S",
    "FLAGS",
    "MAX_PLANNED_ARRIVALS",
    "MAX_SECONDS",
    "SCENARIO_LOCKED",
    "SESSION_HEADERS",
    "Interval",
    "RunConfig",
    "RunSettings",
    "Seconds",
    "Seed",
    "SharedSettings",
    "ThinkScale",
    "TimeScale",
    "TraceSlice",
    "TraceStart",
    "VocabSize",
    "flag_of",
    "scenario_defaults",
    "settings_error",
    "validated",
]

MAX_SECONDS = 30 * 86_400.0
"""The longest any duration, timeout or interval may be (30 days): past it a number
is a typo, and an unbounded one overflows the nanosecond clocks the lanes plan with."""
MAX_RATE = 10_000.0
"""Open-loop session arrivals per second at most."""
MAX_SCALE = 1e6
"""``--think-scale`` and ``--time-scale`` at most (and ``--time-scale`` at least 1/this)."""
MAX_PLANNED_ARRIVALS = 10_000_000
"""Sessions an open-loop plan (``--rate`` x (``--warmup`` + ``--duration``)) may hold:
the plan is built in memory before the run starts."""

# The bounds of the knobs ``run`` and ``compare`` share, written once: both settings
# models use these types, so a value one command refuses the other refuses too, at once.
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS)]
"""A duration that may be 0 (warmup, drain, a think-time cap)."""
Interval = Annotated[float, Field(gt=0, le=MAX_SECONDS)]
"""A duration above 0 (the measured window, a timeout, a scrape interval)."""
ThinkScale = Annotated[float, Field(ge=0, le=MAX_SCALE)]
TimeScale = Annotated[float, Field(ge=1 / MAX_SCALE, le=MAX_SCALE)]
Seed = Annotated[int, Field(ge=0, le=2**63 - 1)]
VocabSize = Annotated[int, Field(ge=2)]
TraceStart = Annotated[float, Field(ge=0, le=1e12)]
TraceSlice = Annotated[float, Field(gt=0, le=1e12)]




def flag_of(field: str) -> str:
    """The flag a user types for a settings field (the field name when it has none)."""
    return FLAGS.get(field, field)


def settings_error(exc: ValidationError) -> ConfigError:
    """The first validation error as one line naming the flag, e.g.
    ``--warmup: must be >= 0 (got -1.0)``."""
    return knob_error(exc, FLAGS)


M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], values: Mapping[str, Any]) -> M:
    """``model(**values)``, with a validation error reported as :func:`settings_error`."""
    return from_knobs(model, values, FLAGS)


DRAIN_RATE_TOK_S = 20.0
"""The default drain's decode rate per user (slower than any server worth measuring);
with the two below, ``replay.load._drain`` decides it and ``--drain``'s help states it."""
DRAIN_MARGIN_S = 10.0
"""Added for the queueing and prefill before the first token."""
DRAIN_MIN_S = 30.0
_DRAIN_HELP = (f"at most this many seconds for in-flight requests after the window (default: "
               f"long enough for the workload's longest answer: its output tokens at "
               f"{DRAIN_RATE_TOK_S:g} tok/s + {DRAIN_MARGIN_S:g} s, at least {DRAIN_MIN_S:g} s, "
               "said when the run starts; requests still running then are cut, reported "
               "incomplete with the tokens they got)")
_THINK_CAP_HELP = ("cap on each think time (tool run, human reading), s: the workload's pauses "
                   "average ~110 s, so a short run needs one to see enough requests (a run "
                   "whose window would be thin says so first)")
_SCENARIO_HELP = ("replay by a benchmark's fixed rules and lock them: agentx-v1 = agentx-harness "
                  "1.0.x (WEKA sessions, entry at 25-75%% of each lane's first session after "
                  "10 priming turns sent as warmup, per-run cache busting, think times "
                  "capped at 300 s, seed 42, >= 3600 s window, <= 10%% failures, a fresh "
                  "server per level); agentx-mvp = the older InferenceX AgentX MVP rules "
                  "(think times as recorded, >= 900 s, <= 5%% failures; 'agentx' is its "
                  "former name); both never leave the run idle over 10 s (every pending turn "
                  "moves earlier together); contradicting flags are refused")


SESSION_HEADERS = ("X-Session-ID", "X-Correlation-ID")
"""The default session-id headers: ``X-Session-ID`` is what kv-cache-tester sends and
consistent-hash routers (SGLang's router, llm-d's session affinity) hash on;
``X-Correlation-ID`` is what AIPerf sends per conversation (Dynamo's and ATOM's
routers fall back to it for ``x-dynamo-session-id``)."""
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_RESERVED = frozenset({"host", "content-length", "content-type", "accept", "accept-encoding",
                       "authorization", "x-request-id", "transfer-encoding", "connection"})
_GPU_METRICS_HELP = (
    "scrape this DCGM exporter's /metrics (GPU power, utilisation, memory) through the "
    "run, for energy per token and agents per kW (repeat for several; compare: ARM=URL "
    "scrapes it for that arm's runs only; serve-sim models one at /dcgm/metrics)")
_SESSION_HEADER_HELP = (
    "send each request's session id in this header (repeat for several; default: "
    "X-Session-ID and X-Correlation-ID), so a router in front of several replicas can "
    "keep a session, and the subagents it spawns, on one replica")


def _one_or_many(value: object) -> list[object]:
    """A repeatable flag's value as a list (one string from code or a config, or many)."""
    return [value] if isinstance(value, str) else list(value)  # type: ignore[call-overload]


class SharedSettings(BaseModel):
    """The knobs ``run`` and ``compare`` share, each declared once with its flag.

    :class:`RunSettings` (one run) and ``replay.ab.CompareOptions`` (every run of a
    comparison) both extend it, so a knob has one name, bound, default, flag, help
    and experiment key (``replay.knobs`` derives them); a comparison hands
    :meth:`shared` to each planned run.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    duration_s: Annotated[Interval, Knob("--duration", "measured window, seconds", metavar="S")]
    warmup_s: Annotated[Seconds, Knob("--warmup", "warmup seconds before it", metavar="S")] = 0.0
    drain_s: Annotated[Seconds | None, Knob("--drain", _DRAIN_HELP, metavar="S")] = None
    """None: decided from the workload when the run starts (``replay.load._drain``)."""
    api: Annotated[Literal["completions", "chat"], Knob(
        "--api", "OpenAI endpoint to send to: /v1/completions or /v1/chat/completions",
    )] = "completions"
    model: Annotated[str | None, Knob(
        "--model", "served model name (default: the first; compare --launch: the model "
        "directory to serve)", metavar="NAME")] = None
    api_key_env: Annotated[str | None, Knob(
        "--api-key-env", "environment variable holding the API key (sent as Bearer)",
        metavar="VAR", resumed=False)] = None
    """Name of the environment variable holding the API key (never the key)."""
    seed: Annotated[Seed, Knob(
        "--seed", "seed of the lanes' random draws and per-session salts", metavar="N")] = 0
    vocab_size: Annotated[VocabSize | None, Knob(
        "--vocab-size", "override the vocabulary size (by default read from the model's "
        "files or found by asking the server)", metavar="N")] = None
    think_time_cap_s: Annotated[Seconds | None, Knob(
        "--think-time-cap", _THINK_CAP_HELP, metavar="S")] = None
    think_scale: Annotated[ThinkScale, Knob(
        "--think-scale", "multiply every think time of the workload (then --think-time-cap "
        "caps it)", metavar="X")] = 1.0
    metrics_interval_s: Annotated[Interval | None, Knob(
        "--metrics-interval", "seconds between /metrics scrapes (0 = off)", metavar="S")] = 2.0
    """None (``--metrics-interval 0``) turns polling off."""
    first_token_timeout_s: Annotated[Interval | None, Knob(
        "--ttft-timeout", "a request with no output token this many seconds after it was "
        "sent is a timeout", metavar="S")] = 600.0
    itl_timeout_s: Annotated[Interval | None, Knob(
        "--itl-timeout", "a request whose next output token takes longer than this many "
        "seconds is a timeout", metavar="S")] = 120.0
    connect_timeout_s: Annotated[Interval | None, Knob(
        "--connect-timeout", "a request that cannot open a connection to the server within "
        "this many seconds is a timeout", metavar="S")] = 30.0
    total_timeout_s: Annotated[Interval | None, Knob(
        "--total-timeout", "a request not finished this many seconds after it was sent is "
        "a timeout", metavar="S")] = 3600.0
    routing: Annotated[Literal["affinity", "round-robin"], Knob(
        "--routing", "with several replicas (--target repeated, or an arm LABEL=URL1,URL2): "
        "affinity = every turn of a session on one replica (the one with the fewest sessions "
        "when it starts), so its prefix cache holds; round-robin = each request to the next "
        "replica")] = "affinity"
    scenario: Annotated[Literal["agentx-v1", "agentx-mvp", "agentx"] | None, Knob(
        "--scenario", _SCENARIO_HELP)] = None
    """Named replay rules (``replay.load._scenario``): set and locked by ``--scenario``."""
    scenario_unsafe: Annotated[bool, Knob(
        "--scenario-unsafe", "run a --scenario with contradicting flags anyway; the run is "
        "stamped as not satisfying it, with the reasons")] = False
    time_scale: Annotated[TimeScale, Knob(
        "--time-scale", "timestamp workloads: multiply arrival offsets by F (0.5 = twice as "
        "fast)", metavar="F")] = 1.0
    """Timestamp replay: workload arrival offsets multiplied by this; with
    ``start_s``/``slice_s`` see ``replay.load._timeline``."""
    start_s: Annotated[TraceStart | None, Knob(
        "--start", "timestamp workloads: replay from trace time S seconds (default: the "
        "first arrival)", metavar="S")] = None
    slice_s: Annotated[TraceSlice | None, Knob(
        "--slice", "timestamp workloads: only sessions whose first arrival is within S trace "
        "seconds of the start", metavar="S")] = None

    session_header: Annotated[tuple[str, ...] | None, Knob(
        "--session-header", _SESSION_HEADER_HELP, metavar="NAME")] = None
    """The headers that carry each request's session id (None: :data:`SESSION_HEADERS`)."""
    no_session_header: Annotated[bool, Knob(
        "--no-session-header", "send no session-id header (a router then cannot keep a "
        "session on one replica)")] = False

    gpu_metrics: Annotated[tuple[str, ...] | None, Knob(
        "--gpu-metrics", _GPU_METRICS_HELP, metavar="[ARM=]URL", resumed=False)] = None
    """DCGM exporters to scrape through the run (``ARM=`` limits one to that arm's runs)."""

    @field_validator("gpu_metrics", mode="before")
    @classmethod
    def _gpu_urls(cls, value: object) -> object:
        if value is None:
            return None
        entries = _one_or_many(value)
        for entry in entries:
            checked_url(split_arm(str(entry))[1])
        return tuple(str(e) for e in entries)

    def gpu_urls(self, label: str) -> tuple[str, ...]:
        """The exporters a run labelled ``label`` scrapes: every entry without an arm,
        and those naming this one."""
        pairs = [split_arm(e) for e in self.gpu_metrics or ()]
        return tuple(url for arm, url in pairs if not arm or arm == label)

    @field_validator("session_header", mode="before")
    @classmethod
    def _header_names(cls, value: object) -> object:
        if value is None:
            return None
        names = _one_or_many(value)
        for name in names:
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                raise ValueError(f"{name!r} is not an HTTP header name (letters, digits, "
                                 "and !#$%&'*+-.^_`|~)")
            if name.lower() in _RESERVED:
                raise ValueError(f"{name!r} is a header the client sets itself")
        return tuple(dict.fromkeys(names))

    @model_validator(mode="after")
    def _one_header_rule(self) -> SharedSettings:
        if self.no_session_header and self.session_header:
            raise ValueError("--no-session-header and --session-header contradict each "
                             "other; give one")
        return self

    @property
    def session_headers(self) -> tuple[str, ...]:
        """The header names each request carries its session id in (empty: none)."""
        if self.no_session_header:
            return ()
        return self.session_header or SESSION_HEADERS

    @field_validator("metrics_interval_s", mode="before")
    @classmethod
    def _zero_is_off(cls, value: object) -> object:
        return None if value == 0 else value

    def shared(self) -> dict[str, Any]:
        """The values of the shared knobs (what a comparison hands each run)."""
        return {name: getattr(self, name) for name in SharedSettings.model_fields}


_OWN_FLAGS = {
    "target": "--target", "targets": "--target", "users": "--users", "levels": "--users",
    "server_block_size": "--server-block-size", "rate": "--rate", "rates": "--rate",
    "label": "--label", "carry_output": "--no-carry-output", "workers": "--workers",
    "ray": "--ray", "repeats": "--repeats", "allow_unfair": "--allow-unfair",
    "max_failure_share": "--max-failure-share", "entries": "--entry",
}
"""The flags of the fields one command has alone (``run``'s or ``compare``'s)."""
FLAGS: dict[str, str] = {**knob_flags(SharedSettings), **_OWN_FLAGS}
"""Settings field -> the command-line flag that sets it (the shared knobs' from their
declarations)."""


SCENARIO_LOCKED = ("think_scale", "think_time_cap_s", "seed")
"""The shared knobs a ``--scenario`` fills in and locks (``replay.load._scenario``)."""


def scenario_defaults() -> dict[str, Any]:
    """The defaults of the fields a scenario locks: a value that differs was typed."""
    fields = SharedSettings.model_fields
    return {**{name: fields[name].default for name in SCENARIO_LOCKED}, "rate": None,
            "warmup_s": fields["warmup_s"].default}


class RunSettings(SharedSettings):
    """Everything that decides how a run loads the server.

    Load shape (users, duration, warmup, drain, seed, arrival, think time) goes
    into the manifest's ``LoadSettings``; the rest (timeouts, polling, output
    carrying) only affects how the client behaves.
    """

    target: str
    """The server, or the first replica of a fleet (``targets``)."""
    targets: tuple[str, ...] = ()
    """A fleet measured as one target: every replica's URL, ``target`` first (empty:
    ``target`` alone). See ``replay.load._routing``."""
    users: int = Field(default=1, ge=0, le=1_000_000)
    server_block_size: int | None = Field(default=None, ge=1)
    rate: float | None = Field(default=None, gt=0, le=MAX_RATE)
    """Open-loop session arrivals per second (Poisson, seeded); None = closed loop."""
    warmup_start: Literal["midway", "start"] = "midway"
    label: str = ""
    carry_output: bool = True
    """Ask for the generated token ids and resend them in the next turn."""
    max_line_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    workers: int = Field(default=1, ge=1, le=1024)
    """Processes (or Ray actors) the users are split across, each with its own loop."""
    ray: str | None = None
    """Ray cluster address (``auto``, ``host:port`` or ``local``); None runs workers as
    local processes."""
    entries: tuple[str, ...] = ()
    """``SESSION:TURN`` per closed-loop user (``--entry``, with a ``--scenario``): user
    ``i``'s first session and the turn it enters at, instead of the scenario's seeded
    draw (``replay.load._scenario.pinned_entries``)."""

    @field_validator("entries")
    @classmethod
    def _entries(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for value in values:
            sid, sep, turn = value.rpartition(":")
            if not sep or not sid or not turn.isdigit():
                raise ValueError(f"{value!r} is not SESSION:TURN (a session id and a "
                                 "turn number from 0)")
        return values

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        problem = label_problem(value) if value else None
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("target")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return checked_url(value)

    @field_validator("targets")
    @classmethod
    def _http_urls(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        urls = tuple(checked_url(v) for v in values)
        if len(urls) == 1:
            return ()
        dup = duplicate_replica(urls)
        if dup is not None:
            raise ValueError(dup)
        return urls

    @property
    def fleet(self) -> tuple[str, ...]:
        """Every server the run loads: the replicas, or just ``target``."""
        return self.targets or (self.target,)

    @model_validator(mode="after")
    def _users_or_rate(self) -> RunSettings:
        if self.targets and self.targets[0] != self.target:
            raise ValueError("--target: the first of the replicas must be the target")
        if self.rate is None and self.users < 1:
            raise ValueError("--users must be at least 1 for closed-loop runs (or give --rate)")
        if (self.workers > 1 or self.ray is not None) and self.rate is not None:
            raise ValueError("--workers and --ray split closed-loop users; they do not combine "
                             "with an open-loop --rate")
        if self.rate is not None:
            planned = self.rate * (self.warmup_s + self.duration_s)
            if planned > MAX_PLANNED_ARRIVALS:
                raise ValueError(
                    f"--rate {self.rate:g}/s over --warmup + --duration "
                    f"{self.warmup_s + self.duration_s:g} s plans {planned:.3g} session "
                    f"arrivals; at most {MAX_PLANNED_ARRIVALS:,} (lower --rate or --duration)")
        return self

    @property
    def drain(self) -> float:
        """The drain in seconds, once decided (``run_load`` decides an unset one)."""
        if self.drain_s is None:
            raise RuntimeError("the drain is decided from the workload before the run")
        return self.drain_s

    @property
    def split(self) -> bool:
        """True when the users run in worker processes or Ray actors."""
        return self.workers > 1 or self.ray is not None

    def load_settings(self, arrival: Literal["closed", "open", "timestamps"]) -> LoadSettings:
        """The part of the settings two comparable runs must share."""
        fields = LoadSettings.model_fields
        scale = "think_scale" if "think_scale" in fields else "think_time_scale"
        values: dict[str, Any] = dict(
            # users set a closed-loop load only; an open-loop or timestamp run's load is
            # its rate or arrivals (its level), so it records no user count
            users=self.users if arrival == "closed" else None, duration_s=self.duration_s,
            warmup_s=self.warmup_s,
            drain_s=self.drain, seed=self.seed, api=self.api, arrival=arrival,
            rate=self.rate, think_time_cap_s=self.think_time_cap_s,
            warmup_start=self.warmup_start,
        )
        if self.entries:
            values["entries"] = self.entries
        values[scale] = self.think_scale
        if arrival != "closed" and self.rate is None and "time_scale" in fields:
            values["time_scale"] = self.time_scale
        return LoadSettings(**values)


RunConfig = RunSettings
"""The former name of :class:`RunSettings` (same class)."""
