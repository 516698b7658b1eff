"""How many streamed tokens/s one simulator process sustains (instant profile).

Starts ``serve-sim --profile instant`` in a child process pinned to one core
(where the OS allows), drives it with N concurrent streaming clients pinned to
the other cores, and prints tokens/s as the clients received them. Modes:
``merged`` (every ready token of a step in one SSE event, one write) and
``split`` (one token per SSE event, one write per event).

    python bench/sim_bench.py [--users 64] [--seconds 5] [--max-tokens 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import aiohttp

from replay.sim import SimServerProcess


async def _drive(url: str, users: int, seconds: float, max_tokens: int) -> tuple[int, int, float]:
    tokens = 0
    events = 0
    stop_at = time.monotonic() + seconds
    body = {"prompt": [100, 101, 102], "max_tokens": max_tokens, "stream": True,
            "ignore_eos": True}
    connector = aiohttp.TCPConnector(limit=users)
    timeout = aiohttp.ClientTimeout(total=None)

    async def lane(s: aiohttp.ClientSession) -> None:
        nonlocal tokens, events
        while time.monotonic() < stop_at:
            async with s.post(url, json=body) as r:
                async for data in r.content.iter_any():
                    tokens += data.count(b" t")
                    events += data.count(b"data: ")
                    if time.monotonic() >= stop_at:
                        break

    t0 = time.monotonic()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as s:
        await asyncio.gather(*(lane(s) for _ in range(users)))
    return tokens, events, time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--max-tokens", type=int, default=4000)
    ap.add_argument("--modes", default="merged,split")
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    for mode in args.modes.split(","):
        with SimServerProcess("instant", split_tokens=mode == "split") as srv:
            if len(cores) >= 2 and srv.proc is not None:
                os.sched_setaffinity(srv.proc.pid, {cores[0]})
                os.sched_setaffinity(0, set(cores[1:]))
            tokens, events, wall = asyncio.run(
                _drive(srv.url + "/v1/completions", args.users, args.seconds, args.max_tokens))
        print(f"{mode:6s} users={args.users} tokens/s={tokens / wall:>12,.0f} "
              f"events/s={events / wall:>10,.0f} tokens/event={tokens / max(events, 1):6.1f} "
              f"(sim on 1 core{'' if len(cores) >= 2 else ', unpinned'})")


if __name__ == "__main__":
    main()
