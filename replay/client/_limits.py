"""Bodies read from a server, each with a size limit: an answer that never ends, or
a 60 MB ``/tokenize``, costs the client at most the limit, then one clear error.

The streamed completions have their own line limit (``_stream``), ``/metrics`` its
own cap (``_poller``); these are the JSON answers of the probes and the chat codec.
"""

from __future__ import annotations

import aiohttp

from replay.errors import TargetError

__all__ = ["JSON_BODY_LIMIT", "read_limited"]

JSON_BODY_LIMIT = 16 << 20
"""The largest JSON answer read (16 MiB): /v1/models, /server_info, /tokenize."""


async def read_limited(resp: aiohttp.ClientResponse, url: str,
                       limit: int = JSON_BODY_LIMIT) -> bytes:
    """The body of ``resp``, refused with :class:`TargetError` past ``limit`` bytes
    (declared or received: reading stops there)."""
    declared = resp.content_length
    if declared is not None and declared > limit:
        raise TargetError(f"{url}: an answer of {declared:,} bytes; at most {limit:,} are read")
    raw = bytearray()
    while len(raw) <= limit:  # read(n) returns what has arrived, at most n
        more = await resp.content.read(limit + 1 - len(raw))
        if not more:
            return bytes(raw)
        raw += more
    raise TargetError(f"{url}: the answer went past {limit:,} bytes (not read further)")
