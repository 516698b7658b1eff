"""The run configuration: one validated model that the CLI and compare/demo fill in."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from analysis._schema import LoadSettings

__all__ = ["RunConfig"]


class RunConfig(BaseModel):
    """Everything that decides how a run loads the server.

    Load shape (users, duration, warmup, drain, seed, arrival, think time) goes
    into the manifest's ``LoadSettings``; the rest (timeouts, polling, output
    carrying) only affects how the client behaves.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    target: str
    users: int = Field(default=1, ge=0, le=1_000_000)
    duration_s: float = Field(gt=0)
    warmup_s: float = Field(default=0.0, ge=0)
    drain_s: float = Field(default=30.0, ge=0)
    api: Literal["completions", "chat"] = "completions"
    model: str | None = None
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (never the key)."""
    seed: int = 0
    vocab_size: int | None = Field(default=None, ge=2)
    server_block_size: int | None = Field(default=None, ge=1)
    think_time_cap_s: float | None = Field(default=None, ge=0)
    think_time_scale: float = Field(default=1.0, ge=0)
    rate: float | None = Field(default=None, gt=0)
    """Open-loop session arrivals per second (Poisson, seeded); None = closed loop."""
    warmup_start: Literal["midway", "start"] = "midway"
    label: str = ""
    carry_output: bool = True
    """Ask for the generated token ids and resend them in the next turn."""
    connect_timeout_s: float | None = Field(default=30.0, gt=0)
    first_token_timeout_s: float | None = Field(default=600.0, gt=0)
    itl_timeout_s: float | None = Field(default=120.0, gt=0)
    total_timeout_s: float | None = Field(default=3600.0, gt=0)
    metrics_interval_s: float | None = Field(default=2.0, gt=0)
    """Seconds between ``/metrics`` scrapes; None turns polling off."""
    max_line_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    workers: int = Field(default=1, ge=1, le=1024)
    """Processes (or Ray actors) the users are split across, each with its own loop."""
    ray: str | None = None
    """Ray cluster address (``auto`` or ``host:port``); None runs workers as local
    processes."""

    @field_validator("target")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s) URL such as http://host:8000")
        return value.strip()

    @model_validator(mode="after")
    def _users_or_rate(self) -> RunConfig:
        if self.rate is None and self.users < 1:
            raise ValueError("users must be at least 1 for closed-loop runs (or give a rate)")
        if (self.workers > 1 or self.ray is not None) and self.rate is not None:
            raise ValueError("workers and ray split closed-loop users; they do not combine "
                             "with an open-loop rate")
        return self

    def load_settings(self, arrival: Literal["closed", "open", "timestamps"]) -> LoadSettings:
        """The part of the config two comparable runs must share."""
        return LoadSettings(
            users=self.users, duration_s=self.duration_s, warmup_s=self.warmup_s,
            drain_s=self.drain_s, seed=self.seed, api=self.api, arrival=arrival,
            rate=self.rate, think_time_cap_s=self.think_time_cap_s,
            think_time_scale=self.think_time_scale, warmup_start=self.warmup_start,
        )
