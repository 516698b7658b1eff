"""``agentreplay serve-sim``: run the simulated vLLM server until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve-sim", help="run a simulated vLLM server (labelled simulated everywhere)",
        description="A vLLM-compatible server driven by a performance model instead of a GPU.",
    )
    from replay.sim import list_profiles

    p.add_argument("--profile", default="kimi-k3-gb300-tp16", metavar="NAME|FILE.json",
                   help="a bundled profile (" + ", ".join(list_profiles()) + ") or a "
                        "profile .json file (default: %(default)s, calibrated to vLLM's "
                        "published Kimi K3 TP16 decode rates, as the demo uses; 'small' is "
                        "a fast test profile whose auto arm misses every default SLO tier)")
    p.add_argument("--backend", choices=["auto", "latency_specialized"],
                   default="latency_specialized",
                   help="the simulated decode backend (the arms of a comparison differ in it)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (0 = any free)")
    p.add_argument("--speedup", type=float, default=1.0, metavar="X",
                   help="run X times faster than real time: every modelled duration divided "
                        "by X, reported in the profile's seconds")
    p.add_argument("--time-scale", type=float, default=None, dest="old_time_scale",
                   help=argparse.SUPPRESS)  # the former name of --speedup (run's
    # --time-scale multiplies arrival offsets, the opposite sense: one name per concept)
    p.add_argument("--slowdown", type=float, default=1.0,
                   help="every engine step really takes F times its modelled time, while "
                        "reporting the modelled time (a deliberately late simulator; "
                        "default 1.0)")
    p.add_argument("--faults", default=None, help="KIND=VALUE,... e.g. error_rate=0.1")
    p.add_argument("--truth", default=None,
                   help="write the truth log (JSONL) here; the per-step log goes beside it "
                        "(X.jsonl -> X.steps.jsonl)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the simulated output tokens and faults")
    p.add_argument("--split-tokens", action="store_true",
                   help="one token per SSE event and one event per write")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from replay.errors import ConfigError
    from replay.sim import SimConfig, parse_faults

    if args.old_time_scale is not None:
        import sys

        print("agentreplay: serve-sim --time-scale is now --speedup (same meaning); "
              "--time-scale will go", file=sys.stderr)
        args.speedup = args.old_time_scale
    if args.speedup <= 0:
        raise ConfigError("--speedup must be > 0")
    if not args.slowdown >= 1.0:
        raise ConfigError("--slowdown must be >= 1")
    if not 0 <= args.port <= 65535:
        raise ConfigError("--port must be in 0..65535")
    try:
        config = SimConfig(
            profile=args.profile, backend=args.backend, host=args.host, port=args.port,
            time_scale=args.speedup, slowdown=args.slowdown,
            faults=parse_faults(args.faults), truth_path=args.truth, seed=args.seed,
            split_tokens=args.split_tokens, keep_truth=False,
        )
    except ValidationError as exc:  # one line naming the flag, never a traceback
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else ""
        flag = {"truth_path": "--truth", "time_scale": "--speedup"}.get(
            field, "--" + field.replace("_", "-"))
        raise ConfigError(f"{flag}: {err['msg']}") from None
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
    from replay.sim import SimServer

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
