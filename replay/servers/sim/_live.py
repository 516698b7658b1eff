"""One request in flight: what the step loop has produced for it and its handler has not
yet written, plus the timestamps its truth record needs."""

from __future__ import annotations

import asyncio

from replay.servers.sim._engine import SimRequest

__all__ = ["Live"]


class Live:
    """A request between intake and its last written token (see ``StepLoop.deliver``)."""

    __slots__ = (
        "req", "pending", "waiter", "finished", "emit_ns", "emit_tokens", "step_start_ns",
        "step_model_ns", "step_actual_ns", "first_token_ns", "scheduled_ns", "last_emit_ns",
        "stopped", "arrival_ns", "sent", "queued_ns",
    )

    def __init__(self, req: SimRequest, arrival_ns: int) -> None:
        self.req = req
        self.arrival_ns = arrival_ns
        self.queued_ns = arrival_ns
        """When the engine got it (after ``request_overhead_s``): vLLM's queue start."""
        self.stopped = False
        """The server is stopping (or its step loop failed): the handler gives up."""
        self.sent = 0
        self.pending: list[int] = []
        self.waiter: asyncio.Future[None] | None = None
        self.finished = False
        self.emit_ns: list[int] = []
        self.emit_tokens: list[int] = []
        self.step_start_ns: list[int] = []
        self.step_model_ns: list[int] = []
        self.step_actual_ns: list[int] = []
        self.first_token_ns: int | None = None
        self.scheduled_ns: int | None = None
        self.last_emit_ns = 0

    def wake(self) -> None:
        """Let a handler blocked in ``take`` look again."""
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def stop(self) -> None:
        self.stopped = True
        self.wake()

    async def take(self) -> list[int]:
        """Every token not yet taken; waits while there is none and the request runs."""
        while not self.pending and not self.finished and not self.stopped:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
            self.waiter = None
        out = self.pending
        self.pending = []
        return out
