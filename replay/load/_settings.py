"""The run settings: one validated model that the CLI and compare/demo fill in.

Every knob has one name from flag to settings to manifest (``--think-scale`` is
``think_scale``). :data:`FLAGS` maps each settings field to the flag a user
types, and :func:`validated` turns a pydantic error into one line naming that
flag (a :class:`~replay.errors.ConfigError`, exit 2), so no settings model
ever surfaces as a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from analysis import LoadSettings
from replay.errors import ConfigError

__all__ = ["FLAGS", "MAX_PLANNED_ARRIVALS", "MAX_SECONDS", "Interval", "RunConfig", "RunSettings",
           "Seconds", "Seed", "ThinkScale", "TimeScale", "TraceSlice", "TraceStart", "VocabSize",
           "flag_of",
           "settings_error", "validated"]

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

FLAGS: dict[str, str] = {
    "target": "--target",
    "targets": "--target",
    "routing": "--routing",
    "users": "--users",
    "levels": "--users",
    "duration_s": "--duration",
    "warmup_s": "--warmup",
    "drain_s": "--drain",
    "api": "--api",
    "model": "--model",
    "api_key_env": "--api-key-env",
    "seed": "--seed",
    "vocab_size": "--vocab-size",
    "server_block_size": "--server-block-size",
    "think_time_cap_s": "--think-time-cap",
    "think_scale": "--think-scale",
    "rate": "--rate",
    "rates": "--rate",
    "label": "--label",
    "carry_output": "--no-carry-output",
    "metrics_interval_s": "--metrics-interval",
    "workers": "--workers",
    "ray": "--ray",
    "first_token_timeout_s": "--ttft-timeout",
    "itl_timeout_s": "--itl-timeout",
    "repeats": "--repeats",
    "allow_unfair": "--allow-unfair",
    "max_failure_share": "--max-failure-share",
    "scenario": "--scenario",
    "scenario_unsafe": "--scenario-unsafe",
    "time_scale": "--time-scale",
    "start_s": "--start",
    "slice_s": "--slice",
}
"""Settings field -> the command-line flag that sets it (the one place they are paired)."""


def flag_of(field: str) -> str:
    """The flag a user types for a settings field (the field name when it has none)."""
    return FLAGS.get(field, field)


def settings_error(exc: ValidationError) -> ConfigError:
    """The first validation error as one line naming the flag, e.g.
    ``--warmup: must be >= 0 (got -1.0)``."""
    err = exc.errors()[0]
    msg = str(err["msg"]).removeprefix("Value error, ")
    loc = [str(x) for x in err["loc"] if not isinstance(x, int)]
    if not loc:
        return ConfigError(msg)
    shown = msg.replace("Input should be", "must be").replace("greater than or equal to", ">=")
    shown = shown.replace("greater than", ">").replace("less than or equal to", "<=")
    got = err.get("input")
    tail = f" (got {got!r})" if got is not None and not isinstance(got, dict | tuple | list) \
        else ""
    return ConfigError(f"{flag_of(loc[0])}: {shown}{tail}")


M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], values: Mapping[str, Any]) -> M:
    """``model(**values)``, with a validation error reported as :func:`settings_error`."""
    try:
        return model(**values)
    except ValidationError as exc:
        raise settings_error(exc) from None


class RunSettings(BaseModel):
    """Everything that decides how a run loads the server.

    Load shape (users, duration, warmup, drain, seed, arrival, think time) goes
    into the manifest's ``LoadSettings``; the rest (timeouts, polling, output
    carrying) only affects how the client behaves.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    target: str
    """The server, or the first replica of a fleet (``targets``)."""
    targets: tuple[str, ...] = ()
    """A fleet measured as one target: every replica's URL, ``target`` first (empty:
    ``target`` alone). See ``replay.load._routing``."""
    routing: Literal["affinity", "round-robin"] = "affinity"
    """How requests spread over ``targets``: every turn of a session on one replica
    (its prefix cache holds), or each request to the next replica in turn."""
    users: int = Field(default=1, ge=0, le=1_000_000)
    duration_s: Interval
    warmup_s: Seconds = 0.0
    drain_s: Seconds | None = None
    """None: decided from the workload when the run starts (``replay.load._drain``)."""
    api: Literal["completions", "chat"] = "completions"
    model: str | None = None
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (never the key)."""
    seed: Seed = 0
    vocab_size: VocabSize | None = None
    server_block_size: int | None = Field(default=None, ge=1)
    think_time_cap_s: Seconds | None = None
    think_scale: ThinkScale = 1.0
    """Multiplies every think time of the workload (then ``think_time_cap_s`` caps it)."""
    rate: float | None = Field(default=None, gt=0, le=MAX_RATE)
    """Open-loop session arrivals per second (Poisson, seeded); None = closed loop."""
    warmup_start: Literal["midway", "start"] = "midway"
    label: str = ""
    carry_output: bool = True
    """Ask for the generated token ids and resend them in the next turn."""
    connect_timeout_s: float | None = Field(default=30.0, gt=0, le=MAX_SECONDS)
    first_token_timeout_s: Interval | None = 600.0
    itl_timeout_s: Interval | None = 120.0
    total_timeout_s: float | None = Field(default=3600.0, gt=0, le=MAX_SECONDS)
    metrics_interval_s: Interval | None = 2.0
    """Seconds between ``/metrics`` scrapes; None turns polling off."""
    max_line_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    workers: int = Field(default=1, ge=1, le=1024)
    """Processes (or Ray actors) the users are split across, each with its own loop."""
    ray: str | None = None
    """Ray cluster address (``auto``, ``host:port`` or ``local``); None runs workers as
    local processes."""
    scenario: Literal["agentx"] | None = None
    """Named replay rules (``replay.load._scenario``): set and locked by ``--scenario``."""
    scenario_unsafe: bool = False
    """``--scenario-unsafe``: rules the user overrode; the run is stamped not satisfied."""
    time_scale: TimeScale = 1.0
    """Timestamp replay: workload arrival offsets multiplied by this (0.5 = twice as
    fast); with ``start_s``/``slice_s`` see ``replay.load._timeline``."""
    start_s: TraceStart | None = None
    """Timestamp replay: trace time that replay time 0 stands for (None: first arrival)."""
    slice_s: TraceSlice | None = None
    """Timestamp replay: only sessions whose first arrival is within this many trace
    seconds of the start."""

    @field_validator("target")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _checked_url(value)

    @field_validator("targets")
    @classmethod
    def _http_urls(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        urls = tuple(_checked_url(v) for v in values)
        if len(urls) == 1:
            return ()
        bases = [_base(u) for u in urls]
        dup = next((u for i, u in enumerate(bases) if u in bases[:i]), None)
        if dup is not None:
            raise ValueError(f"{dup} is given twice; give each replica once")
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
            # its rate or arrivals, and recording a user count there misled readers
            users=self.users if arrival == "closed" else 0, duration_s=self.duration_s,
            warmup_s=self.warmup_s,
            drain_s=self.drain, seed=self.seed, api=self.api, arrival=arrival,
            rate=self.rate, think_time_cap_s=self.think_time_cap_s,
            warmup_start=self.warmup_start,
        )
        values[scale] = self.think_scale
        if arrival != "closed" and self.rate is None and "time_scale" in fields:
            values["time_scale"] = self.time_scale
        return LoadSettings(**values)


def _checked_url(value: str) -> str:
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{value!r} is not an http(s) URL such as http://host:8000")
    try:
        parts.port  # noqa: B018 - raises on a port outside 0..65535
    except ValueError:
        raise ValueError(f"{value!r}: the port must be a number in 1..65535") from None
    return value.strip()


def _base(url: str) -> str:
    """A replica as compared for duplicates: scheme, host and port (no credentials)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port}{parts.path.rstrip('/')}"


RunConfig = RunSettings
"""The former name of :class:`RunSettings` (same class)."""
