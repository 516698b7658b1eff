"""The one seam between the lanes and what answers them: the :class:`Transport` Protocol.

Declared here, by the side that calls it (as GuideLLM's scheduler declares its
``BackendInterface``), not in ``replay.client``: the load generator states what it
needs of a server, and whatever serves it conforms structurally without importing
``replay.load``. Two implementations exist: ``replay.client.stream_request`` (HTTP,
the default of :func:`~replay.load.run_load`) and the twin's engines
(``replay.twin.TwinEngines.send``: in process, on simulated time). A fleet needs no
third: its routing is decided where the client's prefix model sees each request
(``replay.load._routing``), and the replica's URL is the ``url`` handed over.
"""

from __future__ import annotations

from typing import Protocol

import aiohttp

from replay.client import StreamOutcome, Timeouts

__all__ = ["Transport"]


class Transport(Protocol):
    """Send one prepared request body and stream the answer into ``out``.

    ``replay.client.stream_request``'s signature: ``session`` is the run's HTTP
    session (a transport that needs none ignores it), ``url`` the replica's endpoint,
    ``headers`` the request's own (request and session ids included). Failures never
    escape: they are recorded in ``out`` (status, error kind); cancellation is recorded
    and re-raised. ``out`` is returned, filled."""

    async def __call__(
        self, session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str],
        timeouts: Timeouts, out: StreamOutcome, *, max_line_bytes: int = ...,
        keep_output_ids: bool = ..., max_tokens: int | None = ...,
    ) -> StreamOutcome: ...
