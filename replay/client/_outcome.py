"""What one streamed request ended as (:class:`StreamOutcome`) and the limits it ran
under (:class:`Timeouts`): plain records that the stream, the exchange, the event
reader and the bodies all fill or read, kept apart so none of those imports another
to name them."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["StreamOutcome", "Timeouts"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Per-request limits in seconds; ``None`` disables one."""

    connect_s: float | None = 30.0
    first_token_s: float | None = 600.0
    """Request sent to first output token (``--ttft-timeout``)."""
    itl_s: float | None = 120.0
    """Longest gap between output tokens (``--itl-timeout``)."""
    total_s: float | None = 3600.0


@dataclass(slots=True)
class StreamOutcome:
    """What happened to one request, filled in while it streams."""

    status: str = "ok"
    error_kind: str | None = None
    error_message: str | None = None
    http_status: int | None = None
    sent_ns: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    usage: dict[str, object] | None = None
    done: bool = False
    """``data: [DONE]`` was received."""

    @property
    def streamed_tokens(self) -> int:
        return sum(self.chunk_tokens)

    def fail(self, status: str, kind: str, message: str | None = None) -> None:
        """Record the first failure only; later ones are consequences."""
        if self.status == "ok":
            self.status = status
            self.error_kind = kind
            self.error_message = message[:500] if message else message
