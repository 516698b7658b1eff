"""The run's aiohttp connector, which also owns the completion stream's connections.

The completion stream goes over :class:`replay.client._wire.WirePool` (see there
why not aiohttp); probes and ``/metrics`` go through aiohttp. Keeping the pool on
the connector gives both one owner and one lifetime: closing the session closes
every connection of the run, streamed or not.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import aiohttp

from replay.client._wire import WirePool

__all__ = ["StreamingConnector"]


class StreamingConnector(aiohttp.TCPConnector):
    """``TCPConnector`` plus the keep-alive pool of the streamed completions (``.wire``)."""

    def __init__(self, wire: WirePool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wire = wire

    def _close(self, *args: Any, **kwargs: Any) -> list[Awaitable[object]]:
        self.wire.close()
        return super()._close(*args, **kwargs)  # type: ignore[no-any-return]
