"""``agentreplay serve-sim``: run the simulated vLLM server until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    from replay.knobs import add_knob_flags
    from replay.servers.sim import SimConfig

    p = subparsers.add_parser(
        "serve-sim", help="run a simulated vLLM server (labelled simulated everywhere)",
        description="A vLLM-compatible server driven by a performance model instead of a GPU.",
    )
    add_knob_flags(p, SimConfig)  # --profile, --backend, --host, --port, --speedup, ...
    p.add_argument("--time-scale", type=float, default=None, dest="old_time_scale",
                   help=argparse.SUPPRESS)  # the former name of --speedup (run's
    # --time-scale multiplies arrival offsets, the opposite sense: one name per concept)
    p.add_argument("--faults", default=None, help="KIND=VALUE,... e.g. error_rate=0.1")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from replay.knobs import from_knobs, knob_values
    from replay.servers.sim import SimConfig, parse_faults

    if args.old_time_scale is not None:
        print("agentreplay: serve-sim --time-scale is now --speedup (same meaning); "
              "--time-scale will go", file=sys.stderr)
        args.speedup = args.old_time_scale
    config = from_knobs(SimConfig, {**knob_values(args, SimConfig),
                                    "faults": parse_faults(args.faults), "keep_truth": False})
    config.resolved_profile()  # a bad profile is a user error before anything starts
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        got = asyncio.run(_serve(config))
    else:
        got = uvloop.run(_serve(config))
    # Ctrl-C is how a server is meant to stop; SIGTERM/SIGHUP say so in the status
    return 0 if got in (None, signal.SIGINT) else 128 + got


async def _serve(config: Any) -> int | None:
    """Serve until a stop signal; returns the signal number."""
    from replay.servers.sim import SimServer

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    got: list[int] = []

    def on_signal(sig: int) -> None:
        got.append(sig)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, on_signal, sig)
    async with SimServer(config) as srv:
        p = srv.profile
        print(f"serve-sim: SIMULATED vLLM at {srv.url} profile={p.name} "
              f"backend={config.backend} model={p.model} speedup={config.time_scale:g}"
              + (f" slowdown={config.slowdown}" if config.slowdown != 1.0 else ""),
              file=sys.stderr, flush=True)
        await stop.wait()
    return got[0] if got else None
