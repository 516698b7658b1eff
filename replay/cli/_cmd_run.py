"""``agentreplay run``: replay a workload against one server and record everything."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:

    from analysis import RunManifest
    from replay.load import ClosedRun, RunSettings

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from replay.knobs import add_knob_flags
    from replay.load import SharedSettings

    p = subparsers.add_parser(
        "run", help="replay a workload against a server",
        description="Replay a workload against one OpenAI-compatible (vLLM) server (or a fleet "
        "of replicas: --target repeated) and write "
        "a run directory (run.json, requests.jsonl, server_metrics.jsonl).",
    )
    p.add_argument("--target", required=True, action="append", metavar="URL",
                   help="server base URL, e.g. http://host:8000; repeat it to load a fleet "
                        "of replicas as one target (see --routing)")
    p.add_argument("--workload", required=True, help="workload file (.jsonl)")
    p.add_argument("--out", required=True, help="run directory to write")
    p.add_argument("--users", type=int, default=1, help="concurrent users (closed loop)")
    p.add_argument("--rate", type=float, default=None,
                   help="open loop: sessions arriving per second (Poisson, seeded)")
    p.add_argument("--label", default="", help="arm label, e.g. the decode backend")
    p.add_argument("--server-block-size", type=int, default=None,
                   help="KV block size when the server does not expose it (default 16)")
    p.add_argument("--no-carry-output", action="store_true",
                   help="do not ask for generated token ids (no return_token_ids)")
    p.add_argument("--workers", type=int, default=1,
                   help="split the users across this many processes (closed loop)")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run the workers as Ray actors: a cluster address, 'auto', or "
                   "'local' (needs agentreplay[ray])")
    p.add_argument("--entry", action="append", default=None, metavar="SESSION:TURN",
                   help="with --scenario (and --scenario-unsafe): user i's first session "
                   "and entry turn, the i-th --entry, instead of the scenario's seeded draw "
                   "(to replay the lanes another tool chose; the run is stamped not "
                   "satisfying the scenario)")
    p.add_argument("--force", action="store_true",
                   help="replace the run already in --out (its files are removed first)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quiet", action="store_true", help="no live view")
    mode.add_argument("--plain", action="store_true", help="periodic log lines (CI, non-TTY)")
    add_knob_flags(p.add_argument_group("load settings (the same flags in compare)"),
                   SharedSettings)
    p.set_defaults(func=_main)


def _scenario(args: argparse.Namespace, values: dict[str, object]) -> dict[str, object]:
    """The settings values with ``--scenario``'s rules filled in (refused when a flag
    or the workload contradicts them); checked before anything is sent."""
    from replay.load import scenario_values
    from traces import read_header

    header = read_header(args.workload) if args.scenario else None
    return scenario_values(args.scenario, args.scenario_unsafe, values, header, args.workload)


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
                     think_time_cap_s=config.think_time_cap_s,
                     scenario=config.scenario)


def _summary(closed: ClosedRun) -> list[str]:
    """The run's closing summary and report hint, from the close's one read and
    analysis; none when the results could not be read (a failed write: the error was
    already said)."""
    from replay.cli._run_summary import run_summary_lines

    return run_summary_lines(closed)


def _main(args: argparse.Namespace) -> int:
    import asyncio
    import signal
    import sys
    from pathlib import Path

    from replay.cli import EXIT_INTERRUPTED, EXIT_TERMINATED, print_validity
    from replay.errors import Stopped
    from replay.knobs import knob_values
    from replay.load import (
        RunSettings,
        SharedSettings,
        claim_run_dir,
        event_loop_factory,
        run_closed,
        validated,
    )

    config = validated(RunSettings, _scenario(args, dict(
        knob_values(args, SharedSettings), target=args.target[0], targets=tuple(args.target),
        users=args.users, rate=args.rate, label=args.label,
        server_block_size=args.server_block_size, carry_output=not args.no_carry_output,
        workers=args.workers, ray=args.ray, entries=tuple(args.entry or ()),
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
            closed = await run_closed(config, args.workload, args.out, live=live, stop=stop,
                                      before_load=lambda: _advise(args.workload, config))
        except Stopped as exc:  # during the preflight: nothing sent, no run to keep
            print(f"agentreplay: {exc}", file=sys.stderr)
            return EXIT_INTERRUPTED if caught[:1] == [signal.SIGINT] else EXIT_TERMINATED
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)
        out = closed.dir
        note = " (interrupted)" if caught else ""
        print(f"agentreplay: run written to {out}{note}", file=sys.stderr)
        if caught:
            print(f"agentreplay: every finished request is kept; `agentreplay report {out}` "
                  "reports them. A run does not resume: rerun with --force (replaces it) or "
                  "another --out", file=sys.stderr)
        summary = _summary(closed)
        if caught:
            print("\n".join(summary))
            return EXIT_INTERRUPTED if caught[0] == signal.SIGINT else EXIT_TERMINATED
        manifest = closed.manifest
        _print_scenario(manifest)
        print("\n".join(summary[:1]), flush=True)
        code = print_validity(manifest.validity, "run", simulated=manifest.simulated)
        print("\n".join(summary[1:]))
        return code

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(main())
