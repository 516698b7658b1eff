"""The reference client of bench/peers.py: aiohttp + uvloop, one lane per user.

Not a peer: the floor a Python asyncio client reading the same stream can reach
with no bookkeeping beyond counting ``data: {`` lines and timing them.

Run (the harness does): ``python bench/peers.py bare --url URL --users 64
--duration 10 --out bare.json``.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from _peers_tools import OUTPUT_TOKENS, PROMPT_TOKENS


async def _bare_main(url: str, users: int, duration: float, out: Path) -> None:
    """The reference client: aiohttp + uvloop, one lane per user, counting SSE lines."""
    import aiohttp

    body = {
        "model": "stub",
        "prompt": list(range(1, PROMPT_TOKENS + 1)),
        "max_tokens": OUTPUT_TOKENS,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    payload = json.dumps(body).encode()
    end_at = time.monotonic() + duration
    tpots: list[float] = []
    tokens = 0

    async def lane(session: aiohttp.ClientSession) -> None:
        nonlocal tokens
        while time.monotonic() < end_at:
            async with session.post(
                f"{url}/v1/completions", data=payload,
                headers={"content-type": "application/json"},
            ) as resp:
                n = 0
                first = last = 0.0
                async for line in resp.content:
                    if line.startswith(b"data: {"):
                        last = time.monotonic()
                        if n == 0:
                            first = last
                        n += 1
                n -= 1  # the usage chunk
                tokens += n
                if n > 1:
                    tpots.append((last - first) / (n - 1))

    conn = aiohttp.TCPConnector(limit=users)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:
        await asyncio.gather(*(lane(session) for _ in range(users)))
    out.write_text(json.dumps({
        "tokens": tokens,
        "requests": len(tpots),
        "mean_tpot_ms": 1e3 * sum(tpots) / len(tpots) if tpots else None,
    }))



def run_bare(url: str, users: int, duration: float, out: Path) -> None:
    """Run the loop on uvloop (asyncio without it) and write its counts to ``out``."""
    try:
        import uvloop

        uvloop.run(_bare_main(url, users, duration, out))
    except ImportError:  # pragma: no cover
        asyncio.run(_bare_main(url, users, duration, out))
