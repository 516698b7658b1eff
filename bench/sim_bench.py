"""Simulator figures: streamed tokens/s one process sustains, and how well it keeps time.

``merged``/``split`` start ``serve-sim --profile instant`` in a child process pinned to
one core (where the OS allows), drive it with N concurrent streaming clients pinned to
the other cores, and print tokens/s as the clients received them: ``merged`` writes
every ready token of a step in one SSE event, ``split`` one token per event and write.

``timing`` runs the published decode benchmark (input 1 token, ``--decode-tokens``
output tokens, ignore_eos) on a Kimi K3 profile at batch 1 and 64 for both backends
and prints, per point: the model's aggregate decode tok/s (``modelled_decode``), what
the simulator achieved by its truth log (token delivery times) and by the client's
clock, and the simulator's lateness from its ``vllm_sim:`` counters. These are figures
of the machine (a busy machine makes the simulator late); tests only assert against the
truth log (``tests/sim/test_timing.py``).

    python bench/sim_bench.py [--users 64] [--seconds 5] [--max-tokens 4000]
    python bench/sim_bench.py --modes timing [--profile kimi-k3-gb300-tp16] [--slowdown 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from replay.client import parse_prometheus
from replay.servers.sim import SimServerProcess, load_profile, modelled_decode

_LATE = ("vllm_sim:engine_step_actual_seconds_total", "vllm_sim:engine_step_model_seconds_total")


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


def _pin(srv: SimServerProcess, cores: list[int]) -> None:
    if len(cores) >= 2 and srv.proc is not None:
        os.sched_setaffinity(srv.proc.pid, {cores[0]})
        os.sched_setaffinity(0, set(cores[1:]))


def _throughput(args: argparse.Namespace, mode: str, cores: list[int]) -> None:
    with SimServerProcess("instant", split_tokens=mode == "split") as srv:
        _pin(srv, cores)
        tokens, events, wall = asyncio.run(
            _drive(srv.url + "/v1/completions", args.users, args.seconds, args.max_tokens))
    print(f"{mode:6s} users={args.users} tokens/s={tokens / wall:>12,.0f} "
          f"events/s={events / wall:>10,.0f} tokens/event={tokens / max(events, 1):6.1f} "
          f"(sim on 1 core{'' if len(cores) >= 2 else ', unpinned'})")


async def _decode_batch(url: str, batch: int, tokens: int) -> tuple[float, dict[str, float]]:
    """Aggregate decode tok/s by the client's clock, and /metrics after the batch."""
    body = {"prompt": [100], "max_tokens": tokens, "stream": True, "ignore_eos": True}
    timeout = aiohttp.ClientTimeout(total=None)

    async def one(s: aiohttp.ClientSession) -> float:
        first = last = 0.0
        async with s.post(url + "/v1/completions", json=body) as r:
            async for data in r.content.iter_any():
                if b" t" in data:
                    last = time.monotonic()
                    first = first or last
        return (tokens - 1) / (last - first)

    connector = aiohttp.TCPConnector(limit=batch)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as s:
        rates = await asyncio.gather(*(one(s) for _ in range(batch)))
        async with s.get(url + "/metrics") as r:
            metrics = parse_prometheus(await r.text(), prefix="vllm_sim:")
    return sum(rates), metrics


def _truth_rate(truth: Path, tokens: int) -> float:
    """Aggregate decode tok/s by the simulator's delivery times (its truth log)."""
    total = 0.0
    for line in truth.read_bytes().splitlines():
        rec = orjson.loads(line)
        total += (tokens - 1) / ((rec["emit_ns"][-1] - rec["emit_ns"][0]) / 1e9)
    return total


def _timing(args: argparse.Namespace, cores: list[int]) -> None:
    profile = load_profile(args.profile)
    print(f"decode benchmark on {profile.name}: input 1, output {args.decode_tokens}, "
          f"slowdown {args.slowdown}; aggregate tok/s of the TP group")
    print(f"{'backend':20s} {'batch':>5s} {'model':>9s} {'sim truth':>9s} {'client':>9s} "
          f"{'late %':>7s}")
    for backend in ("latency_specialized", "auto"):
        for batch in (1, 64):
            with tempfile.TemporaryDirectory() as tmp:
                truth = Path(tmp) / "truth.jsonl"
                with SimServerProcess(args.profile, backend, slowdown=args.slowdown,
                                      truth_path=str(truth)) as srv:
                    _pin(srv, cores)
                    client, late = asyncio.run(
                        _decode_batch(srv.url, batch, args.decode_tokens))
                achieved = _truth_rate(truth, args.decode_tokens)
            model = modelled_decode(profile, backend, batch,
                                    output_tokens=args.decode_tokens).decode_tok_s
            lateness = (late[_LATE[0]] / late[_LATE[1]] - 1) * 100
            print(f"{backend:20s} {batch:5d} {model:9.1f} {achieved:9.1f} {client:9.1f} "
                  f"{lateness:7.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--max-tokens", type=int, default=4000)
    ap.add_argument("--modes", default="merged,split", help="merged, split, timing")
    ap.add_argument("--profile", default="kimi-k3-gb300-tp16", help="timing mode's profile")
    ap.add_argument("--decode-tokens", type=int, default=1000)
    ap.add_argument("--slowdown", type=float, default=1.0)
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    for mode in args.modes.split(","):
        if mode == "timing":
            _timing(args, cores)
        else:
            _throughput(args, mode, cores)


if __name__ == "__main__":
    main()
