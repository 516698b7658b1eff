"""Fault injection: ``--faults KIND=VALUE,...`` parsed into ``FaultSpec``.

Each request draws one number ``u`` in [0, 1) from (seed, request id, attempt:
how many times that id was seen before), so a rerun with the same seed and ids
injects the same faults, and a retry under the same id draws again. The rates partition
[0, 1) in this order: rate_limit (HTTP 429 with Retry-After), error (HTTP 500),
stream_error (HTTP 200, then an in-stream error event and ``[DONE]``), stall
(no token for ``stall_s`` seconds mid-stream), disconnect (connection dropped
mid-stream), malformed (one malformed SSE event mid-stream, then the stream
continues). ``slow_accept_s`` delays every response before anything is sent.
"Mid-stream" is after the first half of the request's output tokens, and
always after the first token.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from analysis import ErrorKind, RequestStatus
from replay.errors import ConfigError
from traces import first_problem

__all__ = ["FAULT_OUTCOMES", "FaultKind", "FaultSpec", "parse_faults"]

FaultKind = Literal["rate_limit", "error", "stream_error", "stall", "disconnect", "malformed"]
_ORDER: tuple[FaultKind, ...] = (
    "rate_limit", "error", "stream_error", "stall", "disconnect", "malformed",
)
FAULT_OUTCOMES: dict[FaultKind, tuple[RequestStatus, str]] = {
    "rate_limit": ("error", "http_429"),
    "error": ("error", "http_500"),
    "stream_error": ("error", ErrorKind.STREAM_ERROR),
    "stall": ("timeout", ErrorKind.TIMEOUT_ITL),
    "disconnect": ("error", ErrorKind.DISCONNECT),
    "malformed": ("error", ErrorKind.MALFORMED),
}
"""What a client that reads the stream right records for each injected fault (status,
error kind; a stall past the client's ITL limit): the contract the fault tests hold
the client to, in the record schema's own terms."""


class FaultSpec(BaseModel):
    """Fault rates (per request) and their parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rate_limit_rate: float = Field(default=0.0, ge=0, le=1)
    retry_after_s: int = Field(default=1, ge=0)
    error_rate: float = Field(default=0.0, ge=0, le=1)
    stream_error_rate: float = Field(default=0.0, ge=0, le=1)
    stall_rate: float = Field(default=0.0, ge=0, le=1)
    stall_s: float = Field(default=5.0, ge=0)
    disconnect_rate: float = Field(default=0.0, ge=0, le=1)
    malformed_rate: float = Field(default=0.0, ge=0, le=1)
    slow_accept_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _check_sum(self) -> FaultSpec:
        if sum(self._rates()) > 1 + 1e-9:
            raise ValueError("the fault rates add up to more than 1")
        return self

    def _rates(self) -> list[float]:
        return [
            self.rate_limit_rate, self.error_rate, self.stream_error_rate,
            self.stall_rate, self.disconnect_rate, self.malformed_rate,
        ]

    @property
    def active(self) -> bool:
        return any(self._rates()) or self.slow_accept_s > 0

    def pick(self, seed: int, request_id: str) -> FaultKind | None:
        """The fault for one request, a pure function of (seed, request id)."""
        if not any(self._rates()):
            return None
        digest = hashlib.blake2b(f"{seed}\0{request_id}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / 2.0**64
        edge = 0.0
        for kind, rate in zip(_ORDER, self._rates(), strict=True):
            edge += rate
            if u < edge:
                return kind
        return None


def parse_faults(text: str | None) -> FaultSpec:
    """Parse ``KIND=VALUE,...`` (for example ``error_rate=0.1,stall_rate=0.05,stall_s=2``)."""
    if not text:
        return FaultSpec()
    values: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigError(f"--faults: {item!r} is not KIND=VALUE")
        values[key.strip()] = value.strip()
    try:
        return FaultSpec.model_validate(values)
    except ValidationError as exc:
        problem = first_problem(exc)
        field = problem.field or ""
        known = ", ".join(FaultSpec.model_fields)
        if problem.kind == "extra_forbidden":
            raise ConfigError(f"--faults: unknown kind {field!r} (known: {known})") from None
        where = f"{field}: " if field else ""
        raise ConfigError(f"--faults: {where}{problem.raw}") from None
