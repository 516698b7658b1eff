"""``agentreplay run``: replay a workload against one server and record everything."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pathlib import Path

    from analysis import RunManifest
    from replay.load import RunSettings

__all__ = ["register"]


DRAIN_HELP = ("at most this many seconds for in-flight requests after the window (default: "
              "long enough for the workload's longest answer: its output tokens at 20 tok/s "
              "+ 10 s, at least 30 s, said when the run starts; requests still running then "
              "are cut, reported incomplete with the tokens they got)")
"""The numbers are ``replay.load``'s ``DRAIN_RATE_TOK_S`` etc. (a test holds them equal;
the CLI does not import the load machinery to print its help)."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "run", help="replay a workload against a server",
        description="Replay a workload against one OpenAI-compatible (vLLM) server (or a fleet "
        "of replicas: --target repeated) and write "
        "a run directory (run.json, requests.jsonl, server_metrics.jsonl).",
    )
    p.add_argument("--target", required=True, action="append", metavar="URL",
                   help="server base URL, e.g. http://host:8000; repeat it to load a fleet "
                        "of replicas as one target (see --routing)")
    p.add_argument("--routing", choices=("affinity", "round-robin"), default="affinity",
                   help="with several --target: affinity = every turn of a session on one "
                        "replica (the one with the fewest sessions when it starts), so its "
                        "prefix cache holds; round-robin = each request to the next replica "
                        "(default: %(default)s)")
    p.add_argument("--workload", required=True, help="workload file (.jsonl)")
    p.add_argument("--users", type=int, default=1, help="concurrent users (closed loop)")
    p.add_argument("--duration", type=float, required=True, help="measured window, seconds")
    p.add_argument("--warmup", type=float, default=0.0, help="warmup seconds before it")
    p.add_argument("--drain", type=float, default=None, help=DRAIN_HELP)
    p.add_argument("--out", required=True, help="run directory to write")
    p.add_argument("--api", choices=("completions", "chat"), default="completions",
                   help="OpenAI endpoint to send to: /v1/completions or /v1/chat/completions")
    p.add_argument("--model", default=None, help="served model name (default: the first)")
    p.add_argument("--api-key-env", default=None,
                   help="environment variable holding the API key (sent as Bearer)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the lanes' random draws and per-session salts")
    p.add_argument("--vocab-size", type=int, default=None,
                   help="override the vocabulary size (by default read from the model's files "
                        "or found by asking the server)")
    p.add_argument("--server-block-size", type=int, default=None,
                   help="KV block size when the server does not expose it (default 16)")
    p.add_argument("--think-time-cap", type=float, default=None,
                   help="cap on each think time (tool run, human reading), s: the "
                        "workload's pauses average ~110 s, so a short run needs one to see "
                        "enough requests (a run whose window would be thin says so first)")
    p.add_argument("--think-scale", type=float, default=1.0, help="multiply think times")
    p.add_argument("--rate", type=float, default=None,
                   help="open loop: sessions arriving per second (Poisson, seeded)")
    p.add_argument("--no-carry-output", action="store_true",
                   help="do not ask for generated token ids (no return_token_ids)")
    p.add_argument("--metrics-interval", type=float, default=2.0,
                   help="seconds between /metrics scrapes (0 = off)")
    p.add_argument("--label", default="", help="arm label, e.g. the decode backend")
    p.add_argument("--workers", type=int, default=1,
                   help="split the users across this many processes (closed loop)")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run the workers as Ray actors: a cluster address, 'auto', or "
                   "'local' (needs agentreplay[ray])")
    add_stall_flags(p)
    p.add_argument("--force", action="store_true",
                   help="replace the run already in --out (its files are removed first)")
    add_scenario_flags(p)
    add_time_flags(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quiet", action="store_true", help="no live view")
    mode.add_argument("--plain", action="store_true", help="periodic log lines (CI, non-TTY)")
    p.set_defaults(func=_main)


def add_stall_flags(p: argparse.ArgumentParser) -> None:
    """The per-request stall limits (``run`` and ``compare``): a server that stops
    sending ends the request as a timeout instead of pinning its user."""
    p.add_argument("--ttft-timeout", type=float, default=600.0, metavar="S",
                   help="a request with no output token this many seconds after it was "
                        "sent is a timeout (default: %(default)s)")
    p.add_argument("--itl-timeout", type=float, default=120.0, metavar="S",
                   help="a request whose next output token takes longer than this many "
                        "seconds is a timeout (default: %(default)s)")


def add_time_flags(p: argparse.ArgumentParser) -> None:
    """``--time-scale``, ``--start``, ``--slice`` (``run`` and ``compare``): reshape a
    workload replayed at its own arrival times (``replay.load._timeline``)."""
    p.add_argument("--time-scale", type=float, default=1.0, metavar="F",
                   help="timestamp workloads: multiply arrival offsets by F (0.5 = twice "
                        "as fast; default: %(default)s)")
    p.add_argument("--start", type=float, default=None, metavar="S",
                   help="timestamp workloads: replay from trace time S seconds (default: "
                        "the first arrival)")
    p.add_argument("--slice", type=float, default=None, metavar="S",
                   help="timestamp workloads: only sessions whose first arrival is within "
                        "S trace seconds of the start")


def add_scenario_flags(p: argparse.ArgumentParser) -> None:
    """``--scenario NAME`` and ``--scenario-unsafe`` (``run`` and ``compare``)."""
    p.add_argument("--scenario", choices=("agentx",), default=None,
                   help="replay by a benchmark's fixed rules and lock them: agentx = "
                        "InferenceX AgentX (WEKA sessions, entry at 25-75%% of each lane's first "
                        "session, per-run cache busting, idle gaps capped at 10 s, seed 42, "
                        ">= 900 s window, <= 5%% failures); contradicting flags are refused")
    p.add_argument("--scenario-unsafe", action="store_true",
                   help="run a --scenario with contradicting flags anyway; the run is "
                        "stamped as not satisfying it, with the reasons")


_SCENARIO_DEFAULTS = {"think_scale": 1.0, "think_time_cap_s": None, "seed": 0,
                      "rate": None}
"""The command's defaults of the fields a scenario locks (what the user did not type)."""


def _scenario(args: argparse.Namespace, values: dict[str, object]) -> dict[str, object]:
    """The settings values with ``--scenario``'s rules filled in (refused when a flag
    or the workload contradicts them); checked before anything is sent."""
    from replay.load import scenario_values
    from traces import read_header

    header = read_header(args.workload) if args.scenario else None
    return scenario_values(args.scenario, args.scenario_unsafe, values, _SCENARIO_DEFAULTS,
                           header, args.workload)


def _print_scenario(manifest: RunManifest) -> None:
    """One line on stderr: whether the run satisfied its ``--scenario`` and why not."""
    import sys

    if manifest.scenario is None or manifest.scenario_satisfied is None:
        return
    if manifest.scenario_satisfied:
        print(f"agentreplay: scenario {manifest.scenario}: satisfied", file=sys.stderr)
        return
    why = "; ".join(manifest.scenario_notes)
    print(f"agentreplay: scenario {manifest.scenario}: NOT satisfied: {why}", file=sys.stderr)


def _advise(workload: str, config: RunSettings) -> None:
    """The warmup and window warnings of a closed-loop run, before its load."""
    from replay.cli._warmup import print_advice

    if config.rate is None:
        print_advice(workload, warmup_s=config.warmup_s, users=config.users,
                     duration_s=config.duration_s, think_scale=config.think_scale,
                     think_cap_s=config.think_time_cap_s)


def _summary(out: Path) -> list[str]:
    """The run's closing summary and report hint; none when the results cannot be
    read (a failed write: the error was already said)."""
    from analysis import ResultError
    from replay.cli._run_summary import run_summary_lines

    try:
        return run_summary_lines(out)
    except (ResultError, OSError):
        return []


def _main(args: argparse.Namespace) -> int:
    import asyncio
    import signal
    import sys
    from pathlib import Path

    from analysis import read_manifest
    from replay.cli import EXIT_INTERRUPTED, EXIT_TERMINATED, print_validity
    from replay.errors import Stopped
    from replay.load import RunSettings, claim_run_dir, event_loop_factory, run_load, validated

    config = validated(RunSettings, _scenario(args, dict(
        target=args.target[0], targets=tuple(args.target), routing=args.routing,
        users=args.users, duration_s=args.duration,
        warmup_s=args.warmup, drain_s=args.drain, api=args.api, model=args.model,
        api_key_env=args.api_key_env, seed=args.seed, vocab_size=args.vocab_size,
        server_block_size=args.server_block_size, think_time_cap_s=args.think_time_cap,
        think_scale=args.think_scale, rate=args.rate, label=args.label,
        carry_output=not args.no_carry_output,
        metrics_interval_s=args.metrics_interval or None,
        workers=args.workers, ray=args.ray,
        first_token_timeout_s=args.ttft_timeout, itl_timeout_s=args.itl_timeout,
        time_scale=args.time_scale, start_s=args.start, slice_s=args.slice,
    )))
    claim_run_dir(Path(args.out), force=args.force)
    live: Literal["rich", "plain", "quiet"]
    if args.quiet:
        live = "quiet"
    elif args.plain or not sys.stderr.isatty():
        live = "plain"
    else:
        live = "rich"

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        caught: list[int] = []

        def on_signal(sig: int) -> None:
            if stop.is_set():  # a second signal: stop waiting for the orderly end
                loop.remove_signal_handler(sig)
                signal.raise_signal(sig)
                return
            name = "Ctrl-C" if sig == signal.SIGINT else "SIGTERM"
            print(f"agentreplay: {name}: stopping (again to abort)", file=sys.stderr)
            caught.append(sig)
            stop.set()

        handled = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, on_signal, sig)
                handled.append(sig)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
                pass
        try:
            out = await run_load(config, args.workload, args.out, live=live, stop=stop,
                                 before_load=lambda: _advise(args.workload, config))
        except Stopped as exc:  # during the preflight: nothing sent, no run to keep
            print(f"agentreplay: {exc}", file=sys.stderr)
            return EXIT_INTERRUPTED if caught[:1] == [signal.SIGINT] else EXIT_TERMINATED
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)
        note = " (interrupted)" if caught else ""
        print(f"agentreplay: run written to {out}{note}", file=sys.stderr)
        if caught:
            print(f"agentreplay: every finished request is kept; `agentreplay report {out}` "
                  "reports them. A run does not resume: rerun with --force (replaces it) or "
                  "another --out", file=sys.stderr)
        summary = _summary(out)
        if caught:
            print("\n".join(summary))
            return EXIT_INTERRUPTED if caught[0] == signal.SIGINT else EXIT_TERMINATED
        manifest = read_manifest(out)
        _print_scenario(manifest)
        print("\n".join(summary[:1]), flush=True)
        code = print_validity(manifest.validity, "run", simulated=manifest.simulated)
        print("\n".join(summary[1:]))
        return code

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(main())
